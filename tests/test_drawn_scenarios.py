"""Plausible scenarios through every command a plan goes through (tests/drawn_scenarios.py):
no traceback, only the contract's exit codes. `bench/valid_scenarios.py` runs a campaign."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pytest

from tests.drawn_scenarios import check, draw

# the PPO plan whose reward model sits on two GPUs at PP 2 beside a TP-2 actor (OpenRLHF would
# run it at the actor's TP: no data-parallel rank left), and a few drawn ones
FOLLOWER = {"algorithm": "ppo",
            "models": {"actor": "qwen2.5-7b", "reference": "actor", "critic": "qwen2.5-1.5b",
                       "reward": "qwen2.5-1.5b"},
            "workload": {"prompts_per_step": 128, "samples_per_prompt": 4, "prompt_len": 512,
                         "response_len": 2048, "max_response_len": 8192, "mini_batches": 2},
            "cluster": {"gpu": "a100-sxm-40gb", "nodes": 1, "gpus_per_node": 4},
            "search": {"max_staleness": 1, "time_limit_s": 10}}


@pytest.mark.parametrize("sc", [FOLLOWER, *(draw(random.Random(seed)) for seed in range(3))],
                         ids=["ppo-follower", "drawn-0", "drawn-1", "drawn-2"])
def test_every_command_answers_within_the_contract(sc):
    with tempfile.TemporaryDirectory() as folder:
        assert check(sc, Path(folder)) == []
