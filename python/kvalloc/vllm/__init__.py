"""kvalloc's KV connector for vLLM: ``kvalloc.vllm.KvallocConnector``.

Start vLLM with::

    --kv-transfer-config '{"kv_connector": "KvallocConnector",
        "kv_connector_module_path": "kvalloc.vllm", "kv_role": "kv_both",
        "kv_connector_extra_config": {"model_id": "my-model-v1"}}'

This package needs vLLM (and torch); ``import kvalloc`` does not import it.
``README.md`` beside this file is the operator's guide: the keys, the
settings (stable block hashes), and what happens when the daemon or Redis
is down.
"""

__all__ = ["KvallocConnector", "KvallocConnectorMetadata", "KvallocStats",
           "BlockSpec"]


def __getattr__(name: str):
    """The connector's classes, imported (with vLLM and torch) on first use,
    so that ``kvalloc.vllm.identity`` needs the standard library alone."""
    if name in __all__:
        from . import connector
        return getattr(connector, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
