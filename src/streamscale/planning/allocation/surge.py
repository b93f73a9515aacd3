"""One step to the needed size: the cores a keyed operator needs *now*, from the offered
rate and the backlog, with the start-up time of new cores in the catch-up term.

The batch-boundary planner sizes each instance with Elasticutor's queueing model
(paper 000, §4.1) from the rates measured over the last period. Under a step surge those
rates lag (the period averages the old rate with the new one) and the decision waits
for the batch that the surge made long. This sizing reads what the source offers — the
rate over the last seconds and the tuples not yet admitted — and asks in one step for
the cores that serve the offered rate *and* drain the backlog within the catch-up time:
while new cores start, the backlog grows by what the offered rate exceeds the current
cores' capacity, for ``startup_s`` (Flink's autoscaler adds ``restart.time`` worth of input
to its catch-up term the same way; DS2, Kalavri et al., OSDI 2018, §3), then drains in
``catch_up_s``. The operator is one M/M/k queue
whose ``k`` is the fewest cores meeting the latency target (the §4.1 model with one
instance), floored, as the boundary planner floors backlogged instances, at
``θ · λ / μ / max_utilization``.
"""

from __future__ import annotations

import math

from streamscale.planning.allocation.queueing import QueueingProblem, allocate
from streamscale.settings import Setting

__all__ = ["CATCH_UP_FORM", "CATCH_UP_FORMS", "surge_cores"]

# how a backlog adds to demand (the setting ``catch_up_form``): ``drain`` adds its catch-up
# rate to the arrival rate, ``latency`` takes the larger of the two
CATCH_UP_FORMS: tuple[str, ...] = ("drain", "latency")

#: The setting, declared once: the Elasticutor steps' and :func:`instance_loads`' default.
CATCH_UP_FORM = Setting(
    "catch_up_form",
    str,
    "drain",
    "how a backlog adds to demand: drain = rate + backlog / catch_up_s (DS2: the "
    "backlog is gone within catch_up_s); latency = max(rate, backlog / catch_up_s) "
    "(first in, first out: its last tuple waits at most catch_up_s)",
    choices=CATCH_UP_FORMS,
)


def surge_cores(
    offered_rate: float,
    backlog: float,
    service_rate: float,
    *,
    latency_target_s: float,
    catch_up_s: float,
    startup_s: float,
    current_cores: int,
    max_cores: int,
    max_utilization: float,
    theta: float,
    form: str,
) -> int:
    """Cores that serve ``offered_rate`` and drain ``backlog`` within ``catch_up_s`` of the
    new cores' start.

    Parameters
    ----------
    offered_rate
        Tuples per second the source offers now (its end offsets' slope).
    backlog
        Tuples offered and not yet admitted by any batch.
    service_rate
        Tuples per second one core processes (μ, from busy time).
    latency_target_s
        The queueing model's latency target.
    catch_up_s
        Seconds, after new cores start, to drain the backlog in.
    startup_s
        Seconds a requested core takes to run tasks (learned from history).
    current_cores
        Cores running now: they serve ``current_cores × service_rate`` while new ones start.
    max_cores
        Upper bound (the cluster's cores).
    max_utilization, theta
        The utilization floor ``⌈θ · λ / μ / max_utilization⌉`` (the boundary planner's
        settings, passed in).
    form
        The setting ``catch_up_form``. ``"drain"``: λ = offered + backlog / catch-up (DS2: the backlog is gone within
        ``catch_up_s``). ``"latency"``: λ = max(offered, backlog / catch-up): served first
        in, first out at that capacity the backlog's last tuple waits at most
        ``catch_up_s``, and later tuples less, since the queue shrinks.

    Returns
    -------
    int
        Cores, in ``[1, max_cores]``.

    Examples
    --------
    With θ = 1 (no margin) and a 90 % utilization floor, a surge to 300 tuples/s on 4 cores of 50 tuples/s each, 200 tuples waiting, 4 s to
    start a core: the backlog is 200 + (300 − 200) × 4 = 600 tuples by then, drained in
    5 s ⇒ λ = 300 + 120 = 420 ⇒ at least ⌈420 / 50 / 0.9⌉ = 10 cores. A steady 100
    tuples/s with nothing waiting needs ⌈100 / 50 / 0.9⌉ = 3 (the queueing model's 3
    cores meet a 2 s target too). Bounding the backlog's wait instead of draining it:
    λ = max(300, 600 / 5) = 300 ⇒ ⌈300 / 50 / 0.9⌉ = 7 cores.

    >>> floor = {"max_utilization": 0.9, "theta": 1.0}
    >>> surge_cores(300.0, 200.0, 50.0, latency_target_s=2.0, catch_up_s=5.0,
    ...             startup_s=4.0, current_cores=4, max_cores=16, **floor, form="drain")
    10
    >>> surge_cores(100.0, 0.0, 50.0, latency_target_s=2.0, catch_up_s=5.0,
    ...             startup_s=4.0, current_cores=4, max_cores=16, **floor, form="drain")
    3
    >>> surge_cores(300.0, 200.0, 50.0, latency_target_s=2.0, catch_up_s=5.0,
    ...             startup_s=4.0, current_cores=4, max_cores=16, **floor, form="latency")
    7
    """
    if not service_rate > 0 or not math.isfinite(service_rate):
        return max_cores
    if max_cores < 1:
        raise ValueError("max_cores must be >= 1")
    lam = max(0.0, offered_rate)
    growth = max(0.0, lam - max(0, current_cores) * service_rate) * max(0.0, startup_s)
    if form not in CATCH_UP_FORMS:
        raise ValueError(f"form must be one of {CATCH_UP_FORMS}, got {form!r}")
    drain = (max(0.0, backlog) + growth) / max(catch_up_s, 1e-9)
    lam = max(lam, drain) if form == "latency" else lam + drain
    if lam <= 0:
        return 1
    res = allocate(QueueingProblem((lam,), (service_rate,), lam, latency_target_s, max_cores))
    floor = math.ceil(theta * lam / service_rate / max_utilization - 1e-9)
    return max(1, min(max_cores, max(int(res.cores[0]), floor)))
