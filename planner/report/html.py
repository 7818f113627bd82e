"""HTML building blocks of the report page: escaped text, tables, sections. Every value from a
plan or sweep file is escaped here, so a name in a scenario cannot inject markup."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape


def esc(value: object) -> str:
    """`value` as HTML text, quotes escaped (safe in attributes too)."""
    return escape(str(value), quote=True)


def para(text: str, cls: str | None = None) -> str:
    return f"<p{attr('class', cls)}>{esc(text)}</p>"


def attr(name: str, value: str | None) -> str:
    return "" if value is None else f' {name}="{esc(value)}"'


def bullets(items: Iterable[str], cls: str | None = None) -> str:
    """A list of plain-text items; nothing when there is none."""
    items = list(items)
    if not items:
        return ""
    return f"<ul{attr('class', cls)}>" + "".join(f"<li>{esc(i)}</li>" for i in items) + "</ul>"


def table(head: Sequence[str], rows: Iterable[Sequence[object]], numeric: Sequence[bool] = (),
          caption: str | None = None, row_classes: Sequence[str | None] = ()) -> str:
    """A table in a box that scrolls sideways on a narrow screen (the page itself never does).
    `numeric[k]`: column k is right-aligned; `row_classes[i]`: a class for row i."""
    right = [bool(numeric[k]) if k < len(numeric) else False for k in range(len(head))]
    cells = "".join(f"<th{attr('class', 'num' if r else None)}>{esc(h)}</th>"
                    for h, r in zip(head, right, strict=True))
    body = []
    for i, row in enumerate(rows):
        cls = row_classes[i] if i < len(row_classes) else None
        body.append(f"<tr{attr('class', cls)}>" + "".join(
            f"<td{attr('class', 'num' if r else None)}>{esc(v)}</td>"
            for v, r in zip(row, right, strict=True)) + "</tr>")
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    return (f'<div class="scroll"><table>{cap}<thead><tr>{cells}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table></div>")


def facts(pairs: Iterable[tuple[str, str]]) -> str:
    """Label–value pairs as a definition list (the page's key figures)."""
    return '<dl class="facts">' + "".join(f"<div><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>"
                                          for k, v in pairs) + "</dl>"


def pre(text: str, cls: str = "code") -> str:
    """Preformatted text (a config, the scenario) in a box that scrolls on screen and prints
    whole."""
    return f'<pre class="{esc(cls)}">{esc(text)}</pre>'


def figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{esc(caption)}</figcaption></figure>"


def section(ident: str, title: str, *parts: str) -> str:
    """A section of the page: its id is the anchor the navigation links to (and what the
    browser test looks for)."""
    return (f'<section id="{esc(ident)}" aria-labelledby="{esc(ident)}-h">'
            f'<h2 id="{esc(ident)}-h">{esc(title)}</h2>{"".join(parts)}</section>')


def num(value: float | None, spec: str, prefix: str = "", suffix: str = "") -> str:
    """A figure for a cell; '—' when unknown."""
    return "—" if value is None else f"{prefix}{value:{spec}}{suffix}"
