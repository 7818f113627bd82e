"""Which command of a script launches the training, and through which wrappers.

verl (`python3 -m verl.trainer.main_ppo ...`, its recipes), OpenRLHF (`python3 -m
openrlhf.cli.train_ppo_ray`, `deepspeed --module openrlhf.cli.train_dpo`, often behind
`ray job submit ... --`) and Megatron-LM (`torchrun ... pretrain_gpt.py ...`); wrappers such as
`srun`, `torchrun`, `deepspeed`, `ray job submit --`, `uv run` and `NAME=value` prefixes are
looked through, their options kept (torchrun's `--nproc_per_node`/`--nnodes` size a Megatron
job). A file with no launch command is read as what `rlplan export` writes: verl overrides
one per line, or Megatron argument arrays (`ACTOR_ARGS=( ... )`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from planner.errors import InputError
from planner.importers.shell import Script, Text

FORMATS = ("verl", "openrlhf", "megatron", "nemo-rl")

_MEGATRON_FLAGS = ("--tensor-model-parallel-size", "--num-layers", "--micro-batch-size",
                   "--pipeline-model-parallel-size", "--global-batch-size")


@dataclass
class Launch:
    fmt: str
    entry: str  # the module or script launched
    args: list[Text]
    wrapper: dict[str, Text] = field(default_factory=dict)  # launcher options before the entry
    roles: dict[str, list[Text]] = field(default_factory=dict)  # Megatron arrays by role
    comments: str = ""  # the file's text (rlplan's own exports carry group sizes in comments)
    sbatch_nodes: int | None = None  # `#SBATCH -N` / `--nodes`: the job's node count
    variables: dict[str, list[Text]] = field(default_factory=dict)  # the script's, at the end


def _entry(word: str) -> str | None:
    if re.match(r"(verl|recipe)\.[\w.]+$", word) or word.endswith("main_ppo.py"):
        return "verl"
    if word.startswith("openrlhf.cli."):
        return "openrlhf"
    if re.search(r"(^|/)run_(grpo|dpo|sft)\w*\.py$", word):  # NeMo-RL's example runners
        return "nemo-rl"
    return None


def find_launch(script: Script, text: str, fmt: str | None = None) -> Launch:
    """The training launch in `script` (of format `fmt` when forced)."""
    found = []
    for cmd in script.commands:
        words = cmd.words
        for k, w in enumerate(words):
            kind = _entry(w.text)
            if kind is None and w.text.endswith(".py") and any(
                    x.text.partition("=")[0] in _MEGATRON_FLAGS for x in words[k + 1:]):
                kind = "megatron"
            if kind is not None and (fmt is None or kind == fmt):
                found.append(Launch(kind, w.text, words[k + 1:], _options(words[:k]),
                                    comments=text))
                break
    nodes = script.sbatch.get("-N") or script.sbatch.get("--nodes")
    sbatch = int(nodes) if nodes and nodes.isdigit() and int(nodes) > 0 else None
    if found:
        found[-1].sbatch_nodes = sbatch
        found[-1].variables = script.variables
        return found[-1]
    arrays = {name[:-5].lower(): vals for name, vals in script.variables.items()
              if name.endswith("_ARGS") and any(v.text.startswith("--") for v in vals)}
    overrides = [w for c in script.commands for w in c.words
                 if re.match(r"\+{0,2}[A-Za-z_][\w]*\.[\w.]+=", w.text)]
    if fmt in (None, "verl") and overrides and not arrays:
        return Launch("verl", "overrides", overrides, comments=text)
    if fmt in (None, "megatron") and arrays:
        if "actor" not in arrays:  # a launch script's arrays: all of them are one command's
            arrays = {"actor": [w for vals in arrays.values() for w in vals]}
        return Launch("megatron", "arguments", arrays["actor"], roles=arrays, comments=text)
    forced = f" as {fmt}" if fmt else ""
    raise InputError(f"import: found no training launch{forced} in the file (python3 -m "
                     "verl.trainer.main_ppo, python3 -m openrlhf.cli.train_ppo_ray / deepspeed "
                     "--module openrlhf.cli.train_dpo, torchrun pretrain_gpt.py, or Megatron "
                     f"ACTOR_ARGS=( ... ) arrays); force a format with --format "
                     f"{'|'.join(FORMATS)}")


def _options(words: list[Text]) -> dict[str, Text]:
    """`--opt value`, `--opt=value`, `-N 2` of the launchers before the entry point."""
    out: dict[str, Text] = {}
    for k, w in enumerate(words):
        if not w.text.startswith("-") or w.text in ("-m", "--"):
            continue
        flag, eq, rest = w.text.partition("=")
        if eq:
            out[flag] = Text(rest, w.unset)
        elif k + 1 < len(words) and not words[k + 1].text.startswith("-"):
            out[flag] = words[k + 1]
        else:
            out[flag] = Text("true")
    return out
