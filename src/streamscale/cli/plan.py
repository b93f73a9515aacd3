"""``streamscale plan``: compose an allocator, a placer and a balancer over model files.

Any registered planner runs unchanged: the command builds a
:class:`~streamscale.planning.registry.PlanningContext` from the files, chains
the chosen steps with :func:`~streamscale.planning.registry.compose`, prints
each step's figures and what the new plan changes against ``--current``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import typer
import yaml

from streamscale.cli.output import Output
from streamscale.errors import StreamscaleError
from streamscale.model import (
    Plan,
    Snapshot,
    Topology,
    load_cluster,
    load_models,
    load_plan,
    load_snapshot,
    load_topology,
    save,
)
from streamscale.model.ids import parse_instance
from streamscale.model.io import dump
from streamscale.planning.registry import Family, PlanningContext, check_params, compose, entries

__all__ = ["parse_param_items", "plan", "register", "shard_sizes"]

DEFAULT_STEPS: tuple[tuple[Family, str], ...] = (
    ("allocator", "queueing"),
    ("placer", "elasticutor"),
    ("balancer", "shard"),
)


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)


def parse_param_items(items: list[str]) -> dict[str, Any]:
    """``key=value`` pairs; values are read as YAML scalars (numbers, booleans, strings)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise StreamscaleError("expected key=value", item=f"--param {item}")
        try:
            out[key.strip()] = yaml.safe_load(value) if value.strip() else ""
        except yaml.YAMLError:
            out[key.strip()] = value
    return out


def shard_sizes(topology: Topology, snapshot: Snapshot | None) -> Any:
    """``shard_bytes(instance, shard)`` for instances ``op[e]`` (paper 000 ids).

    Sizes come from the snapshot's shard statistics (global index ``e·Z + s``),
    else the operator's state spread evenly; other instances count zero.
    """
    sizes: dict[tuple[str, int], int] = {}
    if snapshot is not None:
        sizes = {(s.operator, s.shard): s.state_bytes for s in snapshot.shards}

    def shard_bytes(instance: str, shard: int) -> int:
        inst = parse_instance(instance)
        op_name = inst.operator
        if inst.index is None or op_name not in topology.names:
            return 0
        op = topology.operator(op_name)
        g = inst.index * op.shards + shard
        if (op_name, g) in sizes:
            return sizes[(op_name, g)]
        return op.state_bytes // max(op.instances * op.shards, 1)

    return shard_bytes


def _steps(
    allocator: str | None, placer: str | None, balancer: str | None
) -> list[tuple[Family, str]]:
    chosen: list[tuple[Family, str]] = []
    if allocator:
        chosen.append(("allocator", allocator))
    if placer:
        chosen.append(("placer", placer))
    if balancer:
        chosen.append(("balancer", balancer))
    return chosen or list(DEFAULT_STEPS)


def _list(out: Output) -> None:
    rows = [
        [e.family, e.name, e.description, "-" if e.params is None else (e.params.help() or "none")]
        for e in entries()
    ]
    if out.json:
        out.emit([{"family": f, "name": n, "description": d, "settings": p} for f, n, d, p in rows])
    else:
        out.table("planners", ["family", "name", "description", "settings (--param)"], rows)


def _show_figures(out: Output, step: str, figures: dict[str, Any]) -> None:
    scalars = [[k, v] for k, v in figures.items() if not isinstance(v, dict | list | tuple)]
    out.table(step, ["figure", "value"], scalars)
    for key, value in figures.items():
        if isinstance(value, dict) and value:
            nested = any(isinstance(v, dict) for v in value.values())
            if nested:
                rows = [
                    [k, ", ".join(f"{a}:{b}" for a, b in v.items()) if isinstance(v, dict) else v]
                    for k, v in value.items()
                ]
            else:
                rows = [[k, v] for k, v in value.items()]
            out.table(f"{step} — {key}", ["item", "value"], rows)
        elif isinstance(value, list | tuple) and value:
            out.line(f"{step} — {key}: {', '.join(str(v) for v in value)}")


def plan(
    ctx: typer.Context,
    topology: Path | None = typer.Argument(None, help="Topology file (YAML/JSON)."),
    cluster: Path | None = typer.Option(None, "--cluster", help="Cluster file."),
    snapshot: Path | None = typer.Option(
        None, "--snapshot", help="Observed statistics (rates, shard loads and sizes)."
    ),
    current: Path | None = typer.Option(None, "--current", help="The plan in force now."),
    models: Path | None = typer.Option(None, "--models", help="Performance models file."),
    rate: float | None = typer.Option(None, "--rate", help="Source rate Ω (tuples/s)."),
    allocator: str | None = typer.Option(None, "--allocator", help="Allocator name."),
    placer: str | None = typer.Option(None, "--placer", help="Placer name."),
    balancer: str | None = typer.Option(None, "--balancer", help="Balancer name."),
    param: list[str] = typer.Option(
        [], "--param", help="Planner parameter key=value (repeatable)."
    ),
    seed: int | None = typer.Option(None, "--seed", help="Seed for randomized planners."),
    save_to: Path | None = typer.Option(None, "--save", help="Write the new plan here."),
    list_all: bool = typer.Option(False, "--list", help="List the registered planners."),
) -> None:
    """Plan TOPOLOGY on --cluster: run the chosen steps and print their figures.

    Without --allocator/--placer/--balancer, Elasticutor's pipeline runs
    (queueing, elasticutor, shard). `--list` prints every registered planner.
    """
    out: Output = ctx.obj
    if list_all:
        _list(out)
        return
    if topology is None:
        raise StreamscaleError("missing TOPOLOGY (or use --list)", item="plan")
    if cluster is None:
        raise StreamscaleError("missing --cluster FILE", item="plan")
    if rate is not None and not (rate > 0 and math.isfinite(rate)):
        raise StreamscaleError(f"must be a finite number > 0, got {rate}", item="--rate")
    steps = _steps(allocator, placer, balancer)
    params = check_params(steps, parse_param_items(param))
    if save_to is not None and not save_to.parent.is_dir():
        raise StreamscaleError("its directory does not exist", item=f"--save {save_to}")
    topo = load_topology(topology)
    snap = load_snapshot(snapshot) if snapshot else None
    start = load_plan(current) if current else Plan()
    context = PlanningContext(
        topology=topo,
        cluster=load_cluster(cluster),
        snapshot=snap,
        models=load_models(models) if models else {},
        rate=rate,
        params=params,
        seed=seed,
        now=snap.time if snap else 0.0,
    )
    new, figures, notes = compose(context, start, steps=steps)
    diff = start.diff(new, shard_bytes=shard_sizes(topo, snap))
    summary = {
        "instances": len(new.allocation.cores),
        "units": new.allocation.total,
        "shard_moves": len(diff.shard_moves),
        "remote_shard_moves": sum(1 for m in diff.shard_moves if m.remote),
        "migration_bytes": diff.migration_bytes,
        "core_moves": len(diff.core_moves),
    }
    if save_to is not None:
        save(new, save_to)
    if out.json:
        out.emit(
            {
                "steps": [
                    {"family": f, "name": n, "figures": figures[f"{f}:{n}"]} for f, n in steps
                ],
                "diff": summary,
                "notes": list(notes),
                "plan": dump(new),
            }
        )
        return
    for f, n in steps:
        _show_figures(out, f"{f} {n}", dict(figures[f"{f}:{n}"]))
    _show_figures(out, "plan vs current", summary)
    for note in notes:
        out.line(f"note: {note}")
    if save_to is not None:
        out.line(f"plan written to {save_to}")
