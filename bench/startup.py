"""How long rlplan's commands take from process start to exit (issue 24: commands import only
what they use). Each command runs as its own process, `--runs` times; the figures are medians.
The quick commands are shown against a bare `python -c "import typer"` on the same machine
(the target: within 0.3 s of it); `plan` on the 8-GPU example (examples/grpo-qwen2.5-7b.yaml
on one node) as the whole command's time (the target: at most 1 s). No test asserts any of
this: timings depend on the machine and its load (say so when quoting them). Run with Python's
bytecode cache, as an installed rlplan is (`as_installed`).

    python bench/startup.py            # 7 runs of each
    python bench/startup.py --runs 15
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = "examples/grpo-qwen2.5-7b.yaml"


def rlplan() -> list[str]:
    """The installed `rlplan` script beside this Python (the entry point users run)."""
    beside = Path(sys.executable).with_name("rlplan")
    found = str(beside) if beside.exists() else shutil.which("rlplan")
    return [found] if found else [sys.executable, "-c",
                                  "from planner.cli.main import main; main()"]


def as_installed(root: Path = REPO) -> dict[str, str]:
    """This environment as an installed rlplan runs in: with Python's bytecode cache, written
    here once (pip compiles a package's modules when it installs it, and Python caches an
    editable one's on first import). This machine's environment sets
    PYTHONDONTWRITEBYTECODE=1, which makes every process compile rlplan's sources again:
    0.13 s more to each command that plans."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "planner")],
                   env=env, check=True)
    return env


def median_s(argv: list[str], runs: int, env: dict[str, str]) -> float:
    times = []
    for _ in range(runs):
        started = time.monotonic()
        out = subprocess.run(argv, capture_output=True, cwd=REPO, check=False, env=env)
        times.append(time.monotonic() - started)
        if out.returncode != 0:
            raise SystemExit(f"{' '.join(argv)}: exit {out.returncode}: "
                             f"{out.stderr.decode()[-300:]}")
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="runs of each command")
    runs = parser.parse_args().runs
    cmd = rlplan()
    env = as_installed()
    base = median_s([sys.executable, "-c", "import typer"], runs, env)
    print(f"median of {runs} runs; python -c 'import typer': {base:.3f} s")
    print(f"{'command':<50} {'s':>7} {'over typer':>11}")
    for args in (["--version"], ["gpus"], ["models"], ["validate", EXAMPLE]):
        took = median_s([*cmd, *args], runs, env)
        print(f"{'rlplan ' + ' '.join(args):<50} {took:7.3f} {took - base:+11.3f}")
    args = ["plan", EXAMPLE, "--nodes", "1"]
    took = median_s([*cmd, *args], runs, env)
    print(f"{'rlplan ' + ' '.join(args):<50} {took:7.3f} {'(whole)':>11}")


if __name__ == "__main__":
    main()
