"""Markdown tables of the committed benchmark results, written into README.md and the
documentation pages (``docs/**/*.md``) between ``<!-- results:NAME -->`` and
``<!-- /results:NAME -->``.

Every table quotes one run — the lines of the newest ``run`` of one clean commit in
``benchmarks/results/<bench>.jsonl`` (:mod:`_results`), or the ``figure: "summary"``
lines (medians over repeats) of one clean commit — and names its command, commit, cores
and load, so no Spark figure in the docs is typed by hand. :func:`check_lines` refuses a
table that would mix runs or commits, or quote a modified tree (``+dirty``); a block
with no such run says which command records one. A block may hold several tables (per
trace, per query), each from one run with its own source line. ``--check`` exits 1 when
a document's block differs from what the files give (the drift test runs it); ``--write``
rewrites the blocks; both exit 2 naming the table when one is refused.

Run: ``.venv/bin/python benchmarks/tables.py --write`` after committing new results.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
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


class RefusedTable(ValueError):
    """A table whose lines are not one run of one clean commit (:func:`check_lines`)."""


def _run_of(x: Line) -> Any:
    """The run that recorded ``x``; ``None`` for a line older than the ``run`` field, which
    no table quotes (which lines ran together is not known)."""
    return x.get("run")


def _dirty(commit: Any) -> bool:
    """A commit no checkout reproduces: a modified tree (``+dirty``), or none known."""
    return not isinstance(commit, str) or commit in ("", "unknown") or commit.endswith("+dirty")


def _names(values: Sequence[Any]) -> str:
    return ", ".join(str(v) for v in values)


def check_lines(table: str, lines: Sequence[Line]) -> list[Line]:
    """``lines`` when one table may quote them together: the lines of one run of one
    clean commit, or ``figure: "summary"`` lines (medians over repeats) of runs of one
    clean commit. Anything else raises :class:`RefusedTable` naming ``table`` and the runs
    or commits it would mix: a table never merges runs, nor quotes a modified tree.
    Every table builder passes its lines through here."""
    lines = list(lines)
    if not lines:
        return lines
    runs = list(dict.fromkeys(_run_of(x) for x in lines))
    commits = list(dict.fromkeys(x.get("commit") for x in lines))
    if None in runs:
        raise RefusedTable(f"table {table!r}: lines without a run (commits {_names(commits)})")
    if len(commits) > 1:
        raise RefusedTable(
            f"table {table!r} would mix commits {_names(commits)} (runs {_names(runs)})"
        )
    if _dirty(commits[0]):
        raise RefusedTable(
            f"table {table!r} would quote commit {commits[0]!r} of a modified tree "
            f"(run {_names(runs)}): only a clean commit's run is quoted"
        )
    if len(runs) > 1 and not all(x.get("figure") == "summary" for x in lines):
        raise RefusedTable(
            f"table {table!r} would mix runs {_names(runs)} (commit {commits[0]}): one run "
            "per table, or the summary lines of one clean commit"
        )
    return lines


def _runs(bench: str) -> list[list[Line]]:
    """Each run's lines in ``results/<bench>.jsonl``, the newest (last recorded) first;
    lines without a ``run`` belong to none."""
    by: dict[Any, list[Line]] = {}
    for x in _lines(bench):
        if _run_of(x) is not None:
            by.setdefault(_run_of(x), []).append(x)
    last = {_run_of(x): i for i, x in enumerate(_lines(bench))}
    return [by[r] for r in sorted(by, key=last.__getitem__, reverse=True)]


def _clean(run: Sequence[Line]) -> bool:
    """A whole run of one clean commit (a run whose lines name several commits is not)."""
    commits = {x.get("commit") for x in run}
    return len(commits) == 1 and not _dirty(next(iter(commits)))


def latest_run(bench: str, where: Callable[[Line], bool] = lambda _: True) -> list[Line]:
    """The lines satisfying ``where`` of the newest run in ``results/<bench>.jsonl`` that
    has such lines and is all of one clean commit; ``[]`` when there is none."""
    for run in _runs(bench):
        if _clean(run) and (got := [x for x in run if where(x)]):
            return got
    return []


def _unclean_only(bench: str, where: Callable[[Line], bool] = lambda _: True) -> list[Line]:
    """The newest run's lines satisfying ``where`` when no clean run has any (else ``[]``)."""
    if latest_run(bench, where):
        return []
    return next(([x for x in run if where(x)] for run in _runs(bench)
                 if any(where(x) for x in run)), [])  # fmt: skip


def newest_per(
    bench: str,
    key: Callable[[Line], Any],
    where: Callable[[Line], bool] = lambda _: True,
    *,
    order: Callable[[Any], Any] = str,
) -> tuple[list[list[Line]], dict[Any, list[Line]]]:
    """Per value of ``key`` over the lines satisfying ``where``: the newest clean run with
    such a line. Returns those runs, one list per run (its lines of the keys it is the
    newest for, in the order of the keys sorted by ``order``), and per key that no clean run has, the
    newest run's lines of that key (its command records a clean one)."""
    chosen: dict[Any, list[Line]] = {}
    unclean: dict[Any, list[Line]] = {}
    for run in _runs(bench):
        for k in dict.fromkeys(key(x) for x in run if where(x)):
            if k not in chosen and _clean(run):
                chosen[k] = run
            elif k not in chosen and k not in unclean:
                unclean[k] = [x for x in run if where(x) and key(x) == k]
    tables: dict[Any, list[Line]] = {}
    for k in sorted(chosen, key=order):
        run = chosen[k]
        mine = {j for j, r in chosen.items() if r is run}
        tables.setdefault(_run_of(run[0]), [x for x in run if where(x) and key(x) in mine])
    return list(tables.values()), {k: v for k, v in unclean.items() if k not in chosen}


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


def _missing(bench: str, command: str, unclean: Sequence[Line] = ()) -> str:
    """What a block says in place of a table with no clean single run to quote: the
    command that records one (``unclean``: the newest run there is, which is not quoted)."""
    if not unclean:
        return f"*No committed run of `{bench}` yet: `{command}` records one.*"
    x = unclean[-1]
    return (
        f"*No committed run of `{bench}` from one clean commit yet (the newest, run "
        f"{_run_of(x)} at `{str(x.get('commit')).removesuffix('+dirty')}` with uncommitted "
        f"changes, is not quoted): `{command}` records one.*"
    )


def _command(lines: Sequence[Line], default: str) -> str:
    """The command of the newest of ``lines`` (``default`` when none names one)."""
    c = lines[-1].get("command") if lines else None
    return c if isinstance(c, str) else default


def autoscale() -> str:
    """The newest full-length surge run's table, then the newest quick run's with real
    and with emulated start-up."""
    kinds: tuple[tuple[str, Callable[[Line], bool], str], ...] = (
        ("Full length", lambda x: x.get("quick") is False, ""),
        ("Quick", lambda x: x.get("quick") is True and _real(x), " --quick"),
        ("Quick, start-up emulated", lambda x: x.get("quick") is True and not _real(x),
         " --quick --startup emulated"),
    )  # fmt: skip
    parts = []
    for name, where, args in kinds:
        if lines := latest_run("autoscale", where):
            parts.append(_autoscale(check_lines("autoscale", lines), name))
        elif unclean := _unclean_only("autoscale", where):
            cmd = f"python benchmarks/bench_autoscale.py{args}"
            parts.append(f"**{name}.** " + _missing("autoscale", cmd, unclean))
    return "\n\n".join(parts) or _missing("autoscale", "python benchmarks/bench_autoscale.py")


def autoscale_headline() -> str:
    """The README's short surge table: the full-length run's share of tuples within the
    latency target and its core-seconds against the static peak sizing, per policy."""
    lines = check_lines("autoscale_headline",
                        latest_run("autoscale", lambda x: x.get("quick") is not True))  # fmt: skip
    pol = _policy_runs(lines)
    if not pol:
        unclean = _unclean_only("autoscale", lambda x: x.get("quick") is not True)
        return _missing("autoscale", "python benchmarks/bench_autoscale.py", unclean)
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


def _policy_runs(lines: list[Line]) -> list[Line]:
    """The lines of one policy's run each: not a summary over repeats, not the order
    check's repeated first run (``bench_autoscale.py --repeats``)."""
    return [x for x in lines if "policy" in x and "figure" not in x and not x.get("order_check")]


def _autoscale(lines: list[Line], name: str) -> str:
    """One surge run's table: a row per policy and repeat, each against the static-peak
    of its own repeat and start-up mode; with repeats, their medians and ranges after."""
    pol = sorted(_policy_runs(lines), key=lambda x: x.get("repeat", 0))
    ratio = next((x for x in lines if x.get("figure") == "ratios"), {})
    peaks = {(x.get("repeat", 0), x.get("startup", "real")): x["core_seconds"]
             for x in pol if x["policy"] == "static-peak"}  # fmt: skip
    repeated = any(x.get("repeat", 0) > 0 for x in pol)

    def label(x: Line) -> str:
        return f"{_policy(x)}, run {x.get('repeat', 0) + 1}" if repeated else _policy(x)

    def peak(x: Line) -> Any:
        return peaks.get((x.get("repeat", 0), x.get("startup", "real")))

    rows = [
        [
            label(x),
            _pct(x.get("slo_tuples")),
            _pct(x.get("slo_batches")),
            _fmt(x.get("core_seconds")),
            _fmt(x["core_seconds"] / peak(x), 3) if peak(x) else "–",
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
    return f"{head}\n\n{table}{tail}{_autoscale_medians(lines)}\n\n{_source('autoscale', lines)}"


def _autoscale_medians(lines: list[Line]) -> str:
    """A repeated surge run's summary lines as one sentence per policy: the median and
    range of its share of tuples within target and, for ``elastic``, of its
    core-seconds ÷ static-peak's (empty for a run of one repeat)."""
    parts = []
    for x in lines:
        if x.get("figure") != "summary" or x.get("repeats", 0) < 2:
            continue
        text = f"{_policy(x)} {_spread(x.get('slo_tuples'), pct=True)} of tuples"
        if isinstance(x.get("core_seconds_vs_static_peak"), dict):
            text += f" at {_spread(x['core_seconds_vs_static_peak'])}× static-peak's core-seconds"
        parts.append(f"{text} ({x['repeats']} runs)")
    return (
        "\n\nMedians over the repeats, their range in brackets: " + "; ".join(parts) + "."
        if parts
        else ""
    )


def _old_trace(x: Line) -> bool:
    """A line of the first real-traffic format (one run per policy set, no deployment)."""
    return "trace" in x and "deployment" not in x


def _trace_runs() -> tuple[list[list[Line]], dict[Any, list[Line]]]:
    """Per trace file and start-up mode, the newest clean run that measured it (one table
    per run), and the (trace, mode) pairs with no clean run."""
    return newest_per("trace", lambda x: (x["trace"], x.get("startup", "real")), _old_trace)


def _trace_rows(lines: list[Line], *, full: bool) -> list[list[str]]:
    """The rows of one run's lines: per start-up mode, each policy against that mode's
    ``static-peak`` and oracle of the same run."""
    rows = []
    for mode in dict.fromkeys(x.get("startup", "real") for x in lines):
        of = [x for x in lines if x.get("startup", "real") == mode and "policy" in x]
        ora = next((x["core_seconds"] for x in of if x["policy"] == "oracle"), None)
        peak = next((x["core_seconds"] for x in of if x["policy"] == "static-peak"), None)
        delay = of[0].get("startup_delay_s") if of else None
        start = f"emulated, {_fmt(delay)} s" if mode == "emulated" else "real"
        for x in of:
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


def _trace_missing(unclean: dict[Any, list[Line]]) -> list[str]:
    """A line per (trace, start-up mode) with no clean run: the command that records one."""
    out = []
    for (name, mode), lines in sorted(unclean.items(), key=str):
        words = shlex.split(_command(lines, ""))
        path = words[words.index("--trace") + 1] if "--trace" in words[:-1] else name
        cmd = f"python benchmarks/bench_trace.py --trace {path} --quick --startup {mode}"
        out.append(f"`{name}`, start-up {mode}: " + _missing("trace", cmd, lines))
    return out


def trace_table(table: str, lines: list[Line], *, full: bool) -> str:
    """One run's real-traffic table (:func:`check_lines` first), with its source."""
    lines = check_lines(table, lines)
    if not full:
        return f"{_table(HEAD_TRACE, _trace_rows(lines, full=False))}\n\n{_source('trace', lines)}"
    head = [*HEAD_TRACE, "slo batches", "core-seconds", "mean cores", "ups / downs", "p99 ms"]
    first = next(x for x in lines if "policy" in x)
    table_md = _table(head, _trace_rows(lines, full=True))
    return f"{_trace_head(first)}\n\n{table_md}\n\n{_source('trace', lines)}"


def trace_headline() -> str:
    """The README's real-traffic tables: per trace and start-up mode its newest clean
    run, every policy of it, one table per run."""
    runs, unclean = _trace_runs()
    if not runs and not unclean:
        return _missing("trace", "python benchmarks/bench_trace.py --trace FILE")
    parts = [trace_table("trace_headline", lines, full=False) for lines in runs]
    return "\n\n".join(parts + _trace_missing(unclean))


def trace() -> str:
    """Per trace and start-up mode its newest clean run in full, with the scenario."""
    runs, unclean = _trace_runs()
    if not runs and not unclean:
        return _missing("trace", "python benchmarks/bench_trace.py --trace FILE")
    parts = [trace_table("trace", lines, full=True) for lines in runs]
    return "\n\n".join(parts + _trace_missing(unclean))


#: the command that records the first run of the deployments' format
TRACE_DEPLOYMENTS_CMD = (
    "python benchmarks/bench_trace.py --trace ../shared/traces/Twitter_volume_GOOG.csv "
    "--deployment minutes --quick --repeats 3"
)


def _secs(v: Any) -> str:
    """Seconds in words: whole minutes from two minutes on, else seconds."""
    if not isinstance(v, int | float):
        return "–"
    if v >= 120 and v % 60 == 0:
        return f"{v / 60:g} min"
    return f"{v:.3g} s" if v < 1000 else f"{v / 60:.3g} min"


def _deployment(x: Line, run: Sequence[Line]) -> str:
    """``minutes (trigger 2 min, target 10 min, start-up 60 s emulated)``: a deployment
    with its real trigger, latency target and start-up (from the summary line, else from
    a repeat's line of the same trace, deployment and start-up)."""
    same = [y for y in run if y.get("trace") == x.get("trace")
            and y.get("deployment") == x.get("deployment")
            and y.get("startup") == x.get("startup")]  # fmt: skip

    def field(name: str) -> Any:
        return next((y[name] for y in [x, *same] if y.get(name) is not None), None)

    return (
        f"{x.get('deployment')} (trigger {_secs(field('real_trigger_s'))}, target "
        f"{_secs(field('real_target_s'))}, start-up {_secs(field('real_startup_s'))} "
        f"{x.get('startup', 'real')})"
    )


def _spread(v: Any, pct: bool = False) -> str:
    """``{"median", "min", "max"}`` as ``median (min–max)``."""
    if not isinstance(v, dict) or v.get("median") is None:
        return "–"
    if pct:
        return (f"{100 * v['median']:.1f} % ({100 * v.get('min', v['median']):.1f}–"
                f"{100 * v.get('max', v['median']):.1f})")  # fmt: skip
    return f"{_fmt(v['median'])} ({_fmt(v.get('min'))}–{_fmt(v.get('max'))})"


HEAD_DEPLOYMENTS = ["trace", "deployment", "policy", "tuples within target",
                    "core-hours ÷ oracle", "core-hours ÷ static-peak", "repeats"]  # fmt: skip


def trace_deployments_table(lines: list[Line]) -> str:
    """One run's summaries of the deployments' format (:func:`check_lines` first): per
    trace, deployment, start-up and policy the median and range over the repeats."""
    lines = check_lines("trace_deployments", lines)
    rows = [
        [f"`{x.get('trace')}`", _deployment(x, lines), str(x.get("policy")),
         _spread(x.get("slo_tuples"), pct=True), _spread(x.get("core_hours_vs_oracle")),
         _spread(x.get("core_hours_vs_static_peak")), _fmt(x.get("repeats"))]
        for x in lines
        if x.get("figure") == "summary" and "policy" in x
    ]  # fmt: skip
    scale = next((x.get("time_scale") for x in lines if x.get("time_scale")), None)
    head = (
        f"The trace replayed at {_fmt(scale)} trace seconds a second; medians over the "
        "repeats, their range in brackets."
        if scale
        else "Medians over the repeats, their range in brackets."
    )
    return f"{head}\n\n{_table(HEAD_DEPLOYMENTS, rows)}\n\n{_source('trace', lines)}"


def _deployment_key(x: Line) -> tuple[Any, ...]:
    return (x.get("trace"), x.get("deployment"), x.get("startup", "real"))


def trace_minutes() -> str:
    """:func:`trace_deployments` of the ``minutes`` deployment only (the README's)."""
    return trace_deployments(only="minutes")


def trace_deployments(*, only: str | None = None) -> str:
    """Per trace, deployment and start-up mode the newest clean run of the deployments'
    format with its summary lines; one table per run (its repeats' lines with it);
    ``only``: that deployment's runs."""

    def summary(x: Line) -> bool:
        return ("trace" in x and "deployment" in x and x.get("figure") == "summary"
                and only in (None, x.get("deployment")))  # fmt: skip

    runs, unclean = newest_per("trace", _deployment_key, summary)
    whole = {_run_of(r[0]): r for r in _runs("trace")}
    parts = []
    for run in runs:
        keys = {_deployment_key(x) for x in run}
        lines = whole[_run_of(run[0])]
        parts.append(trace_deployments_table(
            [x for x in lines if "deployment" in x and _deployment_key(x) in keys]
        ))  # fmt: skip
    for (name, deployment, mode), lines in sorted(unclean.items(), key=str):
        cmd = _command(lines, TRACE_DEPLOYMENTS_CMD)
        parts.append(f"`{name}`, {deployment}, start-up {mode}: "
                     + _missing("trace", cmd, lines))  # fmt: skip
    return "\n\n".join(parts) or _missing("trace_deployments", TRACE_DEPLOYMENTS_CMD)


def _run_with(bench: str, figure: str) -> list[Line]:
    """The lines of the newest clean run of ``bench`` that recorded a ``figure`` line."""
    return next((run for run in _runs(bench)
                 if _clean(run) and any(x.get("figure") == figure for x in run)), [])  # fmt: skip


def datapath() -> str:
    """The newest run comparing ``elastic`` with the other paths (``ratios``)."""
    lines = check_lines(
        "datapath", [x for x in _run_with("datapath", "ratios") if x.get("path") != "dag"]
    )
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
    lines = check_lines("datapath_agg", _run_with("datapath", "agg-ratios"))
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
    lines = check_lines("planner_scale", latest_run("planner_scale"))
    if not lines:
        return _missing("planner_scale", "python benchmarks/bench_planner_scale.py",
                        _unclean_only("planner_scale"))  # fmt: skip
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
    """Per query its newest clean run (queries may be rerun alone: ``--queries``): one
    table per run, with the queries it is the newest run of."""
    runs, unclean = newest_per(
        "nexmark", lambda x: x["query"], lambda x: "query" in x and "engine" in x
        and x.get("bench", "nexmark") == "nexmark" and not x.get("order_check")
        and x.get("figure") != "order_check", order=_query_order,
    )  # fmt: skip
    if not runs and not unclean:
        return _missing("nexmark", "python benchmarks/bench_nexmark.py")
    harness = [next((y.get("harness") for y in reversed(x) if "harness" in y), None) for x in runs]
    parts = [nexmark_table(lines, harness=i == 0 or harness[i] != harness[i - 1])
             for i, lines in enumerate(runs)]  # fmt: skip
    if unclean:
        qs = ",".join(sorted(unclean, key=_query_order))
        parts.append(_missing("nexmark", f"python benchmarks/bench_nexmark.py --queries {qs}",
                              next(iter(unclean.values()))))  # fmt: skip
    return "\n\n".join(parts)


def _query_order(q: Any) -> int:
    return int(str(q).lstrip("q"))


def nexmark_table(lines: list[Line], *, harness: bool = True) -> str:
    """One run's Nexmark rows per query and engine (:func:`check_lines` first), under its
    harness (``harness=False``: the same as the table's above, not repeated); a run of
    several repeats shows each figure's median and range (its summary lines)."""
    lines = check_lines("nexmark", lines)
    newest = {(x["query"], x["engine"]): x for x in lines if _generic_row(x)}
    summary = {(x["query"], x["engine"]): x for x in lines
               if x.get("figure") == "summary" and x.get("repeats", 1) > 1}  # fmt: skip
    queries = sorted({q for q, _ in newest}, key=lambda q: int(q.lstrip("q")))
    engines = ("spark-sql", "streamscale", "streamscale-1batch")

    def figure(q: str, e: str, name: str) -> str:
        x = summary.get((q, e))
        return _spread(x.get(name)) if x is not None else _fmt(newest[q, e].get(name))

    def cell(q: str, e: str) -> str:
        x = newest.get((q, e))
        if x is None:
            return ""
        mode = x.get("spark_mode") or x.get("mode") or ""
        ratio = "" if e == "spark-sql" else f" ({figure(q, e, 'ratio_vs_spark_sql')}×)"
        return f"{figure(q, e, 'rows_per_s')}{ratio}" + (f" {mode}" if e == "spark-sql" else "")

    rows = [[q, *(cell(q, e) for e in engines)] for q in queries]
    table = _table(["query", "spark-sql rows/s", "streamscale", "streamscale, one batch"], rows)
    rows_of = [x for x in lines if _generic_row(x)]
    head = f"Harness: {rows_of[-1].get('harness')}\n\n" if harness and rows_of else ""
    return f"{head}{table}\n\n{_source('nexmark', lines)}"


def nexmark_surge() -> str:
    """Per surge query (Q5, Q8) its newest clean whole run: every policy's line of that
    run, one table per run."""
    runs, unclean = newest_per(
        "nexmark", lambda x: x["query"], lambda x: x.get("bench") == "nexmark-surge"
    )
    runs = [r for r in runs if any(x.get("figure") == "ratios" for x in r)]
    if not runs:
        return _missing("nexmark-surge", "python benchmarks/bench_nexmark.py --surge",
                        next(iter(unclean.values()), []))  # fmt: skip
    return "\n\n".join(nexmark_surge_table(r) for r in runs)


def nexmark_surge_table(run: list[Line]) -> str:
    """One run's surge rows per query and policy (:func:`check_lines` first)."""
    run = check_lines("nexmark_surge", run)
    rows = []
    for q in sorted({x["query"] for x in run}, key=lambda q: int(q.lstrip("q"))):
        pol = [x for x in run if x["query"] == q and "policy" in x]
        peak = next((x["core_seconds"] for x in pol if x["policy"] == "static-peak"), None)
        rows += [
            [q.upper(), x["policy"], _pct(x.get("slo_tuples")), _fmt(x.get("core_seconds")),
             _fmt(x["core_seconds"] / peak, 3) if peak else "–", _fmt(x.get("peak_executors")),
             _fmt(x.get("p99_ms"))]
            for x in pol
        ]  # fmt: skip
    head = _surge_head(run[0], "events", warmup=True)
    table = _table(["query", "policy", "slo tuples", "core-seconds", "÷ static-peak",
                    "peak executors", "p99 ms"], rows)  # fmt: skip
    return f"{head}\n\n{table}\n\n{_source('nexmark', run)}"


#: The other Spark benchmarks: their lines' figures as they are, one row per line.
COLUMNS: dict[str, tuple[str, ...]] = {
    "skew": ("bench", "policy", "alpha", "emulated_cores", "throughput", "elastic_vs_static"),
    "pipeline": ("bench", "policy", "alpha", "omega", "throughput", "p99_ms", "efficiency"),
    "placement": ("bench", "policy", "placement_hit", "remote_shuffle_bytes", "batch_s"),
    "state": ("backend", "keys", "bytes_written_per_batch", "written_fraction", "batch_s",
              "recovery_s"),
    "memory": ("figure", "minutes", "batches", "rss_growth_pct", "python_growth_pct"),
    "stages": ("rows_per_batch", "operators", "engine", "median_s", "batches",
               "ratio_vs_one_operator", "streamscale_over_spark", "spark_mode"),
}  # fmt: skip


def generic(bench: str) -> Callable[[], str]:
    """A table of the newest run's lines of ``bench`` over :data:`COLUMNS`."""

    def table() -> str:
        lines = check_lines(bench, [x for x in latest_run(bench) if _generic_row(x)])
        if not lines:
            return _missing(bench, f"python benchmarks/bench_{bench}.py", _unclean_only(bench))
        return _lines_table(bench, lines)

    return table


def _generic_row(x: Line) -> bool:
    """A line that is a row of its benchmark's table: not a sample, not a summary over
    repeats nor the order check's line or repeated run (their figures are the runs')."""
    if x.get("sample") or x.get("order_check"):
        return False
    return x.get("figure") not in ("summary", "order_check")


def _lines_table(bench: str, lines: list[Line]) -> str:
    cols = [c for c in COLUMNS[bench] if any(c in x for x in lines)]
    rows = [[_fmt(x.get(c)) for c in cols] for x in lines]
    return f"{_table(cols, rows)}\n\n{_source(bench, lines)}"


def stages() -> str:
    """The newest clean run of ``bench_stages.py``: its ``summary`` lines (the median and
    range over the repeats of each figure) when it has them, else its lines as they are."""
    lines = check_lines("stages", latest_run("stages"))
    if not lines:
        return _missing("stages", "python benchmarks/bench_stages.py", _unclean_only("stages"))
    return stages_table(lines)


def stages_table(lines: list[Line]) -> str:
    """One run's chain table (:func:`check_lines` first)."""
    lines = check_lines("stages", lines)
    summary = [x for x in lines if x.get("figure") == "summary"]
    if not summary:
        return _lines_table("stages", lines)
    rows = [
        [_fmt(x.get("rows_per_batch")), _fmt(x.get("operators")), str(x.get("engine")),
         _spread(x.get("median_s")), _spread(x.get("ratio_vs_one_operator")),
         _spread(x.get("streamscale_over_spark")), _fmt(x.get("repeats")),
         _fmt(x.get("batches")), _fmt(x.get("spark_mode"))]
        for x in summary
    ]  # fmt: skip
    head = ["rows per batch", "operators", "engine", "median s", "÷ one operator",
            "streamscale_over_spark", "repeats", "scored batches", "spark mode"]  # fmt: skip
    again = [f"{_fmt(x['rows_per_batch'])} rows: {x['engine']}, {x['operators']} operator(s), "
             f"{_spread(x['again_over_first'])}" for x in summary if x.get("again_over_first")]  # fmt: skip
    text = (
        "Medians over the repeats, their range in brackets; each repeat one interleaved "
        "pass over the configurations, forward and backward in turn."
    )
    if again:
        text += " The pass's first configuration measured again at its end, over its first "
        text += "measurement (the drift within a pass): " + "; ".join(again) + "."
    note = next((x["note"] for x in lines if x.get("note")), None)
    if note:
        text += f" This run: {note}."
    return f"{text}\n\n{_table(head, rows)}\n\n{_source('stages', lines)}"


def _delayed(faults: list[Line]) -> int | None:
    """Tuples the faults delayed; ``None`` when a fault has no figure (a run that could not
    read the generator's start time)."""
    return sum(f["delayed"] for f in faults) if all("delayed" in f for f in faults) else None


def chaos() -> str:
    """The newest chaos run: what held, then the recovery per kind of fault."""
    lines = check_lines("chaos", latest_run("chaos"))
    if not lines:
        return _missing("chaos", "python benchmarks/bench_chaos.py", _unclean_only("chaos"))
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
    if "recovery_by_kind" in x:
        return f"{head}\n\n{held}\n\n{_chaos_kinds(x)}\n\n{_source('chaos', lines)}"
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


def _chaos_kinds(x: Line) -> str:
    """Recovery per kind of fault over the faults that hit work in flight (median and
    max), the faults that hit none counted apart, and the backlog's worst return."""
    rows = [
        [kind, _fmt(k.get("in_flight")), _fmt(k.get("not_in_flight")), _fmt(k.get("median_s")),
         _fmt(k.get("max_s"))]
        for kind, k in (x.get("recovery_by_kind") or {}).items()
    ]  # fmt: skip
    table = _table(["fault", "hit work in flight", "hit none", "recovery median s",
                    "recovery max s"], rows)  # fmt: skip
    return f"{table}\n\nBacklog back to its level before the fault within " \
        f"{_fmt(x.get('backlog_recovery_max_s'))} s after every fault that hit work in flight."  # fmt: skip


#: the soak's figures by their field (a growth line's ``growth`` keys; the older format's
#: fields add ``_pct_per_10k``)
SOAK_LABELS = {
    "driver_python_rss_mb": "driver Python RSS",
    "driver_jvm_rss_mb": "driver JVM RSS",
    "jvm_heap_mb": "driver JVM heap (after a GC)",
    "executor_rss_mb": "executor RSS (mean of those alive)",
    "executor_heap_mb": "executor live heap (mean)",
    "first_executor_rss_mb": "first executor's RSS",
    "first_executor_heap_mb": "first executor's live heap",
    "open_fds": "open files",
    "threads": "threads",
    "spark_checkpoint_bytes": "Spark checkpoint bytes",
    "checkpoint_bytes": "checkpoint bytes",
    "state_bytes": "keyed state bytes",
    "state_bytes_per_key": "state bytes per key",
    "output_bytes": "output bytes",
}
#: the older format's growth figures: (label, field, in % per 10,000 batches)
SOAK_FIGURES = tuple(
    (SOAK_LABELS[k], f"{k}_pct_per_10k")
    for k in ("driver_python_rss_mb", "driver_jvm_rss_mb", "jvm_heap_mb", "executor_rss_mb",
              "open_fds", "threads", "spark_checkpoint_bytes", "state_bytes", "output_bytes")
)  # fmt: skip


def soak() -> str:
    """Per state store the newest clean run's growth line: the run, then every figure's
    growth per 10,000 batches after warm-up; one pair of tables per run."""
    runs, unclean = newest_per("soak", lambda x: str(x.get("state")),
                               lambda x: x.get("figure") == "growth")  # fmt: skip
    if not runs and not unclean:
        return _missing("soak", "python benchmarks/bench_soak.py --quick")
    parts = [soak_table(run) for run in runs]
    for state, lines in sorted(unclean.items()):
        cmd = _command(lines, f"python benchmarks/bench_soak.py --quick --state {state}")
        parts.append(f"State in {state}: " + _missing("soak", cmd, lines))
    return "\n\n".join(parts)


def soak_table(lines: list[Line]) -> str:
    """One run's soak figures (:func:`check_lines` first)."""
    lines = check_lines("soak", lines)
    head = _table(
        ["state", "master", "batches", "minutes", "batch median s", "tuples",
         "state equals pandas", "control errors"],
        [[_fmt(x.get("state")), _fmt(x.get("master")), _fmt(x.get("batches")),
          _fmt(x.get("minutes")), _fmt(x.get("batch_p50_s")), _fmt(x.get("tuples")),
          _fmt(x.get("state_equals_pandas")), _fmt(x.get("control_errors"))] for x in lines],
    )  # fmt: skip
    if any("growth" in x for x in lines):
        return f"{head}\n\n{_soak_fits(lines)}\n\n{_source('soak', lines)}"
    growth = _table(
        ["growth per 10,000 batches", *(f"{x.get('state')} (%)" for x in lines)],
        [[label, *(_fmt(x.get(field)) for x in lines)] for label, field in SOAK_FIGURES],
    )
    return f"{head}\n\n{growth}\n\n{_source('soak', lines)}"


def _soak_fits(lines: list[Line]) -> str:
    """Each figure's growth per 10,000 batches with its 95 % interval (the soak under
    rescaling), and the plan and executor changes the run made."""
    figures = sorted({f for x in lines for f in (x.get("growth") or {})})

    def cell(x: Line, f: str) -> str:
        g = (x.get("growth") or {}).get(f)
        if not g:
            return "–"
        return f"{_fmt(g.get('per_10k'))} ({_fmt(g.get('ci95_low'))} to {_fmt(g.get('ci95_high'))})"

    def missed(x: Line) -> str:
        met = x.get("met") or {}
        return ", ".join(k for k, v in met.items() if k != "all" and not v) or "none"

    changes = _table(["state", "plan changes", "executor changes", "metrics rotations",
                      "targets missed"],
                     [[_fmt(x.get("state")), _fmt(x.get("plan_changes")),
                       _fmt(x.get("executor_changes")), _fmt(x.get("metrics_rotations")),
                       missed(x)] for x in lines])  # fmt: skip
    growth = _table(
        ["growth per 10,000 batches, % (95 % interval)", *(str(x.get("state")) for x in lines)],
        [[SOAK_LABELS.get(f, f), *(cell(x, f) for x in lines)] for f in figures],
    )
    return f"{changes}\n\n{growth}"


TABLES: dict[str, Callable[[], str]] = {
    "chaos": chaos,
    "soak": soak,
    "trace": trace,
    "trace_headline": trace_headline,
    "trace_deployments": trace_deployments,
    "trace_minutes": trace_minutes,
    "autoscale": autoscale,
    "autoscale_headline": autoscale_headline,
    "datapath": datapath,
    "datapath_agg": datapath_agg,
    "planner_scale": planner_scale,
    "nexmark": nexmark,
    "nexmark_surge": nexmark_surge,
    **{name: generic(name) for name in COLUMNS},
    "stages": stages,
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
    try:
        return _main(args)
    except RefusedTable as exc:
        print(f"tables: refused: {exc}", file=sys.stderr)
        return 2


def _main(args: argparse.Namespace) -> int:
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
