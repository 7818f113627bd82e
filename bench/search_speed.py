"""Search speed.

Default: the targets of issue 25 — the 1,024-GPU PPO case (four Llama-3.1-70B roles, 512
prompts × 4 samples, prompt 1,024, response 2,048, max 4,096, 128 nodes × 8 H100; `rlplan
plan`'s defaults otherwise: staleness 0, so its what-ifs search staleness 1 with partial
rollouts and a shared critic) and the 8-GPU example (`examples/grpo-qwen2.5-7b.yaml --nodes
1`). Each run in a fresh process (no warm caches, but Python's bytecode cache, as rlplan is
installed: `startup.as_installed`), `--runs` times: min / median / max.
`search` is the search proper (`plan(explain=False)`: every inter-model option priced, solved
and proven), `command` `rlplan plan --json` as run, with its what-ifs: `search.wall_s`, the
command's own clock, and `process`, the process with Python's start-up and imports.
Run: .venv/bin/python bench/search_speed.py [--runs 3]

`--phases`: where the search of those two commands spends its time — the rollout simulations,
the pricing of the options' spaces, CP-SAT's solves, the canonical pins, the what-ifs — in this
process: what child processes do beside it (`planner/search/aside.py`: part of the pricing,
every other pin, the what-ifs) shows as the time it waits for them.
Run: .venv/bin/python bench/search_speed.py --phases [--runs 3]

`--examples`: `rlplan plan` as run on every shipped example (`examples/*.yaml`), the same
columns, no target (`--against REV` side by side too).
Run: .venv/bin/python bench/search_speed.py --examples [--runs 3] [--against REV]

`--matrix`: wall time and status of `plan` for PPO, GRPO and DPO on 8 … 4096 GPUs with a
7B, a 70B and a 235B MoE actor; candidates before and after pruning; CP-SAT against brute
force where brute force can finish.
Run: .venv/bin/python bench/search_speed.py --matrix [--quick]
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
import json
import math
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from startup import as_installed  # bench/startup.py

from planner.search import brute, cpsat
from planner.search.choice import Choice, fits, score, valid
from planner.search.solve import default_workers, plan
from planner.search.space import Space, build_space
from planner.specs.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
PPO_1024 = {  # issue 25's case, as a scenario file (the rest: rlplan's defaults)
    "algorithm": "ppo",
    "models": {"actor": "llama-3.1-70b", "reference": "actor", "reward": "llama-3.1-70b",
               "critic": "llama-3.1-70b"},
    "workload": {"prompts_per_step": 512, "samples_per_prompt": 4, "prompt_len": 1024,
                 "response_len": 2048, "max_response_len": 4096, "mini_batches": 4},
    "cluster": {"gpu": "h100-sxm", "nodes": 128, "gpus_per_node": 8}}
EXAMPLE_8 = ROOT / "examples" / "grpo-qwen2.5-7b.yaml"
TARGETS = [  # (label, scenario, `rlplan plan` flags, what is timed, target s)
    ("PPO 4×70B on 1,024 H100s", PPO_1024, [], "search", 2.0),
    ("PPO 4×70B on 1,024 H100s", PPO_1024, [], "command", 5.0),
    # issue 25's "the 8-GPU example ≤ 0.5 s" read as its search (like the 1,024-GPU row above
    # it), and issue 24's "`rlplan plan` on the 8-GPU example in ≤ 1 s for the whole command"
    ("GRPO 7B example --nodes 1 (8 GPUs)", EXAMPLE_8, ["--nodes", "1"], "search", 0.5),
    ("GRPO 7B example --nodes 1 (8 GPUs)", EXAMPLE_8, ["--nodes", "1"], "command", 1.0),
]
SEARCH_PROPER = """
import sys, time
from pathlib import Path
from planner.search.solve import plan
from planner.specs.scenario import load_scenario
flags = dict(zip(sys.argv[2::2], sys.argv[3::2]))  # --nodes N: the only flag the targets use
sc = load_scenario(Path(sys.argv[1]), {"cluster.nodes": int(flags["--nodes"])} if flags else {})
started = time.monotonic()
plan(sc, explain=False)
print(time.monotonic() - started)
"""


PHASES = """
import sys, time
from collections import Counter
from pathlib import Path
from planner.cost import rollout
from planner.search import cpsat, solve
spent = Counter()

def timed(owner, name, phase):
    inner = getattr(owner, name)
    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[phase] += time.perf_counter() - started
    setattr(owner, name, wrapper)

timed(rollout, "_simulate", "simulations")
timed(solve, "build_space", "pricing")
timed(cpsat, "solve", "solves")
timed(cpsat, "pin", "pins")
timed(solve, "_what_if", "what-ifs")
import yaml
from planner.specs.scenario import load_scenario
flags = {k: yaml.safe_load(v) for k, v in (a.split("=", 1) for a in sys.argv[2:])}
sc = load_scenario(Path(sys.argv[1]), flags)
started = time.perf_counter()
solve.plan(sc)
spent["plan"] = time.perf_counter() - started
print(" ".join(f"{k}={v:.3f}" for k, v in spent.items()))
"""


def phases(runs: int) -> None:
    """Where `rlplan plan`'s search spends its time on the two commands of the targets (each
    run in a fresh process; medians over `runs`): the whole `plan` (imports and the CLI's
    rendering aside); the rollout simulations (inside the pricing and the solves, whose KV
    refinement prices more sizes), the pricing of the options' spaces, CP-SAT's solves with
    their KV refinement, the canonical pins, and the what-ifs (their pricing and solves
    included). The phases nest: the simulations are inside the pricing and the solves, the
    what-ifs hold pricing and solves of their own."""
    cases = [("PPO 4×70B on 1,024 H100s", PPO_1024, []),
             ("GRPO 7B example (8 GPUs)", EXAMPLE_8, ["cluster.nodes=1"])]
    names = ["plan", "simulations", "pricing", "solves", "pins", "what-ifs"]
    print(f"seconds, median of {runs} fresh processes (a shared machine: rerun to judge)")
    print(f"{'case':28} " + " ".join(f"{n:>11}" for n in names))
    with tempfile.TemporaryDirectory() as tmp:
        for label, scenario_, overrides in cases:
            path = scenario_
            if isinstance(scenario_, dict):
                path = Path(tmp) / "ppo-1024.yaml"
                path.write_text(yaml.safe_dump(scenario_))
            got: dict[str, list[float]] = {n: [] for n in names}
            for _ in range(runs):
                out = subprocess.run([sys.executable, "-c", PHASES, str(path), *overrides],
                                     capture_output=True, text=True, cwd=ROOT, check=True)
                for item in out.stdout.split():
                    name, value = item.split("=")
                    got[name].append(float(value))
            print(f"{label:28} " + " ".join(
                f"{statistics.median(got[n]) if got[n] else 0.0:11.2f}" for n in names),
                flush=True)


def run_once(path: Path, flags: list[str], what: str, env: dict[str, str], root: Path = ROOT
             ) -> tuple[float, float, float]:
    """One fresh process of the checkout at `root`: `rlplan plan --json` ("command"), or the
    search proper of the same scenario ("search"): (the seconds it reports itself, the
    process's, its CPU seconds)."""
    if what == "search":  # `plan(explain=False)` of the scenario with the flags' overrides
        command = [sys.executable, "-c", SEARCH_PROPER, str(path), *flags]
    else:
        command = [sys.executable, "-c", "from planner.cli.main import main; main()", "plan",
                   str(path), *flags, "--json"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    out = subprocess.run(command, capture_output=True, text=True, cwd=root, env=env)
    process = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if out.returncode != 0:
        raise SystemExit(f"exit {out.returncode}: {out.stderr.strip()[-300:]}")
    if what == "search":
        return float(out.stdout), process, cpu
    return json.loads(out.stdout)["search"]["wall_s"], process, cpu


BUILD_NATIVE = """
import pathlib, shutil, tempfile, hatch_build
with tempfile.TemporaryDirectory() as tmp:
    built = hatch_build._compile(pathlib.Path.cwd(), pathlib.Path(tmp))
    shutil.copy2(built, pathlib.Path("planner", "cost", built.name))
"""


@contextlib.contextmanager
def revision(rev: str):
    """A temporary worktree of git revision `rev` beside this checkout, with this checkout's
    compiled rollout simulation when that revision's source of it is the same, else its own,
    built there (its `hatch_build.py`, as its install would)."""
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp) / "rev"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach",
                        str(where), rev], check=True)
        try:
            if subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", rev, "--",
                               "planner/cost/_rollout_sim.c"]).returncode != 0:
                built = subprocess.run([sys.executable, "-c", BUILD_NATIVE], cwd=where,
                                       capture_output=True, text=True)
                if built.returncode != 0:
                    raise SystemExit(f"--against {rev}: its rollout simulation's C module did "
                                     f"not build: {built.stderr.strip()[-300:]}")
            else:
                for built in (ROOT / "planner" / "cost").glob("_rollout_sim*.so"):
                    shutil.copy2(built, where / "planner" / "cost")
            yield where
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                            str(where)], check=False)


def shipped_examples() -> list[tuple]:
    """`rlplan plan` on each shipped example as it ships, as rows like `TARGETS`' (no target):
    the sizes a newcomer runs first (a 16-node PPO among them)."""
    return [(f"example {path.stem}", path, [], "command", None)
            for path in sorted((ROOT / "examples").glob("*.yaml"))]


HOST_LOOP = ("import time; t = time.perf_counter(); sum(i * i for i in range(10_000_000)); "
             "print(time.perf_counter() - t)")
HOST_LOOP_S = 0.37  # its median of 5 on this machine, 2026-12-03 13:55, all three targets met


def host_speed(runs: int = 5) -> float:
    """A fixed pure-Python loop's seconds in fresh processes (median of `runs`): a shared host's
    speed drifts (the same code's 1,024-GPU command 5.33 s on 2026-12-01, 3.67–5.26 s within
    an hour on 2026-12-03), so the rows are read beside it — roughly: it times one core, not
    the contention the solver's threads and the children meet (bench/README.md)."""
    return statistics.median(
        float(subprocess.run([sys.executable, "-c", HOST_LOOP], capture_output=True,
                             text=True, check=True).stdout) for _ in range(runs))


def targets(runs: int, against: str | None = None, rows: list[tuple] = TARGETS) -> None:
    """The issues' four rows (or `rows`): min / median / max over `runs` fresh processes; with
    `against`, that git revision's too, run by run in turn with this checkout's (a shared
    host's speed drifts within the hour: only figures taken side by side compare)."""
    def spread(xs: list[float]) -> str:
        return f"{min(xs):5.2f} / {statistics.median(xs):5.2f} / {max(xs):5.2f}"

    print(f"{runs} runs each, seconds min / median / max (a shared machine: rerun to judge; "
          "cpu: the CPU time of the process and its children — CP-SAT's worker threads, the "
          "work beside the search)")
    print(f"host speed: a fixed Python loop took {host_speed():.2f} s (median of 5; "
          f"{HOST_LOOP_S:.2f} s when the targets were last all met)")
    print(f"{'case':46} {'timed':8} {'in the command':>21} {'process':>21} {'cpu':>21} "
          f"{'target':>6}")
    with contextlib.ExitStack() as stack:
        checkouts = {"": (ROOT, as_installed())}  # with Python's bytecode cache, as installed
        if against:
            old = stack.enter_context(revision(against))
            checkouts[against] = (old, {**as_installed(old), "PYTHONPATH": str(old)})
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        for label, scenario_, flags, what, target in rows:
            path = scenario_
            if isinstance(scenario_, dict):
                path = tmp / "ppo-1024.yaml"
                path.write_text(yaml.safe_dump(scenario_))
            times: dict[str, list] = {name: [] for name in checkouts}
            for _ in range(runs):
                for name, (root, env) in checkouts.items():
                    times[name].append(run_once(path, flags, what, env, root))
            for name, got in times.items():
                inside, process, cpu = ([t[k] for t in got] for k in range(3))
                case = f"{label} {'at ' + name if name else ''}"
                print(f"{case:46} {what:8} {spread(inside):>21} {spread(process):>21} "
                      f"{spread(cpu):>21} {'' if target is None else f'{target:6.1f}':>6}",
                      flush=True)


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
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per target row")
    parser.add_argument("--matrix", action="store_true",
                        help="the table over algorithms, actors and GPU counts instead")
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
    parser.add_argument("--against", metavar="REV",
                        help="also time git revision REV's target rows, run by run in turn "
                        "with this checkout's")
    parser.add_argument("--phases", action="store_true",
                        help="where the two target commands' search spends its time instead")
    parser.add_argument("--examples", action="store_true",
                        help="time `rlplan plan` on every shipped example instead")
    args = parser.parse_args()
    if args.phases:
        phases(args.runs)
        return
    if args.examples:
        targets(args.runs, args.against, shipped_examples())
        return
    if not args.matrix:
        targets(args.runs, args.against)
        return
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
