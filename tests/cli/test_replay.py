"""``streamscale replay``: a real run's decisions reproduced from its ``metrics.jsonl``;
another policy replayed over the same inputs; bad input in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamscale.cli.app import main

CTL = {"interval_s": 0.0, "stabilization_s": 0.0, "scale_down_delay_s": 0.0}


def test_file_without_inputs_is_one_line_error(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "metrics.jsonl").write_text(json.dumps({"batch_id": 0, "rows": 5}) + "\n")
    assert main(["replay", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert str(out / "metrics.jsonl") in err and "holds no controller inputs" in err
    assert main(["replay", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "nowhere" in err and "no such file" in err


def test_bad_line_and_unknown_policy_are_one_line_errors(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "metrics.jsonl"
    bad.write_text('{"batch_id": 0}\n{"batch_id": 1, "inp\n')
    assert main(["replay", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{bad}:2" in err and "not a JSON line" in err
    assert main(["replay", str(bad), "--policy", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "nope" in err


@pytest.mark.spark
def test_a_real_run_replays_exactly(spark, tmp_path: Path, capsys) -> None:
    from streamscale.runtime.spark.driver.job import Job
    from streamscale.runtime.spark.driver.runner import run_job
    from streamscale.runtime.spark.keyed.functions import calculator
    from tests.runtime.spark._seq_source import SeqSource

    # 400 tuples of 0.5 ms per batch, a quarter of them on three hot keys
    opts = {"keys": "40", "step": "400", "cost_ms": "0.5", "partitions": "2"}
    job = Job.simple(
        "calc", calculator, source_options=opts, source_format=SeqSource.name(),
        source_class=SeqSource, instances=2, shards=8, trigger_s=0,
    )  # fmt: skip
    out = tmp_path / "out"
    res = run_job(
        spark,
        job,
        policy="elastic",
        duration_s=120,
        checkpoint=tmp_path / "ck",
        out=out,
        params={**CTL, "latency_target_ms": 0.25},  # half the 0.5 ms service time: scale out
        max_batches=5,
        seed=3,
    )
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) >= 5 and all("batch_id" in x for x in lines)  # batch lines as before
    capsys.readouterr()
    assert main(["replay", str(out), "--json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    # one replayed decision per batch, matching what the run recorded itself
    ran = [x["extra"]["decision"] for x in lines if "decision" in x["extra"]]
    assert len(rows) == len(ran) == len(lines)
    assert [r["replay"]["reason"] for r in rows] == ran
    assert all(r["match"] for r in rows)
    applied = [r["replay"]["plan"] for r in rows if r["replay"]["type"] == "apply"]
    assert applied, f"elastic scaled out for a latency target it cannot meet: {ran}"
    assert applied[-1]["allocation"]["cores"] == dict(res.plan.allocation.cores)
    # another policy over the same inputs: it runs and reports where it decides otherwise
    assert main(["replay", str(out), "--policy", "static"]) == 0
    text = capsys.readouterr().out.strip().splitlines()
    assert len(text) == len(rows) + 1
    assert "DIFFERS" in "\n".join(text) and text[-1].startswith(f"{len(rows)} decisions")
