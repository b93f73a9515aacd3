"""Reproductions of the papers' headline results (``streamscale reproduce NAME``).

Each module exposes ``run(out: Path, *, quick: bool, seed: int) -> dict`` that
writes ``results.json``, ``results.md`` and PNG plots into ``out`` (use
:func:`streamscale.experiments.report.write_results`) and returns the results.
"""

from __future__ import annotations

REPRODUCTIONS: dict[str, tuple[str, str]] = {
    # name: (module, one-line description)
    "elasticutor": (
        "streamscale.experiments.elasticutor",
        "paper 000: Elasticutor vs static, RC, naive-EC (simulator)",
    ),
    "task-allocation": (
        "streamscale.experiments.task_allocation",
        "paper 001: naive, TL, TD vs optimal",
    ),
    "elastic-allocator": (
        "streamscale.experiments.elastic_allocator",
        "paper 002: GMA vs Random vs Even",
    ),
    "albic": ("streamscale.experiments.albic", "paper 003: MILP vs Flux, scale-in, ALBIC vs COLA"),
    "model-driven": ("streamscale.experiments.model_driven", "paper 004: LSA/MBA × DSM/RSM/SAM"),
}
