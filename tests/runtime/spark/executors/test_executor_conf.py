"""Locality settings of :func:`executor_conf`: steered tasks wait, nothing else does."""

from __future__ import annotations

from streamscale.runtime.spark.executors.resources import executor_conf


def test_unpinned_steered_tasks_wait_for_a_ready_executor() -> None:
    conf = executor_conf(2, 8, pin=False, separate_hosts=False)
    # only process-local preferences (streamscale's steering) wait; node, rack and any
    # level fall back to spark.locality.wait = 0, and reduce tasks carry no preference
    assert conf["spark.locality.wait"] == "0s"
    assert conf["spark.locality.wait.process"] == "30s"
    assert "spark.locality.wait.node" not in conf
    assert conf["spark.shuffle.reduceLocality.enabled"] == "false"


def test_unpinned_without_steering_keeps_no_wait_anywhere() -> None:
    conf = executor_conf(2, 8, pin=False, separate_hosts=False, steer_wait_s=None)
    assert conf["spark.locality.wait"] == "0s"
    assert "spark.locality.wait.process" not in conf
    assert "spark.shuffle.reduceLocality.enabled" not in conf


def test_pinned_waits_for_the_pinned_executor_only() -> None:
    conf = executor_conf(2, 8)
    assert conf["spark.locality.wait.process"] == "30s"
    assert conf["spark.locality.wait.node"] == "0s"
    assert "spark.locality.wait" not in conf
