"""``streamscale reproduce NAME``: rerun a paper's headline experiments."""

from __future__ import annotations

import importlib
import json
import time
from pathlib import Path

import typer

from streamscale.cli.output import Output, jsonable
from streamscale.cli.run import ensure_dir
from streamscale.errors import StreamscaleError, require_extra
from streamscale.experiments import REPRODUCTIONS
from streamscale.experiments.report import checkout_commit, provenance, stamp_headline


def register(app: typer.Typer) -> None:
    app.command("reproduce", help="Reproduce a paper's results: " + ", ".join(REPRODUCTIONS) + ".")(
        reproduce
    )


def reproduce(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Which reproduction (" + ", ".join(REPRODUCTIONS) + ")."),
    out_dir: Path | None = typer.Option(
        None, "--out", help="Output directory (default results/NAME)."
    ),
    quick: bool = typer.Option(False, "--quick", help="A small run of a few minutes at most."),
    seed: int = typer.Option(1, "--seed", help="Seed for every random choice."),
) -> None:
    """Run reproduction NAME and write results.json, results.md and plots."""
    out: Output = ctx.obj
    if name not in REPRODUCTIONS:
        raise StreamscaleError(
            f"unknown reproduction (known: {', '.join(REPRODUCTIONS)})", item=name
        )
    if seed < 0:
        raise StreamscaleError(f"must be >= 0, got {seed}", item="--seed")
    require_extra("papers")  # the papers' planners and plots
    target = out_dir or Path("results") / name
    ensure_dir(target, "--out")
    module = importlib.import_module(REPRODUCTIONS[name][0])
    commit, started = checkout_commit(), time.perf_counter()
    results = module.run(target, quick=quick, seed=seed)
    # every headline record names the command, the commit and the run's wall time
    if (target / "headline.jsonl").exists():
        stamp = provenance(name, quick=quick, seed=seed, commit=commit,
                           wall_s=time.perf_counter() - started)  # fmt: skip
        stamp_headline(target / "headline.jsonl", stamp)
    if out.json:
        out.emit(results)
    else:
        out.console.print((target / "results.md").read_text())
        out.line(f"written to {target}/")
        # one JSON line per target figure, so a run can be checked mechanically
        for record in results.get("targets", ()):
            print(json.dumps(jsonable(record)))
