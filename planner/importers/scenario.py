"""The scenario an imported script runs: the script's fields under `--scenario` and the flags
(flag > scenario file > script). A model the script names but rlplan cannot load is an error
only if neither the file nor a flag gives that role."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from planner.errors import InputError
from planner.importers.reading import Reading
from planner.specs.files import read_mapping
from planner.specs.scenario import Scenario, load_scenario

_CLUSTER = ("cluster.nodes", "cluster.gpus_per_node")


def _get(raw: dict[str, Any], path: str) -> Any:
    node: Any = raw
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def scenario_for(reading: Reading, path: Path | None, flags: dict[str, Any]
                 ) -> tuple[Scenario, list[str]]:
    """The resolved scenario and notes on where the file or a flag overrides the script."""
    raw = read_mapping(path) if path is not None else {}
    notes: list[str] = []
    cluster = raw.get("cluster")
    own_cluster = isinstance(cluster, str) or (isinstance(cluster, dict) and (
        "pools" in cluster or "preset" in cluster))
    script: dict[str, Any] = {}
    for key, value in reading.fields.items():
        given = flags.get(key, _get(raw, key))
        if key in _CLUSTER and own_cluster:
            continue
        if given is None:
            script[key] = value
        elif given != value:
            origin = "a flag" if key in flags else f"{path}"
            notes.append(f"{key}: {given} from {origin}; the script says {value}")
    for role, ref in reading.models.items():
        key = f"models.{role}"
        if flags.get(key) is not None or _get(raw, key) is not None:
            continue
        if ref.follows is not None:  # e.g. OpenRLHF's critic: the reward model's, if given
            given = flags.get(f"models.{ref.follows}") or _get(raw, f"models.{ref.follows}")
            if given is not None:
                script[key] = given
                continue
        if ref.value is None:
            raise InputError(ref.error or f"import: no model for {role}")
        script[key] = ref.value
        if ref.note:
            notes.append(ref.note)
    return load_scenario(path, {**script, **flags}), notes
