"""Markdown tables of the committed benchmark results, written into README.md and the
documentation pages (``docs/**/*.md``) between ``<!-- results:NAME -->`` and
``<!-- /results:NAME -->``.

Every table quotes one run — the lines of the newest ``run`` in
``benchmarks/results/<bench>.jsonl`` (:mod:`_results`) — and names its command, commit,
cores and load, so no Spark figure in the docs is typed by hand. ``--check`` exits 1
when a document's block differs from what the files give (the drift test runs it);
``--write`` rewrites the blocks.

Run: ``.venv/bin/python benchmarks/tables.py --write`` after committing new results.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")))

Line = dict[str, Any]


def _lines(bench: str) -> list[Line]:
    """Every line of ``results/<bench>.jsonl`` (none when there is no file)."""
    path = RESULTS / f"{bench}.jsonl"
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def latest_run(bench: str, where: Callable[[Line], bool] = lambda _: True) -> list[Line]:
    """The lines of the newest run in ``results/<bench>.jsonl`` that satisfy ``where``."""
    lines = [x for x in _lines(bench) if where(x)]
    if not lines:
        return []
    run = lines[-1].get("run", lines[-1].get("utc"))
    return [x for x in lines if x.get("run", x.get("utc")) == run]


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return f"{v:.{digits}g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _pct(v: Any) -> str:
    return "–" if v is None else f"{100.0 * float(v):.1f} %"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def _source(bench: str, lines: Sequence[Line]) -> str:
    x = lines[-1]
    load = x.get("load_avg")
    load_s = f", load {load[0]:.1f}" if isinstance(load, list) and load else ""
    return (
        f"*From `benchmarks/results/{bench}.jsonl`, run {x.get('run', x.get('utc'))} at "
        f"commit `{x.get('commit')}` on {x.get('cores')} cores{load_s}: "
        f"`{x.get('command')}`.*"
    )


def _missing(bench: str, command: str) -> str:
    return f"*No committed run of `{bench}` yet: `{command}` records one.*"


def autoscale() -> str:
    """The newest full-length surge run's table, then the newest quick run's with real
    and with emulated start-up."""
    full = latest_run("autoscale", lambda x: x.get("quick") is False)
    quick = latest_run("autoscale", lambda x: x.get("quick") is True and _real(x))
    emulated = latest_run("autoscale", lambda x: x.get("quick") is True and not _real(x))
    runs = ((full, "Full length"), (quick, "Quick"), (emulated, "Quick, start-up emulated"))
    parts = [_autoscale(x, name) for x, name in runs if x]
    return "\n\n".join(parts) or _missing("autoscale", "python benchmarks/bench_autoscale.py")


def autoscale_headline() -> str:
    """The README's short surge table: the full-length run's share of tuples within the
    latency target and its core-seconds against the static peak sizing, per policy."""
    lines = latest_run("autoscale", lambda x: x.get("quick") is not True)
    pol = [x for x in lines if "policy" in x]
    if not pol:
        return _missing("autoscale", "python benchmarks/bench_autoscale.py")
    peak = next((x["core_seconds"] for x in pol if x["policy"] == "static-peak"
                 and x.get("startup", "real") == "real"), None)  # fmt: skip
    target = pol[0].get("config", {}).get("latency_target_ms")
    rows = [
        [
            _policy(x),
            _pct(x.get("slo_tuples")),
            _fmt(x["core_seconds"] / peak, 3) if peak else "–",
            f"{x.get('scale_ups', 0)} / {x.get('scale_downs', 0)}",
            _pct(x.get("host_cpu_surge")),
        ]
        for x in pol
    ]
    table = _table(
        ["policy", f"tuples within {_fmt(target)} ms", "core-seconds ÷ static-peak",
         "scale-ups / downs", "host CPU in the surge"],
        rows,
    )  # fmt: skip
    return f"{table}\n\n{_source('autoscale', lines)}"


def _policy(x: Line) -> str:
    """A surge line's policy, with its start-up mode when emulated."""
    if x.get("startup", "real") == "emulated":
        return f"{x['policy']} (start-up emulated, {_fmt(x.get('startup_delay_s'))} s)"
    return x["policy"]


def _cpu(x: Line) -> str:
    if x.get("host_cpu_base") is None and x.get("host_cpu_surge") is None:
        return "–"
    return f"{_pct(x.get('host_cpu_base'))} / {_pct(x.get('host_cpu_surge'))}"


def _surge_head(line: Line, unit: str, *, warmup: bool = False) -> str:
    """The surge scenario of a run (its ``config`` and emulated cores), in ``unit``."""
    cfg = line.get("config", {})
    base = cfg.get("base_rate")
    after = f" after a {cfg.get('warmup_s')} s warm-up" if warmup else ""
    return (
        f"Surge {base} → {cfg.get('base_rate', 0) * cfg.get('peak_factor', 0):g} → {base} "
        f"{unit}/s, {cfg.get('phase_s')} s phases{after}, {cfg.get('cost_ms')} ms per "
        f"{unit.rstrip('s')} *waited* (cost_kind wall: {line.get('emulated_cores')} task "
        f"slots emulate cores on this machine), {cfg.get('executor_cores')}-core executors, "
        f"latency target {cfg.get('latency_target_ms')} ms."
    )


def _real(x: Line) -> bool:
    return x.get("startup", "real") == "real"


def _autoscale(lines: list[Line], name: str) -> str:
    pol = [x for x in lines if "policy" in x]
    ratio = next((x for x in lines if x.get("figure") == "ratios"), {})
    peak = next((x["core_seconds"] for x in pol if x["policy"] == "static-peak"), None)
    rows = [
        [
            _policy(x),
            _pct(x.get("slo_tuples")),
            _pct(x.get("slo_batches")),
            _fmt(x.get("core_seconds")),
            _fmt(x["core_seconds"] / peak, 3) if peak else "–",
            _fmt(x.get("mean_cores")),
            _fmt(x.get("peak_executors")),
            f"{x.get('scale_ups', 0)} / {x.get('scale_downs', 0)}",
            f"{x['scale_ups_run']} / {x['scale_downs_run']}" if "scale_ups_run" in x else "–",
            _fmt(x.get("reaction_tasks_s")) if _real(x) else "–",  # emulated: started before
            _fmt(x.get("p99_ms")),
            _cpu(x),
        ]
        for x in pol
    ]
    head = f"**{name}.** " + _surge_head(pol[0], "tuples")
    floor = ratio.get("oracle_core_seconds_vs_static_peak")
    tail = f"\n\nOracle core-seconds ÷ static-peak's, by executor size: {floor}." if floor else ""
    table = _table(
        ["policy", "slo tuples", "slo batches", "core-seconds", "÷ static-peak",
         "mean cores", "peak executors", "ups / downs", "ups / downs (whole run)",
         "first tasks on added (s)", "p99 ms", "host CPU base / surge"],
        rows,
    )  # fmt: skip
    return f"{head}\n\n{table}{tail}\n\n{_source('autoscale', lines)}"


def _trace_runs() -> list[list[Line]]:
    """Per trace file, by name: the newest line of each start-up mode and policy among the
    runs of its newest scenario (window, minutes, peak rate), so that policies run apart
    stand in one table; each line keeps its run and command."""
    lines = [x for x in _lines("trace") if "trace" in x]
    runs = []
    for name in sorted({x["trace"] for x in lines}):
        of = [x for x in lines if x["trace"] == name]
        same = [x for x in of if _scenario(x) == _scenario(of[-1])]
        newest = {_trace_key(x): x for x in same}
        kept = {_run_of(x) for k, x in newest.items() if k[1] not in ("oracle", "ratios")}
        last = {x.get("startup", "real"): x for x in same if x.get("policy") == "oracle"}
        held = [x for k, x in newest.items() if _run_of(x) in kept or x in last.values()]
        runs.append(sorted(held, key=same.index))
    return runs


def _trace_key(x: Line) -> tuple[Any, ...]:
    """A line's place in the table: its mode and policy; the oracle's also its run (each
    line is compared with the oracle of its own run, the start-up it measured)."""
    key = (x.get("startup", "real"), x.get("policy", x.get("figure")))
    return (*key, _run_of(x)) if key[1] == "oracle" else key


def _run_of(x: Line) -> Any:
    return x.get("run", x.get("utc"))


def _scenario(x: Line) -> tuple[Any, ...]:
    return (x.get("window"), x.get("minutes"), x.get("peak_rate"))


def _sources(bench: str, lines: Sequence[Line]) -> str:
    """:func:`_source` of every run among ``lines``, oldest first."""
    runs = dict.fromkeys(x.get("run", x.get("utc")) for x in lines)
    return "\n".join(
        _source(bench, [x for x in lines if x.get("run", x.get("utc")) == r]) for r in runs
    )


def _trace_rows(lines: list[Line], *, full: bool) -> list[list[str]]:
    rows = []
    for mode in dict.fromkeys(x.get("startup", "real") for x in lines):
        every = [x for x in lines if x.get("startup", "real") == mode and "policy" in x]
        oracles = {_run_of(x): x["core_seconds"] for x in every if x["policy"] == "oracle"}
        newest_oracle = [x for x in every if x["policy"] == "oracle"][-1:]
        of = [x for x in every if x["policy"] != "oracle"] + newest_oracle
        peak = next((x["core_seconds"] for x in of if x["policy"] == "static-peak"), None)
        delay = of[0].get("startup_delay_s") if of else None
        start = f"emulated, {_fmt(delay)} s" if mode == "emulated" else "real"
        for x in of:
            ora = oracles.get(
                _run_of(x), newest_oracle[0]["core_seconds"] if newest_oracle else None
            )
            if "error" in x:
                rows.append([x["trace"], start, x["policy"], f"failed: {x['error']}"]
                            + [""] * (8 if full else 3))  # fmt: skip
                continue
            cs = x.get("core_seconds")
            row = [x["trace"], start, x["policy"], _pct(x.get("slo_tuples")),
                   _fmt(cs / peak, 3) if peak and cs else "–",
                   _fmt(cs / ora, 3) if ora and cs else "–",
                   _fmt(x.get("peak_executors"))]  # fmt: skip
            if full:
                ups = f"{x['scale_ups']} / {x['scale_downs']}" if "scale_ups" in x else "–"
                row += [_pct(x.get("slo_batches")), f"{cs:,.0f}" if cs else "–",
                        _fmt(x.get("mean_cores")), ups, _fmt(x.get("p99_ms"))]  # fmt: skip
            rows.append(row)
    return rows


def _trace_head(line: Line) -> str:
    cfg = line.get("config", {})
    return (
        f"`{line['trace']}`, window `{line.get('window')}` replayed in {line.get('minutes')} "
        f"min (99th percentile at {line.get('peak_rate')} tuples/s, largest "
        f"{_fmt(line.get('max_rate'))}, mean {_fmt(line.get('mean_rate'))}) after a "
        f"{cfg.get('warmup_s')} s warm-up; {cfg.get('cost_ms')} ms per tuple *waited* "
        f"(cost_kind wall: {line.get('emulated_cores')} task slots emulate cores), "
        f"{cfg.get('executor_cores')}-core executors, latency target "
        f"{_fmt(cfg.get('latency_target_ms'))} ms; start-up measured for one executor: "
        f"{_fmt(line.get('measured_startup_s'))} s."
    )


HEAD_TRACE = ["trace", "start-up", "policy", "tuples within target", "core-s ÷ static-peak",
              "core-s ÷ oracle", "peak executors"]  # fmt: skip


def trace_headline() -> str:
    """The README's real-traffic table: per trace its newest run, every policy and mode."""
    runs = _trace_runs()
    if not runs:
        return _missing("trace", "python benchmarks/bench_trace.py --trace FILE")
    rows = [r for lines in runs for r in _trace_rows(lines, full=False)]
    sources = "\n".join(_sources("trace", lines) for lines in runs)
    return f"{_table(HEAD_TRACE, rows)}\n\n{sources}"


def trace() -> str:
    """Per trace its newest run in full, with the scenario it ran."""
    runs = _trace_runs()
    if not runs:
        return _missing("trace", "python benchmarks/bench_trace.py --trace FILE")
    head = [*HEAD_TRACE, "slo batches", "core-seconds", "mean cores", "ups / downs", "p99 ms"]
    parts = []
    for lines in runs:
        first = next(x for x in lines if "policy" in x)
        table = _table(head, _trace_rows(lines, full=True))
        parts.append(f"{_trace_head(first)}\n\n{table}\n\n{_sources('trace', lines)}")
    return "\n\n".join(parts)


def _run_with(bench: str, figure: str) -> list[Line]:
    """The lines of the newest run of ``bench`` that recorded a ``figure`` line."""
    lines = _lines(bench)
    runs = [x.get("run", x.get("utc")) for x in lines if x.get("figure") == figure]
    if not runs:
        return []
    return [x for x in lines if x.get("run", x.get("utc")) == runs[-1]]


def datapath() -> str:
    """The newest run comparing ``elastic`` with the other paths (``ratios``)."""
    lines = [x for x in _run_with("datapath", "ratios") if x.get("path") != "dag"]
    paths = [x for x in lines if "path" in x]
    if not paths:
        return _missing("datapath", "python benchmarks/bench_datapath.py")
    ratios = {x["alpha"]: x.get("elastic_over", {}) for x in lines if x.get("figure") == "ratios"}
    rows = [
        [
            x["path"],
            _fmt(x["alpha"]),
            _fmt(x["rows"]),
            _fmt(x["rows_per_s"]),
            _fmt(ratios.get(x["alpha"], {}).get(x["path"])) if x["path"] != "elastic" else "1",
        ]
        for x in paths
    ]
    head = f"Harness: {paths[0].get('harness')}"
    table = _table(["path", "Zipf α", "rows per batch", "rows/s", "elastic ÷ path"], rows)
    return f"{head}\n\n{table}\n\n{_source('datapath', lines)}"


def datapath_agg() -> str:
    """The newest run of the declarative paths beside their Spark SQL references."""
    lines = _run_with("datapath", "agg-ratios")
    figs = [x for x in lines if x.get("figure") == "agg-ratios"]
    if not figs:
        return _missing("datapath_agg", "python benchmarks/bench_datapath.py --paths "
                        "spark-sql,elastic-agg,spark-sql-tumbling,elastic-window")  # fmt: skip
    rate = {(x["path"], x["alpha"]): x for x in lines if "path" in x}
    rows = []
    for f in figs:
        for p, ref in f.get("reference", {}).items():
            a, b = rate[(p, f["alpha"])], rate[(ref, f["alpha"])]
            rows.append([p, ref, _fmt(f["alpha"]), _fmt(a["rows"]), _fmt(a["rows_per_s"]),
                         _fmt(b["rows_per_s"]), _fmt(f["over_spark"][p])])  # fmt: skip
    head = ["path", "Spark SQL reference", "Zipf α", "rows per batch", "rows/s",
            "reference rows/s", "path ÷ reference"]  # fmt: skip
    return f"{_table(head, rows)}\n\n{_source('datapath', lines)}"


def planner_scale() -> str:
    lines = latest_run("planner_scale")
    if not lines:
        return _missing("planner_scale", "python benchmarks/bench_planner_scale.py")
    rows = [
        [
            x.get("decision", "–"),
            _fmt(x["executors"]),
            _fmt(x["shards"]),
            _fmt(x["median_s"]),
            f"{_fmt(x.get('min_s'))} – {_fmt(x.get('max_s'))}",
            _fmt(x.get("peak_mb")),
        ]
        for x in lines
        if "executors" in x
    ]
    table = _table(["decision", "executors", "shards", "median s", "min – max s", "peak MB"],
                   rows)  # fmt: skip
    return f"{table}\n\n{_source('planner_scale', lines)}"


def nexmark() -> str:
    """Per query and engine the newest line (queries may be rerun alone: ``--queries``)."""
    newest = {
        (x["query"], x["engine"]): x for x in _lines("nexmark") if "query" in x and "engine" in x
    }
    if not newest:
        return _missing("nexmark", "python benchmarks/bench_nexmark.py")
    queries = sorted({q for q, _ in newest}, key=lambda q: int(q.lstrip("q")))
    engines = ("spark-sql", "streamscale", "streamscale-1batch")

    def cell(q: str, e: str) -> str:
        x = newest.get((q, e))
        if x is None:
            return ""
        mode = x.get("spark_mode") or x.get("mode") or ""
        ratio = "" if e == "spark-sql" else f" ({_fmt(x.get('ratio_vs_spark_sql'))}×)"
        return f"{_fmt(x['rows_per_s'])}{ratio}" + (f" {mode}" if e == "spark-sql" else "")

    rows = [[q, *(cell(q, e) for e in engines)] for q in queries]
    table = _table(["query", "spark-sql rows/s", "streamscale", "streamscale, one batch"], rows)
    lines = list(newest.values())
    loads = [x["load_avg"][0] for x in lines if isinstance(x.get("load_avg"), list)]
    runs = sorted({(x.get("commit"), x.get("command")) for x in lines})
    src = "; ".join(f"`{c}` at `{k}`" for k, c in runs)
    load = f", load {min(loads):.1f}–{max(loads):.1f}" if loads else ""
    return (
        f"{table}\n\n*Newest line per query and engine in `benchmarks/results/nexmark.jsonl` "
        f"({lines[0].get('cores')} cores{load}): {src}. Harness: {lines[-1].get('harness')}.*"
    )


def nexmark_surge() -> str:
    """Per surge query (Q5, Q8) its newest whole run: every policy's line of that run."""
    surge = [x for x in _lines("nexmark") if x.get("bench") == "nexmark-surge"]
    newest = {x["query"]: x.get("run") for x in surge if x.get("figure") == "ratios"}
    if not newest:
        return _missing("nexmark-surge", "python benchmarks/bench_nexmark.py --surge")
    rows, used = [], []
    for q in sorted(newest, key=lambda q: int(q.lstrip("q"))):
        run = [x for x in surge if x["query"] == q and x.get("run") == newest[q]]
        pol = [x for x in run if "policy" in x]
        peak = next((x["core_seconds"] for x in pol if x["policy"] == "static-peak"), None)
        used.append(run[-1])
        rows += [
            [q.upper(), x["policy"], _pct(x.get("slo_tuples")), _fmt(x.get("core_seconds")),
             _fmt(x["core_seconds"] / peak, 3) if peak else "–", _fmt(x.get("peak_executors")),
             _fmt(x.get("p99_ms"))]
            for x in pol
        ]  # fmt: skip
    head = _surge_head(used[0], "events", warmup=True)
    table = _table(["query", "policy", "slo tuples", "core-seconds", "÷ static-peak",
                    "peak executors", "p99 ms"], rows)  # fmt: skip
    srcs = "; ".join(
        f"{x['query'].upper()}: run {x.get('run')} at commit `{x.get('commit')}`, load "
        f"{x['load_avg'][0]:.1f}"
        if isinstance(x.get("load_avg"), list)
        else x["query"]
        for x in used
    )
    return (
        f"{head}\n\n{table}\n\n*From `benchmarks/results/nexmark.jsonl` on "
        f"{used[0].get('cores')} cores ({srcs}): `{used[-1].get('command')}`.*"
    )


#: The other Spark benchmarks: their lines' figures as they are, one row per line.
COLUMNS: dict[str, tuple[str, ...]] = {
    "skew": ("bench", "policy", "alpha", "emulated_cores", "throughput", "elastic_vs_static"),
    "pipeline": ("bench", "policy", "alpha", "omega", "throughput", "p99_ms", "efficiency"),
    "placement": ("bench", "policy", "placement_hit", "remote_shuffle_bytes", "batch_s"),
    "state": ("backend", "keys", "bytes_written_per_batch", "written_fraction", "batch_s",
              "recovery_s"),
    "memory": ("figure", "minutes", "batches", "rss_growth_pct", "python_growth_pct"),
    "stages": ("rows_per_batch", "operators", "engine", "median_s", "ratio_vs_one_operator",
               "streamscale_over_spark", "spark_mode"),
}  # fmt: skip


def generic(bench: str) -> Callable[[], str]:
    """A table of the newest run's lines of ``bench`` over :data:`COLUMNS`."""

    def table() -> str:
        lines = [x for x in latest_run(bench) if not x.get("sample")]
        if not lines:
            return _missing(bench, f"python benchmarks/bench_{bench}.py")
        cols = [c for c in COLUMNS[bench] if any(c in x for x in lines)]
        rows = [[_fmt(x.get(c)) for c in cols] for x in lines]
        return f"{_table(cols, rows)}\n\n{_source(bench, lines)}"

    return table


def _delayed(faults: list[Line]) -> int | None:
    """Tuples the faults delayed; ``None`` when a fault has no figure (a run that could not
    read the generator's start time)."""
    return sum(f["delayed"] for f in faults) if all("delayed" in f for f in faults) else None


def chaos() -> str:
    """The newest chaos run: what held, then the recovery per kind of fault."""
    lines = latest_run("chaos")
    if not lines:
        return _missing("chaos", "python benchmarks/bench_chaos.py")
    x = lines[-1]
    per = x.get("fault_list") or []
    head = f"`{x.get('trace')}` replayed in {_fmt(x.get('minutes'))} min at a peak of " \
        f"{_fmt(x.get('peak_rate'))} tuples/s, {_fmt(x.get('cost_ms'))} ms per tuple *waited* " \
        f"(cost_kind wall), `elastic` on at most {x.get('max_executors')} executors of " \
        f"{x.get('executor_cores')} core(s), {x.get('workers')} workers × " \
        f"{x.get('worker_cores')} cores; seed {x.get('seed')}."  # fmt: skip
    held = _table(
        ["faults", "tuples offered", "lost", "duplicated", "state exact", "outputs exact",
         "recovery median s", "recovery max s", "tuples delayed", "driver starts", "met"],
        [[_fmt(x.get("faults")), _fmt(x.get("offered")), _fmt(x.get("lost")),
          _fmt(x.get("duplicated")), _fmt(x.get("state_exact")), _fmt(x.get("outputs_exact")),
          _fmt(x.get("recovery_median_s")), _fmt(x.get("recovery_max_s")),
          _fmt(_delayed(per)), _fmt(x.get("driver_starts")), _fmt(x.get("met"))]],
    )  # fmt: skip
    rows = []
    for kind, n in (x.get("per_kind") or {}).items():
        rec = sorted(f["recovery_s"] for f in per if f["kind"] == kind and f.get("recovery_s"))
        med = (x.get("recovery_median_by_kind_s") or {}).get(kind)
        rows.append([kind, _fmt(n), _fmt(med),
                     _fmt(rec[-1] if rec else None),
                     _fmt(_delayed([f for f in per if f["kind"] == kind]))])  # fmt: skip
    kinds = _table(["fault", "count", "recovery median s", "recovery max s", "tuples delayed"],
                   rows)  # fmt: skip
    return f"{head}\n\n{held}\n\n{kinds}\n\n{_source('chaos', lines)}"


#: the soak's growth figures: (label, field of its growth line, in % per 10,000 batches)
SOAK_FIGURES = (
    ("driver Python RSS", "driver_python_rss_mb_pct_per_10k"),
    ("driver JVM RSS", "driver_jvm_rss_mb_pct_per_10k"),
    ("JVM heap (after a GC)", "jvm_heap_mb_pct_per_10k"),
    ("executor RSS", "executor_rss_mb_pct_per_10k"),
    ("open files", "open_fds_pct_per_10k"),
    ("threads", "threads_pct_per_10k"),
    ("Spark checkpoint bytes", "spark_checkpoint_bytes_pct_per_10k"),
    ("keyed state bytes", "state_bytes_pct_per_10k"),
    ("output bytes", "output_bytes_pct_per_10k"),
)


def soak() -> str:
    """The newest soak growth line of each state store: the run, then every figure's
    growth per 10,000 batches after warm-up."""
    newest = {x.get("state"): x for x in _lines("soak") if x.get("figure") == "growth"}
    if not newest:
        return _missing("soak", "python benchmarks/bench_soak.py --quick")
    runs = [newest[k] for k in sorted(newest, key=str)]
    head = _table(
        ["state", "master", "batches", "minutes", "batch median s", "tuples",
         "state equals pandas", "control errors"],
        [[_fmt(x.get("state")), _fmt(x.get("master")), _fmt(x.get("batches")),
          _fmt(x.get("minutes")), _fmt(x.get("batch_p50_s")), _fmt(x.get("tuples")),
          _fmt(x.get("state_equals_pandas")), _fmt(x.get("control_errors"))] for x in runs],
    )  # fmt: skip
    growth = _table(
        ["growth per 10,000 batches", *(f"{x.get('state')} (%)" for x in runs)],
        [[label, *(_fmt(x.get(field)) for x in runs)] for label, field in SOAK_FIGURES],
    )
    sources = "\n".join(_source("soak", [x]) for x in runs)
    return f"{head}\n\n{growth}\n\n{sources}"


TABLES: dict[str, Callable[[], str]] = {
    "chaos": chaos,
    "soak": soak,
    "trace": trace,
    "trace_headline": trace_headline,
    "autoscale": autoscale,
    "autoscale_headline": autoscale_headline,
    "datapath": datapath,
    "datapath_agg": datapath_agg,
    "planner_scale": planner_scale,
    "nexmark": nexmark,
    "nexmark_surge": nexmark_surge,
    **{name: generic(name) for name in COLUMNS},
}


def render(text: str) -> str:
    """``text`` with every ``results:NAME`` block regenerated (unknown names refused)."""

    def one(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in TABLES:
            raise SystemExit(f"tables: unknown results block {name!r}")
        return f"<!-- results:{name} -->\n{TABLES[name]()}\n<!-- /results:{name} -->"

    return re.sub(r"<!-- results:([\w-]+) -->.*?<!-- /results:\1 -->", one, text, flags=re.DOTALL)


def drift(paths: Sequence[Path] = DOCS) -> list[Path]:
    """The documents whose blocks differ from the committed results."""
    return [p for p in paths if p.exists() and render(p.read_text()) != p.read_text()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", action="store_true", help="Rewrite the blocks.")
    g.add_argument("--check", action="store_true", help="Exit 1 when a block drifted.")
    args = ap.parse_args(argv)
    if args.check:
        stale = drift()
        for p in stale:
            print(f"tables: {p.relative_to(ROOT)} differs from benchmarks/results", file=sys.stderr)
        return 1 if stale else 0
    for p in DOCS:
        if p.exists():
            p.write_text(render(p.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
