"""What the search's menus leave out of the proof, and what widening them costs.

For each scenario, `rlplan plan`'s search (`plan(explain=False)`, in this process) at narrow
menus and widened — `--widen cp`: `search.min_cp_chunk` 4,096 (the default) against 1 (every
cp the GPUs allow); `--widen pp`: `search.every_pp` false (powers of two) against true (every
pipeline degree dividing a group's GPUs, the default since 2026-12-03) — the plan of each (its
status printed: OPTIMAL unless the time limit cut it), the gain, the search's wall time
(median of `--runs`), and the widened layouts of the faster plan.
Scenarios: the 1,024-GPU PPO case of `bench/search_speed.py`, the shipped PPO example (four 70B
roles on 128 H100s), and a grid of 48 small ones (GRPO and PPO with a 7B, 8B or 14B actor, 0.5B
critic and reward, on 4 or 8 A100-40GB or H100 GPUs, 16 prompts × 4, prompt 256, response
1,024 up to 2,048 or 4,096).

    python bench/menus.py --widen cp           # everything (about 2 minutes)
    python bench/menus.py --widen pp --grid    # the small grid only
    python bench/menus.py --widen pp --runs 3
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from search_speed import PPO_1024  # bench/search_speed.py

from planner.search.solve import plan
from planner.specs.scenario import load_scenario
from planner.specs.search import DEFAULT_MIN_CP_CHUNK

ROOT = Path(__file__).resolve().parents[1]


def grid() -> list[tuple[str, dict]]:
    out = []
    for model, algo, gpu, n, longest in itertools.product(
            ("qwen2.5-7b", "qwen2.5-14b", "llama-3.1-8b"), ("grpo", "ppo"),
            ("a100-sxm-40gb", "h100-sxm"), (4, 8), (2048, 4096)):
        flags = {"algorithm": algo, "models.actor": model, "models.reference": "actor",
                 "workload.prompts_per_step": 16, "workload.samples_per_prompt": 4,
                 "workload.prompt_len": 256, "workload.response_len": 1024,
                 "workload.max_response_len": longest, "cluster.gpu": gpu, "cluster.nodes": 1,
                 "cluster.gpus_per_node": n}
        if algo == "ppo":
            flags |= {"models.critic": "qwen2.5-0.5b", "models.reward": "qwen2.5-0.5b"}
        out.append((f"{algo} {model} {n}×{gpu} max {longest}", flags))
    return out


WIDEN = {"cp": ({"search.min_cp_chunk": DEFAULT_MIN_CP_CHUNK}, {"search.min_cp_chunk": 1}),
         "pp": ({"search.every_pp": False}, {"search.every_pp": True})}
"""The default menus and the widened ones, as scenario fields."""


def widened(lay, what: str) -> bool:
    """Whether a layout uses what the widened menus add (cp > 1, or pp not a power of two)."""
    return lay.cp > 1 if what == "cp" else lay.pp & (lay.pp - 1) != 0


def searched(path: Path | None, flags: dict, runs: int, what: str
             ) -> tuple[float, float, dict]:
    """The proven optimum (s), the median wall time of its search (s), and the plan's layouts
    with what widening `what` adds (role.stage → cp, pp, micro-batch)."""
    sc = load_scenario(path, flags)
    walls = []
    for _ in range(runs):
        started = time.monotonic()
        best = plan(sc, explain=False)
        walls.append(time.monotonic() - started)
    odd = {f"{role}.{stage}": (lay.cp, lay.pp, lay.micro_batch)
           for role, stages in best.layouts.items() for stage, lay in stages.items()
           if widened(lay, what)}
    return best.iteration_time_s, statistics.median(walls), {**odd, "status":
                                                            best.search["status"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widen", choices=sorted(WIDEN), required=True)
    parser.add_argument("--grid", action="store_true", help="the small grid only")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "ppo-1024.yaml"
        big.write_text(yaml.safe_dump(PPO_1024))
        cases = ([] if args.grid else
                 [("PPO 4×70B on 1,024 H100s", big, {}),
                  ("PPO example (4×70B, 128 H100s)", ROOT / "examples/ppo-llama-3.1-70b.yaml",
                   {})])
        cases += [(name, None, flags) for name, flags in grid()]
        print(f"{'scenario':46} {'narrow s':>10} {'search s':>9} {'widened s':>11} "
              f"{'search s':>9} {'gain':>7}  widened layouts (cp, pp, micro-batch), status")
        narrow, wide = WIDEN[args.widen]
        gains = []
        for name, path, flags in cases:
            base = searched(path, {**flags, **narrow}, args.runs, args.widen)
            every = searched(path, {**flags, **wide}, args.runs, args.widen)
            gain = every[0] / base[0] - 1
            gains.append(gain)
            print(f"{name:46} {base[0]:10.3f} {base[1]:9.2f} {every[0]:11.3f} {every[1]:9.2f} "
                  f"{gain:+7.2%}  {every[2] if gain < 0 else every[2]['status']}", flush=True)
    better = [g for g in gains if g < 0]
    print(f"\n{len(gains)} scenarios: the widened menus faster in {len(better)}"
          + (f" (by {-max(better):.2%} to {-min(better):.2%})" if better else "")
          + f"; never slower: {all(g <= 1e-9 for g in gains)}")
    print(f"(bench wall time {time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
