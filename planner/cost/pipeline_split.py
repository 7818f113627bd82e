"""How a pipeline splits a model's transformer layers over its stages, and which splits Megatron
runs: the one place of these rules (pricing, plan checks, search, exports and imports read them).

A layout says how many layers its first and last stages hold (`first_stage_layers`,
`last_stage_layers`; absent = as many as the others); the other ("middle") stages split the rest
evenly. Megatron runs a split by one of two mechanisms (megatron-core 0.19.2,
`TransformerConfig.__post_init__` and `transformer_block.get_num_layers_to_build`;
../shared/data/exports.md §1.4 and §4 name the keys and flags):

- explicit counts, `--decoder-first-pipeline-num-layers` / `--decoder-last-pipeline-num-layers`
  (`num_layers_in_first/last_pipeline_stage` in verl and NeMo-RL): each given count > 0, the
  middle stages' layers divisible by their number (none left when there are no middle stages);
  with vp interleaved chunks every rank's count divisible by vp (first, last and middle);
- `--account-for-embedding-in-pipeline-split` / `--account-for-loss-in-pipeline-split`: the
  embedding (the loss) counts as a layer, every rank gets m = (L + e + s)/pp and the first (the
  last) one fewer; with vp chunks m divisible by vp (the fewer falls in the first / last chunk).

Without either, Megatron asserts that pp (and pp·vp) divide the layers. Megatron's third way,
`--pipeline-model-parallel-layout` (any layers per chunk, MTP layers placed by hand), is not
planned: a split only it runs is refused. Rollout engines split their own pipelines
(`pipeline_stage_layers` with no ends: the first L mod pp stages one more).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["CONFIG_FIELDS", "MegatronSplit", "megatron_split", "offered_split",
           "pipeline_stage_layers", "split_from_megatron", "split_problem", "stage_layer_counts"]


def stage_layer_counts(L: int, pp: int, first: int | None = None,
                       last: int | None = None) -> list[int]:
    """Layers on each of `pp` stages: the given end counts, the middle stages the rest evenly;
    with no end given as even as possible (the first L mod pp stages one more). Assumes a
    split `split_problem` accepts (`pipeline_stage_layers` checks it)."""
    if first is None and last is None:
        base, extra = divmod(L, pp)
        return [base + (k < extra) for k in range(pp)]
    middle = pp - (first is not None) - (last is not None)
    rest = L - (first or 0) - (last or 0)
    counts = [rest // middle if middle else 0] * pp
    if first is not None:
        counts[0] = first
    if last is not None:
        counts[-1] = last
    return counts


def pipeline_stage_layers(L: int, pp: int, first: int | None = None,
                          last: int | None = None) -> list[range]:
    """Layer indices of each pipeline stage (`stage_layer_counts`). Raises ValueError for a
    split no stage layout can hold."""
    if pp > L:
        raise ValueError(f"pp ({pp}) exceeds the model's {L} layers; use pp ≤ {L}")
    if (first is not None or last is not None) and (bad := split_problem(L, pp, 1, first, last)):
        raise ValueError(f"{bad[0]}: {bad[1]}")
    bounds = [0]
    for n in stage_layer_counts(L, pp, first, last):
        bounds.append(bounds[-1] + n)
    return [range(bounds[k], bounds[k + 1]) for k in range(pp)]


def _ends_field(first: int | None, last: int | None) -> str:
    return "/".join(f for f, v in (("first_stage_layers", first), ("last_stage_layers", last))
                    if v is not None)


def _accounted(counts: list[int]) -> tuple[bool, bool] | None:
    """(embedding, loss) when `counts` is an --account-for-*-in-pipeline-split split: every
    stage m layers but the first and/or the last, which hold m − 1; else None."""
    m = max(counts)
    if any(c != m for c in counts[1:-1]) or not {counts[0], counts[-1]} <= {m - 1, m}:
        return None
    return counts[0] == m - 1, counts[-1] == m - 1


def _runs_interleaved(counts: list[int], vp: int) -> bool:
    """Whether Megatron runs these per-stage counts in vp chunks per rank: every count divides
    by vp (explicit counts), or the account-for split with m divisible by vp."""
    if all(c % vp == 0 for c in counts):
        return True
    return _accounted(counts) is not None and max(counts) % vp == 0


def split_problem(L: int, pp: int, vp: int, first: int | None,
                  last: int | None) -> tuple[str, str] | None:
    """Why Megatron cannot split L layers over pp stages of vp chunks with these end counts, as
    (the layout field to change, what is wrong and the fix); None when it can."""
    return _problem(L, pp, vp, first, last, _hint)


def _problem(L: int, pp: int, vp: int, first: int | None, last: int | None,
             hint: Callable[..., str]) -> tuple[str, str] | None:
    """`split_problem`, with `hint(L, pp, vp[, otherwise])` saying the fix."""
    if first is None and last is None:
        if L % pp:
            return "pp", (f"pp {pp} does not divide the model's {L} layers, and Megatron "
                          "splits them evenly unless the end stages' counts are given; "
                          + hint(L, pp, vp))
        if vp > 1 and L % (pp * vp):
            fits = [v for v in range(1, L // pp + 1) if L % (pp * v) == 0]
            return "vp", (f"vp {vp}: pp·vp = {pp}·{vp} must divide the model's {L} layers; "
                          f"use vp {' or '.join(map(str, fits[-3:]))}")
        return None
    field = _ends_field(first, last)
    if pp < 2:
        return field, "uneven stages need pp > 1; drop them or use pipeline parallelism"
    given = [n for n in (first, last) if n is not None]
    middle, rest = pp - len(given), L - sum(given)
    if not middle and rest:
        return field, (f"with pp 2 the two stages hold the model's {L} layers, not "
                       f"{first} + {last}")
    if middle and (rest <= 0 or rest % middle):
        return field, (f"the other {middle} stage(s) must split the remaining {rest} of the "
                       f"model's {L} layers evenly (Megatron's rule); " + hint(L, pp, vp))
    counts = stage_layer_counts(L, pp, first, last)
    if vp > 1 and not _runs_interleaved(counts, vp):
        shown = ", ".join(map(str, counts))
        return "vp", (f"vp {vp}: Megatron interleaves uneven stages only when every stage's "
                      f"layers divide into vp chunks, or as --account-for-embedding/loss-in-"
                      f"pipeline-split does (every stage m layers, the first and/or last m − 1, "
                      f"m divisible by vp); the stages hold {shown} (free layouts, "
                      "--pipeline-model-parallel-layout, are not planned). "
                      + hint(L, pp, vp, "use vp 1"))
    return None


def _hint(L: int, pp: int, vp: int, otherwise: str = "") -> str:
    """The fix to suggest: the split the search offers, else `otherwise` or a dividing pp."""
    split = offered_split(L, pp, vp) if L % pp else None
    if split is not None:
        said = ", ".join(f"{name}: {n}" for name, n in zip(
            ("first_stage_layers", "last_stage_layers"), split, strict=True) if n is not None)
        return f"e.g. {said} (the split the search offers)"
    return otherwise or f"use a pp that divides {L}"


def offered_split(L: int, pp: int, vp: int = 1) -> tuple[int | None, int | None] | None:
    """The uneven split the search offers where pp does not divide L, as (first_stage_layers,
    last_stage_layers) with a count equal to the middle stages' left out (None: no split
    Megatron runs with vp, or pp divides L).

    The middle stages hold m = ⌈L/pp⌉ layers (no split paces the pipeline faster), the two end
    stages the other r = L − (pp − 2)·m, at most m each. Balanced first — ⌈r/2⌉ and ⌊r/2⌋, the
    last lighter as it also runs the head and the loss, which is also where the first stage's
    in-flight activations peak; Megatron's --account-for-embedding-and-loss split where it
    applies (Qwen3-235B's 94 layers over PP8: 11, 12 × 6, 11, NeMo-RL's recipe) — then the
    first stage full and the last taking the rest, then the reverse: the first Megatron runs
    with vp chunks."""
    if pp < 2 or L % pp == 0 or pp > L:
        return None
    m = -(-L // pp)
    r = L - (pp - 2) * m
    if r < 2:
        return None
    for first, last in ((r - r // 2, r // 2), (m, r - m), (r - m, m)):
        if not (1 <= first <= m and 1 <= last <= m):
            continue
        split = (None if first == m else first, None if last == m else last)
        if _problem(L, pp, vp, *split, hint=lambda *_: "") is None:
            return split
    return None


@dataclass(frozen=True)
class MegatronSplit:
    """The Megatron settings that run a split: explicit end counts (`first`, `last`), or the
    account-for switches; all unset for an even split."""

    first: int | None = None  # --decoder-first-pipeline-num-layers
    last: int | None = None  # --decoder-last-pipeline-num-layers
    embedding_in_split: bool = False  # --account-for-embedding-in-pipeline-split
    loss_in_split: bool = False  # --account-for-loss-in-pipeline-split

    @property
    def uneven(self) -> bool:
        return (self.first is not None or self.last is not None or self.embedding_in_split
                or self.loss_in_split)


CONFIG_FIELDS = ("num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage",
                 "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split")
"""Megatron's TransformerConfig fields of a `MegatronSplit`'s, in its order: the keys verl
(override_transformer_config) and NeMo-RL (megatron_cfg) write them as."""


def megatron_split(L: int, pp: int, vp: int, first: int | None,
                   last: int | None) -> MegatronSplit:
    """How Megatron runs a layout's split: explicit counts when every rank's count divides by
    vp (always with vp 1), else the account-for switches. Raises ValueError (field: why) for a
    split Megatron cannot run."""
    if bad := split_problem(L, pp, vp, first, last):
        raise ValueError(f"{bad[0]}: {bad[1]}")
    if first is None and last is None:
        return MegatronSplit()
    counts = stage_layer_counts(L, pp, first, last)
    if all(c % vp == 0 for c in counts):
        return MegatronSplit(first=first, last=last)
    embedding, loss = _accounted(counts) or (False, False)
    return MegatronSplit(embedding_in_split=embedding, loss_in_split=loss)


def split_from_megatron(L: int, pp: int, settings: MegatronSplit
                        ) -> tuple[int | None, int | None]:
    """(first_stage_layers, last_stage_layers) of a Megatron configuration's split (import).
    Raises ValueError where Megatron itself refuses the settings."""
    if settings.first is not None or settings.last is not None:
        if settings.embedding_in_split or settings.loss_in_split:
            raise ValueError("the first/last pipeline stage layer counts cannot be combined "
                             "with the account-for-embedding/loss-in-pipeline-split switches "
                             "(Megatron's TransformerConfig refuses it); keep one of them")
        return settings.first, settings.last
    extra = settings.embedding_in_split + settings.loss_in_split
    if not extra:
        return None, None
    if (L + extra) % pp:
        raise ValueError(f"the {L} layers with the embedding/loss counted as layers ({L + extra}) "
                         f"do not divide over pp {pp} (Megatron refuses it)")
    m = (L + extra) // pp
    return (m - 1 if settings.embedding_in_split else None,
            m - 1 if settings.loss_in_split else None)
