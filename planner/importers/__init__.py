"""`rlplan import`: a launch script as its author wrote it → the scenario it runs and the plan
(`groups`, `layouts`, `inter_model`) `evaluate` prices.

shell.py reads the script without running it (variables, arrays, defaults, wrappers);
launch.py finds the training command; one module per framework (verl.py, openrlhf.py,
megatron.py, nemo_rl.py, which also reads NeMo-RL's YAML configs) maps its settings, with that
release's defaults (defaults.py), to scenario fields (models.py for the models) and to the
plan; scenario.py joins them with `--scenario` and the flags (flag > scenario file > script).
Settings rlplan does not price are listed in a note; settings that change the layout in a way
a plan cannot say are refused (one InputError).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from planner.errors import InputError
from planner.importers.launch import FORMATS, find_launch
from planner.importers.reading import Reading, dividing_micro_batches
from planner.importers.shell import read_script
from planner.specs.scenario import Scenario

__all__ = ["FORMATS", "Imported", "detect", "import_config", "read_file"]


@dataclass
class Imported:
    fmt: str
    plan: dict[str, Any]  # groups, layouts, inter_model
    notes: list[str] = field(default_factory=list)
    reading: Reading | None = None
    scenario: Scenario | None = None


def read_file(text: str, fmt: str | None = None,
              settings: dict[str, str] | None = None) -> Reading:
    """What the script says (its variables fixed by `settings`, --set NAME=VALUE)."""
    from planner.importers import megatron, nemo_rl, openrlhf, verl

    if fmt is not None and fmt not in FORMATS:
        raise InputError(f"--format: unknown format '{fmt}'; choose one of {', '.join(FORMATS)}")
    if fmt in (None, "nemo-rl") and nemo_rl.is_config(text):  # its YAML, not a script
        return nemo_rl.read_config(text)
    script = read_script(text, settings)
    launch = find_launch(script, text, fmt)
    readers = {"verl": verl.read, "openrlhf": openrlhf.read, "megatron": megatron.read,
               "nemo-rl": nemo_rl.read}
    reading = readers[launch.fmt](launch)
    wrapped = [f"--set {name}: replaces the script's own assignment of {name}"
               for name in script.overridden]
    reading.notes[:0] = script.notes + wrapped  # in place: the layout adds to this list
    return reading


def detect(text: str) -> str:
    """The format, recognised from the launch command (or the file's shape)."""
    from planner.importers.nemo_rl import is_config

    return "nemo-rl" if is_config(text) else find_launch(read_script(text), text).fmt


def lay_out(reading: Reading, sc: Scenario) -> Imported:
    """The plan of `reading` under the resolved scenario `sc`."""
    if sc.multi_pool:  # its groups would name no pool, and the plan would not evaluate
        raise InputError(f"import: the scenario's field 'cluster.pools' lists "
                         f"{len(sc.pools)} pools and a {reading.fmt} script names no GPU type, "
                         "so its groups have no pool; give a scenario with one GPU type "
                         "(cluster.gpu, or one pool), or write the plan JSON with each group's "
                         "'pool'")
    plan = reading.layout(sc)
    notes = list(reading.notes) + dividing_micro_batches(plan, sc)
    ignored = reading.ignored()
    if ignored:
        notes.append(f"ignored ({len(ignored)} settings rlplan does not price): "
                     f"{', '.join(ignored)}")
    return Imported(reading.fmt, plan, notes, reading, sc)


def import_config(text: str, sc: Scenario, fmt: str | None = None,
                  settings: dict[str, str] | None = None) -> Imported:
    """The plan of a script for a scenario given whole (`plan --baseline`, tests)."""
    return lay_out(read_file(text, fmt, settings), sc)
