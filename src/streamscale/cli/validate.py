"""``streamscale validate FILE``: check a model file and summarize it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from streamscale.cli.output import Output
from streamscale.model import Cluster, PerformanceModel, Plan, Snapshot, Topology
from streamscale.model.io import detect_kind, load, read_document


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)


def validate(
    ctx: typer.Context,
    file: Path = typer.Argument(
        ..., help="A topology, cluster, models, snapshot or plan file (YAML/JSON)."
    ),
    rate: float | None = typer.Option(
        None, "--rate", help="Source rate Ω (tuples/s) for topology rates."
    ),
) -> None:
    """Validate FILE; print a summary, or the problem in one line (exit 2)."""
    out: Output = ctx.obj
    doc = read_document(file)
    kind = detect_kind(doc)
    obj = load(file, kind)
    summary: dict[str, Any] = {"file": str(file), "kind": kind, "valid": True}
    if isinstance(obj, Topology):
        summary.update(_topology(obj, rate, out))
    elif isinstance(obj, Cluster):
        summary.update(_cluster(obj, out))
    elif isinstance(obj, Snapshot):
        summary.update(
            {"operators": len(obj.operators), "shards": len(obj.shards), "nodes": len(obj.nodes)}
        )
        out.line(
            f"snapshot at t={obj.time:g}s: {len(obj.operators)} operators, {len(obj.shards)} shards"
        )
    elif isinstance(obj, Plan):
        summary.update({"instances": len(obj.allocation.cores), "units": obj.allocation.total})
        out.line(f"plan: {len(obj.allocation.cores)} instances, {obj.allocation.total} units")
    else:
        summary.update(_models(obj, out))
    if out.json:
        out.emit(summary)
    else:
        out.line(f"[green]valid[/green] {kind}: {file}")


def _topology(t: Topology, rate: float | None, out: Output) -> dict[str, Any]:
    has_rate = rate is not None or all(s.rate for s in t.sources)
    rates = t.rates(rate) if has_rate else {}
    out.table(
        f"topology {t.name}",
        ["operator", "kind", "task", "key", "instances", "input rate"],
        [
            [o.name, o.kind, o.task or "", o.key or "", o.instances, rates.get(o.name, "")]
            for o in t.operators
        ],
    )
    out.table(
        "edges",
        ["edge", "grouping", "selectivity"],
        [[e.name, e.grouping, e.selectivity] for e in t.edges],
    )
    return {
        "name": t.name,
        "operators": [o.name for o in t.operators],
        "edges": [e.name for e in t.edges],
        "rates": rates,
    }


def _cluster(c: Cluster, out: Output) -> dict[str, Any]:
    out.table(
        "nodes",
        ["node", "cores", "memory GB", "bandwidth Mb/s", "rack"],
        [[n.name, n.cores, n.memory_gb, n.bandwidth_mbps, n.rack] for n in c.nodes],
    )
    if c.vm_types:
        out.table(
            "vm types",
            ["type", "slots", "memory GB", "$/h"],
            [[v.name, v.slots, v.memory_gb, v.price_per_hour] for v in c.vm_types],
        )
    return {
        "nodes": list(c.names),
        "cores": c.total_cores,
        "vm_types": [v.name for v in c.vm_types],
    }


def _models(models: dict[str, PerformanceModel], out: Output) -> dict[str, Any]:
    out.table(
        "performance models",
        ["task", "threads", "peak rate", "τ̂", "approximate"],
        [
            [m.task, m.max_threads, m.peak_rate, m.peak_threads, m.approximate]
            for m in models.values()
        ],
    )
    return {
        "models": {
            m.task: {"peak_rate": m.peak_rate, "peak_threads": m.peak_threads}
            for m in models.values()
        }
    }
