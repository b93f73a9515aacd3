"""``streamscale run``: errors in one line; a short run on the generator source."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from streamscale.cli.app import main

JOB = """
name: tiny
operators:
  - name: gen
    kind: source
    rate: 300
    params: {keys: 200, alpha: 1.0, cost_ms: 0.2, seed: 3, trigger_s: 0.5}
  - {name: calc, key: key, instances: 2, shards: 8,
     function: "streamscale.runtime.spark.keyed.functions:calculator"}
  - {name: out, kind: sink, params: {format: jsonl, path: sink}}
edges:
  - {from: gen, to: calc, grouping: key}
  - {from: calc, to: out}
"""


def test_unknown_function_is_one_line_error(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(JOB.replace("functions:calculator", "functions:nope"))
    assert main(["run", str(bad), "--duration", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "operator calc" in err and "'nope'" in err


def test_dag_operator_without_function_is_one_line_error(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        JOB.replace("  - {name: out,", "  - {name: c2, key: key}\n  - {name: out,").replace(
            "{from: calc, to: out}", "{from: calc, to: c2}\n  - {from: c2, to: out}"
        )
    )
    assert main(["run", str(bad), "--duration", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "operator c2" in err and "no function given" in err


@pytest.mark.parametrize(
    ("old", "new", "named"),
    [
        ("keys: 200,", "keys: 200, rows_per_sec: 5,", "'rows_per_sec'"),
        ("keys: 200,", "keys: many,", "option 'keys'"),
        ("alpha: 1.0,", "alpha: -1,", "option 'alpha'"),
    ],
)
def test_bad_source_option_is_one_line_error_before_spark(
    tmp_path: Path, capsys, old: str, new: str, named: str
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(JOB.replace(old, new))
    # the pipeline (linear) and the DAG path both check the source before any session
    assert main(["run", str(bad), "--duration", "1", "--master", "spark://127.0.0.1:1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and named in err


@pytest.mark.spark
def test_run_writes_metrics_and_sink(spark, tmp_path: Path, capsys) -> None:
    job = tmp_path / "tiny.yaml"
    job.write_text(JOB)
    out = tmp_path / "out"
    args = ["--json", "run", str(job), "--policy", "static", "--master", "local[2]"]
    code = main([*args, "--duration", "120", "--max-batches", "2", "--out", str(out)])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["batches"] >= 2 and summary["rows"] > 0
    lines = (out / "metrics.jsonl").read_text().splitlines()
    assert sum(json.loads(x)["rows"] for x in lines) == summary["rows"]
    # no --seed: the driver drew one and logged it, so the run replays exactly
    header = json.loads(lines[0])["extra"]["controller"]
    assert isinstance(header["seed"], int)
    sunk = sum(1 for f in (out / "sink").glob("batch_id=*/part-*.json") for _ in f.open())
    assert sunk == summary["rows"]  # the calculator emits one tuple per input tuple


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("ftp://host/state", "unsupported state backend scheme 'ftp'"),
        ("file:///tmp/x?fsync=1&colour=red", "unknown state backend option 'colour'"),
        ("s3:///prefix", "names no bucket or host"),
        ("state?snapshot_every=often", "snapshot_every must be a number"),
        ("", "names no path"),
    ],
)
def test_bad_state_url_is_one_line_error_before_spark(
    tmp_path: Path, capsys, url: str, named: str
) -> None:
    job = tmp_path / "tiny.yaml"
    job.write_text(JOB)
    args = ["run", str(job), "--duration", "1", "--master", "spark://127.0.0.1:1"]
    assert main([*args, "--state-url", url]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err
    assert f"error: --state-url {url}: " in err and named in err, err


def test_state_url_that_cannot_be_created_names_it(tmp_path: Path, capsys) -> None:
    job = tmp_path / "tiny.yaml"
    job.write_text(JOB)
    blocker = tmp_path / "file"
    blocker.write_text("")
    url = str(blocker / "state")
    assert main(["run", str(job), "--duration", "1", "--state-url", url]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"error: --state-url {url}: cannot create" in err


def test_state_url_help_comes_from_its_declaration() -> None:
    from typer.testing import CliRunner

    from streamscale.cli.app import app
    from streamscale.runtime.spark.state.state_api import STATE_URL

    res = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "400"})
    assert res.exit_code == 0
    assert "--state-url" in res.output and STATE_URL.description in res.output


@pytest.mark.spark
def test_run_keeps_state_where_state_url_says(spark, tmp_path: Path, capsys) -> None:
    from streamscale.runtime.spark.state.state import state_backend

    job = tmp_path / "tiny.yaml"
    job.write_text(JOB)
    url = f"file://{tmp_path / 'kept'}?fsync=1"
    args = ["--json", "run", str(job), "--policy", "static", "--master", "local[2]"]
    ckpt = tmp_path / "ck"
    code = main([*args, "--max-batches", "2", "--checkpoint", str(ckpt), "--state-url", url])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["state_url"] == url and not (ckpt / "state").exists()
    state = state_backend(url).load_all("calc")
    # the calculator keeps [count, sum] per key: every input tuple counted once
    assert sum(acc[0] for st in state.values() for acc in st.values()) == summary["rows"] > 0


@pytest.mark.spark
@pytest.mark.timeout(400)  # stops by itself at the source's end, long before --duration
def test_run_available_now_processes_what_the_source_holds_then_stops(
    spark, tmp_path: Path, capsys
) -> None:
    from streamscale.runtime.spark.sources.sources import generate

    opts = {"keys": 50, "alpha": 1.0, "cost_ms": 0.0, "seed": 7, "start_time": 0,
            "total": 900, "max_rows_per_batch": 400}  # fmt: skip
    params = ", ".join(f"{k}: {v}" for k, v in opts.items())
    job = tmp_path / "bounded.yaml"
    job.write_text(
        JOB.replace("rate: 300", "rate: 100000").replace(
            "keys: 200, alpha: 1.0, cost_ms: 0.2, seed: 3, trigger_s: 0.5", params
        )
    )
    out = tmp_path / "out"
    args = ["--json", "run", str(job), "--policy", "static", "--master", "local[2]"]
    # a duration far beyond the run: only the end of the source may stop it
    assert main([*args, "--available-now", "--duration", "600", "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["keyed_rows"] == {"calc": 900} and summary["batches"] >= 3  # 400+400+100
    parts = sorted((out / "sink").glob("batch_id=*/part-*.json"))  # every job's sink layout
    sink = pd.concat(pd.read_json(p, lines=True, dtype={"key": str}) for p in parts)
    want = generate(opts, 0, 900)["key"].value_counts()
    got = sink.groupby("key")["count"].max()
    assert len(sink) == 900
    assert got.sort_index().to_dict() == want.sort_index().to_dict()
