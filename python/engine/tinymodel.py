"""A small random-weight Llama model made on the spot, never downloaded.

``build(out_dir, ...)`` writes a ``transformers`` Llama checkpoint
(``config.json`` and ``model.safetensors``, fp32) and a word-level tokenizer
(``tokenizer.json`` and its config, a ``PreTrainedTokenizerFast``) into
``out_dir``, which vLLM then serves offline (``HF_HUB_OFFLINE=1``) as a
local model directory. The same arguments and seed give the same bytes, so
two processes that build it separately serve the same model.

The weights are normal with standard deviation ``std`` (0.1 by default),
not vLLM's dummy weights (uniform in +-1e-3, under which every token's
logits are nearly equal whatever the KV holds): with these, the greedy
tokens and the prompt logprobs change when the KV a layer reads is wrong,
which is what the end-to-end cases check a connector against.
``kv_sensitivity`` measures that on the checkpoint itself.

The vocabulary is ``<unk> <s> </s> w3 w4 ...``: token id ``i >= 3`` is the
word ``w<i>``, so a prompt of token ids and its text map one to one
(``words(ids)``). Needs ``torch``, ``transformers``, ``tokenizers`` and
``safetensors`` (the engine venv has them).
"""

import json
import os
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Sequence

SPECIAL = ["<unk>", "<s>", "</s>"]


@dataclass(frozen=True)
class ModelSpec:
    """The shape of a tiny model; the defaults are the end-to-end cases'."""

    layers: int = 2
    hidden: int = 256
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 64
    intermediate: int = 512
    vocab: int = 512
    max_positions: int = 4096
    std: float = 0.1
    seed: int = 1234

    def __post_init__(self) -> None:
        if self.heads * self.head_dim != self.hidden:
            raise ValueError(f"heads*head_dim = {self.heads * self.head_dim} "
                             f"!= hidden {self.hidden}")
        if self.heads % self.kv_heads:
            raise ValueError(f"heads {self.heads} not a multiple of kv_heads "
                             f"{self.kv_heads}")
        if not 32 <= self.head_dim <= 256:
            raise ValueError(f"head_dim {self.head_dim}: vLLM's CPU attention "
                             f"takes 32..256")
        if self.vocab <= len(SPECIAL):
            raise ValueError(f"vocab {self.vocab} too small")

    def kv_bytes_per_token(self, dtype_bytes: int = 4) -> int:
        """Bytes of K and V one token holds over all layers."""
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes


#: The end-to-end cases' model: 2 layers, hidden 256, 4 heads, 2 KV heads.
SMALL = ModelSpec()
#: The benchmark's model: prefill of 2,000 tokens costs seconds on 2 cores.
BENCH = ModelSpec(layers=8, hidden=1024, heads=16, kv_heads=8, head_dim=64,
                  intermediate=2816, vocab=512)


def word(i: int) -> str:
    """The word of token id ``i``."""
    return SPECIAL[i] if i < len(SPECIAL) else f"w{i}"


def words(ids: Sequence[int]) -> str:
    """The text whose word-level tokenization is ``ids``."""
    return " ".join(word(i) for i in ids)


def build(out_dir: str, spec: ModelSpec = SMALL) -> str:
    """Write the model of ``spec`` into ``out_dir`` (created); returns it."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    os.makedirs(out_dir, exist_ok=True)
    vocab = {word(i): i for i in range(spec.vocab)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>",
                                   bos_token="<s>", eos_token="</s>")
    fast.save_pretrained(out_dir)

    cfg = LlamaConfig(
        vocab_size=spec.vocab, hidden_size=spec.hidden,
        intermediate_size=spec.intermediate, num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads, num_key_value_heads=spec.kv_heads,
        head_dim=spec.head_dim, max_position_embeddings=spec.max_positions,
        initializer_range=spec.std, rms_norm_eps=1e-5, rope_theta=10000.0,
        tie_word_embeddings=False, bos_token_id=1, eos_token_id=2,
        pad_token_id=0, torch_dtype="float32")
    torch.manual_seed(spec.seed)
    model = LlamaForCausalLM(cfg).to(torch.float32)
    gen = torch.Generator().manual_seed(spec.seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            else:
                p.copy_(torch.randn(p.shape, generator=gen) * spec.std)
    model.save_pretrained(out_dir, safe_serialization=True)
    with open(os.path.join(out_dir, "kvalloc-tinymodel.json"), "w") as f:
        json.dump(asdict(spec), f, indent=1)
    return out_dir


def kv_sensitivity(model_dir: str, prompt: Sequence[int],
                   split: int) -> Dict[str, Any]:
    """How much the next token's logits after ``prompt`` change when the KV
    of ``prompt[:split]`` is replaced by another prefix's.

    Runs the checkpoint with ``transformers`` (not vLLM): the prefix's KV is
    computed once from ``prompt[:split]`` and once from a different prefix
    of the same length, then the rest of the prompt is run on each. Returns
    the two argmax tokens and the largest absolute logit difference.
    """
    import torch
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.eval()
    vocab = model.config.vocab_size
    ids = torch.tensor([list(prompt)])
    other = torch.tensor([[(t + 7) % (vocab - 3) + 3 for t in prompt[:split]]])
    out: Dict[str, Any] = {}
    with torch.no_grad():
        ref = model(ids).logits[0, -1]
        pkv = model(other, use_cache=True).past_key_values
        wrong = model(ids[:, split:], past_key_values=pkv,
                      use_cache=True).logits[0, -1]
    out["argmax"] = int(ref.argmax())
    out["argmax_wrong_kv"] = int(wrong.argmax())
    out["max_abs_diff"] = float((ref - wrong).abs().max())
    top2 = ref.topk(2).values
    out["top2_margin"] = float(top2[0] - top2[1])
    return out


def prompts(n: int, length: int, vocab: int, seed: int,
            shared_prefix: int = 0) -> List[List[int]]:
    """``n`` prompts of ``length`` token ids drawn from the words (never
    the special tokens), the first ``shared_prefix`` ids the same in all."""
    import random
    rng = random.Random(seed)
    lo = len(SPECIAL)
    prefix = [rng.randrange(lo, vocab) for _ in range(shared_prefix)]
    return [prefix + [rng.randrange(lo, vocab)
                      for _ in range(length - shared_prefix)]
            for _ in range(n)]


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--bench", action="store_true",
                    help="the benchmark's model (8 layers, hidden 1024)")
    a = ap.parse_args()
    print(build(a.out_dir, BENCH if a.bench else SMALL))
