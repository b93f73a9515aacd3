"""MkDocs hook: the reference pages' generated parts, built from the code at build time.

A page holds a marker ``<!-- generated:NAME -->``; :func:`on_page_markdown` replaces it
with :data:`GENERATORS` ``[NAME]()``:

* ``cli`` — every command and option of ``streamscale``, walked from the click command
  that typer builds (the same objects ``--help`` prints);
* ``settings`` — every declared setting (:class:`streamscale.settings.Schema`): the run's,
  each live policy's, the controller's, the watch's, the output's, each planner's, each
  profiling task's, and the bundled sources' options.

Nothing here is typed by hand, so a default or a bound changed in the code changes the
page. ``tests/test_docs.py`` imports this module to check that the commands and
settings the pages mention exist.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator
from typing import Any

MARKER = re.compile(r"<!-- generated:([\w-]+) -->")


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


# ----------------------------------------------------------------------------- the CLI


def root_command() -> Any:
    """The ``streamscale`` click command (a group), as typer builds it."""
    import typer

    from streamscale.cli.app import app

    return typer.main.get_command(app)


def commands() -> Iterator[tuple[str, Any]]:
    """``(path, command)`` of every command, groups included, depth first, by name."""

    def walk(path: str, cmd: Any) -> Iterator[tuple[str, Any]]:
        yield path, cmd
        if _is_group(cmd):
            for name in sorted(cmd.commands):
                yield from walk(f"{path} {name}", cmd.commands[name])

    yield from walk("streamscale", root_command())


def _is_group(cmd: Any) -> bool:
    # typer ships its own click: duck-typed, not isinstance of the click package's Group
    return isinstance(getattr(cmd, "commands", None), dict)


def _option_row(p: Any, ctx: Any) -> list[str]:
    kind = p.display_type(ctx).strip("<>")
    if p.param_type_name == "argument":
        names = p.name.upper()
        kind = f"argument ({kind})"
    else:
        names = ", ".join(p.opts + p.secondary_opts)
    default = p.default
    if callable(default) or default in (None, (), []) or default is False:
        default = ""
    help_text = getattr(p, "help", None) or ""
    return [f"`{names}`", kind, f"`{default}`" if default != "" else "", help_text]


def cli_page() -> str:
    """Every command: its usage, its help text and a table of its options."""
    parts: list[str] = []
    for path, cmd in commands():
        depth = min(path.count(" ") + 2, 4)
        ctx = cmd.context_class(cmd, info_name=path)
        parts.append(f"{'#' * depth} `{path}`\n")
        parts.append(f"```text\n{cmd.get_usage(ctx).strip()}\n```\n")
        if cmd.help:
            parts.append(cmd.help.strip() + "\n")
        params = [p for p in cmd.params if p.name != "help"]
        if params:
            parts.append(_table(["option", "type", "default", "description"],
                                [_option_row(p, ctx) for p in params]) + "\n")  # fmt: skip
        if _is_group(cmd):
            subs = sorted(cmd.commands)
            parts.append("Commands: " + ", ".join(f"`{path} {s}`" for s in subs) + ".\n")
    return "\n".join(parts)


def options_of(path: str) -> set[str]:
    """The option names (``--x``) the command at ``path`` takes."""
    for p, cmd in commands():
        if p == path:
            return {o for q in cmd.params for o in (*q.opts, *q.secondary_opts)}
    raise KeyError(path)


# ------------------------------------------------------------------------ the settings


def schemas() -> list[tuple[str, str, Any]]:
    """``(title, where it is given, schema)`` of every declared settings schema."""
    from streamscale.control.controller import CONTROLLER_SETTINGS
    from streamscale.control.policies import specs
    from streamscale.control.watch import WATCH_SETTINGS
    from streamscale.planning.registry import entries
    from streamscale.profiling.tasks import TASK_SETTINGS
    from streamscale.runtime.run_config import RUN_SETTINGS
    from streamscale.runtime.spark.state.retention import OUTPUT_SETTINGS

    run = "`streamscale run` options (`--duration` for `duration_s`, …) and `Stream.run(...)`"
    out: list[tuple[str, str, Any]] = [("Run", run, RUN_SETTINGS)]
    out += [(f"Policy `{s.name}`", f"`--param` with `--policy {s.name}`: {s.description}",
             s.settings) for s in specs()]  # fmt: skip
    out += [
        ("Controller", "`--param` of `streamscale run` (every policy)", CONTROLLER_SETTINGS),
        ("Watch", "`--param` of `streamscale run` (decisions while a batch runs)",
         WATCH_SETTINGS),
        ("Output", "`--param` of `streamscale run` (what a run keeps)", OUTPUT_SETTINGS),
    ]  # fmt: skip
    for e in entries():
        if e.params is not None and e.params.settings:
            where = f"`--param` of `streamscale plan --{e.family} {e.name}`: {e.description}"
            out.append((f"{e.family.capitalize()} `{e.name}`", where, e.params))
    for name, sch in TASK_SETTINGS.items():
        out.append((f"Profiling task `{name}`", f"`--param` of `streamscale profile {name}`", sch))
    return out


def setting_names() -> set[str]:
    """Every name ``--param`` may take somewhere (and every source option)."""
    names = {s.name for _, _, sch in schemas() for s in sch.settings}
    return names | {n for _, fields in source_options() for n, _ in fields}


def source_options() -> list[tuple[str, list[tuple[str, Any]]]]:
    """``(format, [(option, default)])`` of every bundled source."""
    from streamscale.runtime.spark.sources.source_registry import source, sources

    out = []
    for name in sources():
        entry = source(name)
        spec = entry.spec() if entry is not None else None
        if spec is None or not dataclasses.is_dataclass(spec):
            continue
        fields = [(f.name, f.default) for f in dataclasses.fields(spec) if f.init
                  and not f.name.startswith("_")]  # fmt: skip
        out.append((name, fields))
    return out


def _default(s: Any) -> str:
    return "derived" if s.default is None else f"`{s.default!r}`"


def settings_page() -> str:
    """One table per schema, then the bundled sources' options."""
    parts: list[str] = []
    for title, where, sch in schemas():
        rows = [[f"`{s.name}`", s.type.__name__, _default(s), s.bounds, s.description]
                for s in sch.settings]  # fmt: skip
        parts.append(f"## {title}\n\n{where}.\n")
        if rows:
            parts.append(_table(["setting", "type", "default", "bounds", "description"], rows))
        else:
            parts.append("No settings of its own.")
        parts.append("")
    parts.append("## Bundled sources\n\nOptions of the sources' Spark formats "
                 "(`spark.readStream.format(NAME).option(...)`, or a topology's source "
                 "`params`), checked before Spark starts.\n")  # fmt: skip
    for name, fields in source_options():
        rows = [[f"`{n}`", "required" if d is dataclasses.MISSING else f"`{d!r}`"]
                for n, d in fields]  # fmt: skip
        parts.append(f"### `{name}`\n\n{_table(['option', 'default'], rows)}\n")
    return "\n".join(parts)


GENERATORS: dict[str, Callable[[], str]] = {"cli": cli_page, "settings": settings_page}


def render(markdown: str) -> str:
    """``markdown`` with every ``generated:NAME`` marker replaced (unknown names refused)."""

    def one(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in GENERATORS:
            raise ValueError(f"unknown generated block {name!r}")
        return GENERATORS[name]()

    return MARKER.sub(one, markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs event: fill the page's generated blocks."""
    return render(markdown) if MARKER.search(markdown) else markdown
