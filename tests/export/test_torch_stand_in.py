"""torch's stand-in for the frameworks' config checks (tests/export/torch_stub.py): what it
gives, what it refuses, that it never leaks into the rest of the suite, and — where a real
(CPU) torch imports — that DeepSpeed's and Megatron-LM's checks answer the same with either."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from planner.export import export
from planner.plan import PlanInput
from tests.export import frameworks as fw
from tests.export import torch_stub
from tests.export.plans import colocated, ppo_scenario, ppo_split, priced, scenario
from tests.export.test_frameworks import _megatron_cases

KEPT: dict = {}


def test_the_stand_in_gives_dtypes_and_a_machine_without_cuda():
    with torch_stub.swapped(("torch",), [torch_stub.FINDER], KEPT):
        import torch
        import torch.nn.functional as F

        assert torch.__version__ == torch_stub.TORCH_VERSION
        assert torch.half is torch.float16 and torch.float is torch.float32
        assert isinstance(torch.bfloat16, torch.dtype) and torch.bfloat16 != torch.float16
        assert torch.cuda.is_available() is False and torch.cuda.device_count() == 0
        assert torch.distributed.is_initialized() is False

        def f():
            return 1

        assert torch.jit.script(f) is f and torch.compile(mode="x")(f) is f

        class Layer(torch.nn.Module):  # a framework's subclass is a real class
            def __init__(self, width):
                super().__init__()
                self.width = width

        assert Layer(3).width == 3 and isinstance(Layer(3), torch.nn.Module)
        assert not isinstance(object(), torch.Tensor)
        assert F.gelu is F.gelu  # the same placeholder each time it is named


@pytest.mark.parametrize("use", [bool, iter, len, int, float, lambda x: x < 1,
                                 lambda x: x.__enter__()])
def test_a_placeholder_is_never_a_value(use):
    with torch_stub.swapped(("torch",), [torch_stub.FINDER], KEPT):
        import torch

        with pytest.raises(torch_stub.TorchStubUsed, match="torch.cuda.get_device_name"):
            use(torch.cuda.get_device_name())


def test_the_stand_in_stays_inside_its_block():
    before = {n for n in sys.modules if n == "torch" or n.startswith("torch.")}
    with torch_stub.swapped(("torch",), [torch_stub.FINDER], KEPT):
        import torch

        assert isinstance(torch, torch_stub._Module)
    assert {n for n in sys.modules if n == "torch" or n.startswith("torch.")} == before
    assert torch_stub.FINDER not in sys.meta_path
    fw.deepspeed_config(_ds_config(), 8)
    assert {n for n in sys.modules if n == "torch" or n.startswith("torch.")} == before
    assert not any(n.startswith("deepspeed") for n in sys.modules)


# --- the same answers as a real torch, where one imports ---------------------------------------

def _real_torch() -> None:
    run = subprocess.run([sys.executable, "-c", "import torch, deepspeed"], capture_output=True,
                         text=True, timeout=300, check=False)
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or ["?"])[-1]
        pytest.skip(f"no real torch imports here ({last}): PyPI's torch is the CUDA build; "
                    "with PyTorch's CPU build installed this test compares the two")


def _ds_config() -> dict:
    sc = scenario()
    return json.loads(export(priced(sc, colocated()), sc, "deepspeed").text)["actor"]


def _fields(ds) -> dict[str, str]:
    """A DeepSpeedConfig's attributes as text, object addresses left out."""
    return {k: re.sub(r" at 0x[0-9a-f]+", "", repr(v)) for k, v in sorted(vars(ds).items())
            if k != "_param_dict"}


_REAL_DEEPSPEED = """
import json, re, sys
from deepspeed.runtime import config as ds_config
out = []
for config, world in json.load(sys.stdin):
    class Dist:
        get_rank = staticmethod(lambda *_: 0)
        get_world_size = staticmethod(lambda *_, w=world: w)
    ds_config.dist = Dist
    try:
        ds = ds_config.DeepSpeedConfig(config)
    except AssertionError as err:
        out.append(f"AssertionError: {err}")
        continue
    out.append({k: re.sub(r" at 0x[0-9a-f]+", "", repr(v)) for k, v in sorted(vars(ds).items())
                if k != "_param_dict"})
print(json.dumps(out))
"""


def test_deepspeed_answers_the_same_with_the_real_torch():
    _real_torch()
    configs = []
    for sc, plan in ((scenario(), colocated()), (ppo_scenario(nodes=3), ppo_split())):
        data = priced(sc, plan)
        layouts = PlanInput.model_validate(data).layouts
        for role, config in json.loads(export(data, sc, "deepspeed").text).items():
            world = layouts[role]["training"].gpus
            configs += [(config, world), (config, world + 1)]  # accepted, refused
    stand_in = []
    for config, world in configs:
        try:
            stand_in.append(_fields(fw.deepspeed_config(config, world)))
        except AssertionError as err:
            stand_in.append(f"AssertionError: {err}")
    run = subprocess.run([sys.executable, "-c", _REAL_DEEPSPEED], input=json.dumps(configs),
                         capture_output=True, text=True, timeout=600, check=True)
    real = json.loads(run.stdout.strip().splitlines()[-1])
    assert sum(isinstance(r, str) for r in real) == len(configs) // 2  # each refused once
    assert stand_in == real


def test_megatron_answers_the_same_with_the_real_torch():
    _real_torch()
    sc = ppo_scenario(nodes=3)
    export_cases = _megatron_cases(export(priced(sc, ppo_split()), sc, "megatron"), sc)
    shape = fw.model_args(sc.actor, sc.workload.max_seq_len)
    cases = [(argv, world, env) for _, argv, world, env in export_cases]
    cases += [(["--tensor-model-parallel-size", "2", "--micro-batch-size", "1", "--bf16",
                *shape], world, env) for world in (6, 8)
              for env in ({}, {"CUDA_DEVICE_MAX_CONNECTIONS": "1"})]
    cases.append((["--micro-batch-size", "1", *shape], 8, {}))
    stand_in = fw.megatron_validate(cases)
    assert fw.megatron_validate(cases, torch="real") == stand_in
    assert all(r["ok"] for r in stand_in[:len(export_cases)])
    # TP 2 without CUDA_DEVICE_MAX_CONNECTIONS=1 is refused, with it accepted; bare defaults pass
    assert [r["ok"] for r in stand_in[len(export_cases):]] == [False, True, False, True, True]
