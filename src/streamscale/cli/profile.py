"""``streamscale profile TASK``: build a task's performance model from Spark trials (paper 004, §5)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from streamscale.cli.demo import check_values
from streamscale.cli.output import Output
from streamscale.errors import StreamscaleError
from streamscale.profiling.tasks import TASK_SETTINGS
from streamscale.settings import parse_pairs

if TYPE_CHECKING:
    from streamscale.profiling.profiler import ProfileResult, TrialResult

__all__ = ["profile_command", "register"]


_PARAM_HELP = "Task parameter KEY=VALUE (repeatable). " + " ".join(
    f"{name}: {schema.help()}." for name, schema in TASK_SETTINGS.items()
)


def register(app: typer.Typer) -> None:
    app.command("profile", help="Profile a bundled task on Spark into a performance model.")(
        profile_command
    )


def _numbers(text: str | None, what: str, conv: type = float) -> list[Any] | None:
    if text is None:
        return None
    try:
        out = [conv(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise StreamscaleError(
            f"expected comma-separated numbers, got {text!r}", item=what
        ) from None
    if not out:
        raise StreamscaleError("empty list", item=what)
    return out


def profile_command(
    ctx: typer.Context,
    task: str = typer.Argument(
        ..., help="Bundled task: pi, xml_parse, service_lookup, batch_write."
    ),
    threads: str = typer.Option("1,2,4,8", "--threads", help="Thread counts τ, ascending from 1."),
    rates: str | None = typer.Option(
        None, "--rates", help="Rate ladder ω in tuples/s (default: --start-rate × --growth^k)."
    ),
    start_rate: float = typer.Option(
        10.0, "--start-rate", help="First rung of the default ladder."
    ),
    growth: float = typer.Option(
        1.5, "--growth", help="Ratio between rungs of the default ladder."
    ),
    max_rate: float = typer.Option(100_000.0, "--max-rate", help="Top of the default ladder."),
    trial_seconds: float = typer.Option(3.0, "--trial-seconds", help="Seconds per rate step."),
    warmup: float = typer.Option(
        3.0, "--warmup", help="Seconds before the first step is measured."
    ),
    max_latency_slope: float = typer.Option(
        0.5, "--max-latency-slope", help="λ_L^max: latency growth (s/s) still counted stable."
    ),
    min_slope: float = typer.Option(
        0.02,
        "--min-slope",
        help="λ_ω^min: stop adding threads below this relative gain per thread.",
    ),
    param: list[str] = typer.Option([], "--param", help=_PARAM_HELP),
    master: str = typer.Option("local[2]", "--master", help="Spark master URL."),
    out_file: Path | None = typer.Option(
        None, "--out", help="Write the model file here (YAML/JSON)."
    ),
) -> None:
    """Run Algorithm 1 of paper 004 with real trials on Spark and print (and save) the model."""
    from streamscale.model import save
    from streamscale.profiling.profiler import check_inputs, profile
    from streamscale.profiling.tasks import check_task

    out: Output = ctx.obj
    ts = _numbers(threads, "--threads", int) or []
    ladder = _numbers(rates, "--rates")
    task_params = check_task(task, parse_pairs(param))
    check_inputs(ts, ladder, start_rate, growth, max_rate)  # all before Spark starts
    check_values(
        {"--trial-seconds": trial_seconds},
        {"--warmup": warmup, "--max-latency-slope": max_latency_slope, "--min-slope": min_slope},
    )
    if out_file is not None and not out_file.parent.is_dir():
        raise StreamscaleError("its directory does not exist", item=f"--out {out_file}")

    from streamscale.profiling.spark_trial import SparkTrials
    from streamscale.runtime.spark.executors.session import build_session

    spark = build_session(master, app_name="streamscale-profile", shuffle_partitions=1)
    trials = SparkTrials(
        spark,
        task,
        seconds=trial_seconds,
        warmup=warmup,
        max_latency_slope=max_latency_slope,
        task_params=task_params,
    )
    rows: list[list[Any]] = []
    with _progress(out, task, rows) as seen:
        try:
            res = profile(
                task,
                trials,
                threads=ts or (1,),
                rates=ladder,
                start_rate=start_rate,
                growth=growth,
                max_rate=max_rate,
                min_slope=min_slope,
                on_trial=seen,
            )
        finally:
            trials.close()
    if out_file is not None:
        save({task: res.model}, out_file)
    _report(out, task, res, rows, out_file)


#: a trial row's fields: JSON keys and table headers, in the row's order
_TRIAL_FIELDS: tuple[tuple[str, str], ...] = (
    ("threads", "threads"),
    ("rate", "rate"),
    ("verdict", "verdict"),
    ("achieved", "achieved t/s"),
    ("busy", "busy share"),
    ("slope", "latency slope"),
    ("cpu", "CPU %"),
    ("memory", "memory %"),
)


@contextmanager
def _progress(out: Output, task: str, rows: list[list[Any]]) -> Iterator[Callable[[Any], None]]:
    """A spinner over the trials; yields the callback that records each trial in ``rows``."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        disable=out.json,
        transient=True,
    ) as bar:
        job = bar.add_task(f"profiling {task}", total=None)

        def seen(r: TrialResult) -> None:
            verdict = "stable" if r.stable else "unstable"
            rows.append(
                [r.threads, r.rate, verdict, r.achieved_rate, r.utilization,
                 r.latency_slope, r.cpu, r.memory]
            )  # fmt: skip
            bar.update(job, description=f"{task}: τ={r.threads} ω={r.rate:g} {verdict}")

        yield seen


def _report(
    out: Output, task: str, res: ProfileResult, rows: list[list[Any]], out_file: Path | None
) -> None:
    """The trials and the model: one JSON object, or two tables."""
    if out.json:
        keys = [k for k, _ in _TRIAL_FIELDS]
        out.emit(
            {
                "model": res.model.to_dict(),
                "stopped": res.stopped,
                "trials": [dict(zip(keys, r, strict=True)) for r in rows],
                "out": str(out_file) if out_file else None,
            }
        )
        return
    out.table(f"trials of {task}", [h for _, h in _TRIAL_FIELDS], rows)
    out.table(
        f"model of {task} ({res.stopped})",
        ["threads", "peak rate", "CPU %", "memory %"],
        [[p.threads, p.rate, p.cpu, p.memory] for p in res.model.points],
    )
    if out_file is not None:
        out.line(f"model written to {out_file}")
