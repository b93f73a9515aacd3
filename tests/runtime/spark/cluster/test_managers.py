"""Master URLs are served by registered cluster managers, hand-checked; one registered
from outside the package is honoured, and a URL nobody serves is one line before Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamscale.cli.app import main
from streamscale.errors import StreamscaleError
from streamscale.runtime.run_config import parse_run
from streamscale.runtime.spark.cluster.managers import (
    ClusterManager,
    manager_for,
    managers,
    register_manager,
)
from streamscale.runtime.spark.executors.resources import is_cluster_master


@pytest.mark.parametrize(
    ("master", "name", "elastic"),
    [
        ("local", "local", False),
        ("local[*]", "local", False),
        ("local[4]", "local", False),
        ("local[4,2]", "local", False),
        ("spark://127.0.0.1:7077", "standalone", True),
        ("spark://h1:7077,h2:7077", "standalone", True),
        ("k8s://https://10.0.0.1:6443", "kubernetes", True),
        ("yarn", "yarn", True),
    ],
)
def test_each_bundled_master_has_its_manager(master: str, name: str, elastic: bool) -> None:
    m = manager_for(master)
    assert m is not None and (m.name, m.elastic) == (name, elastic)
    assert is_cluster_master(master) is elastic


@pytest.mark.parametrize("master", ["mesos://host:5050", "local[0]", "local[x]", "yarnish", ""])
def test_a_master_nobody_serves_is_refused_naming_it(master: str) -> None:
    assert manager_for(master) is None and not is_cluster_master(master)
    with pytest.raises(StreamscaleError, match="no cluster manager serves") as e:
        parse_run({"master": master})
    assert master in str(e.value.item)


def test_a_manager_registered_from_outside_is_one_call() -> None:
    before = managers()
    try:
        register_manager(ClusterManager("tests-mgr", r"testmgr://\S+", elastic=True))
        assert is_cluster_master("testmgr://pool-a")
        assert parse_run({"master": "testmgr://pool-a"}).master == "testmgr://pool-a"
        # registering again under the same name replaces it in place
        register_manager(ClusterManager("tests-mgr", r"testmgr://\S+", elastic=False))
        assert not is_cluster_master("testmgr://pool-a")
    finally:
        import streamscale.runtime.spark.cluster.managers as mod

        mod._MANAGERS[:] = list(before)
    assert manager_for("testmgr://pool-a") is None


def test_the_cli_refuses_mesos_in_one_line(tmp_path: Path, capsys) -> None:
    job = tmp_path / "tiny.yaml"
    from tests.cli.test_run import JOB

    job.write_text(JOB)
    assert main(["run", str(job), "--duration", "1", "--master", "mesos://host:5050"]) != 0
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err
    assert "--master mesos://host:5050" in err and "no cluster manager serves" in err
