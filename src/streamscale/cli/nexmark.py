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


ENGINES = ("streamscale", "spark-sql")


@nexmark_app.command("run")
def run_cmd(
    ctx: typer.Context,
    query: str = typer.Option(..., "--query", help="q0-q8 or q11."),
    events: Path = typer.Option(..., "--events", help="Directory written by 'nexmark generate'."),
    engine: str = typer.Option("streamscale", "--engine", help="streamscale or spark-sql."),
    policy: str = typer.Option(
        "static", "--policy", help="streamscale's policy for the keyed operators."
    ),
    out_dir: Path = typer.Option(..., "--out", help="Directory for result.parquet."),
    master: str = typer.Option("local[2]", "--master", help="Spark master."),
    files_per_trigger: int = typer.Option(
        1, "--files-per-trigger", help="Files of each table per micro-batch."
    ),
    resume: bool = typer.Option(
        False, "--resume", help="Go on from OUT/checkpoint instead of starting afresh."
    ),
) -> None:
    """Run one query over the events to the end of the input; write OUT/result.parquet."""
    from streamscale.cli.run import ensure_dir
    from streamscale.control.policies import check_policy
    from streamscale.nexmark.files import read_meta
    from streamscale.nexmark.results import check_query

    q = check_query(query)
    if engine not in ENGINES:
        raise StreamscaleError(f"unknown engine (known: {', '.join(ENGINES)})", item=engine)
    check_policy(policy)
    if engine == "spark-sql" and policy != "static":
        raise StreamscaleError("spark-sql runs Spark's own plan: no policy", item=policy)
    if engine == "spark-sql" and resume:
        raise StreamscaleError("spark-sql runs start afresh", item="--resume")
    if files_per_trigger < 1:
        raise StreamscaleError("must be >= 1", item=f"--files-per-trigger {files_per_trigger}")
    read_meta(events)
    ensure_dir(out_dir, "--out")
    from streamscale.runtime.spark.executors.session import build_session

    spark = build_session(master, app_name=f"nexmark-{q}-{engine}", shuffle_partitions=2)
    try:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
        if engine == "spark-sql":
            from streamscale.nexmark.spark_sql import run_spark_sql

            info = run_spark_sql(spark, q, events, out_dir, files_per_trigger=files_per_trigger)
        else:
            from streamscale.nexmark.streamscale_engine import run_streamscale

            info = run_streamscale(
                spark, q, events, out_dir, policy=policy,
                files_per_trigger=files_per_trigger, fresh=not resume,
            )  # fmt: skip
            info.pop("committed", None)
    finally:
        spark.stop()
    out = _out(ctx)
    if out.json:
        out.emit({**info, "result": str(out_dir / "result.parquet")})
    else:
        out.line(
            f"{q} on {engine}: {info['rows_out']} rows in {out_dir / 'result.parquet'} "
            f"({info['batches']} batches, {info['wall_s']:.1f} s)"
        )
