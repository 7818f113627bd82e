"""Uneven pipeline stages on published layouts: what the split changes in the priced time.

    python bench/uneven_pipelines.py

1. The throughput rows of ../shared/data/calibration/training_h100.md whose pp does not divide
   the model's layers, priced as bench/training_throughput.py prices them (the layers spread
   as evenly as possible, the first `L mod pp` stages one more — a split Megatron cannot be
   told) and with the split rlplan offers and Megatron runs (`pipeline_split.offered_split`:
   the middle stages ⌈L/pp⌉, the last stage no heavier), against the measured tokens/s/GPU.
   The rows do not state their split; where no first/last-stage split runs (DeepSeek-V3 PP8 ×
   VP2: Megatron's recipes use --pipeline-model-parallel-layout there) the row says so.
2. The uneven layouts the published RL recipes give (../shared/data/exports.md §1.11, §5):
   the layers per stage, and the Megatron settings rlplan exports for them.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, fields
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import training_throughput as tt

from planner.cost.pipeline_split import (
    megatron_split,
    offered_split,
    split_problem,
    stage_layer_counts,
)
from planner.plan import Layout
from planner.specs.model import load_model


@dataclass(frozen=True)
class _SplitRow(tt.TRow):
    """A throughput row with its end stages' layers given."""

    first: int | None = None
    last: int | None = None

    def layout(self) -> Layout:
        return super().layout().model_copy(update={"first_stage_layers": self.first,
                                                   "last_stage_layers": self.last})


def _stages(counts: list[int]) -> str:
    middle = counts[1:-1]
    if len(middle) > 2 and len(set(middle)) == 1:
        return f"{counts[0]}, {middle[0]}×{len(middle)}, {counts[-1]}"
    return ", ".join(map(str, counts))


def throughput_rows() -> None:
    path = tt.DATA / "training_h100.md"
    text = path.read_text(encoding="utf-8")
    print("1. training_h100.md rows whose pp does not divide the layers (tokens/s/GPU; error = "
          "predicted/measured - 1)")
    print(f"{'row':5} {'model':16} {'pp×vp':6} {'measured':>8}  {'as evenly as possible':34} "
          f"{'Megatron split (rlplan offers)':40}")
    for row in tt.ROWS:
        if row.model is None:
            continue
        L = load_model(row.model).num_hidden_layers
        if L % row.pp == 0:
            continue
        measured = tt.measured(text, row)
        even = tt.predict(row)
        cells = [f"{_stages(stage_layer_counts(L, row.pp))}: {even:7.1f} "
                 f"{even / measured - 1:+6.1%}"]
        split = offered_split(L, row.pp, row.vp)
        if split is None:
            cells.append("none runs with first/last counts")
        else:
            how = megatron_split(L, row.pp, row.vp, *split)
            kind = "counts" if how.first is not None or how.last is not None else "accounting"
            priced = tt.predict(_SplitRow(**{f.name: getattr(row, f.name) for f in fields(row)},
                                          first=split[0], last=split[1]))
            cells.append(f"{_stages(stage_layer_counts(L, row.pp, *split))} ({kind}): "
                         f"{priced:7.1f} {priced / measured - 1:+6.1%}")
        print(f"{row.id:5} {row.model:16} {f'{row.pp}×{row.vp}':6} {measured:8.1f}  "
              f"{cells[0]:34} {cells[1]}  {row.note}")


# (recipe, model, pp, vp, first_stage_layers, last_stage_layers), as exports.md gives them
RECIPES = [
    ("NeMo-RL grpo-qwen3-235b-16n8g (exports.md §5)", "qwen3-235b-a22b", 8, 1, 11, 11),
    ("verl run_deepseek671b_math_megatron_96gb.sh (§1.11)", "deepseek-v3", 12, 1, None, 6),
    ("training_h100.md T55 (Qwen3-235B PP8 × VP4)", "qwen3-235b-a22b", 8, 4, 11, 11),
]


def recipes() -> None:
    print("\n2. Uneven layouts of published recipes: layers per stage, the Megatron settings")
    for name, model, pp, vp, first, last in RECIPES:
        L = load_model(model).num_hidden_layers
        if bad := split_problem(L, pp, vp, first, last):
            print(f"  {name}: refused — {bad[0]}: {bad[1]}")
            continue
        how = megatron_split(L, pp, vp, first, last)
        said = {k: v for k, v in vars(how).items() if v not in (None, False)}
        print(f"  {name}: {L} layers → {_stages(stage_layer_counts(L, pp, first, last))}; "
              f"vp {vp}; Megatron {said}")


def main() -> int:
    if not (tt.DATA / "training_h100.md").is_file():
        print(f"needs {tt.DATA / 'training_h100.md'} (the workplace's shared calibration data)")
        return 1
    throughput_rows()
    recipes()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
