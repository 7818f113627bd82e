"""`rlplan import`: a config a user already runs → the plan JSON (`groups`, `layouts`,
`inter_model`) that `evaluate` prices. One module per format, each the inverse of its exporter
(`planner/export/`) on what the exporter writes; the scenario supplies what the file cannot hold
(models, workload, GPUs per node). Keys the planner does not model are notes; keys that change
the layout in a way a plan cannot say are refused (one `InputError` naming the key)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from planner.errors import InputError
from planner.specs.scenario import Scenario

FORMATS = ("verl", "openrlhf", "megatron")


@dataclass
class Imported:
    fmt: str
    plan: dict[str, Any]  # groups, layouts, inter_model
    notes: list[str] = field(default_factory=list)


def detect(text: str) -> str:
    """The format, recognised from the content."""
    if "verl.trainer.main_ppo" in text or re.search(
            r"^\s*\+?(actor_rollout_ref|trainer|algorithm|data)\.[\w.]+=", text, re.M):
        return "verl"
    if "openrlhf.cli" in text or re.search(r"--(actor|vllm|ds)[._]\w+", text):
        return "openrlhf"
    if "--tensor-model-parallel-size" in text or "_ARGS=(" in text:
        return "megatron"
    raise InputError("import: the file is not a verl launch script or override list, an "
                     "OpenRLHF command or a Megatron argument list; force one with --format "
                     f"{'|'.join(FORMATS)}")


def words(text: str) -> list[str]:
    """The shell words of a script or list, comments and line continuations dropped."""
    try:
        return [w for w in shlex.split(text.replace("\\\n", " "), comments=True) if w != "$@"]
    except ValueError as err:
        raise InputError(f"import: cannot split the file into shell words ({err}); fix its "
                         "quoting") from None


def value(text: str) -> Any:
    """A word's value: booleans as Hydra and Python spell them, numbers, else the text."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def import_config(text: str, sc: Scenario, fmt: str | None = None) -> Imported:
    from planner.importers import megatron, openrlhf, verl

    fmt = fmt or detect(text)
    readers = {"verl": verl.read, "openrlhf": openrlhf.read, "megatron": megatron.read}
    if fmt not in readers:
        raise InputError(f"--format: unknown format '{fmt}'; choose one of {', '.join(FORMATS)}")
    if sc.multi_pool:  # its groups would name no pool, and the plan would not evaluate
        raise InputError(f"import: the scenario's field 'cluster.pools' lists "
                         f"{len(sc.pools)} pools and a {fmt} config names no GPU type, so its "
                         "groups have no pool; give a scenario with one GPU type (cluster.gpu, "
                         "or one pool), or write the plan JSON with each group's 'pool'")
    return readers[fmt](text, sc)


def whole(gpus: int, per: int, what: str) -> int:
    if per <= 0 or gpus % per:
        raise InputError(f"import: {what}: {gpus} GPUs do not split into groups of {per}; fix "
                         "the parallel sizes")
    return gpus // per
