"""PNG plots of the ALBIC reproduction (load distance over rounds; ALBIC vs COLA, Figs. 11-12)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

__all__ = ["plot_all", "plot_collocation"]


def plot_all(
    out: Path,
    milp_vs_flux: Mapping[str, Mapping[str, Sequence[float]]],
    scale_in: Mapping[str, Sequence[float]],
) -> None:
    """Write ``milp_vs_flux.png`` and ``scale_in.png`` into ``out``."""
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


def plot_collocation(
    out: Path,
    by_factor: Sequence[Mapping[str, Any]],
    by_size: Sequence[Mapping[str, Any]],
    periods: Mapping[str, Mapping[str, Sequence[float]]],
) -> None:
    """Write ``albic_vs_cola.png`` (as Fig. 11) and ``albic_periods.png`` (as Fig. 12).

    Fig. 11: collocation in the last period against the maximum collocation
    factor and against the cluster size, ALBIC's variants beside COLA. Fig. 12:
    per adaptation period, collocation, load distance, migrations and load
    index of every run in ``periods``.
    """
    out.mkdir(parents=True, exist_ok=True)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.5))
    for ax, rows, key, label in (
        (a1, by_factor, "max_collocation_pct", "max collocation factor (%)"),
        (a2, by_size, "setup", "nodes x key groups x operators (max collocation 50 %)"),
    ):
        variants = sorted({r["albic_variant"] for r in rows})
        for v in variants:
            sel = [r for r in rows if r["albic_variant"] == v]
            ax.plot(
                [str(r[key]) for r in sel],
                [r["albic_final_collocation_pct"] for r in sel],
                marker="o",
                label=f"ALBIC {v}",
            )
        if variants:
            sel = [r for r in rows if r["albic_variant"] == variants[0]]
            ax.plot(
                [str(r[key]) for r in sel],
                [r["cola_final_collocation_pct"] for r in sel],
                marker="s",
                label="COLA",
            )
        ax.set_xlabel(label, fontsize=8)
        ax.set_ylabel("collocation factor, last period (%)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "albic_vs_cola.png", dpi=110)
    plt.close(fig)

    panels = (
        ("coll", "collocation factor (%)"),
        ("ld", "load distance (% of mean)"),
        ("mig", "migrations"),
        ("index", "load index"),
    )
    runs = list(periods.items())
    fig, axes = plt.subplots(
        max(1, len(runs)), len(panels), figsize=(13, 2.4 * max(1, len(runs))), squeeze=False
    )
    for row, (name, ser) in zip(axes, runs, strict=False):
        for ax, (key, ylabel) in zip(row, panels, strict=True):
            for side in ("albic", "cola"):
                ys = ser[f"{side}_{key}"]
                ax.plot(range(1, len(ys) + 1), ys, marker=".", ms=3, label=side.upper())
            if key == "mig":
                ax.set_yscale("log")
            ax.set_title(name, fontsize=8)
            ax.set_xlabel("adaptation period", fontsize=8)
            ax.set_ylabel(ylabel, fontsize=8)
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "albic_periods.png", dpi=90)
    plt.close(fig)
