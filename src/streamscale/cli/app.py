"""``streamscale``: the one command. Sub-commands live in sibling modules.

Errors a user can cause print as one line on stderr with a non-zero exit;
``--json`` (global, before the sub-command) switches every command to
machine-readable output on stdout.
"""

from __future__ import annotations

import importlib
import sys

import typer

from streamscale import __version__
from streamscale.cli.output import Output
from streamscale.errors import StreamscaleError, missing_extra

__all__ = ["app", "main"]

app = typer.Typer(
    name="streamscale",
    help="Elasticity and scheduling for stateful stream processing on Spark.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

# Each module defines ``register(app)``; a module appears here once it exists.
_COMMAND_MODULES = (
    "validate",
    "reproduce",
    "plan",
    "demo",
    "surge",
    "traffic",
    "profile",
    "run",
    "cluster",
    "nexmark",
    "replay",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"streamscale {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    json_out: bool = typer.Option(False, "--json", help="Machine-readable JSON on stdout."),
    debug: bool = typer.Option(False, "--debug", help="Show the traceback of an unexpected error."),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    ctx.obj = Output(json=json_out)


for _m in _COMMAND_MODULES:
    importlib.import_module(f"streamscale.cli.{_m}").register(app)


def _one_line(text: str) -> str:
    """``text`` on one line: a character that is not printable (a line break, a control
    character drawn from a bad value) is written as its escape (``\\r``, ``\\x85``)."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def _usage_line(exc: typer.TyperException) -> str:
    ctx = getattr(exc, "ctx", None)
    where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    msg = " ".join(exc.format_message().split())
    return _one_line(f"streamscale: error: {msg}{where}")


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app, turning every error into one line and an exit code.

    Usage errors, unreadable or malformed files and bad values exit 2 (3: infeasible);
    anything else prints one line and exits 1, with the traceback under ``--debug``.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    try:
        rc = app(args=args, prog_name="streamscale", standalone_mode=False)
        if isinstance(rc, int) and not isinstance(rc, bool):  # typer.Exit(code), caught inside
            return rc
    except StreamscaleError as exc:
        print(_one_line(f"streamscale: error: {exc}"), file=sys.stderr)
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        print("streamscale: aborted", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("streamscale: interrupted", file=sys.stderr)
        return 130
    except typer.TyperException as exc:  # usage errors: typer's own exception types
        if type(exc).__name__ == "NoArgsIsHelpError":
            print(exc.format_message())
            return 0
        print(_usage_line(exc), file=sys.stderr)
        return exc.exit_code
    except (OSError, UnicodeError) as exc:
        if debug:
            raise
        name = getattr(exc, "filename", None)
        what = getattr(exc, "strerror", None) or str(exc)
        print(
            _one_line(f"streamscale: error: {name + ': ' if name else ''}{what}"), file=sys.stderr
        )
        return 2
    except Exception as exc:
        if debug:
            raise
        extra = missing_extra(exc)  # an extra's module not installed: which extra has it
        if extra is not None:
            print(_one_line(f"streamscale: error: {extra}"), file=sys.stderr)
            return extra.exit_code
        msg = " ".join(str(exc).split())[:300] or "no message"
        print(
            f"streamscale: internal error: {type(exc).__name__}: {msg} "
            "(run with --debug for the traceback)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
