"""Every docstring example under ``src/streamscale`` runs and prints what it shows.

One test per module holding an example (``>>>`` in its source), found from the file tree
without importing anything at collection; the module's examples run with the standard
:mod:`doctest` (``ELLIPSIS`` on), so a failure names the module and the example. Modules
whose examples need a running SparkSession or files are in :data:`EXCLUDED`, each with
its reason; an excluded module that no longer holds an example fails, so the list only
shrinks. Every planner entry point of :data:`PLANNERS` and every planner of the registry
must show an example, so a new one cannot arrive without.
"""

from __future__ import annotations

import doctest
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "streamscale"

#: module -> why its examples are not run here
EXCLUDED: dict[str, str] = {
    "streamscale.runtime.spark.api": "the join example reads Parquet files into a running query",
}


#: The planners' entry points that must hold an example (``module:qualname``; ``module:``
#: for the module's docstring), the registry's adapters aside.
PLANNERS: tuple[str, ...] = (
    "streamscale.planning.allocation.ds2:",
    "streamscale.planning.allocation.ds2:ds2_target_rate",
    "streamscale.planning.allocation.surge:surge_cores",
    "streamscale.planning.allocation.queueing:allocate",
    "streamscale.planning.allocation.model_based:allocate_lsa",
    "streamscale.planning.allocation.model_based:allocate_mba",
    "streamscale.planning.balancing.keygroups:KeyGroupProblem.build",
    "streamscale.planning.balancing.milp:solve_milp",
    "streamscale.planning.balancing.albic:albic",
    "streamscale.planning.balancing.cola:cola",
    "streamscale.planning.balancing.flux:flux",
    "streamscale.planning.balancing.potc:potc",
    "streamscale.planning.balancing.shard_balance:balance_shards",
    "streamscale.planning.balancing.rc:rc_rebalance",
    "streamscale.planning.balancing.collocate:route_pool",
    "streamscale.planning.placement.groups:GroupJob.build",
    "streamscale.planning.placement.naive_pairs:naive_pairs",
    "streamscale.planning.placement.task_level:task_level",
    "streamscale.planning.placement.top_down:top_down",
    "streamscale.planning.placement.optimal:optimal",
    "streamscale.planning.placement.reconfigure:reconfigure",
    "streamscale.planning.placement.relaxations:gcd_granularity",
    "streamscale.planning.placement.relaxations:split_skewed",
    "streamscale.planning.placement.gma:gma",
    "streamscale.planning.placement.elastic_allocator:random_placement",
    "streamscale.planning.placement.elastic_allocator:even_placement",
    "streamscale.planning.placement.core_assignment:assign_cores",
    "streamscale.planning.placement.core_assignment:naive_ec",
    "streamscale.planning.placement.slots:acquire",
    "streamscale.planning.placement.slots:map_dsm",
    "streamscale.planning.placement.slots:map_rsm",
    "streamscale.planning.placement.slots:map_sam",
    "streamscale.planning.placement.slots:map_adding_slots",
    "streamscale.planning.prediction:predict",
    "streamscale.planning.elastic_plan:",
    "streamscale.planning.elastic_plan:fill_assignment",
    "streamscale.planning.elastic_plan:trim_cores",
    "streamscale.planning.registry:compose",
    "streamscale.model.topology:Topology.build",
    "streamscale.model.cluster:Cluster.build",
    "streamscale.model.cluster:Cluster.uniform",
    "streamscale.model.performance:PerformanceModel.build",
    "streamscale.model.snapshot:Snapshot.build",
    "streamscale.model.plan:Plan.diff",
    "streamscale.model.io:topology_from_dict",
)


def module_name(path: Path) -> str:
    """The dotted name of the module at ``path`` under ``src``."""
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def with_examples() -> list[str]:
    """Every module under ``src/streamscale`` whose source holds ``>>>``, sorted."""
    return sorted(module_name(p) for p in SRC.rglob("*.py") if ">>>" in p.read_text())


@pytest.fixture
def registries() -> Iterator[None]:
    """The process-wide source registry as it was: an example that registers a source
    (``runtime/spark/sources/source_registry``) must not leave it to later tests — its spec
    refers to a class defined in the example's namespace, which doctest clears."""
    from streamscale.runtime.spark.sources import source_registry

    saved, loaded = dict(source_registry._SOURCES), source_registry._loaded
    try:
        yield
    finally:
        source_registry._SOURCES.clear()
        source_registry._SOURCES.update(saved)
        source_registry._loaded = loaded


@pytest.mark.parametrize("name", [m for m in with_examples() if m not in EXCLUDED])
def test_examples_run(name: str, registries: None) -> None:
    module = importlib.import_module(name)
    tests = [t for t in doctest.DocTestFinder().find(module) if t.examples]
    assert tests, f"{name}: '>>>' in the source but no docstring example found"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"


def test_the_exclusions_still_hold_examples() -> None:
    assert set(EXCLUDED) <= set(with_examples())


def test_a_wrong_output_fails() -> None:
    """The runner used above reports a wrong printed result as a failure."""
    test = doctest.DocTestParser().get_doctest(">>> 1 + 1\n3\n", {}, "wrong", None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test, out=lambda _: None)
    assert runner.summarize(verbose=False).failed == 1


def _doc(target: str) -> str:
    module, _, qualname = target.partition(":")
    obj: object = importlib.import_module(module)
    for part in filter(None, qualname.split(".")):
        obj = getattr(obj, part)
    return obj.__doc__ or ""


def test_every_planner_entry_point_shows_an_example() -> None:
    missing = [t for t in PLANNERS if ">>>" not in _doc(t)]
    assert not missing, f"no docstring example: {', '.join(missing)}"


def test_every_registered_planner_shows_an_example() -> None:
    from streamscale.planning.registry import entries

    missing = [f"{e.family} {e.name}" for e in entries() if ">>>" not in (e.adapter.__doc__ or "")]
    assert not missing, f"no docstring example: {', '.join(missing)}"
