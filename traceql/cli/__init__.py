"""Typer app: thin commands over the library. One error boundary: TraceQLError -> one red line, exit 1."""

from __future__ import annotations

import importlib
import os
import sys

import typer

app = typer.Typer(
    name="traceql",
    help=(
        "traceql: find what saturates first — HBM bandwidth, compute or communication — in accelerator "
        "profiler dumps (Ascend torch_npu/msprof, PyTorch Kineto), with SQL.\n\n"
        "Example:  traceql ingest ./rank0_ascend_pt && traceql findings"
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

# One small module per command group; each exposes register(app).
_COMMAND_MODULES = [
    "ingest",
    "sql",
    "query",
    "findings",
    "chart",
    "capture",
    "check",
    "compare",
    "export",
    "mcp",
]


def _register() -> None:
    for mod in _COMMAND_MODULES:  # a missing command module is a broken install: its ImportError is raised
        importlib.import_module(f"traceql.cli.{mod}").register(app)


_register()


def _version(value: bool) -> None:
    if value:
        from ..version import __version__

        print(f"traceql {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(
        False, "--debug", help="Show full tracebacks for errors.", envvar="TRACEQL_DEBUG"
    ),
    version: bool = typer.Option(
        False,
        "--version",
        help="Print traceql's version and exit.",
        callback=_version,
        is_eager=True,
    ),
) -> None:
    if debug:
        os.environ["TRACEQL_DEBUG"] = "1"


def main() -> None:
    from .._procs import cap_malloc_arenas, fit_address_space_cap, install_parent_handlers
    from ..errors import TraceQLError

    cap_malloc_arenas()  # before any thread starts (see there)
    fit_address_space_cap()  # before anything imports pyarrow (see there)
    install_parent_handlers()  # SIGTERM/SIGHUP unwind like Ctrl-C: workers stopped, staging and temp dirs removed
    try:
        rv = app(standalone_mode=False)
        if rv == 130:  # typer turns Ctrl-C into exit code 130 without a word
            from ._console import error

            error("interrupted; the store is unchanged")
        if isinstance(rv, int) and rv:
            sys.exit(rv)
    except TraceQLError as e:
        if os.environ.get("TRACEQL_DEBUG"):
            raise
        from ._console import error

        error(str(e))
        sys.exit(1)
    except KeyboardInterrupt:
        from ._console import error

        error("interrupted; the store is unchanged")
        sys.exit(130)
    except SystemExit:
        raise
    except Exception as e:  # click usage errors arrive here with standalone_mode=False
        # typer >= 0.29 vendors click (typer._click), older typer uses click: duck-type its exceptions.
        code = getattr(e, "exit_code", None)
        if hasattr(e, "show") and isinstance(code, int):
            e.show()
            sys.exit(code)
        if type(e).__name__ == "Abort":
            sys.exit(1)
        from .._duck import interrupted, oom_message, resource_exhausted

        if interrupted(e):  # DuckDB's InterruptException: Ctrl-C during a query, never a failure to report
            from ._console import error

            error("interrupted; the store is unchanged")
            sys.exit(130)
        if os.environ.get("TRACEQL_DEBUG"):
            raise
        from ._console import error

        if isinstance(e, OSError):
            # disk full, read-only filesystem, a store path through a file...: one line with what to do
            from ..fs_errors import store_error

            se = store_error(e, e.filename or "the store", "reading or writing the store")
            if se is not None:
                error(str(se))
                sys.exit(1)

        if resource_exhausted(e):  # memory, address space, threads, DuckDB's budget: what to raise, not a bug
            error(oom_message("traceql", e))
            sys.exit(1)
        error(f"internal error: {type(e).__name__}: {e} (re-run with --debug for the traceback)")
        sys.exit(1)
