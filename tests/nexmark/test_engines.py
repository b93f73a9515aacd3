"""Every query on both engines against the pandas reference, on a few thousand events."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from streamscale.nexmark.files import read_events, write_events
from streamscale.nexmark.generator import GeneratorConfig
from streamscale.nexmark.results import QUERIES, same_rows
from streamscale.nexmark.spark_sql import run_spark_sql
from tests.nexmark._reference import reference

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # 200 events/s: 4,000 events span 20 s of event time (several windows and sessions)
    d = tmp_path_factory.mktemp("nexmark") / "events"
    write_events(GeneratorConfig.constant(200, seed=11), 4000, d, files=3)
    return d


@pytest.mark.parametrize("q", QUERIES)
def test_spark_sql_equals_reference(spark, events: Path, tmp_path: Path, q: str) -> None:
    ev = read_events(events)
    want = reference(q, ev)
    info = run_spark_sql(spark, q, events, tmp_path)
    got = pd.read_parquet(tmp_path / "result.parquet")
    assert same_rows(got, want) is None, same_rows(got, want)
    assert info["rows_out"] == len(want)
    if q in ("q0", "q5", "q7", "q8", "q11"):
        assert len(want) > 0  # the event set exercises the query
