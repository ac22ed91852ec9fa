"""Write docs/cli.md, the reference of every `traceql` command and option, from the CLI itself.

    python tools/cli_reference.py            # rewrite docs/cli.md
    python tools/cli_reference.py --check    # exit 1 when docs/cli.md is not what the CLI says (tests/test_docs.py)

Generated so the reference cannot drift from the code: the options, their help and defaults come from Click."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "cli.md"


def _commands() -> list[tuple[str, Any]]:
    import typer

    from traceql.cli import app

    group = typer.main.get_command(app)
    return [("traceql", group)] + [(f"traceql {n}", c) for n, c in group.commands.items()]  # type: ignore[attr-defined]


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _option_rows(cmd: Any) -> list[str]:
    rows = []
    for p in cmd.params:  # duck-typed: typer >= 0.29 vendors its own click
        if p.param_type_name == "option":
            flags = ", ".join(f"`{o}`" for o in [*p.opts, *p.secondary_opts])
            env = f" (env `{p.envvar}`)" if isinstance(p.envvar, str) else ""
            choices = getattr(p.type, "choices", None)
            one_of = f" One of: {', '.join(f'`{c}`' for c in choices)}." if choices else ""
            rows.append(f"| {flags} | {_cell(p.help or '')}{one_of}{env} |")
        elif p.param_type_name == "argument":
            rows.append(
                f"| `{p.name.upper() if p.name else ''}` (argument) | {_cell(getattr(p, 'help', '') or '')} |"
            )
    return rows


def render() -> str:
    out = [
        "# Command reference",
        "",
        "Every `traceql` command and its options, generated from the CLI by `python tools/cli_reference.py`",
        "(`tests/test_docs.py` fails when this file is out of date). `traceql COMMAND --help` shows the same with",
        "examples; the manual is README.md.",
    ]
    for name, cmd in _commands():
        first = _cell((cmd.help or "").split("\n\n")[0])
        out += ["", f"## {name}", "", first, "", "| option | what it does |", "|---|---|", *_option_rows(cmd)]
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not OUT.exists() or OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT} is out of date: run python tools/cli_reference.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
