"""Shared fixtures: one SparkSession per test process (local[2], UI off).

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


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from streamscale.runtime.spark.session import build_session

    warehouse = tmp_path_factory.mktemp("warehouse")
    session = build_session(
        "local[2]",
        app_name="streamscale-tests",
        shuffle_partitions=2,
        conf={
            "spark.sql.warehouse.dir": str(warehouse),
            "spark.sql.streaming.checkpointLocation": str(tmp_path_factory.mktemp("ckpt")),
        },
    )
    yield session
    session.stop()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: file order kept
