"""Random valid scenarios through every command a plan goes through: `plan`, then `evaluate`,
`report` and `export` to each framework of the plan it printed — none may end in a traceback.

`bench/fuzz.py` mutates inputs into hostile ones; this draws plausible ones (PPO with a critic
and a reward model, GRPO, DPO; six models, six GPUs, one or two nodes of 2–8 GPUs, staleness
0 or 1), where the search's corners are (its first run found `rlplan plan` dividing by zero on
a PPO plan whose reward model sat on fewer GPUs than the actor's TP × its own PP). Each
command runs in this process (the CLI's `app`); a failure is any exception other than the
CLI's exit, or an exit code other than 0, 2 (bad input, or a plan a framework cannot run) and
3 (nothing fits).

    python bench/valid_scenarios.py --cases 150 --seed 6     # about 2 minutes

Exit status 1 when any command failed.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import random
import sys
import tempfile
import time
import traceback
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner.cli.main import app

MODELS = ("qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-7b", "qwen2.5-14b", "llama-3.1-8b",
          "qwen3-30b-a3b")
GPUS = ("h100-sxm", "a100-sxm-40gb", "a100-sxm-80gb", "mi300x", "h20", "b200")
FORMATS = ("verl", "openrlhf", "deepspeed", "megatron", "nemo-rl")
EXPECTED = {0, 2, 3}


def draw(rng: random.Random) -> dict:
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=150)
    parser.add_argument("--seed", type=int, default=6)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    codes: collections.Counter = collections.Counter()
    failed = 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        for k in range(args.cases):
            sc = draw(rng)
            scenario, plan = Path(folder, f"s{k}.yaml"), Path(folder, f"p{k}.json")
            scenario.write_text(yaml.safe_dump(sc))
            commands = [["plan", str(scenario), "--json"]]
            try:
                code, printed = run(commands[0])
                codes["plan", code] += 1
                if code == 0:
                    plan.write_text(printed)
                    commands = [
                        ["evaluate", str(scenario), str(plan), "--json"],
                        ["report", str(plan), "--out", str(Path(folder, f"r{k}.html"))],
                        *(["export", str(plan), "--format", f, "--scenario", str(scenario),
                           "--out", str(Path(folder, f"e{k}.{f}"))] for f in FORMATS)]
                    for command in commands:
                        code, _ = run(command)
                        codes[" ".join(command[:1] + command[3:4] * (command[0] == "export")),
                              code] += 1
                        if code not in EXPECTED:
                            failed += 1
                            print(f"case {k}: {' '.join(command[:1])} exit {code}: {sc}")
            except Exception:  # a traceback: the contract broken
                failed += 1
                print(f"case {k}: {sc}\n{traceback.format_exc(limit=-4)}", flush=True)
    print(", ".join(f"{what} exit {code}: {n}" for (what, code), n in sorted(codes.items())))
    print(f"{args.cases} scenarios in {time.monotonic() - started:.0f} s, seed {args.seed}: "
          f"{failed} commands failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
