"""Plausible scenarios drawn at random, and every command a plan goes through run on each:
`plan`, then `evaluate`, `report` and `export` to each framework of the plan it printed. None
may end in a traceback or an exit code other than 0, 2 (bad input, or a plan a framework
cannot run) and 3 (nothing fits). `tests/test_drawn_scenarios.py` runs a few;
`bench/valid_scenarios.py` runs a campaign. (`tests/fuzzing.py` makes inputs hostile instead.)
"""

from __future__ import annotations

import contextlib
import io
import random
import traceback
from collections import Counter
from pathlib import Path

import yaml

from planner.cli.main import app
from planner.frameworks.presets import releases

MODELS = ("qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-7b", "qwen2.5-14b", "llama-3.1-8b",
          "qwen3-30b-a3b")
GPUS = ("h100-sxm", "a100-sxm-40gb", "a100-sxm-80gb", "mi300x", "h20", "b200")
FORMATS = ("verl", "openrlhf", "deepspeed", "megatron", "nemo-rl")
RELEASES = tuple(f"{f}@{v}" for f, versions in releases().items() for v in versions)
EXPECTED = {0, 2, 3}


def draw(rng: random.Random, framework: bool = False) -> dict:
    """A scenario file's fields: PPO with a critic and a reward model, GRPO or DPO; six
    models, six GPUs, one or two nodes of 2–8 GPUs, staleness 0 or 1; with `framework`, half
    of them name a framework release to plan for (`framework:`)."""
    algorithm = rng.choice(("ppo", "ppo", "grpo", "dpo"))
    mean = rng.choice((256, 1024, 2048))
    sc = {"algorithm": algorithm, "models": {"actor": rng.choice(MODELS), "reference": "actor"},
          "workload": {"prompts_per_step": rng.choice((16, 64, 128)),
                       "samples_per_prompt": rng.choice((2, 4)),
                       "prompt_len": rng.choice((128, 512)), "response_len": mean,
                       "max_response_len": mean * rng.choice((1, 2, 4))},
          "cluster": {"gpu": rng.choice(GPUS), "nodes": rng.choice((1, 1, 2)),
                      "gpus_per_node": rng.choice((2, 4, 8))},
          "search": {"max_staleness": rng.choice((0, 1)), "time_limit_s": 10}}
    if algorithm == "ppo":
        sc["models"] |= {"critic": rng.choice(MODELS[:3]), "reward": rng.choice(MODELS[:3])}
    if framework and rng.random() < 0.5:
        sc["framework"] = rng.choice(RELEASES)
    return sc


def run(args: list[str]) -> tuple[int, str]:
    """The CLI on `args` in this process: (exit code, what it printed)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            app(args)
        except SystemExit as exc:
            return int(exc.code or 0), out.getvalue()
    return 0, out.getvalue()


def check(sc: dict, folder: Path, codes: Counter | None = None) -> list[str]:
    """Scenario `sc` through every command, in `folder`: what went wrong (nothing: []);
    `codes` counts each command's exit codes."""
    codes = Counter() if codes is None else codes
    scenario, plan = folder / "s.yaml", folder / "p.json"
    scenario.write_text(yaml.safe_dump(sc))
    commands = [["plan", str(scenario), "--json"]]
    problems = []
    try:
        code, printed = run(commands[0])
        codes["plan", code] += 1
        if code not in EXPECTED:
            return [f"plan: exit {code}"]
        if code != 0:
            return []
        plan.write_text(printed)
        commands = [["evaluate", str(scenario), str(plan), "--json"],
                    ["report", str(plan), "--out", str(folder / "r.html")],
                    *(["export", str(plan), "--format", f, "--scenario", str(scenario),
                       "--out", str(folder / f"e.{f}")] for f in FORMATS)]
        for command in commands:
            code, _ = run(command)
            what = " ".join(command[:1] + command[3:4] * (command[0] == "export"))
            codes[what, code] += 1
            if code not in EXPECTED:
                problems.append(f"{what}: exit {code}")
    except Exception:  # a traceback: the contract broken
        problems.append(traceback.format_exc(limit=-4))
    return problems
