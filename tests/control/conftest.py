"""Fixtures shared by the policy tests: the micro-benchmark topology and the example cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamscale.model import Cluster, Topology, load_cluster, load_topology

EXAMPLES = Path(__file__).parents[2] / "examples"


@pytest.fixture(scope="module")
def topo() -> Topology:
    return load_topology(EXAMPLES / "microbench.yaml")


@pytest.fixture(scope="module")
def cluster() -> Cluster:
    return load_cluster(EXAMPLES / "cluster.yaml")
