from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from streamscale.cli.app import main

EXAMPLES = Path(__file__).parents[2] / "examples"


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("streamscale ")


def test_validate_json_rates(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--json", "validate", str(EXAMPLES / "diamond.yaml"), "--rate", "100"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "topology" and data["rates"]["write"] == 400


def test_validate_broken_file_one_line_exit_2(tmp_path: Path) -> None:
    p = tmp_path / "t.yaml"
    p.write_text(
        "name: t\noperators: [{name: s, kind: source}, {name: o, kind: sink}]\nedges: [{from: s, to: q}]\n"
    )
    res = subprocess.run(
        [sys.executable, "-m", "streamscale.cli.app", "validate", str(p)],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0
    assert "edge s->q: unknown operator 'q'" in res.stderr
    assert "Traceback" not in res.stderr


def test_unknown_reproduction(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reproduce", "nope"]) == 2
    assert "nope" in capsys.readouterr().err


def test_reproduce_prints_one_json_line_per_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import streamscale.experiments.elasticutor as mod

    record = {"figure": "f", "paper": "2x", "measured": 1.5, "target": ">= 1.8", "met": False}

    def fake(out: Path, *, quick: bool, seed: int) -> dict[str, object]:
        (out / "results.md").write_text("# fake\n")
        return {"targets": [record]}

    monkeypatch.setattr(mod, "run", fake)
    assert main(["reproduce", "elasticutor", "--quick", "--out", str(tmp_path)]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("{")]
    assert [json.loads(ln) for ln in lines] == [record]


def test_reproduce_stamps_each_headline_record_with_its_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import streamscale.experiments.model_driven as mod

    figures = [
        {"figure": "a", "variant": "literal", "paper": 1, "measured": 2},
        {"figure": "a", "variant": "tuned", "paper": 1, "measured": 3},
    ]

    def fake(out: Path, *, quick: bool, seed: int) -> dict[str, object]:
        (out / "results.md").write_text("# fake\n")
        (out / "headline.jsonl").write_text("".join(json.dumps(h) + "\n" for h in figures))
        return {}

    monkeypatch.setattr(mod, "run", fake)
    assert main(["reproduce", "model-driven", "--seed", "2", "--out", str(tmp_path)]) == 0
    heads = [json.loads(x) for x in (tmp_path / "headline.jsonl").read_text().splitlines()]
    assert [{k: h[k] for k in ("figure", "variant", "paper", "measured")} for h in heads] == figures
    assert {h["command"] for h in heads} == {"streamscale reproduce model-driven --seed 2"}
    assert all(h["wall_s"] >= 0 and h["commit"] and h["utc"] for h in heads)
