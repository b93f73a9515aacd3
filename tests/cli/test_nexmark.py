"""``streamscale nexmark generate``: the file contract and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from streamscale.cli.app import main
from streamscale.nexmark.files import read_events
from streamscale.nexmark.generator import GeneratorConfig, generate


def test_generate_writes_the_three_tables(tmp_path: Path) -> None:
    out = tmp_path / "ev"
    assert main(["nexmark", "generate", "--events", "3000", "--seed", "5", "--out", str(out),
                 "--files", "4"]) == 0  # fmt: skip
    bid = pq.read_table(out / "bid.parquet")
    assert bid.column_names == ["auction", "bidder", "price", "channel", "url", "dateTime",
                                "extra"]  # fmt: skip
    assert str(bid.schema.field("dateTime").type) == "timestamp[us, tz=UTC]"
    auction = pq.read_table(out / "auction.parquet")
    assert str(auction.schema.field("expires").type) == "timestamp[us, tz=UTC]"
    assert len(list((out / "bid.parquet").glob("*.parquet"))) == 4
    # the files, in order, are the generator's output at the default rate
    ev = read_events(out)
    want = generate(GeneratorConfig.constant(10_000, seed=5), 0, 3000)
    pd.testing.assert_frame_equal(ev.bid, want.bid)
    pd.testing.assert_frame_equal(ev.person, want.person)


def test_bad_input_is_one_line(tmp_path: Path, capsys) -> None:
    assert main(["nexmark", "generate", "--events", "0", "--out", str(tmp_path / "a")]) == 2
    assert main(["nexmark", "generate", "--events", "9", "--rate", "-1",
                 "--out", str(tmp_path / "a")]) == 2  # fmt: skip
    assert main(["nexmark", "generate", "--events", "9", "--out", str(tmp_path / "b")]) == 0
    assert main(["nexmark", "generate", "--events", "9", "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "--events 0" in err[0] and "--rate" in err[1]
    assert "already holds" in err[2]


def test_run_refuses_bad_input_before_starting_spark(tmp_path: Path, capsys) -> None:
    ev = tmp_path / "ev"
    assert main(["nexmark", "generate", "--events", "100", "--out", str(ev)]) == 0
    capsys.readouterr()
    base = ["nexmark", "run", "--events", str(ev), "--out", str(tmp_path / "o")]
    assert main([*base, "--query", "q9"]) == 2
    assert main([*base, "--query", "q5", "--engine", "flink"]) == 2
    assert main([*base, "--query", "q5", "--policy", "nope"]) == 2
    assert main([*base, "--query", "q5", "--engine", "spark-sql", "--policy", "elastic"]) == 2
    assert main([*base, "--query", "q5", "--engine", "spark-sql", "--resume"]) == 2
    assert main(["nexmark", "run", "--query", "q1", "--events", str(tmp_path / "missing"),
                 "--out", str(tmp_path / "o")]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 6
    assert [e.split(":")[2].strip() for e in err] == ["q9", "flink", "nope", "elastic",
                                                       "--resume", str(tmp_path / "missing")]  # fmt: skip
