"""README and the docs pages quote the committed benchmark results, never typed figures."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).parents[2] / "benchmarks"


def _tables() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tables", BENCH / "tables.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["tables"] = mod
    spec.loader.exec_module(mod)
    return mod


tables = _tables()


def test_docs_quote_the_committed_results() -> None:
    assert tables.drift() == []


def _write(path: Path, lines: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_a_table_quotes_the_newest_run_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tables, "RESULTS", tmp_path)
    stamp = {"commit": "abc", "cores": 2, "load_avg": [0.5], "command": "python b.py"}
    old = {"bench": "planner_scale", "decision": "re-plan", "executors": 1000,
           "shards": 100000, "median_s": 13.9, "min_s": 11.0, "max_s": 15.0,
           "peak_mb": 17.9, "run": "2026-01-01T00:00:00+00:00", **stamp}  # fmt: skip
    new = {**old, "median_s": 0.8, "min_s": 0.7, "max_s": 0.9, "run": "2026-02-01T00:00:00+00:00"}
    _write(tmp_path / "planner_scale.jsonl", [old, new])
    out = tables.planner_scale()
    assert "| re-plan | 1,000 | 100,000 | 0.8 | 0.7 – 0.9 | 17.9 |" in out
    assert "13.9" not in out
    assert "run 2026-02-01T00:00:00+00:00 at commit `abc` on 2 cores, load 0.5" in out


def test_blocks_are_regenerated_and_unknown_ones_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tables, "RESULTS", tmp_path)  # no results: the block says so
    doc = "a\n<!-- results:datapath -->\nstale 58x\n<!-- /results:datapath -->\nb\n"
    out = tables.render(doc)
    assert "stale" not in out and "No committed run of `datapath` yet" in out
    assert out.startswith("a\n") and out.endswith("\nb\n")
    with pytest.raises(SystemExit, match="unknown results block 'nope'"):
        tables.render("<!-- results:nope -->x<!-- /results:nope -->")


def test_ratios_come_from_the_same_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tables, "RESULTS", tmp_path)
    run = {"run": "r1", "commit": "c", "cores": 2, "load_avg": [1.0], "command": "x"}
    lines = [
        {"path": "elastic", "alpha": 1.0, "rows": 1000, "rows_per_s": 600, "harness": "h", **run},
        {"path": "spark-tws", "alpha": 1.0, "rows": 1000, "rows_per_s": 200, "harness": "h", **run},
        {"figure": "ratios", "alpha": 1.0, "elastic_over": {"spark-tws": 3.0}, **run},
    ]
    _write(tmp_path / "datapath.jsonl", lines)
    out = tables.datapath()
    assert "| spark-tws | 1 | 1,000 | 200 | 3 |" in out
    assert "| elastic | 1 | 1,000 | 600 | 1 |" in out


def test_declarative_paths_are_tabled_beside_their_references_from_their_own_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tables, "RESULTS", tmp_path)
    stamp = {"commit": "abc", "cores": 2, "load_avg": [0.5], "command": "python b.py"}
    main = {"run": "r1", **stamp}
    agg = {"run": "r2", **stamp}
    lines = [
        {"path": "elastic", "alpha": 1.0, "rows": 10, "rows_per_s": 100, **main},
        {"figure": "ratios", "alpha": 1.0, "elastic_over": {}, **main},
        {"path": "spark-sql", "alpha": 1.0, "rows": 10, "rows_per_s": 400, **agg},
        {"path": "elastic-agg", "alpha": 1.0, "rows": 10, "rows_per_s": 300, **agg},
        {"figure": "agg-ratios", "alpha": 1.0, "over_spark": {"elastic-agg": 0.75},
         "reference": {"elastic-agg": "spark-sql"}, **agg},
    ]  # fmt: skip
    _write(tmp_path / "datapath.jsonl", lines)
    assert "| elastic-agg | spark-sql | 1 | 10 | 300 | 400 | 0.75 |" in tables.datapath_agg()
    main_table = tables.datapath()  # the newest run with elastic's ratios, not the agg run
    assert "| elastic |" in main_table and "elastic-agg" not in main_table


def test_the_soak_block_has_the_newest_clean_run_of_each_state_store_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tables, "RESULTS", tmp_path)
    stamp = {"bench": "soak", "commit": "abc", "cores": 2, "load_avg": [1.0],
             "command": "python b.py", "master": "local[2]"}  # fmt: skip
    sample = {**stamp, "batch": 100, "open_fds": 300, "run": "r1"}
    old = {**stamp, "figure": "growth", "state": "local", "batches": 1000, "run": "r0",
           "open_fds_pct_per_10k": 9.0}  # fmt: skip
    local = {**old, "batches": 3000, "run": "r1", "open_fds_pct_per_10k": -1.8,
             "state_equals_pandas": True}  # fmt: skip
    s3 = {**old, "state": "s3", "batches": 2500, "run": "r2", "open_fds_pct_per_10k": 0.5}
    dirty = {**s3, "state": "gcs", "run": "r3", "commit": "abc+dirty",
             "command": "python benchmarks/bench_soak.py --quick --state gcs"}  # fmt: skip
    _write(tmp_path / "soak.jsonl", [old, sample, local, s3, dirty])
    out = tables.soak()
    assert "| growth per 10,000 batches | local (%) |" in out  # one table per run
    assert "| growth per 10,000 batches | s3 (%) |" in out
    assert "| open files | -1.8 |" in out and "| open files | 0.5 |" in out
    assert "| 9 |" not in out
    assert "| local | local[2] | 3,000 |" in out and "| s3 | local[2] | 2,500 |" in out
    assert "run r1 at commit" in out and "run r2 at commit" in out
    assert "run r3 at commit" not in out  # the modified tree's run is not quoted; its command is
    assert "`python benchmarks/bench_soak.py --quick --state gcs` records one" in out


STAMP = {"cores": 2, "load_avg": [0.5], "command": "python b.py"}


def test_lines_of_two_runs_are_refused_naming_the_table_and_the_runs() -> None:
    a = {"run": "r1", "commit": "abc", "median_s": 1.0, **STAMP}
    b = {**a, "run": "r2", "median_s": 2.0}
    assert tables.check_lines("stages", [a, {**a, "median_s": 3.0}]) == [a, {**a, "median_s": 3.0}]
    with pytest.raises(tables.RefusedTable, match=r"table 'stages' would mix runs r1, r2"):
        tables.check_lines("stages", [a, b])
    with pytest.raises(tables.RefusedTable, match=r"would mix runs r1, r2"):
        tables.stages_table([a, b])
    other = {**b, "commit": "def"}
    with pytest.raises(tables.RefusedTable, match=r"'stages' would mix commits abc, def"):
        tables.check_lines("stages", [a, other])
    with pytest.raises(tables.RefusedTable, match=r"lines without a run"):
        tables.check_lines("stages", [a, {k: v for k, v in a.items() if k != "run"}])
    # the summaries (medians over repeats) of several runs of one clean commit may share a table
    sa, sb = {**a, "figure": "summary"}, {**b, "figure": "summary"}
    assert tables.check_lines("stages", [sa, sb]) == [sa, sb]
    with pytest.raises(tables.RefusedTable, match=r"would mix commits"):
        tables.check_lines("stages", [sa, {**sb, "commit": "def"}])
    with pytest.raises(tables.RefusedTable, match=r"modified tree"):
        tables.check_lines("stages", [{**sa, "commit": "abc+dirty"}, {**sb, "commit": "abc+dirty"}])


def _trace_run(run: str, commit: str, trace: str = "t.csv") -> list[dict[str, object]]:
    stamp = {"bench": "trace", "trace": trace, "startup": "real", "run": run, "commit": commit,
             "window": ",24", "minutes": 4.0, "peak_rate": 300.0, **STAMP}  # fmt: skip
    return [
        {**stamp, "policy": "elastic", "slo_tuples": 0.9, "core_seconds": 600.0},
        {**stamp, "policy": "static-peak", "slo_tuples": 1.0, "core_seconds": 1000.0},
        {**stamp, "policy": "oracle", "core_seconds": 400.0},
        {**stamp, "figure": "ratios"},
    ]


def test_a_dirty_headline_is_refused_and_never_quoted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dirty = _trace_run("r2", "abc+dirty")
    with pytest.raises(
        tables.RefusedTable, match=r"'trace_headline' would quote commit 'abc\+dirty'"
    ):
        tables.trace_table("trace_headline", dirty, full=False)
    with pytest.raises(tables.RefusedTable, match=r"'trace_headline' would mix runs r1, r2"):
        tables.trace_table("trace_headline", _trace_run("r1", "abc") + _trace_run("r2", "abc"),
                           full=False)  # fmt: skip
    monkeypatch.setattr(tables, "RESULTS", tmp_path)
    _write(tmp_path / "trace.jsonl", _trace_run("r1", "abc") + dirty)
    out = tables.trace_headline()  # the newest clean run, not the newer modified tree's
    assert "| t.csv | real | elastic | 90.0 % | 0.6 | 1.5 | – |" in out
    assert "run r1 at commit `abc`" in out and "r2 at" not in out
    _write(tmp_path / "trace.jsonl", dirty)
    out = tables.trace_headline()
    assert "90.0 %" not in out
    assert "No committed run of `trace` from one clean commit yet" in out
    assert "`python benchmarks/bench_trace.py --trace t.csv --quick --startup real` records" in out


def test_a_one_run_table_is_rendered_per_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tables, "RESULTS", tmp_path)
    _write(tmp_path / "trace.jsonl", _trace_run("r1", "abc") + _trace_run("r2", "def", "u.csv"))
    out = tables.trace_headline()  # two traces, two runs: two tables, each with its source
    assert out.count("| trace | start-up | policy |") == 2
    assert "| t.csv | real | static-peak | 100.0 % | 1 | 2.5 | – |" in out
    assert "| u.csv | real | oracle | – | 0.4 | 1 | – |" in out
    assert "run r1 at commit `abc`" in out and "run r2 at commit `def`" in out


def _deployment_run(run: str, commit: str) -> list[dict[str, object]]:
    stamp = {"bench": "trace", "trace": "Twitter_volume_GOOG.csv", "deployment": "minutes",
             "startup": "emulated", "run": run, "commit": commit, **STAMP}  # fmt: skip
    real = {"time_scale": 75.0, "real_trigger_s": 120.0, "real_target_s": 600.0,
            "real_startup_s": 60.0}  # fmt: skip
    lines: list[dict[str, object]] = []
    for r in range(3):
        lines += [
            {**stamp, **real, "policy": "elastic", "repeat": r, "slo_tuples": 0.99,
             "core_hours": 1.0},
            {**stamp, "policy": "oracle", "repeat": r, "core_hours": 0.5},
        ]  # fmt: skip
    return [
        *lines,
        {**stamp, "figure": "summary", "policy": "elastic", "repeats": 3,
         "slo_tuples": {"median": 0.996, "min": 0.991, "max": 1.0},
         "core_hours": {"median": 1.0, "min": 0.9, "max": 1.1},
         "core_hours_vs_oracle": {"median": 1.8, "min": 1.6, "max": 2.05},
         "core_hours_vs_static_peak": {"median": 0.62, "min": 0.6, "max": 0.7}},
        {**stamp, "figure": "summary", "policy": "static-peak", "repeats": 3,
         "slo_tuples": {"median": 1.0, "min": 1.0, "max": 1.0},
         "core_hours_vs_oracle": {"median": 2.5, "min": 2.5, "max": 2.5},
         "core_hours_vs_static_peak": {"median": 1.0, "min": 1.0, "max": 1.0}},
    ]  # fmt: skip


def test_the_deployments_table_quotes_one_runs_summaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tables, "RESULTS", tmp_path)
    out = tables.trace_deployments()  # nothing yet: the command that records it
    assert "--deployment minutes --quick --repeats 3` records one" in out
    old_format = _trace_run("r0", "abc")  # the first format's lines are not this table's
    _write(tmp_path / "trace.jsonl", old_format + _deployment_run("r1", "abc")
           + _deployment_run("r2", "abc+dirty"))  # fmt: skip
    out = tables.trace_deployments()
    assert (
        "| `Twitter_volume_GOOG.csv` | minutes (trigger 2 min, target 10 min, start-up 60 s "
        "emulated) | elastic | 99.6 % (99.1–100.0) | 1.8 (1.6–2.05) | 0.62 (0.6–0.7) | 3 |"
    ) in out
    assert "| static-peak | 100.0 % (100.0–100.0) | 2.5 (2.5–2.5) | 1 (1–1) | 3 |" in out
    assert "75 trace seconds a second" in out
    assert "run r1 at commit `abc`" in out and "r2" not in out and "r0" not in out
    with pytest.raises(tables.RefusedTable, match=r"'trace_deployments' would quote"):
        tables.trace_deployments_table(_deployment_run("r2", "abc+dirty"))


def test_the_readme_s_table_holds_the_minutes_deployment_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tables, "RESULTS", tmp_path)
    seconds = [{**x, "deployment": "seconds", "run": "r3"} for x in _deployment_run("r3", "abc")]
    _write(tmp_path / "trace.jsonl", _deployment_run("r1", "abc") + seconds)
    both, minutes = tables.trace_deployments(), tables.trace_minutes()
    assert "run r1 at" in both and "run r3 at" in both
    assert "run r1 at" in minutes and "run r3 at" not in minutes and "| seconds" not in minutes


def test_the_stages_table_gives_median_and_range_of_a_runs_summaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tables, "RESULTS", tmp_path)
    stamp = {"bench": "stages", "run": "r1", "commit": "abc", "rows_per_batch": 1000,
             "quick": False, **STAMP}  # fmt: skip
    lines = [
        {**stamp, "engine": "streamscale", "operators": 3, "repeat": 0, "median_s": 0.5},
        {**stamp, "figure": "summary", "engine": "streamscale", "operators": 1, "repeats": 3,
         "batches": 10, "median_s": {"median": 0.5, "min": 0.4, "max": 0.6},
         "ratio_vs_one_operator": {"median": 1.0, "min": 1.0, "max": 1.0},
         "again_over_first": {"median": 0.9, "min": 0.85, "max": 1.0}},
        {**stamp, "figure": "summary", "engine": "spark-sql", "operators": 3, "repeats": 3,
         "batches": 10, "median_s": {"median": 0.8, "min": 0.7, "max": 0.9},
         "ratio_vs_one_operator": {"median": 1.3, "min": 1.2, "max": 1.4},
         "streamscale_over_spark": {"median": 0.6, "min": 0.55, "max": 0.7},
         "spark_mode": "streaming append"},
    ]  # fmt: skip
    _write(tmp_path / "stages.jsonl", lines)
    out = tables.stages()
    assert (
        "| 1,000 | 3 | spark-sql | 0.8 (0.7–0.9) | 1.3 (1.2–1.4) | 0.6 (0.55–0.7) | 3 | 10 |" in out
    )
    assert "streamscale, 1 operator(s), 0.9 (0.85–1)" in out


def test_the_generator_exits_2_naming_a_refused_table(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    a = {"run": "r1", "commit": "abc", **STAMP}
    merged = [a, {**a, "run": "r2"}]
    monkeypatch.setitem(tables.TABLES, "stages", lambda: tables.stages_table(merged))
    monkeypatch.setattr(tables, "DOCS", (Path(__file__).parents[2] / "docs" / "results.md",))
    assert tables.main(["--check"]) == 2
    assert "tables: refused: table 'stages' would mix runs r1, r2" in capsys.readouterr().err


def test_the_soak_under_rescaling_shows_each_growth_with_its_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tables, "RESULTS", tmp_path)
    line = {"bench": "soak", "commit": "abc", "run": "r1", "figure": "growth", **STAMP,
            "state": "local", "master": "spark://x", "batches": 5000, "plan_changes": 300,
            "executor_changes": 60, "metrics_rotations": 3,
            "met": {"batches": True, "growth": False, "all": False},
            "growth": {"threads": {"per_10k": 1.5, "ci95_low": -2.0, "ci95_high": 4.0},
                       "open_fds": {"per_10k": 0.2, "ci95_low": -0.1, "ci95_high": 0.5}}}  # fmt: skip
    _write(tmp_path / "soak.jsonl", [line])
    out = tables.soak()
    assert "| threads | 1.5 (-2 to 4) |" in out and "| open files | 0.2 (-0.1 to 0.5) |" in out
    assert "| local | 300 | 60 | 3 | growth |" in out


def test_the_chaos_table_gives_recovery_per_kind_over_faults_in_flight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tables, "RESULTS", tmp_path)
    line = {"bench": "chaos", "commit": "abc", "run": "r1", **STAMP, "faults": 28,
            "lost": 0, "duplicated": 0, "state_exact": True, "backlog_recovery_max_s": 41.0,
            "recovery_by_kind": {
                "executor-mid-batch": {"in_flight": 7, "not_in_flight": 0, "median_s": 4.2,
                                       "max_s": 9.0},
                "driver": {"in_flight": 7, "not_in_flight": 0, "median_s": 28.0, "max_s": 35.0}}}  # fmt: skip
    _write(tmp_path / "chaos.jsonl", [line])
    out = tables.chaos()
    assert "| executor-mid-batch | 7 | 0 | 4.2 | 9 |" in out
    assert "| driver | 7 | 0 | 28 | 35 |" in out and "within 41 s" in out


def test_repeated_runs_summaries_and_order_checks_are_not_table_rows() -> None:
    run = {"run": "r", "commit": "c"}
    lines = [
        {**run, "bench": "autoscale", "policy": "static-peak", "core_seconds": 100.0, "repeat": 0},
        {**run, "bench": "autoscale", "policy": "elastic", "core_seconds": 60.0, "repeat": 0},
        {
            **run,
            "bench": "autoscale",
            "policy": "static-peak",
            "core_seconds": 101.0,
            "order_check": True,
        },
        {
            **run,
            "bench": "autoscale",
            "figure": "summary",
            "policy": "elastic",
            "core_seconds": {"median": 60.0, "min": 60.0, "max": 60.0},
        },
        {**run, "bench": "autoscale", "figure": "order_check", "policy": "static-peak"},
    ]
    assert [x["core_seconds"] for x in tables._policy_runs(lines)] == [100.0, 60.0]
    rows = [x for x in lines if tables._generic_row(x)]
    assert rows == lines[:2]
    assert not tables._generic_row({**run, "bench": "skew", "sample": True})


def test_the_nexmark_table_gives_medians_of_a_repeated_run_without_its_order_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tables, "RESULTS", tmp_path)
    stamp = {"bench": "nexmark", "run": "r1", "commit": "abc", "harness": "h1", **STAMP}
    rows = [{**stamp, "query": "q5", "engine": e, "rows_per_s": r, "repeat": k,
             "ratio_vs_spark_sql": r / s, "spark_mode": "batch"}
            for k, (s, m) in enumerate(((1000.0, 200.0), (1100.0, 300.0), (900.0, 250.0)))
            for e, r in (("spark-sql", s), ("streamscale", m))]  # fmt: skip
    again = {**rows[0], "rows_per_s": 5.0, "repeat": 3, "order_check": True}
    check = {"bench": "nexmark", "run": "r1", "commit": "abc", **STAMP, "query": "q5",
             "engine": "spark-sql", "figure": "order_check", "first": {"rows_per_s": 1000.0}}  # fmt: skip
    summaries = [
        {"bench": "nexmark", "run": "r1", "commit": "abc", **STAMP, "query": "q5",
         "engine": e, "figure": "summary", "repeats": 3, "rows_per_s": {
             "median": med, "min": lo, "max": hi}, **extra}
        for e, med, lo, hi, extra in (
            ("spark-sql", 1000.0, 900.0, 1100.0, {}),
            ("streamscale", 250.0, 200.0, 300.0, {"ratio_vs_spark_sql": {
                "median": 0.27, "min": 0.2, "max": 0.28}}),
        )
    ]  # fmt: skip
    _write(tmp_path / "nexmark.jsonl", [*rows, again, check, *summaries])
    out = tables.nexmark()
    assert out.startswith("Harness: h1")
    assert "| q5 | 1,000 (900–1,100) batch | 250 (200–300) (0.27 (0.2–0.28)×) |  |" in out
    assert "| 5 " not in out and "median" not in out


def test_a_repeated_surge_run_is_tabled_per_repeat_against_its_own_static_peak() -> None:
    run = {"run": "r", "commit": "c", "bench": "autoscale", "quick": False, **STAMP}
    pol = [{**run, "policy": p, "repeat": k, "slo_tuples": slo, "core_seconds": cs}
           for k, (el, sp) in enumerate(((50.0, 100.0), (45.0, 90.0)))
           for p, slo, cs in (("elastic", 0.9 - k / 10, el), ("static-peak", 1.0, sp))]  # fmt: skip
    summary = {**run, "figure": "summary", "policy": "elastic", "startup": "real", "repeats": 2,
               "slo_tuples": {"median": 0.85, "min": 0.8, "max": 0.9},
               "core_seconds_vs_static_peak": {"median": 0.5, "min": 0.5, "max": 0.5}}  # fmt: skip
    out = tables._autoscale([*pol, summary], "Full length")
    assert "| elastic, run 1 | 90.0 % |" in out and "| elastic, run 2 | 80.0 % |" in out
    # each repeat against its own static-peak: 50/100 and 45/90, never 45/100
    assert out.count("| 0.5 |") == 2 and "0.45" not in out
    assert "elastic 85.0 % (80.0–90.0) of tuples at 0.5 (0.5–0.5)× static-peak's" in out
    single = tables._autoscale([x for x in pol if x["repeat"] == 0], "Full length")
    assert "| elastic | 90.0 % |" in single and "Medians" not in single
