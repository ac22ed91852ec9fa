"""The only module that imports rich: stderr console, error line, progress, and table output."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console

# markup and emoji off on both consoles: every string printed here may quote dump text (a source path
# `d:fire:d`, an op named `[bold]`), and rich would otherwise turn `:fire:` into an emoji and `[x]` into style.
# Machine formats (JSON, CSV) never come here: traceql.cli._output writes them to the stream as they are.
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False)
out = Console(highlight=False, soft_wrap=True, markup=False, emoji=False)

#: width given to a table written to a pipe or a file: wide enough that no cell is ever folded or cut (a number
#: split over two lines cannot be read back); a terminal gets its own width
PIPE_WIDTH = 1_000_000
#: a table with long text cells (a finding's sentence, a query's description) written to a pipe or a file: the
#: text columns wrap at word boundaries to this width; the other columns (numbers, names) stay whole
PIPE_TEXT_WIDTH = 120
#: a cell longer than this, with at least TEXT_WORDS spaces, makes its column a text column (wrapped in pipes);
#: a path or an identifier (few spaces) stays whole however long
TEXT_CELL = 60
TEXT_WORDS = 6


_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x00, 0x09), *range(0x0A, 0x20), 0x7F, *range(0x80, 0xA0)]}


_CONTROL_KEEP_NEWLINES = {k: v for k, v in _CONTROL.items() if k != 0x0A}


def safe(text: str, newlines: bool = False) -> str:
    """Neutralise control characters (ESC sequences could retitle/recolour a terminal or write the clipboard):
    dump-derived text (file names, column names, op names) reaches these messages."""
    return str(text).translate(_CONTROL_KEEP_NEWLINES if newlines else _CONTROL)


def error(msg: str) -> None:
    # markup=False: messages quote file contents (untrusted) that may contain [brackets]
    err.print(f"error: {safe(msg)}", style="bold red", markup=False)


def warn(msg: str) -> None:
    err.print(f"warning: {safe(msg)}", style="yellow", markup=False)


def info(msg: str) -> None:
    err.print(safe(msg), markup=False)


def report(level: str, msg: str) -> None:
    """A library message by level ("warn" or "info"), e.g. traceql.post_ingest's."""
    (warn if level == "warn" else info)(msg)


def line(text: str, style: str | None = None) -> None:
    """One line of human text on stdout (control characters escaped, never read as markup or emoji)."""
    out.print(safe(text), style=style, markup=False, emoji=False)


def progress_enabled(quiet: bool) -> bool:
    return not quiet and sys.stderr.isatty()


def make_byte_progress(quiet: bool) -> Any:
    """A progress bar over input bytes (ingest): MB read, throughput, elapsed and remaining time."""
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
        disable=not progress_enabled(quiet),
        transient=True,
    )


def _text_columns(columns: list[str], rows: list[tuple[Any, ...]]) -> set[int]:
    """The columns holding prose (some cell a long sentence): the ones a pipe may wrap."""
    return {
        i
        for i in range(len(columns))
        if any(
            len(str(r[i])) > TEXT_CELL and str(r[i]).count(" ") >= TEXT_WORDS
            for r in rows
            if i < len(r) and r[i] is not None
        )
    }


def _pipe_width(columns: list[str], rows: list[tuple[Any, ...]], text_cols: set[int]) -> int:
    """A pipe's table width: no text columns, every cell whole on one line (PIPE_WIDTH); with text columns,
    PIPE_TEXT_WIDTH, or wider when the whole columns alone need it (each text column still gets 30)."""
    if not text_cols:
        return PIPE_WIDTH
    fixed = sum(
        max([len(str(columns[i]))] + [len(str(r[i])) for r in rows if i < len(r) and r[i] is not None])
        for i in range(len(columns))
        if i not in text_cols
    )
    return max(PIPE_TEXT_WIDTH, fixed + 30 * len(text_cols) + 3 * len(columns) + 1)


def print_table(columns: list[str], rows: list[tuple[Any, ...]], title: str | None = None) -> None:
    """A result table on stdout. On a terminal: rich's table at the terminal's width. To a pipe or a file:
    the same table with every number and name whole on one line (`traceql ... | grep` sees them), and long
    text cells wrapped at word boundaries to PIPE_TEXT_WIDTH (a finding's sentence stays readable). Too
    many columns for the width: one block per row (psql's expanded mode). No rows: the header and "(0 rows)"."""
    from rich.table import Table
    from rich.text import Text

    tty = out.is_terminal
    width = out.size.width if tty else 160
    if rows and len(columns) * 12 > width:
        # too wide for columns: one block per row, `column  value` lines (like psql's expanded mode)
        if title:
            line(title)
        pad = max(len(str(c)) for c in columns)
        for i, r in enumerate(rows):
            line(f"-[ row {i + 1} ]" + "-" * 20)
            for c, v in zip(columns, r, strict=False):
                line(f"{str(c).ljust(pad)}  {'' if v is None else v}")
        return

    # Text(), not str, everywhere: dump-derived cells and titles like "[bold]" must not be read as markup
    t = Table(title=Text(safe(title)) if title else None, show_lines=False)
    text_cols = _text_columns(columns, rows)
    for i, c in enumerate(columns):
        wraps = tty or i in text_cols
        t.add_column(Text(safe(str(c))), overflow="fold" if wraps else "ignore", no_wrap=not wraps)
    for r in rows:
        t.add_row(*[Text("" if v is None else safe(str(v))) for v in r])
    if tty:
        out.print(t)
    else:
        wide = Console(
            file=out.file,
            width=_pipe_width(columns, rows, text_cols),
            highlight=False,
            soft_wrap=True,
            markup=False,
            emoji=False,
        )
        wide.print(t)
    if not rows:
        line("(0 rows)")
