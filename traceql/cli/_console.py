"""The only module that imports rich: stderr console, error line, progress, and table output."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console

err = Console(stderr=True, highlight=False, soft_wrap=True)
out = Console(highlight=False, soft_wrap=True)


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


def print_table(columns: list[str], rows: list[tuple[Any, ...]], title: str | None = None) -> None:
    from rich.table import Table

    width = out.size.width if out.is_terminal else 160
    if len(columns) * 12 > width:
        # too wide for columns: one block per row, `column  value` lines (like psql's expanded mode)
        if title:
            out.print(title, markup=False)
        pad = max(len(str(c)) for c in columns)
        for i, r in enumerate(rows):
            out.print(f"-[ row {i + 1} ]" + "-" * 20, markup=False)
            for c, v in zip(columns, r, strict=False):
                out.print(f"{str(c).ljust(pad)}  {'' if v is None else v}", markup=False)
        return

    t = Table(title=title, show_lines=False)
    for c in columns:
        t.add_column(str(c), overflow="fold")
    from rich.text import Text

    for r in rows:
        # Text(), not str: dump-derived cells like "[bold]" must not be read as rich markup
        t.add_row(*[Text("" if v is None else safe(str(v))) for v in r])
    out.print(t)
