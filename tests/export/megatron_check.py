"""Megatron-LM's own `parse_args` + `validate_args` (megatron-core 0.19.2) on argument lists, and
the TransformerConfig it builds from them (`core_transformer_config_from_args`: its
`__post_init__` checks the model's settings, the uneven pipeline split among them), run in a
process of its own (tests/export/frameworks.py starts it with the unpacked wheel first
on PYTHONPATH, so an installed older megatron-core is not the one imported).

Reads JSON from stdin: [{"argv": [...], "world_size": N, "env": {...}}, ...]; writes JSON to
stdout: one {"ok": true, "args": {...}} or {"ok": false, "error": "..."} per entry.

torch is tests/export/torch_stub.py's stand-in (issue 24; RLPLAN_CHECK_TORCH=real keeps the
installed torch, for the test that compares the two).

The wheel is built for Python 3.12; on 3.11 two things are given (issue 23): `typing.override`
(3.12's, back-filled from typing_extensions) and `megatron.core.transformer.moe.ops.paged_stash`
(Triton kernels, imported at module load, never called by the argument checks). The checks
ask the GPU's compute capability; they get an H100's (9.0), the GPU the tests plan for.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import types
import typing

import typing_extensions
from torch_stub import install as install_torch_stand_in

H100_CAPABILITY = (9, 0)
KEPT = ("world_size", "data_parallel_size", "tensor_model_parallel_size",
        "pipeline_model_parallel_size", "context_parallel_size", "expert_model_parallel_size",
        "expert_tensor_parallel_size", "sequence_parallel", "use_distributed_optimizer",
        "micro_batch_size", "global_batch_size", "recompute_granularity",
        "virtual_pipeline_model_parallel_size", "optimizer_cpu_offload", "num_layers",
        "hidden_size", "num_attention_heads", "num_query_groups", "ffn_hidden_size",
        "seq_length", "accumulate_allreduce_grads_in_fp32")


def _prepare() -> tuple:
    if not hasattr(typing, "override"):
        typing.override = typing_extensions.override
    name = "megatron.core.transformer.moe.ops.paged_stash"
    stub = types.ModuleType(name)

    def _triton_only(*_: object, **__: object) -> None:
        raise RuntimeError(f"{name}: a Triton kernel, stubbed for the argument checks")

    stub.GLOBAL_BLOCK_SIZE = 1024
    stub.paged_stash_copy_kernel = stub.paged_stash_pop_kernel = _triton_only
    sys.modules[name] = stub
    if os.environ.get("RLPLAN_CHECK_TORCH") != "real":  # "real": the stand-in's comparison test
        install_torch_stand_in()
    import torch

    torch.cuda.get_device_capability = lambda *_: H100_CAPABILITY
    from megatron.training import arguments

    arguments.get_device_arch_version = lambda: H100_CAPABILITY[0]
    from megatron.training.argument_utils import core_transformer_config_from_args

    def validate(args: object) -> None:
        arguments.validate_args(args)
        core_transformer_config_from_args(args)

    return arguments.parse_args, validate


def main() -> None:
    cases = json.load(sys.stdin)
    with contextlib.redirect_stdout(io.StringIO()):  # Megatron prints as it checks
        parse_args, validate_args = _prepare()
        results = []
        for case in cases:
            os.environ.update({"WORLD_SIZE": str(case["world_size"]), "RANK": "0",
                               "LOCAL_RANK": "0", **case.get("env", {})})
            if "CUDA_DEVICE_MAX_CONNECTIONS" not in case.get("env", {}):
                os.environ.pop("CUDA_DEVICE_MAX_CONNECTIONS", None)
            sys.argv = ["pretrain_gpt.py", *case["argv"]]
            said = io.StringIO()
            try:
                with contextlib.redirect_stderr(said):  # argparse's refusal goes to stderr
                    args = parse_args()
                    validate_args(args)
            except (AssertionError, ValueError, SystemExit, RuntimeError) as err:
                why = said.getvalue().strip().splitlines()[-1:] or [str(err)]
                results.append({"ok": False, "error": f"{type(err).__name__}: {why[0]}"})
                continue
            results.append({"ok": True, "args": {k: getattr(args, k, None) for k in KEPT}})
    json.dump(results, sys.stdout, default=str)


if __name__ == "__main__":
    main()
