"""``streamscale cluster up|status|down``: a Spark standalone cluster on loopback."""

from __future__ import annotations

from pathlib import Path

import typer

from streamscale.cli.output import Output
from streamscale.errors import StreamscaleError

__all__ = ["register"]

cluster_app = typer.Typer(
    help="A loopback Spark standalone cluster (master + workers) from the installed pyspark.",
    no_args_is_help=True,
)

_DIR_HELP = "Where the cluster's record and logs live (default $STREAMSCALE_HOME/cluster)."


def register(app: typer.Typer) -> None:
    app.add_typer(cluster_app, name="cluster")


@cluster_app.command("up")
def up(
    ctx: typer.Context,
    workers: int = typer.Option(2, "--workers", help="Worker processes."),
    cores: int = typer.Option(
        2, "--cores", help="Cores each worker offers (may exceed the machine's)."
    ),
    memory: str = typer.Option("", "--memory", help="Memory each worker offers (default CORES g)."),
    directory: Path | None = typer.Option(None, "--dir", help=_DIR_HELP),
) -> None:
    """Start a master and WORKERS workers on 127.0.0.1; print the master URL."""
    from streamscale.runtime.spark.cluster.cluster import cluster_up

    out: Output = ctx.parent.obj if ctx.parent is not None else ctx.obj
    if not 1 <= workers <= 64:
        raise StreamscaleError(f"must be in [1, 64], got {workers}", item="--workers")
    if not 1 <= cores <= 256:
        raise StreamscaleError(f"must be in [1, 256], got {cores}", item="--cores")
    mem = memory or f"{cores}g"
    if not mem[:-1].isdigit() or mem[-1].lower() not in "mg":
        raise StreamscaleError(f"expected e.g. 2g or 1536m, got {mem!r}", item="--memory")
    info = cluster_up(workers, cores, memory=mem, directory=directory)
    if out.json:
        out.emit({"master": info.master_url, "workers": workers, "cores": info.total_cores})
    else:
        out.line(
            f"{info.master_url}  ({workers} workers × {cores} cores, logs in {info.directory})"
        )


@cluster_app.command("status")
def status(
    ctx: typer.Context,
    directory: Path | None = typer.Option(None, "--dir", help=_DIR_HELP),
) -> None:
    """Print the recorded cluster and what its master reports (exit 1 when it is down)."""
    from streamscale.runtime.spark.cluster.cluster import cluster_status

    out: Output = ctx.parent.obj if ctx.parent is not None else ctx.obj
    st = cluster_status(directory)
    if out.json:
        out.emit(st)
    elif not st["running"]:
        out.line(f"no cluster running (record: {st.get('directory')})")
    else:
        out.line(
            f"{st['master_url']}: {st['workers_alive']} workers alive, "
            f"{st['cores_used']}/{st['cores_total']} cores used"
        )
        for a in st["applications"]:
            out.line(f"  {a['id']} {a['name']}: {a['cores']} cores")
    if not st["running"]:
        raise typer.Exit(1)


@cluster_app.command("down")
def down(
    ctx: typer.Context,
    directory: Path | None = typer.Option(None, "--dir", help=_DIR_HELP),
) -> None:
    """Stop the workers, then the master, and remove the record."""
    from streamscale.runtime.spark.cluster.cluster import cluster_down

    out: Output = ctx.parent.obj if ctx.parent is not None else ctx.obj
    stopped = cluster_down(directory)
    out.line("cluster stopped" if stopped else "no cluster was recorded")
