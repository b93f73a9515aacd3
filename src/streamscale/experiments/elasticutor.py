"""``streamscale reproduce elasticutor``: paper 000, §5, on the cluster simulator.

Runs the policies of :mod:`streamscale.control.policies` — ``static``,
``rc`` (resource-centric, as the paper describes it), ``rc-damped`` (RC with
damping the paper does not describe, reported beside it), ``naive-ec`` and
``elastic`` (Elasticutor) — through the same controller on :mod:`streamscale.sim`:

* micro-benchmark (§5.1, Fig. 6): throughput, mean and p99 latency vs ω ∈
  {0, 1, 2, 4, 8, 16} key shuffles per minute;
* instantaneous throughput at ω = 2 (Fig. 7): the dip after each shuffle and
  how long it lasts; shard reassignment time split into synchronisation and
  state migration (Fig. 11);
* throughput vs key skew α (Fig. 10) and vs state size per shard (Fig. 9);
* SSE-like stock exchange (§5.4): throughput and latency of the four policies
  (Fig. 19), naive-EC vs Elasticutor state-migration and remote-transfer rates
  (Table 2), and Elasticutor's throughput and scheduling time on 8/16/32 nodes
  (Table 3).

The paper ran saturating sources ("pressured scenarios", §5); so do the
*saturation* runs: sources emit as fast as back-pressure admits, and the
queueing model's latency target is set below the per-tuple service time, so the
§4.1 greedy allocation only stops when every core is handed out (the paper's
"or Σk reaches the cores available"). The *offered-load* runs (ω sweep and SSE)
feed the sources at a fixed rate (reached by a linear ramp over the warm-up,
so no run starts buried under its first seconds' backlog), ``offered`` × the
lower of the cluster's CPU
capacity and the hot-shard ceiling (the rate at which the hottest shard fills
one core, as a shard is never split), and count the wait of tuples held back
at the source in the latency. Every skew and ω table prints that ceiling.
Beside them, the *sustained-load* runs at the top ω feed every policy
``sustained_share`` × the lower of RC's and Elasticutor's measured saturation
throughput there, a rate both serve, so their latency ratio is not a
throughput shortfall. ``--quick`` shrinks the clusters (4 nodes for the
micro-benchmark with the paper's keys per core, i.e. 1250 keys; 2/4 nodes for
the SSE runs), the sweeps, the micro-benchmark's measured window (20 s) and the
ω = 2 timeline (30 s after its warm-up) so the whole run takes a few minutes.

The headline records (``headline.jsonl``) carry the command, the commit and the
UTC time of the run that produced them (:func:`provenance`).
"""

from __future__ import annotations

import json
import math
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from streamscale.control import ControllerConfig
from streamscale.control.policies import initial_plan, make_policy
from streamscale.experiments.elasticutor_report import dips, render
from streamscale.experiments.elasticutor_targets import headline, headline_runs, targets
from streamscale.experiments.report import (
    checkout_commit,
    markdown_table,
    provenance,
    write_results,
)
from streamscale.sim.kernel import SimConfig
from streamscale.sim.run import SimResult, simulate
from streamscale.sim.workloads import MicroBenchmark, StockExchange

__all__ = [
    "HEADLINE_FILE",
    "POLICIES",
    "QUICK_HEADLINE_FILE",
    "Setup",
    "checkout_commit",
    "provenance",
    "run",
    "setup",
]

# The committed copy of the headline figures docs/papers/elasticutor.md quotes (full run, seed 1).
HEADLINE_FILE = Path(__file__).with_name("elasticutor_headline.jsonl")
# The same figures of ``--quick --seed 1``, which a slow test regenerates.
QUICK_HEADLINE_FILE = Path(__file__).with_name("elasticutor_quick_headline.jsonl")

POLICIES: tuple[str, ...] = ("static", "rc", "rc-damped", "naive-ec", "elastic")
#: the policies of the skew and state-size sweeps (Figs. 9-10)
SWEEP: tuple[str, ...] = ("static", "rc", "elastic")
_KB = 1024


@dataclass(frozen=True)
class Setup:
    """Sizes of one reproduction run (see :func:`setup`).

    ``executors``, ``sse_nodes_per_executor`` and ``sse_executor_sweep`` count instances
    (Elasticutor's elastic executors): the names are keys of ``results.json``'s setup and
    of the ablation records.
    """

    nodes: int
    executors: int
    shards: int
    warmup_s: float
    duration_s: float
    omegas: tuple[float, ...]
    alphas: tuple[float, ...]
    state_bytes: tuple[int, ...]
    sweep_s: float
    sse_nodes: tuple[int, ...]
    sse_shards_per_op: int
    sse_s: float
    queue_s: float = 0.1
    offered: float = 0.75
    offered_omegas: tuple[float, ...] | None = None
    sse_scale_state: bool = False
    sse_nodes_per_executor: int = 4
    sse_executor_sweep: tuple[int, ...] = ()
    timeline_warmup_s: float = 30.0
    timeline_s: float = 90.0
    sustained_share: float = 0.75


def setup(quick: bool) -> Setup:
    """The paper's sizes (32 nodes × 8 cores, 32 instances × 256 shards), or a quick run."""
    if quick:
        return Setup(
            nodes=4,
            executors=4,
            shards=256,
            warmup_s=5.0,
            # 20 s measured (ω = 2's shuffle at 15 s and 10 s after it; ω = 1's first
            # shuffle, at 30 s, falls after the window) and a 30 s ω = 2 timeline (its
            # shuffle at 45 s and 15 s after it): 22 % less CPU than 40 s and 60 s for
            # the same headline pass/miss pattern; the SSE runs keep their length (the
            # SSE ablation's tables are the quick SSE setup)
            duration_s=20.0,
            omegas=(0, 1, 2, 4, 8, 16),
            alphas=(0.0, 0.8),
            state_bytes=(32 * _KB, 32 * 1024 * _KB),
            sweep_s=20.0,
            sse_nodes=(2, 4),
            sse_shards_per_op=1024,
            sse_s=10.0,
            offered_omegas=(0, 2, 16),
            sse_scale_state=True,
            timeline_s=30.0,
        )
    return Setup(
        nodes=32,
        executors=32,
        shards=256,
        warmup_s=5.0,
        duration_s=40.0,
        omegas=(0, 1, 2, 4, 8, 16),
        alphas=(0.0, 0.5, 0.8, 1.0),
        state_bytes=(32 * _KB, 2048 * _KB, 32 * 1024 * _KB),
        sweep_s=20.0,
        sse_nodes=(8, 16, 32),
        sse_shards_per_op=1024,
        sse_s=15.0,
        sse_executor_sweep=(2, 8),
    )


def _params(cost_ms: float) -> dict[str, float]:
    # below one service time: unreachable, so the allocator hands out every core (§4.1)
    return {"latency_target_ms": 0.5 * cost_ms}


def _simulate(
    wl: MicroBenchmark | StockExchange,
    policy: str,
    s: Setup,
    *,
    cost_ms: float,
    duration: float,
    seed: int,
) -> SimResult:
    topo = wl.static_topology() if policy == "static" else wl.topology()
    cluster = wl.cluster()
    pol = make_policy(policy, topo, cluster, params=_params(cost_ms), seed=seed)
    return simulate(
        topo,
        cluster,
        wl.demand(),
        pol,
        initial_plan(policy, topo, cluster),
        duration_s=duration,
        warmup_s=s.warmup_s,
        config=SimConfig(queue_s=s.queue_s),
        controller=ControllerConfig(interval_s=1.0, stabilization_s=1.0, scale_down_delay_s=5.0),
        seed=seed,
    )


def _stock(nodes: int, s: Setup, seed: int, per: int | None = None) -> StockExchange:
    # one instance per ``per`` nodes and operator (12 operators share the cores):
    # every instance holds at least one core, so 12 × nodes/2 instances (192 on
    # 256 cores) leave no instance room to scale and sink a core into each of the
    # 80 light event instances; nodes/4 (96) leaves 2.7 cores per instance. The
    # shards per operator stay fixed; a quick run scales the state with the
    # cluster so each instance holds as much as on the paper's 32 nodes
    e = max(1, nodes // (per or s.sse_nodes_per_executor))
    return StockExchange(
        nodes=nodes,
        instances=e,
        shards=max(1, s.sse_shards_per_op // e),
        state_scale=nodes / 32 if s.sse_scale_state else 1.0,
        seed=seed,
    )


def _row(r: SimResult, **keys: Any) -> dict[str, Any]:
    return {
        **keys,
        "policy": r.policy,
        "throughput": r.throughput,
        "mean_latency_ms": r.mean_latency_ms,
        "p99_ms": r.p99_ms,
    }


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _job(spec: tuple[Any, ...]) -> SimResult:
    """One simulation of the plan below (module level so worker processes can run it)."""
    if spec[0] == "micro":
        _, wl, policy, s, duration, seed = spec
        return _simulate(wl, policy, s, cost_ms=wl.cost_ms, duration=duration, seed=seed)
    if spec[0] == "timeline":
        _, wl, policy, s, seed = spec
        return _simulate(
            wl,
            policy,
            replace(s, warmup_s=s.timeline_warmup_s),
            cost_ms=wl.cost_ms,
            duration=s.timeline_s,
            seed=seed,
        )
    _, wl, policy, s, seed = spec
    return _simulate(wl, policy, s, cost_ms=wl.event_ms, duration=s.sse_s, seed=seed)


def offered_rate(wl: MicroBenchmark | StockExchange, end: float, share: float) -> float:
    """``share`` × the lower of the CPU capacity and the hot-shard ceiling before ``end``."""
    return share * min(wl.capacity(), wl.hot_shard_ceiling(end))


def _run_all(
    specs: dict[tuple[Any, ...], tuple[Any, ...]], workers: int
) -> dict[tuple[Any, ...], SimResult]:
    """Run independent simulations, in ``workers`` processes when more than one."""
    if workers <= 1:
        return {k: _job(v) for k, v in specs.items()}
    # spawn, not fork: the caller may hold threads (a Spark gateway, a test runner)
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        futures = {k: pool.submit(_job, v) for k, v in specs.items()}
        return {k: f.result() for k, f in futures.items()}


def run(
    out: Path,
    *,
    quick: bool,
    seed: int,
    config: Setup | None = None,
    workers: int | None = None,
    headline_only: bool = False,
) -> dict[str, Any]:
    """Run every experiment, write ``results.json``, ``results.md`` and plots into ``out``.

    ``workers`` processes run the independent simulations (default: one per CPU, at most 2).
    ``headline_only`` runs only the simulations the target figures read
    (:func:`~streamscale.experiments.elasticutor_targets.headline_runs`), each as the full
    run has it (seeded, independent of the others), so ``headline.jsonl`` is the full run's;
    the tables hold those runs only and ``results.md`` the target figures only (no plots).
    """
    started, commit = time.perf_counter(), checkout_commit()
    s = config or setup(quick)
    workers = workers if workers is not None else min(2, os.cpu_count() or 1)
    # keys per core as in the paper (10 K keys on 256 cores), one generator per node
    base = MicroBenchmark(
        nodes=s.nodes,
        instances=s.executors,
        shards=s.shards,
        keys=max(1, 10_000 * s.nodes // 32),
        generators=s.nodes,
        seed=seed,
    )
    sse_nodes = s.sse_nodes[len(s.sse_nodes) // 2] if quick else s.sse_nodes[-1]
    stock = _stock(sse_nodes, s, seed)
    specs, rates = _plan(s, base, stock, sse_nodes, seed)
    done, basis = _run_plan(specs, rates, s, base, seed, workers, headline_only=headline_only)
    results: dict[str, Any] = {"setup": asdict(s), "quick": quick, "seed": seed}
    results["capacity"] = {"micro": base.capacity(), "sse": stock.capacity()}
    results.update(_micro_results(done, s, base, rates, basis))
    results.update(_sse_results(done, s, stock, sse_nodes, rates))
    results["targets"] = targets(results)
    results["provenance"] = provenance(
        "elasticutor",
        quick=quick,
        seed=seed,
        custom=config is not None and config != setup(quick),
        wall_s=time.perf_counter() - started,
        commit=commit,
    )
    results["headline"] = [{**h, **results["provenance"]} for h in headline(results["targets"])]
    _write(out, results, headline_only=headline_only)
    return results


Specs = dict[tuple[Any, ...], tuple[Any, ...]]


def _plan(
    s: Setup, base: MicroBenchmark, stock: StockExchange, sse_nodes: int, seed: int
) -> tuple[Specs, dict[tuple[Any, ...], float]]:
    """Every simulation but the sustained ones (they need two runs' results first), by
    key, and the offered rates they run at."""
    specs: Specs = {}
    # the longest runs first, so the worker processes finish together
    for policy in POLICIES:
        specs[("sse", policy)] = ("sse", stock, policy, s, seed)
    for n in s.sse_nodes:
        if n != sse_nodes:
            specs[("scale", n)] = ("sse", _stock(n, s, seed), "elastic", s, seed)
    for per in s.sse_executor_sweep:
        for policy in ("naive-ec", "elastic"):
            specs[("sse-y", per, policy)] = ("sse", _stock(sse_nodes, s, seed, per), policy, s,
                                             seed)  # fmt: skip
    # Fig. 7: the ω = 2 timeline after a warm-up of one shuffle period, so every
    # measured shuffle starts from the policy's steady state (RC's start-up
    # repartitioning at 32 nodes lasts ≈ 30 s)
    for policy in POLICIES:
        specs[("timeline", policy)] = ("timeline", replace(base, omega=2.0), policy, s, seed)
    for omega in s.omegas:
        for policy in POLICIES:
            wl = replace(base, omega=float(omega))
            specs[("omega", omega, policy)] = ("micro", wl, policy, s, s.duration_s, seed)
    end = s.warmup_s + s.duration_s
    rates: dict[tuple[Any, ...], float] = {}
    for omega in s.omegas if s.offered_omegas is None else s.offered_omegas:
        wl = replace(base, omega=float(omega))
        rates[("omega", omega)] = offered_rate(wl, end, s.offered)
        for policy in POLICIES:
            offered = replace(wl, rate=rates[("omega", omega)], ramp_s=s.warmup_s)
            specs[("offered", omega, policy)] = ("micro", offered, policy, s, s.duration_s, seed)
    rates[("sse",)] = offered_rate(stock, s.warmup_s + s.sse_s, s.offered)
    for policy in POLICIES:
        offered_sse = replace(stock, rate=rates[("sse",)], ramp_s=s.warmup_s)
        specs[("sse-offered", policy)] = ("sse", offered_sse, policy, s, seed)
    for alpha in s.alphas:
        for policy in SWEEP:
            wl = replace(base, alpha=float(alpha), omega=2.0)
            specs[("alpha", alpha, policy)] = ("micro", wl, policy, s, s.sweep_s, seed)
    for size in s.state_bytes:
        for policy in SWEEP:
            wl = replace(base, state_bytes_per_shard=int(size), omega=2.0)
            specs[("state", size, policy)] = ("micro", wl, policy, s, s.sweep_s, seed)
    return specs, rates


def _run_plan(
    specs: Specs,
    rates: dict[tuple[Any, ...], float],
    s: Setup,
    base: MicroBenchmark,
    seed: int,
    workers: int,
    *,
    headline_only: bool,
) -> tuple[dict[tuple[Any, ...], SimResult], str]:
    """Run the plan (only the headline's runs with ``headline_only``), the sustained runs
    added once their basis is known; the results by key and that basis policy."""
    # The sustained load needs RC's and Elasticutor's saturation throughput at the
    # top ω: those two runs go first, the rest (and the sustained runs) after them.
    top = max(s.omegas)
    first = [("omega", top, "rc"), ("omega", top, "elastic")]
    done = _run_all({k: specs.pop(k) for k in first}, workers)
    basis = min(("rc", "elastic"), key=lambda p: done[("omega", top, p)].throughput)
    top_wl = replace(base, omega=float(top))
    rates[("sustained",)] = s.sustained_share * done[("omega", top, basis)].throughput
    for policy in POLICIES:
        wl = replace(top_wl, rate=rates[("sustained",)], ramp_s=s.warmup_s)
        specs[("sustained", policy)] = ("micro", wl, policy, s, s.duration_s, seed)
    keep = headline_runs(s.omegas, POLICIES) if headline_only else specs.keys()
    done.update(_run_all({k: v for k, v in specs.items() if k in keep}, workers))
    return done, basis


Done = dict[tuple[Any, ...], SimResult]


def _micro_results(
    done: Done, s: Setup, base: MicroBenchmark, rates: dict[tuple[Any, ...], float], basis: str
) -> dict[str, Any]:
    """The micro-benchmark's tables: the ω sweep (measured, offered, sustained), the ω = 2
    timeline, its dips and reassignments, the skew and state sweeps."""
    end = s.warmup_s + s.duration_s
    top = max(s.omegas)

    def ceiling(**change: float) -> float:
        return replace(base, **change).hot_shard_ceiling(end)

    omega = _omega_results(done, s, base, rates, ceiling)
    out = {k: omega.pop(k) for k in ("omega_sweep", "omega_offered")}  # the report's order
    out["omega_sustained"] = [
        {
            **_row(done[("sustained", p)], omega=top, ceiling=ceiling(omega=float(top)),
                   offered=rates[("sustained",)]),
            "share": s.sustained_share,
            "basis": basis,
        }
        for p in POLICIES
        if ("sustained", p) in done
    ]  # fmt: skip
    out.update(omega)
    out["skew_sweep"] = [
        _row(done[("alpha", a, p)], alpha=a, ceiling=ceiling(alpha=float(a), omega=2.0))
        for a in s.alphas
        for p in SWEEP
        if ("alpha", a, p) in done
    ]
    out["state_sweep"] = [
        _row(done[("state", b, p)], state_kb_per_shard=b / _KB)
        for b in s.state_bytes
        for p in SWEEP
        if ("state", b, p) in done
    ]
    return out


def _omega_results(
    done: Done,
    s: Setup,
    base: MicroBenchmark,
    rates: dict[tuple[Any, ...], float],
    ceiling: Any,
) -> dict[str, Any]:
    """Per ω and policy: the measured and offered rows; at ω = 2 the timeline, its dips
    and the reassignment figures."""
    omega_rows: list[dict[str, Any]] = []
    offered_rows: list[dict[str, Any]] = []
    timeline: dict[str, list[dict[str, float]]] = {}
    reassign: list[dict[str, Any]] = []
    dip_rows: list[dict[str, Any]] = []
    for omega in s.omegas:
        cap = ceiling(omega=float(omega))
        for policy in POLICIES:
            if ("omega", omega, policy) not in done:
                continue
            r = done[("omega", omega, policy)]
            omega_rows.append(_row(r, omega=omega, ceiling=cap))
            if ("offered", omega, policy) in done:
                o = done[("offered", omega, policy)]
                offered_rows.append(
                    _row(o, omega=omega, ceiling=cap, offered=rates[("omega", omega)])
                )
            if omega == 2 and ("timeline", policy) in done:
                tl = done[("timeline", policy)]
                timeline[policy] = [
                    {"time": x.time, "throughput": x.throughput, "cores": x.cores}
                    for x in tl.samples
                ]
                t_end = s.timeline_warmup_s + s.timeline_s
                wl = replace(base, omega=float(omega))
                measured = [t for t in wl.shuffle_times(t_end) if t >= s.timeline_warmup_s]
                dip_rows.append({"policy": policy, **dips(tl.samples, measured, t_end)})
                reassign.append(_reassignment(policy, r))
    return {"omega_sweep": omega_rows, "omega_offered": offered_rows,
            "timeline_omega2": timeline, "dips_omega2": dip_rows,
            "reassignment_omega2": reassign}  # fmt: skip


def _reassignment(policy: str, r: SimResult) -> dict[str, Any]:
    return {
        "policy": policy,
        "moves": r.shard_moves,
        "remote_moves": r.remote_moves,
        "sync_ms_per_move": r.sync_ms_per_move,
        "transfer_ms_per_move": r.transfer_ms_per_move,
        "global_pauses": len(r.pause_s),
        "mean_pause_s": (sum(r.pause_s) / len(r.pause_s)) if r.pause_s else 0.0,
    }


def _sse_results(
    done: Done,
    s: Setup,
    stock: StockExchange,
    sse_nodes: int,
    rates: dict[tuple[Any, ...], float],
) -> dict[str, Any]:
    """The stock-exchange tables: per policy (measured, offered, timeline), naive against
    elastic, the scalability sweep and the instances-per-operator sweep."""
    sse_ceiling = stock.hot_shard_ceiling(s.warmup_s + s.sse_s)
    sse_runs = {p: done[("sse", p)] for p in POLICIES}
    out: dict[str, Any] = {}
    out["sse"] = [
        {
            **_row(r, nodes=sse_nodes, ceiling=sse_ceiling),
            "migration_mb_s": r.migration_mb_s,
            "remote_mb_s": r.remote_mb_s,
        }
        for r in sse_runs.values()
    ]
    out["sse_offered"] = [
        {
            **_row(done[("sse-offered", p)], nodes=sse_nodes, ceiling=sse_ceiling),
            "offered": rates[("sse",)],
        }
        for p in POLICIES
        if ("sse-offered", p) in done
    ]
    out["sse_timeline"] = {
        p: [
            {"time": x.time, "throughput": x.throughput, "p99_ms": _finite(x.p99_ms)}
            for x in r.samples
        ]
        for p, r in sse_runs.items()
    }
    naive, ela = sse_runs["naive-ec"], sse_runs["elastic"]
    out["naive_vs_elastic"] = {
        "naive_migration_mb_s": naive.migration_mb_s,
        "elastic_migration_mb_s": ela.migration_mb_s,
        "naive_remote_mb_s": naive.remote_mb_s,
        "elastic_remote_mb_s": ela.remote_mb_s,
        "nodes": sse_nodes,
    }
    out["scalability"] = [
        {"nodes": n, "throughput": r.throughput, "scheduler_ms": r.scheduler_ms,
         "decisions": r.decisions}
        for n in s.sse_nodes
        if n == sse_nodes or ("scale", n) in done
        for r in [ela if n == sse_nodes else done[("scale", n)]]
    ]  # fmt: skip
    out["sse_executors"] = _instance_sweep(done, s, sse_runs, sse_nodes)
    return out


def _instance_sweep(
    done: Done, s: Setup, sse_runs: dict[str, SimResult], sse_nodes: int
) -> list[dict[str, Any]]:
    y_rows: list[dict[str, Any]] = []
    for per in sorted({s.sse_nodes_per_executor, *s.sse_executor_sweep}):
        for policy in ("naive-ec", "elastic"):
            if per != s.sse_nodes_per_executor and ("sse-y", per, policy) not in done:
                continue
            default = per == s.sse_nodes_per_executor
            r = sse_runs[policy] if default else done[("sse-y", per, policy)]
            y_rows.append(
                {
                    "executors_per_operator": max(1, sse_nodes // per),
                    "policy": policy,
                    "throughput": r.throughput,
                    "migration_mb_s": r.migration_mb_s,
                    "remote_mb_s": r.remote_mb_s,
                    "default": default,
                }
            )
    return y_rows


def _write(out: Path, results: dict[str, Any], *, headline_only: bool) -> None:
    """``results.json``, ``results.md`` (the target figures only with ``headline_only``,
    else the full report and its plots) and ``headline.jsonl``."""
    if headline_only:
        results["headline_only"] = True
        markdown = "# Elasticutor (paper 000, §5): target figures only\n\n" + markdown_table(
            ["figure", "paper", "measured", "target", "met", "runs"],
            [
                [t[k] for k in ("figure", "paper", "measured", "target", "met", "runs")]
                for t in results["targets"]
            ],
        )
    else:
        markdown = render(results, out)
    write_results(out, results, markdown)
    lines = [json.dumps(h) for h in results["headline"]]
    (out / "headline.jsonl").write_text("\n".join(lines) + "\n")
