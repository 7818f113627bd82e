"""Pictures rlplan draws (matplotlib, no pyplot: each figure is its own object, no global
state). The format follows the file extension; `picture_format` checks it before any work."""

from __future__ import annotations

from collections.abc import Callable
from io import BytesIO
from pathlib import Path
from typing import TYPE_CHECKING

from planner.errors import InputError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FORMATS = (".svg", ".png")
# SVG text stays text (searchable, scalable); a fixed salt and no date make the file repeatable.
_RC = {"svg.fonttype": "none", "svg.hashsalt": "rlplan"}


def picture_format(path: Path, flag: str = "--picture") -> str:
    """'svg' or 'png' from the file name; InputError naming `flag` for anything else."""
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise InputError(f"{flag}: cannot draw '{path.name}'; give a file ending in "
                         f"{' or '.join(FORMATS)}")
    return suffix[1:]


def render(draw: Callable[[], Figure], fmt: str) -> bytes:
    """The figure `draw` builds, as `fmt` ('svg' or 'png') bytes."""
    import matplotlib  # here, not at the top: 0.3 s that only drawing commands should pay

    with matplotlib.rc_context(_RC):
        fig = draw()
        buf = BytesIO()
        fig.savefig(buf, format=fmt, dpi=150, bbox_inches="tight",
                    metadata={"Date": None} if fmt == "svg" else None)
    return buf.getvalue()
