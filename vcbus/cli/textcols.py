"""Aligned text columns for the replay report, written as plain lines: fast for reports of thousands of rows.

The layout is the one rich's tables gave the report (no box, two spaces between columns, a column
justified right where asked, one column wrapped at word boundaries to fit the width), without its
cost: rich measured and rendered every cell of every row, 90% of a large replay's time. Styles (a
cell's rich `Text` spans) become ANSI codes only when `color` is set, i.e. on a terminal without
NO_COLOR; otherwise the lines are plain and carry no trailing blanks.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from typing import Iterator, Sequence, Union

from rich.text import Text

Cell = Union[str, Text]
GAP = "  "
_CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "magenta": "35", "cyan": "36"}
_TOKENS = re.compile(r"\S+|\s+")


def use_color(stream=None) -> bool:
    """ANSI styles: on a terminal, unless NO_COLOR says otherwise (as rich decided)."""
    stream = stream or sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)()) and not os.environ.get("NO_COLOR")


def width_for(stream=None) -> int:
    """The width to fit: a terminal's own, else at least 160 (a file or a pager: do not wrap at 80)."""
    if getattr(stream or sys.stdout, "isatty", lambda: False)():
        return shutil.get_terminal_size((160, 24)).columns
    columns = os.environ.get("COLUMNS", "")
    return max(int(columns) if columns.isdigit() else 80, 160)


def style(text: str, name: str | None, color: bool) -> str:
    """`text` in rich style `name` ("bold green", "dim") as ANSI when `color`."""
    if not color or not name:
        return text
    codes = ";".join(_CODES[w] for w in str(name).split() if w in _CODES)
    return f"\x1b[{codes}m{text}\x1b[0m" if codes else text


def plain(cell: Cell) -> str:
    return cell.plain if isinstance(cell, Text) else cell


def styled(cell: Cell, color: bool, base: str | None = None) -> str:
    """A cell as it is printed: its spans' styles when `color`, the column's `base` style around it."""
    if not isinstance(cell, Text):
        return style(cell, base, color)
    if not color:
        return cell.plain
    whole = str(cell.style) if cell.style else base
    if not cell.spans:
        return style(cell.plain, whole, True)
    out, at = [], 0
    for span in sorted(cell.spans, key=lambda s: s.start):
        out.append(style(cell.plain[at:span.start], whole, True))
        out.append(style(cell.plain[span.start:span.end], str(span.style), True))
        at = span.end
    out.append(style(cell.plain[at:], whole, True))
    return "".join(out)


def wrap(text: str, width: int) -> list[str]:
    """Word-wrap each line of `text` to `width`: a line's leading blanks kept, blanks at a break dropped,
    a word longer than the width cut."""
    out: list[str] = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        rest = line.lstrip()
        cur, space = line[: len(line) - len(rest)], ""
        for token in _TOKENS.findall(rest):
            if token.isspace():
                space = token
                continue
            if cur.strip() and len(cur) + len(space) + len(token) > width:
                out.append(cur)
                cur = token
            else:
                cur += space + token
            space = ""
            while len(cur) > width:  # a word longer than the column
                out.append(cur[:width])
                cur = cur[width:]
        out.append(cur)
    return out


def table(rows: Sequence[Sequence[Cell]], *, width: int, color: bool, header: Sequence[str] | None = None,
          right: Sequence[int] = (), wrap_column: int | None = None,
          styles: Sequence[str | None] = ()) -> Iterator[str]:
    """The lines of `rows` in aligned columns (`header` bold first), `wrap_column` word-wrapped to fit `width`."""
    all_rows = [list(header)] + [list(r) for r in rows] if header else [list(r) for r in rows]
    if not all_rows:
        return
    n = len(all_rows[0])
    plains = [[plain(c) for c in r] for r in all_rows]
    widths = [max((max((len(x) for x in p[i].split("\n")), default=0) for p in plains), default=0) for i in range(n)]
    if wrap_column is not None:
        room = width - sum(w for i, w in enumerate(widths) if i != wrap_column) - len(GAP) * (n - 1)
        widths[wrap_column] = max(min(widths[wrap_column], room), 10)
    base = list(styles) + [None] * (n - len(styles))
    for k, (cells, texts) in enumerate(zip(all_rows, plains)):
        bold = header is not None and k == 0
        pieces = [wrap(t, widths[i]) if i == wrap_column else t.split("\n") for i, t in enumerate(texts)]
        for line in range(max(len(p) for p in pieces)):
            out = []
            for i, p in enumerate(pieces):
                text = p[line] if line < len(p) else ""
                pad = " " * (widths[i] - len(text))
                if line == 0 and len(p) == 1 and not bold:
                    shown = styled(cells[i], color, base[i])  # one line: the cell's own styles
                else:
                    shown = style(text, "bold" if bold else base[i], color)
                out.append(pad + shown if i in right else shown + pad)
            yield GAP.join(out).rstrip()
