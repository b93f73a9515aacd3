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


def test_the_soak_table_has_the_newest_growth_line_of_each_state_store(
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
    _write(tmp_path / "soak.jsonl", [old, sample, local, s3])
    out = tables.soak()
    assert "| growth per 10,000 batches | local (%) | s3 (%) |" in out
    assert "| open files | -1.8 | 0.5 |" in out and "| 9 |" not in out
    assert "| local | local[2] | 3,000 |" in out and "| s3 | local[2] | 2,500 |" in out
    assert "run r1 at commit" in out and "run r2 at commit" in out
