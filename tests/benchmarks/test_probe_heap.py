"""probe_heap.py: a few batches on the tests' local[2] session, traced or sampled."""

from __future__ import annotations

import tracemalloc

import pytest

from tests.benchmarks.conftest import Run


@pytest.mark.spark
@pytest.mark.slow
def test_traced_and_sampled_probes_print_their_lines(run_bench: Run, spark) -> None:
    lines = run_bench("probe_heap", "--first", "1", "--last", "3", spark=spark)
    assert [(x["bench"], x["batch"]) for x in lines] == [("heap", 1), ("heap", 3)]
    assert all(x["rss_mb"] > 50 and x["traced_mb"] > 0 for x in lines)
    assert not tracemalloc.is_tracing()
    lines = run_bench("probe_heap", "--first", "0", "--last", "2", "--rss-every", "1", spark=spark)
    # a batch already running when the last was reached may run and sample as well
    assert [(x["bench"], x["batch"]) for x in lines][:3] == [("heap-rss", b) for b in (0, 1, 2)]
    for x in lines:
        assert x["rss_mb"] > 50 and x["python_blocks"] > 0 and x["arrow_pool"]


def test_a_first_batch_after_the_last_is_refused(run_bench: Run, capsys) -> None:
    from tests.benchmarks.conftest import load

    assert load("probe_heap").main(["--first", "5", "--last", "5"]) == 2
    assert "need 0 <= --first < --last" in capsys.readouterr().err
