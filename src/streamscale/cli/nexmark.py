"""``streamscale nexmark generate|run``: Nexmark events to files, and its queries on them."""

from __future__ import annotations

import math
from pathlib import Path

import typer

from streamscale.cli.output import Output
from streamscale.errors import StreamscaleError

__all__ = ["register"]

nexmark_app = typer.Typer(
    help="Nexmark, the auction benchmark: generate events, run queries Q0-Q8 and Q11.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(nexmark_app, name="nexmark")


def _out(ctx: typer.Context) -> Output:
    c: typer.Context | None = ctx
    while c is not None:
        if isinstance(c.obj, Output):
            return c.obj
        c = c.parent
    return Output()


@nexmark_app.command("generate")
def generate_cmd(
    ctx: typer.Context,
    events: int = typer.Option(..., "--events", help="Number of events (persons+auctions+bids)."),
    seed: int = typer.Option(0, "--seed", help="Seed: the same seed gives the same events."),
    rate: float = typer.Option(10_000.0, "--rate", help="Events per second of event time."),
    schedule: str | None = typer.Option(
        None,
        "--schedule",
        help="Piecewise rate instead of --rate: duration_s:rate[,duration_s:rate...].",
    ),
    files: int = typer.Option(8, "--files", help="Files per table (a stream's batches)."),
    out_dir: Path = typer.Option(..., "--out", help="Directory for the three tables."),
) -> None:
    """Write DIR/person.parquet, DIR/auction.parquet and DIR/bid.parquet."""
    from streamscale.nexmark.files import write_events
    from streamscale.nexmark.generator import GeneratorConfig, parse_schedule

    if events < 1:
        raise StreamscaleError("must be >= 1", item=f"--events {events}")
    if not (math.isfinite(rate) and rate > 0):
        raise StreamscaleError("must be a number > 0", item=f"--rate {rate}")
    steps = parse_schedule(schedule) if schedule else ((1.0, float(rate)),)
    cfg = GeneratorConfig(schedule=steps, seed=seed)
    meta = write_events(cfg, events, out_dir, files=files)
    out = _out(ctx)
    if out.json:
        out.emit({"out": str(out_dir), **meta})
    else:
        r = meta["rows"]
        out.line(
            f"{out_dir}: {r['person']} persons, {r['auction']} auctions, {r['bid']} bids "
            f"in {meta['files']} files per table"
        )
