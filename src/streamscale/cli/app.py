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
from streamscale.errors import StreamscaleError

__all__ = ["app", "main"]

app = typer.Typer(
    name="streamscale",
    help="Elasticity and scheduling for stateful stream processing on Spark.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

# Each module defines ``register(app)``; a module appears here once it exists.
_COMMAND_MODULES = ("validate", "reproduce", "plan", "demo", "profile", "run")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"streamscale {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    json_out: bool = typer.Option(False, "--json", help="Machine-readable JSON on stdout."),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    ctx.obj = Output(json=json_out)


for _m in _COMMAND_MODULES:
    importlib.import_module(f"streamscale.cli.{_m}").register(app)


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app, turning user errors into one line and an exit code."""
    try:
        app(args=argv, prog_name="streamscale", standalone_mode=False)
    except StreamscaleError as exc:
        print(f"streamscale: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        print("streamscale: aborted", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("streamscale: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # click usage errors and the like
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            return exc.exit_code
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
