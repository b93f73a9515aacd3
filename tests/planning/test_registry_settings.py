"""Every registered planner declares its settings; ``check_params`` types and rejects."""

from __future__ import annotations

import pytest

from streamscale.errors import StreamscaleError
from streamscale.planning import registry

FAMILIES = ("allocator", "balancer", "placer")


def _entries() -> list[registry.Entry]:
    return [e for f in FAMILIES for e in registry.entries(f)]


def test_every_planner_declares_its_settings() -> None:
    undeclared = [f"{e.family} {e.name}" for e in _entries() if e.params is None]
    assert undeclared == []


@pytest.mark.parametrize("entry", _entries(), ids=lambda e: f"{e.family}-{e.name}")
def test_unknown_name_is_rejected_naming_it(entry: registry.Entry) -> None:
    with pytest.raises(StreamscaleError, match="no_such_setting"):
        registry.check_params([(entry.family, entry.name)], {"no_such_setting": "1"})


def test_values_are_typed_and_bounded() -> None:
    got = registry.check_params(
        [("placer", "gma"), ("balancer", "albic")],
        {"d_cpu": "0.5", "max_migrations": "3", "search": "false"},
    )
    assert got == {"d_cpu": 0.5, "max_migrations": 3, "search": False}
    with pytest.raises(StreamscaleError, match="d_cpu"):
        registry.check_params([("placer", "gma")], {"d_cpu": "1.5"})
    with pytest.raises(StreamscaleError, match="order"):
        registry.check_params([("placer", "tl")], {"order": "sideways"})
    with pytest.raises(StreamscaleError, match="max_migrations"):
        registry.check_params([("balancer", "milp")], {"max_migrations": "2.5"})


def test_schema_read_keeps_only_its_own_names_with_defaults() -> None:
    from streamscale.planning.adapters.albic import FLUX_SETTINGS

    assert FLUX_SETTINGS.read({"max_migrations": 4, "d_cpu": 0.5}) == {
        "max_migrations": 4,
        "max_migration_bytes": None,
    }
