"""``streamscale reproduce model-driven``: paper 004's §8.4 and §8.5 with the paper's models.

Replays, with the task models read off the paper (``data/paper_models.yaml``):

* §8.4 resource benefits: for the micro DAGs (Linear, Diamond, Star) at 50/100/200
  t/s and the application DAGs (Finance, Traffic, Grid) at 50/100 t/s, the slots
  LSA and MBA allocate, the slots RSM (on LSA) and SAM (on MBA) must add to place
  every thread on VMs bought from the Azure D-series catalog, and the rate the
  models predict each mapping sustains (shuffle grouping; also capacity-weighted).
* §8.5 on a fixed cluster of five 4-slot VMs: for LSA+DSM, LSA+RSM, MBA+DSM,
  MBA+RSM and MBA+SAM the highest planned rate (10 t/s steps while the allocation
  fits 20 slots and the mapping succeeds) and the rate the models predict for it.

The paper's "actual" rates came from Storm runs on Azure; here the prediction
stands in for them (the paper reports R² 0.71-0.95 between the two).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Any

from streamscale.errors import InfeasibleError, StreamscaleError
from streamscale.experiments.model_driven_figures import (
    CALIBRATION,
    EXTRA_READINGS,
    MAPPINGS,
    RSM_SLOT_CHOICE,
    extra_slots,
    headline,
)
from streamscale.experiments.report import markdown_table, write_results
from streamscale.model import (
    PerformanceModel,
    Topology,
    VmType,
    load_models,
    load_topology,
)
from streamscale.planning.adapters.model_driven import demands
from streamscale.planning.allocation.model_based import allocate
from streamscale.planning.placement.slots import (
    MappingResult,
    Vm,
    map_adding_slots,
    map_dsm,
    map_rsm,
    map_sam,
)
from streamscale.planning.prediction import predict

__all__ = [
    "CATALOG",
    "FULL_HEADLINE_FILE",
    "HEADLINE_FILE",
    "PAIRS",
    "fixed_cluster",
    "headline",
    "load_dag",
    "paper_models",
    "run",
    "scenario",
]

# The committed copy of the headline figures docs/papers quotes (``--quick``, seed 1).
HEADLINE_FILE = Path(__file__).with_name("model_driven_headline.jsonl")
# The full run's (``streamscale reproduce model-driven --seed 1``: 10 t/s steps on the
# fixed cluster instead of 20) headline figures.
FULL_HEADLINE_FILE = Path(__file__).with_name("model_driven_full_headline.jsonl")

CATALOG = (
    VmType("D1", 1, 3.5, 0.098),
    VmType("D2", 2, 7.0, 0.196),
    VmType("D3", 4, 14.0, 0.392),
)
MICRO = ("linear", "diamond", "star")
APPS = ("finance", "traffic", "grid")
PAIRS = (("lsa", "dsm"), ("lsa", "rsm"), ("mba", "dsm"), ("mba", "rsm"), ("mba", "sam"))
_MAPPERS = {"dsm": map_dsm, "rsm": map_rsm, "sam": map_sam}

# §8.4.1 / Fig. 7 and §8.5.1 as reported in the paper's text.
PAPER_MICRO = {
    ("linear", 50): "LSA 7, MBA 4; SAM +1",
    ("linear", 100): "LSA 13, MBA 7",
    ("linear", 200): "LSA 25 (+3 RSM = 28), MBA 15",
    ("diamond", 50): "≈2x; RSM +1; LSA+RSM actual 35/50",
    ("diamond", 100): "≈2x; LSA+RSM 90/100, MBA+SAM 90/100",
    ("diamond", 200): "≈2x; MBA+SAM actual 190/200",
    ("star", 50): "LSA 7 (6.23), ≈2x MBA",
    ("star", 100): "LSA 13 (12.47), ≈2x MBA",
    ("star", 200): "≈2x",
}
PAPER_FIXED = {
    ("linear", "mba", "dsm"): "planned 280, predicted 200, actual 180",
    ("linear", "mba", "rsm"): "predicted 315, actual 330",
    ("linear", "mba", "sam"): "planned 280, predicted ≈ actual ≈ 280",
    ("linear", "lsa", "dsm"): "planned 160",
    ("linear", "lsa", "rsm"): "planned 160",
}


def _tagged(heads: list[dict[str, Any]], tag: str) -> list[list[Any]]:
    """Table rows of the headline figures tagged ``[tag]``, the tag dropped."""
    return [
        [h["figure"].replace(f" [{tag}]", ""), h["variant"], h["paper"], h["measured"]]
        for h in heads
        if h["figure"].endswith(f"[{tag}]")
    ]


def paper_models() -> dict[str, PerformanceModel]:
    """The five task models read off paper 004 (approximate)."""
    return load_models(Path(str(resources.files("streamscale") / "data" / "paper_models.yaml")))


def load_dag(name: str, examples: Path | None = None) -> Topology:
    """A DAG from ``examples/NAME.yaml`` (the repository's examples directory by default)."""
    base = examples or Path(__file__).resolve().parents[3] / "examples"
    path = base / f"{name}.yaml"
    if not path.exists():
        raise StreamscaleError("example DAG not found (run from a source checkout)", item=str(path))
    return load_topology(path)


def _map(
    alg: str,
    pl: str,
    topo: Topology,
    models: Mapping[str, PerformanceModel],
    rate: float,
    vms: Sequence[Vm] | None,
    *,
    literal: bool = False,
    variant: str = "tuned",
) -> tuple[int, MappingResult]:
    a = allocate(alg, topo, models, rate)
    d = demands(topo, models, a.threads, rate, literal_bundles=literal)
    mapper = _MAPPERS[pl]
    if pl == "rsm":
        mapper = partial(map_rsm, slot_choice=RSM_SLOT_CHOICE[variant])
    if vms is not None:
        return a.slots, mapper(d, vms)
    return a.slots, map_adding_slots(mapper, d, max(1, a.slots), CATALOG)


def _rates(
    topo: Topology, models: Mapping[str, PerformanceModel], res: MappingResult
) -> tuple[float, float]:
    kw: dict[str, Any] = {"slots": res.slots, "vm_slots": {v.name: v.slots for v in res.vms}}
    sh = predict(topo, models, res.assignment, **kw)
    we = predict(topo, models, res.assignment, routing="weighted", **kw)
    return sh.rate, we.rate


def scenario(topo: Topology, models: Mapping[str, PerformanceModel], rate: float) -> dict[str, Any]:
    """§8.4 for one DAG and rate: LSA+RSM against MBA+SAM on VMs bought for ρ."""
    lsa_slots, rsm = _map("lsa", "rsm", topo, models, rate, None)
    mba_slots, sam = _map("mba", "sam", topo, models, rate, None)
    _, sam_literal = _map("mba", "sam", topo, models, rate, None, literal=True)
    _, rsm_literal = _map("lsa", "rsm", topo, models, rate, None, variant="literal")
    lsa_pred, lsa_w = _rates(topo, models, rsm)
    lit_pred, lit_w = _rates(topo, models, rsm_literal)
    mba_pred, mba_w = _rates(topo, models, sam)
    return {
        "dag": topo.name,
        "rate": rate,
        "lsa_slots": lsa_slots,
        "mba_slots": mba_slots,
        "rsm_extra": rsm.extra_slots,
        "sam_extra": sam.extra_slots,
        "sam_literal_extra": sam_literal.extra_slots,
        "lsa_rsm_price_per_hour": round(rsm.price_per_hour, 3),
        "mba_sam_price_per_hour": round(sam.price_per_hour, 3),
        "lsa_rsm_predicted_rate": round(lsa_pred, 2),
        "mba_sam_predicted_rate": round(mba_pred, 2),
        "lsa_rsm_weighted_rate": round(lsa_w, 2),
        "lsa_rsm_literal_predicted_rate": round(lit_pred, 2),
        "lsa_rsm_literal_weighted_rate": round(lit_w, 2),
        "mba_sam_weighted_rate": round(mba_w, 2),
        "extra": extra_slots(topo, models, rate, CATALOG),
    }


def fixed_cluster(
    topo: Topology,
    models: Mapping[str, PerformanceModel],
    *,
    vms: int = 5,
    slots_per_vm: int = 4,
    step: float = 10.0,
    max_rate: float = 2000.0,
) -> list[dict[str, Any]]:
    """§8.5 for one DAG: highest planned rate per pair on a fixed cluster, and its prediction.

    Every pair is run as ``tuned``; the RSM pairs also as ``literal`` (RSM's slot
    choice per variant, :data:`RSM_SLOT_CHOICE`).
    """
    cluster = tuple(Vm(f"D3-{j + 1}", slots_per_vm, "D3", "r0", 0.392) for j in range(vms))
    capacity = vms * slots_per_vm
    rows = []
    runs = [
        (a, p, v) for a, p in PAIRS for v in (("literal", "tuned") if p == "rsm" else ("tuned",))
    ]
    for alg, pl, variant in runs:
        best: tuple[float, MappingResult] | None = None
        rate = step
        while rate <= max_rate:
            try:
                rho, res = _map(alg, pl, topo, models, rate, cluster, variant=variant)
            except InfeasibleError:
                break
            if rho > capacity:
                break
            best = (rate, res)
            rate += step
        head = {"dag": topo.name, "pair": f"{alg}+{pl}", "variant": variant}
        if best is None:
            rows.append({**head, "planned_rate": 0.0})
            continue
        planned, res = best
        kw: dict[str, Any] = {"slots": res.slots, "vm_slots": {v.name: v.slots for v in res.vms}}
        sh = predict(topo, models, res.assignment, **kw)
        we = predict(topo, models, res.assignment, routing="weighted", **kw)
        rows.append(
            {
                **head,
                "planned_rate": planned,
                "predicted_rate": round(sh.rate, 2),
                "predicted_limit": sh.limit,
                "weighted_rate": round(we.rate, 2),
                "vm_cpu_percent": {k: round(v, 1) for k, v in sh.vm_cpu.items()},
                "vm_memory_percent": {k: round(v, 1) for k, v in sh.vm_memory.items()},
            }
        )
    return rows


def _plots(
    out: Path, micro: list[dict[str, Any]], apps: list[dict[str, Any]], fixed: list[dict[str, Any]]
) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    rows = micro + apps
    labels = [f"{r['dag']}\n{r['rate']:g}" for r in rows]
    x = range(len(rows))
    fig, ax = plt.subplots(figsize=(max(8, len(rows) * 0.8), 4))
    ax.bar(
        [i - 0.2 for i in x],
        [r["lsa_slots"] for r in rows],
        0.4,
        label="LSA slots",
        color="#d62728",
    )
    ax.bar(
        [i - 0.2 for i in x],
        [r["rsm_extra"] for r in rows],
        0.4,
        bottom=[r["lsa_slots"] for r in rows],
        label="+RSM extra",
        color="#ff9896",
    )
    ax.bar(
        [i + 0.2 for i in x],
        [r["mba_slots"] for r in rows],
        0.4,
        label="MBA slots",
        color="#1f77b4",
    )
    ax.bar(
        [i + 0.2 for i in x],
        [r["sam_extra"] for r in rows],
        0.4,
        bottom=[r["mba_slots"] for r in rows],
        label="+SAM extra",
        color="#aec7e8",
    )
    ax.set_xticks(list(x), labels, fontsize=7)
    ax.set_ylabel("slots")
    ax.set_title("Slots: LSA+RSM vs MBA+SAM (paper 004 Fig. 7/8)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "slots.png", dpi=110)
    plt.close(fig)
    files.append("slots.png")

    fig, ax = plt.subplots(figsize=(5, 5))
    for pair, marker in zip([f"{a}+{p}" for a, p in PAIRS], "ovs^D", strict=True):
        pts = [
            r
            for r in fixed
            if r["pair"] == pair and r["variant"] == "tuned" and r.get("planned_rate")
        ]
        ax.scatter(
            [r["planned_rate"] for r in pts],
            [r["predicted_rate"] for r in pts],
            marker=marker,
            label=pair,
        )
    top = max([r.get("planned_rate", 0) for r in fixed] + [1])
    ax.plot([0, top], [0, top], "k:", lw=1)
    ax.set_xlabel("planned rate (t/s)")
    ax.set_ylabel("model-predicted rate (t/s)")
    ax.set_title("5 x 4-slot VMs: planned vs predicted (Fig. 9/10)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "fixed_cluster.png", dpi=110)
    plt.close(fig)
    files.append("fixed_cluster.png")
    return files


def _extra_table(rows: list[dict[str, Any]]) -> str:
    cols = ["DAG", "rate"] + [
        f"{label}{' literal' if variant == 'literal' else ''}: {rkey}"
        for _, _, _, _, variant, label in MAPPINGS
        for rkey, *_ in EXTRA_READINGS
    ]
    body = [
        [r["dag"], r["rate"]]
        + [
            "fails" if r["extra"][key][rkey] is None else r["extra"][key][rkey]
            for key, *_ in MAPPINGS
            for rkey, *_ in EXTRA_READINGS
        ]
        for r in rows
    ]
    return markdown_table(cols, body)


def _markdown(
    micro: list[dict[str, Any]],
    apps: list[dict[str, Any]],
    fixed: list[dict[str, Any]],
    heads: list[dict[str, Any]],
) -> str:
    cols = [
        "DAG",
        "rate",
        "LSA slots",
        "MBA slots",
        "RSM extra",
        "SAM extra",
        "SAM extra (literal)",
        "LSA+RSM predicted",
        "MBA+SAM predicted",
        "MBA+SAM capacity sum",
        "paper",
    ]

    def row(r: dict[str, Any]) -> list[Any]:
        return [
            r["dag"],
            r["rate"],
            r["lsa_slots"],
            r["mba_slots"],
            r["rsm_extra"],
            r["sam_extra"],
            r["sam_literal_extra"],
            r["lsa_rsm_predicted_rate"],
            r["mba_sam_predicted_rate"],
            r["mba_sam_weighted_rate"],
            PAPER_MICRO.get((r["dag"], r["rate"]), ""),
        ]

    fcols = [
        "DAG",
        "pair",
        "variant",
        "planned",
        "predicted (shuffle)",
        "limit",
        "capacity sum",
        "paper",
    ]
    frows = [
        [
            r["dag"],
            r["pair"],
            r["variant"],
            r["planned_rate"],
            r.get("predicted_rate", ""),
            r.get("predicted_limit", ""),
            r.get("weighted_rate", ""),
            PAPER_FIXED.get((r["dag"], *r["pair"].split("+")), ""),
        ]
        for r in fixed
    ]
    ratio = [r["mba_slots"] / r["lsa_slots"] for r in micro if r["lsa_slots"]]
    return "\n\n".join(
        [
            "# Model-driven scheduling (paper 004) with the paper's task models",
            "Models: `streamscale/data/paper_models.yaml` (approximate, read off §5.3 and §8; "
            "each point marked read, derived, fitted or interpolated). Predicted rates: "
            "'shuffle' gives every thread of a task an equal share of its input (Storm's "
            "shuffle grouping); 'capacity sum' lets a task sustain the sum of its slots' "
            "modelled capacities, the reading of the paper's worked numbers (e.g. SAM's "
            "9 bundles of 50 Blob threads plus a partial slot giving 280 t/s, §8.5.2). "
            "The paper's 'actual' rates came from Storm on Azure; predictions stand in for "
            "them here.",
            "## Extra slots: two acquisition readings, two conventions\n\n"
            "§7.1 buys the largest VMs within ρ, then the smallest VM covering the rest "
            "(may buy slots beyond ρ); §8.2 picks a D2 or a D1 for the remaining slot(s), "
            "so the slots sum to ρ. Extra slots counted as slots added to ρ until the "
            "mapping succeeds, or as slots bought beyond ρ (under §8.2 the two coincide).\n\n"
            + _extra_table(micro + apps),
            "## Calibration anchors and held-out comparisons\n\n"
            "Calibration (model points were fitted or derived from these figures, so a "
            "match is by construction): "
            + "; ".join(CALIBRATION)
            + ".\n\n"
            + markdown_table(
                ["calibration anchor", "variant", "paper", "measured"],
                _tagged(heads, "calibration"),
            )
            + "\n\nHeld out (no model point was chosen to reproduce them; MBA+SAM's "
            "capacity-sum prediction equals MBA's planned rate by construction, since SAM "
            "maps the bundles MBA sized):\n\n"
            + markdown_table(
                ["held-out comparison", "variant", "paper", "measured"],
                _tagged(heads, "held out"),
            ),
            "## Micro DAGs (§8.4.1, Fig. 7)",
            markdown_table(cols, [row(r) for r in micro]),
            f"MBA/LSA slot ratio on the micro DAGs: {min(ratio):.2f}-{max(ratio):.2f} (paper: about 0.5). "
            f"Under §7.1 with slots added to ρ, RSM needed extra slots in "
            f"{sum(1 for r in micro if r['rsm_extra'])} of {len(micro)} cases (paper: 6 of 9), "
            f"SAM in {sum(1 for r in micro if r['sam_extra'])} (paper: 1); the other readings "
            "are in the tables above.",
            "## Application DAGs (§8.4.2, Fig. 8)",
            markdown_table(cols[:-1], [row(r)[:-1] for r in apps]),
            "Paper: MBA+SAM uses 33-50 % fewer slots than LSA+RSM; Finance gains least (3 and 5 "
            "slots at 50 and 100 t/s); RSM adds 1-3 slots on every application DAG, SAM only on "
            "Grid at 50 t/s. The DAG structures are readings of the text (see examples/*.yaml).",
            "## Fixed cluster of 5 x 4-slot VMs (§8.5, Figs. 9-10)",
            markdown_table(fcols, frows),
            "Paper: MBA supports higher rates than LSA with any mapping (20-175 %); MBA+DSM falls "
            "well short of its plan; model-predicted vs actual R² 0.71-0.95.",
        ]
    )


def run(out: Path, *, quick: bool, seed: int) -> dict[str, Any]:
    """Run the reproduction into ``out`` (``quick``: coarser rate steps on the fixed cluster).

    Every step is deterministic (no randomness), so ``seed`` is recorded only.
    """
    models = paper_models()
    micro = [scenario(load_dag(d), models, r) for d in MICRO for r in (50, 100, 200)]
    apps = [scenario(load_dag(d), models, r) for d in APPS for r in (50, 100)]
    step = 20.0 if quick else 10.0
    fixed = [row for d in MICRO for row in fixed_cluster(load_dag(d), models, step=step)]
    out.mkdir(parents=True, exist_ok=True)
    plots = _plots(out, micro, apps, fixed)
    results = {
        "paper": "004",
        "quick": quick,
        "seed": seed,
        "fixed_cluster_step": step,
        "micro": micro,
        "apps": apps,
        "fixed_cluster": fixed,
        "plots": plots,
    }
    results["headline"] = headline(micro, fixed)
    write_results(out, results, _markdown(micro, apps, fixed, results["headline"]))
    lines = [json.dumps(h) for h in results["headline"]]
    (out / "headline.jsonl").write_text("\n".join(lines) + "\n")
    for line in lines:
        print(line)
    return results
