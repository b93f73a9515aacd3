"""DS2's one-step parallelism for one operator, as Flink's autoscaler applies it.

DS2 (Kalavri et al., "Three steps is all you need: fast, accurate, automatic scaling
decisions for distributed streaming dataflows", OSDI 2018, §3) sizes an operator from
its *true* processing rate — records processed per second of useful (busy) time of one
instance — rather than from its observed rate, which a starved or back-pressured
instance understates: the parallelism that serves the target rate is
``⌈target rate ÷ true rate per instance⌉`` in one step. Flink's Kubernetes-operator
autoscaler, which applies DS2 by stopping the job and restarting it with the new
parallelism, adds three knobs that this function takes by the same names:

* ``target_utilization`` (``job.autoscaler.utilization.target``, default 0.7): size for
  this busy fraction, not for 100 %;
* ``catch_up_s`` (``job.autoscaler.catch-up.duration``): the backlog (lag) must drain
  within this time, so its rate ``backlog ÷ catch_up_s`` is added to the target;
* ``restart_s`` (``job.autoscaler.restart.time``): what arrives while the job restarts
  joins the backlog, ``offered × restart_s`` more to catch up on.

Scale-down uses the same formula; the caller applies its hysteresis (Flink's
utilization boundary and stabilization interval), because only it knows the history.

Examples
--------
100 t/s offered, 1,000 tuples of backlog to drain in 20 s, a restart of 4 s, an
instance serves 50 t/s of busy time:

>>> ds2_parallelism(100.0, 1000.0, 50.0, catch_up_s=20.0, restart_s=4.0)
5
"""

from __future__ import annotations

import math

from streamscale.errors import StreamscaleError

__all__ = ["ds2_parallelism", "ds2_target_rate"]


def ds2_target_rate(
    offered_rate: float, backlog: float, *, catch_up_s: float, restart_s: float = 0.0
) -> float:
    """The rate to provision for: offered, plus the backlog (and what a restart adds to
    it) drained within ``catch_up_s``.

    Examples
    --------
    100 t/s, plus 1,000 queued tuples and the 4 s × 100 t/s a restart adds, drained in 20 s:

    >>> ds2_target_rate(100.0, 1000.0, catch_up_s=20.0, restart_s=4.0)
    170.0
    """
    if catch_up_s <= 0:
        raise StreamscaleError("must be > 0", item="catch_up_s")
    return max(0.0, offered_rate) + (max(0.0, backlog) + max(0.0, offered_rate) * restart_s) / (
        catch_up_s
    )


def ds2_parallelism(
    offered_rate: float,
    backlog: float,
    true_rate: float,
    *,
    target_utilization: float = 0.7,
    catch_up_s: float = 300.0,
    restart_s: float = 0.0,
    min_parallelism: int = 1,
    max_parallelism: int | None = None,
) -> int:
    """Instances that serve the target rate at ``target_utilization`` (DS2 §3, one step).

    Parameters
    ----------
    offered_rate
        Records per second arriving at the operator (averaged over a metrics window).
    backlog
        Records waiting at the source.
    true_rate
        Records one instance processes per second of busy time.
    target_utilization, catch_up_s, restart_s
        As Flink's autoscaler settings of those names (see the module docstring).
    min_parallelism, max_parallelism
        Bounds of the result.

    Returns
    -------
    int
        The parallelism, within the bounds.
    """
    if not 0 < target_utilization <= 1:
        raise StreamscaleError("must be in (0, 1]", item="target_utilization")
    if true_rate <= 0 or not math.isfinite(true_rate):
        return max_parallelism if max_parallelism is not None else min_parallelism
    target = ds2_target_rate(offered_rate, backlog, catch_up_s=catch_up_s, restart_s=restart_s)
    p = max(min_parallelism, math.ceil(target / (true_rate * target_utilization) - 1e-9))
    return p if max_parallelism is None else min(p, max_parallelism)
