"""Writing a matplotlib figure to the file a user named, the format from its extension."""

from __future__ import annotations

from pathlib import Path

from matplotlib import rc_context
from matplotlib.figure import Figure

from planner.errors import InputError

FORMATS = (".svg", ".png")


def check_picture_path(path: Path, option: str) -> None:
    """Refuse an extension we do not write before any work is done."""
    if path.suffix.lower() not in FORMATS:
        raise InputError(f"{option} {path}: unknown picture format '{path.suffix}'; name a "
                         f"file ending in {' or '.join(FORMATS)}")


def save_figure(fig: Figure, path: Path, option: str) -> None:
    """Save `fig` as SVG (text kept as text, so labels stay searchable) or PNG."""
    check_picture_path(path, option)
    with rc_context({"svg.fonttype": "none"}):
        fig.savefig(path, format=path.suffix.lower().lstrip("."), dpi=150,
                    bbox_inches="tight")
