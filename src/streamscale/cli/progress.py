"""Per-batch progress on stderr: one live line (rich) on a terminal, plain lines otherwise.

:func:`batch_line` is the pure part (a batch's row to one line of text); :class:`BatchProgress`
the I/O shell. On a terminal the line of the batch running now is redrawn in place and a
policy's last line stays when the next policy starts; anywhere else (a log file, CI, a
pipe) every batch is one plain line, with no cursor movement or colour codes.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping
from typing import IO, Any

__all__ = ["BatchProgress", "batch_line"]


def _num(v: Any, fmt: str) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return fmt.format(v)


def batch_line(row: Mapping[str, Any], *, rate: float | None, cores: int | None) -> str:
    """One batch as one line: policy, batch, rows, rate (rows/s), p99, executors, cores.

    >>> batch_line({"policy": "elastic", "batch": 7, "rows": 1200, "p99_ms": 1834.2,
    ...             "executors": 3}, rate=600.0, cores=6)
    '            elastic  batch    7  rows=  1200  rate=   600.0/s  p99=   1834 ms  executors= 3  cores=  6'
    """
    return (
        f"{row['policy']:>19}  batch {row['batch']:4d}  rows={row['rows']:6d}  "
        f"rate={_num(rate, '{:8.1f}'):>8}/s  p99={_num(row.get('p99_ms'), '{:7.0f}'):>7} ms  "
        f"executors={row['executors']:2d}  cores={_num(cores, '{:3d}'):>3}"
    )


class BatchProgress:
    """Show each batch's row (``on_batch`` callbacks, any thread) on ``file`` (stderr).

    Parameters
    ----------
    cores_per_executor
        Cores each executor holds (cores = executors × this); ``None`` shows ``-``.
    file
        Where the lines go (default ``sys.stderr``).
    live
        Redraw one line in place; default: when ``file`` is a terminal.
    """

    def __init__(
        self,
        *,
        cores_per_executor: int | None,
        file: IO[str] | None = None,
        live: bool | None = None,
    ) -> None:
        from rich.console import Console

        self.console = Console(file=file, stderr=file is None, highlight=False, soft_wrap=True)
        self.live = self.console.is_terminal if live is None else live
        self.cores_per_executor = cores_per_executor
        self._lock = threading.Lock()
        self._last: dict[str, tuple[float, str]] = {}  # policy -> (time, its latest line)
        self._policy: str | None = None
        self._view: Any = None

    def __enter__(self) -> BatchProgress:
        if self.live:
            from rich.live import Live
            from rich.text import Text

            self._view = Live(Text(""), console=self.console, refresh_per_second=4, transient=True)
            self._view.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._view is not None:
            self._view.stop()
            self._view = None
            if self._policy is not None:  # the last policy's last line stays
                self.console.print(self._last[self._policy][1], markup=False)

    def __call__(self, row: Mapping[str, Any]) -> None:
        now = float(row["time"]) if row.get("time") is not None else time.monotonic()
        policy = f"{row['policy']}"  # a name from the row, printed
        with self._lock:
            prev = self._last.get(policy)
            elapsed = now - prev[0] if prev is not None else math.nan
            rate = row["rows"] / elapsed if elapsed > 0 else None
            cores = (
                row["executors"] * self.cores_per_executor
                if self.cores_per_executor is not None
                else None
            )
            line = batch_line(row, rate=rate, cores=cores)
            if self._view is None:
                self.console.print(line, markup=False)
            else:
                from rich.text import Text

                if self._policy is not None and self._policy != policy:
                    self._view.console.print(self._last[self._policy][1], markup=False)
                self._view.update(Text(line, no_wrap=True, overflow="ellipsis"), refresh=True)
            self._last[policy] = (now, line)
            self._policy = policy
