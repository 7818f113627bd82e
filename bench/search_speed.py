"""Search speed: wall time and status of `plan` for PPO, GRPO and DPO on 8 … 4096 GPUs with a
7B, a 70B and a 235B MoE actor; candidates before and after pruning; CP-SAT against brute
force where brute force can finish.

Not a test: prints a table. Run: .venv/bin/python bench/search_speed.py [--quick]
Columns: `cands` candidates priced, `kept` undominated, `model` left in the base option's
CP-SAT model by the bounds; `search s` is the search proper (`plan(explain=False)`: every
inter-model option priced, solved and proven); `+why s` (with --explained) is `rlplan plan`
as run, whose explanation searches the what-ifs too; `price s` / `solve s` split one option
(the base one).
Brute force's time is first estimated as its choice count (computed exactly, without
enumerating) × the measured seconds per choice of a sample (the first choices: a low
estimate); it is run when the estimate is within BRUTE_SECONDS (10 minutes) and stopped at
that limit ("> 600 s stopped": the speed-up printed is then a lower bound).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import time

from planner.search import brute, cpsat
from planner.search.choice import Choice, fits, score, valid
from planner.search.solve import default_workers, plan
from planner.search.space import Space, build_space
from planner.specs.scenario import load_scenario

ACTORS = {"7B": "qwen2.5-7b", "70B": "llama-3.1-70b", "235B-MoE": "qwen3-235b-a22b"}
GPUS = (8, 64, 512, 1024, 4096)
ALGOS = ("ppo", "grpo", "dpo")
BRUTE_SECONDS = 600  # brute force is run when its estimate is within this


def scenario(algo: str, actor: str, gpus: int):
    flags = {"algorithm": algo, "models.actor": actor, "models.reference": "actor",
             "workload.prompts_per_step": 512, "workload.samples_per_prompt": 1 if algo != "grpo"
             else 8, "workload.prompt_len": 1024, "workload.response_len": 2048,
             "workload.max_response_len": 4096, "workload.mini_batches": 4,
             "cluster.gpu": "h100-sxm", "cluster.nodes": max(1, gpus // 8),
             "cluster.gpus_per_node": min(8, gpus), "search.time_limit_s": 120}
    if algo == "ppo":  # four roles of the actor's class
        flags |= {"models.critic": actor, "models.reward": actor}
    return load_scenario(None, flags)


def brute_count(space: Space) -> int:
    """Choices brute force would score (same rules as brute.enumerate_choices, counted)."""
    names = [t.name for t in space.tasks]
    total = 0
    options_ = [space.shapes] + [[(0, 0), *space.shapes]] * (space.slots - 1)
    for chosen in itertools.product(*options_):
        on, sizes = tuple(p for p, _ in chosen), tuple(s for _, s in chosen)
        for slots in itertools.product(range(space.slots), repeat=len(names)):
            if any(sizes[k] == 0 for k in slots):
                continue
            slot = dict(zip(names, slots, strict=True))
            if not valid(space, Choice(sizes, slot, {}, on)):
                continue
            total += math.prod(len(space.candidates.get((n, on[slot[n]], sizes[slot[n]]), []))
                               for n in names)
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="8 and 64 GPUs only")
    parser.add_argument("--algos", default=",".join(ALGOS), help="e.g. ppo,grpo")
    parser.add_argument("--actors", default=",".join(ACTORS), help="e.g. 7B,70B")
    parser.add_argument("--gpus", default=None, help="e.g. 8,1024")
    parser.add_argument("--workers", type=int, default=default_workers(),
                        help="CP-SAT workers (default: the cores, as rlplan plan)")
    parser.add_argument("--no-brute", dest="brute", action="store_false",
                        help="estimate brute force only, never run it")
    parser.add_argument("--explained", action="store_true",
                        help="also time `rlplan plan` as run (with its what-if searches)")
    args = parser.parse_args()
    gpus_list = ([int(g) for g in args.gpus.split(",")] if args.gpus else
                 GPUS[:2] if args.quick else GPUS)
    actors = {k: v for k, v in ACTORS.items() if k in args.actors.split(",")}
    algos = args.algos.split(",")
    print(f"CP-SAT workers: {args.workers}")
    print(f"{'algo':5} {'actor':9} {'GPUs':>5} {'status':9} {'search s':>8} {'+why s':>8} "
          f"{'price s':>8} "
          f"{'solve s':>8} {'cands':>7} {'kept':>6} {'model':>6} {'iter s':>9} {'brute':>22} "
          f"{'speed-up':>9}")
    for algo, (label, actor), gpus in itertools.product(algos, actors.items(), gpus_list):
        sc = scenario(algo, actor, gpus)
        t0 = time.perf_counter()
        try:
            result = plan(sc, workers=args.workers, explain=False)  # every option, proven
            status, it = result.status, f"{result.iteration_time_s:9.1f}"
            cands, kept = result.search["candidates"], result.search["candidates_after_pruning"]
        except Exception as exc:  # infeasible: report it as such
            status, it, cands, kept = type(exc).__name__[:9], "—", 0, 0
        wall = time.perf_counter() - t0
        t0 = time.perf_counter()
        explained = float("nan")
        if args.explained:  # `rlplan plan` as run: + the what-if searches of its explanation
            with contextlib.suppress(Exception):
                plan(sc, workers=args.workers)
            explained = time.perf_counter() - t0
        # one option, timed separately: pricing vs solving, and brute force on the same space
        t1 = time.perf_counter()
        space = build_space(sc)
        price_s = time.perf_counter() - t1
        r = cpsat.solve(space, 600, args.workers)
        count = brute_count(space)
        sample = list(itertools.islice(brute.enumerate_choices(space), 2000))
        t2 = time.perf_counter()
        for ch in sample:
            if fits(space, ch):
                score(space, ch)
        estimate = count * (time.perf_counter() - t2) / max(1, len(sample))
        brute_s, brute_txt = estimate, f"~{estimate:.1e} s est ({count:.1e})"
        if args.brute and estimate <= BRUTE_SECONDS:  # run it, stopped at the limit
            t2 = time.perf_counter()
            try:
                best, _, _ = brute.solve(space, time_limit_s=BRUTE_SECONDS)
                brute_s = time.perf_counter() - t2
                agree = "=" if best == r.objective else "≠"
                brute_txt = f"{brute_s:8.1f} s {agree} ({count:.1e})"
            except TimeoutError:
                brute_s = BRUTE_SECONDS  # a lower bound: the speed-up is at least this
                brute_txt = f"> {BRUTE_SECONDS} s stopped ({count:.1e})"
        speedup = brute_s / max(r.wall_s, 1e-6)
        print(f"{algo:5} {label:9} {gpus:5d} {status:9} {wall:8.2f} {explained:8.2f} "
              f"{price_s:8.2f} "
              f"{r.wall_s:8.2f} {cands:7d} {kept:6d} {r.candidates:6d} {it} {brute_txt:>22} "
              f"{speedup:9.0f}×",
              flush=True)


if __name__ == "__main__":
    main()
