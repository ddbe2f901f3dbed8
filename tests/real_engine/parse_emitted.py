"""Parse an emitted ``vllm serve`` line with vLLM's own config classes (run under the tier's
vLLM, never in the test environment): its argument parser (``EngineArgs.add_cli_args``), the
``VllmConfig`` it builds (``create_engine_config``, whose ``_post_init_kv_transfer_config``
folds --kv-offloading-size into the connector's config), and the offloading spec and secondary
tier classes vLLM's own factories pick for that config. Prints one JSON object.

    python parse_emitted.py 'vllm serve MODEL --flag ...'
"""

from __future__ import annotations

import inspect
import json
import shlex
import sys


def main() -> None:
    from vllm.engine.arg_utils import EngineArgs
    from vllm.usage.usage_lib import UsageContext
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    from vllm.v1.kv_offload.factory import OffloadingSpecFactory
    from vllm.v1.kv_offload.tiering.factory import SecondaryTierFactory

    words = shlex.split(sys.argv[1])
    assert words[:2] == ["vllm", "serve"], words[:2]
    parser = EngineArgs.add_cli_args(FlexibleArgumentParser())
    args = parser.parse_args(["--model", words[2], *words[3:]])
    config = EngineArgs.from_cli_args(args).create_engine_config(UsageContext.OPENAI_API_SERVER)
    out: dict[str, object] = {
        "model": config.model_config.model,
        "max_model_len": config.model_config.max_model_len,
        "kv_cache_memory_bytes": config.cache_config.kv_cache_memory_bytes,
        "kv_offloading_size": config.cache_config.kv_offloading_size,
    }
    transfer = config.kv_transfer_config
    if transfer is not None:
        extra = dict(transfer.kv_connector_extra_config)
        out.update(kv_connector=transfer.kv_connector, kv_role=transfer.kv_role, extra=extra)
        spec = OffloadingSpecFactory.get_spec_cls(extra)
        out["spec"] = spec.__name__
        tiers = []
        for tier in extra.get("secondary_tiers", []):
            cls = SecondaryTierFactory.get_tier_class(tier)
            unknown = set(tier) - {"type"} - set(inspect.signature(cls.__init__).parameters)
            tiers.append({"class": cls.__name__, "unknown_keys": sorted(unknown)})
        out["tiers"] = tiers
    print("PARSED " + json.dumps(out))


if __name__ == "__main__":
    main()
