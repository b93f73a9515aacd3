"""A source registered from outside the package is one module plus one registration.

The test registers a source of its own (a renamed copy of the tests' sequence source,
with an options class) and nothing else: its options are checked before Spark starts,
the watch reads what it offered, and a job naming only its format runs on Spark with
every key's count exactly what pandas computes from the same tuples.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pytest

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.driver.job import Job
from streamscale.runtime.spark.driver.watch import offered_for
from streamscale.runtime.spark.keyed.functions import calculator
from streamscale.runtime.spark.sources.source_registry import (
    SourceEntry,
    check_options,
    register_source,
    source,
    sources,
)
from tests.runtime.spark._seq_source import SeqSource, expected_rows

NAME = "streamscale_registered_seq"


class RegisteredSeq(SeqSource):
    @classmethod
    def name(cls) -> str:
        return NAME


@dataclass(frozen=True)
class SeqSpec:
    keys: int = 50
    step: int = 200
    total: int = 100_000
    bad: int = 0
    partitions: int = 2
    cost_ms: float = 0.0

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> SeqSpec:
        kw: dict[str, Any] = {}
        for f in fields(cls):
            if f.name in options:
                try:
                    kw[f.name] = type(f.default)(options[f.name])
                except ValueError:
                    raise StreamscaleError("not a number", item=f.name) from None
        return cls(**kw)

    def available(self, elapsed_s: float) -> float:
        return float(min(self.total, self.step))  # one step per batch, offered at once


register_source(
    SourceEntry(
        NAME,
        datasource=lambda: RegisteredSeq,
        spec=lambda: SeqSpec,
        available=lambda options: SeqSpec.from_options(dict(options)).available,
    )
)


def test_the_bundled_sources_and_an_outside_one_are_registered() -> None:
    assert {"streamscale_generator", "streamscale_trace", "streamscale_nexmark", NAME} <= set(
        sources()
    )
    assert source("parquet") is None  # Spark's own: nothing to check, nothing to register


def test_options_are_refused_before_spark_one_line_naming_the_option() -> None:
    with pytest.raises(StreamscaleError, match=r"'stpe'.*unknown streamscale_registered_seq"):
        Job.simple("calc", calculator, source_format=NAME, source_options={"stpe": "5"})
    with pytest.raises(StreamscaleError, match="not a number") as e:
        check_options(NAME, {"step": "many"}, item="source")
    assert e.value.item == "step"
    offered = offered_for(NAME, {"step": "30"})
    assert offered is not None and offered.available(100.0, {"t0": 40.0}) == 30.0
    assert offered_for("parquet", {}) is None


@pytest.mark.spark
def test_a_job_on_the_registered_format_runs_and_its_state_is_exact(
    spark: Any, tmp_path: Path
) -> None:
    from streamscale.runtime.spark.driver.runner import run_job
    from streamscale.runtime.spark.state.state import LocalStateBackend

    opts = {"keys": "30", "step": "150", "total": "300"}
    job = Job.simple(
        "calc", calculator, source_format=NAME, source_options=opts, instances=2, shards=4,
        trigger_s=0,
    )  # fmt: skip
    assert job.source_class is None  # only the registration names the DataSource
    res = run_job(
        spark, job, policy="static", duration_s=240, checkpoint=tmp_path / "ck", max_batches=2
    )
    assert res.rows == 300
    state: dict[str, Any] = {}
    for st in LocalStateBackend(tmp_path / "ck" / "state").load_all("calc").values():
        state.update(st)
    want = expected_rows(opts, 300)["key"].value_counts().to_dict()
    assert {k: v[0] for k, v in state.items()} == want
