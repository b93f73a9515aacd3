"""Shared fixtures: one SparkSession per test process (local[2], UI off), rebuilt for a
module when an earlier one stopped it.

``make test`` runs two test processes (pytest-xdist, ``--dist loadfile``: a module's
tests, and so its module-scoped fixtures, stay in one process). Modules holding a
``slow`` test are collected first so that the long ones start early and the short
ones fill in around them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=30, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


class _Live:
    """The test process's SparkSession, rebuilt when a test stopped it."""

    session: object | None = None


def _alive(session: object | None) -> bool:
    sc = getattr(session, "_sc", None)
    return sc is not None and getattr(sc, "_jsc", None) is not None


@pytest.fixture(scope="session")
def _spark_dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    return str(tmp_path_factory.mktemp("warehouse")), str(tmp_path_factory.mktemp("ckpt"))


@pytest.fixture(scope="module")
def spark(_spark_dirs: tuple[str, str]) -> Iterator[object]:
    """One local[2] session per test process, shared by its modules; a module gets a fresh
    one only when an earlier module stopped it (``streamscale run`` in a CLI test stops
    the session it ran on)."""
    from streamscale.runtime.spark.executors.session import build_session

    if not _alive(_Live.session):
        warehouse, ckpt = _spark_dirs
        _Live.session = build_session(
            "local[2]",
            app_name="streamscale-tests",
            shuffle_partitions=2,
            conf={
                "spark.sql.warehouse.dir": warehouse,
                "spark.sql.streaming.checkpointLocation": ckpt,
            },
        )
    yield _Live.session


@pytest.fixture(scope="session", autouse=True)
def _stop_spark_at_exit() -> Iterator[None]:
    yield
    if _alive(_Live.session):
        _Live.session.stop()  # type: ignore[attr-defined]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: file order kept
