"""PNG plots of the ALBIC reproduction (load distance over rounds; ALBIC vs COLA)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

__all__ = ["plot_all"]


def plot_all(
    out: Path,
    milp_vs_flux: Mapping[str, Mapping[str, Sequence[float]]],
    scale_in: Mapping[str, Sequence[float]],
    albic_vs_cola: Sequence[Mapping[str, Any]],
) -> None:
    """Write ``milp_vs_flux.png``, ``scale_in.png`` and ``albic_vs_cola.png`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    n = max(1, len(milp_vs_flux))
    fig, axes = plt.subplots(1, n, figsize=(4 * n, 3.2), squeeze=False)
    for ax, (name, ser) in zip(axes[0], milp_vs_flux.items(), strict=False):
        for label, xs in ser.items():
            ax.plot(range(len(xs)), xs, marker="o", ms=3, label=label.upper())
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_yscale("log")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("round")
        ax.set_ylabel("load distance (% of mean)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "milp_vs_flux.png", dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for label, xs in scale_in.items():
        ax.plot(range(len(xs)), xs, marker=".", label=label)
    ax.set_xlabel("round")
    ax.set_ylabel("load distance over N_keep (%)")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "scale_in.png", dpi=110)
    plt.close(fig)

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.5))
    settings = sorted(
        {r.get("albic_max_load_distance_pct", 0.0) for r in albic_vs_cola}, reverse=True
    )
    first = [r for r in albic_vs_cola if r.get("albic_max_load_distance_pct", 0.0) == settings[0]]
    xs = [r["max_collocation_pct"] for r in first]
    for ld in settings:
        rows = [r for r in albic_vs_cola if r.get("albic_max_load_distance_pct", 0.0) == ld]
        a1.plot(
            [r["max_collocation_pct"] for r in rows],
            [r["albic_collocation_pct"] for r in rows],
            marker="o",
            label=f"ALBIC (maxLD {ld:g} %)",
        )
    a1.plot(xs, [r["cola_collocation_pct"] for r in first], marker="s", label="COLA")
    a1.set_xlabel("max collocation factor (%)")
    a1.set_ylabel("collocation factor (%)")
    a1.legend(fontsize=8)
    a2.bar([x - 3 for x in xs], [r["albic_migrations"] for r in first], width=6, label="ALBIC")
    a2.bar([x + 3 for x in xs], [r["cola_migrations"] for r in first], width=6, label="COLA")
    a2.set_xlabel("max collocation factor (%)")
    a2.set_ylabel("migrations per round")
    a2.legend()
    fig.tight_layout()
    fig.savefig(out / "albic_vs_cola.png", dpi=110)
    plt.close(fig)
