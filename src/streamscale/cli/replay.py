"""``streamscale replay OUT``: replay a run's controller decisions from its ``metrics.jsonl``.

The run logged every event its controller was fed (docs/metrics.md); the replay feeds
them at the logged times to a fresh controller — the run's policy and settings by
default, or ``--policy`` / ``--param`` — and prints, per decision, the time, the run's
action, the replay's and whether they match.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import typer

from streamscale.cli.output import Output
from streamscale.control.policies import check_policy
from streamscale.control.stimulus import Replayed, Segment, replay, replay_watch, segments
from streamscale.errors import StreamscaleError
from streamscale.settings import parse_pairs

__all__ = ["describe", "read_segments", "register", "replay_cmd", "watch_inputs"]


def register(app: typer.Typer) -> None:
    app.command("replay")(replay_cmd)


def _lines(path: Path) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every line of ``path`` and of its rotated files (``.N``), oldest first."""
    from streamscale.runtime.spark.driver.metrics import metrics_files

    for p in metrics_files(path):
        with p.open(encoding="utf-8") as f:
            for n, text in enumerate(f, 1):
                if not text.strip():
                    continue
                where = f"{p}:{n}"
                try:
                    line = json.loads(text)
                except ValueError:
                    raise StreamscaleError("not a JSON line", item=where) from None
                if isinstance(line, Mapping):
                    yield where, line


def watch_inputs(path: Path) -> list[Mapping[str, Any]]:
    """The mid-batch watch's logged samples (``watch_inputs`` of every batch line)."""
    out: list[Mapping[str, Any]] = []
    for where, line in _lines(path):
        body = line.get("extra") if isinstance(line.get("extra"), Mapping) else line
        got = body.get("watch_inputs")
        if got and not isinstance(got, list):
            raise StreamscaleError("'watch_inputs' must be a list", item=where)
        out.extend(got or ())
    return out


def read_segments(out: Path) -> list[Segment]:
    """The controllers' logs in ``out/metrics.jsonl`` (or ``out`` itself, a file).

    Raises
    ------
    StreamscaleError
        The file is missing or holds no controller inputs (the message names it).
    """
    path = out / "metrics.jsonl" if out.is_dir() else out
    if not path.is_file():
        raise StreamscaleError("no such file", item=str(path))
    segs = segments(_lines(path))
    if not segs:
        raise StreamscaleError(
            "holds no controller inputs (written by runs with a controller, from this version on)",
            item=str(path),
        )
    return segs


def describe(action: Mapping[str, Any] | None) -> str:
    """One action in a few words: ``apply (cores 6): reason``, ``hold: reason``, ``-``."""
    if action is None:
        return "-"
    kind = str(action.get("type", "?"))
    reason = str(action.get("reason", ""))
    if kind == "apply":
        plan = action.get("plan") or {}
        cores = sum((plan.get("allocation") or {}).get("cores", {}).values())
        return f"apply ({cores} cores): {reason}"
    return f"{kind}: {reason}" if reason else kind


def _row(seg: Segment, policy: str, r: Replayed) -> dict[str, Any]:
    return {
        "time": r.now,
        "policy": policy,
        "run_policy": seg.header.get("policy"),
        "run": r.run,
        "replay": r.replay,
        "match": r.match,
    }


def replay_cmd(
    ctx: typer.Context,
    out_dir: Path = typer.Argument(..., help="A run's --out directory (or its metrics.jsonl)."),
    policy: str | None = typer.Option(
        None, "--policy", help="Replay with this policy (default: the run's)."
    ),
    param: list[str] = typer.Option(
        [],
        "--param",
        help="KEY=VALUE, repeatable: policy settings (over the run's with its own policy, "
        "instead of them with another) or controller settings (interval_s, ...).",
    ),
    json_lines: bool = typer.Option(False, "--json", help="One JSON line per decision."),
) -> None:
    """Replay the run's controller decisions; one line per decision (run vs replay)."""
    output: Output = ctx.obj
    as_json = json_lines or output.json
    if policy is not None:
        check_policy(policy)
    params = parse_pairs(param)
    segs = read_segments(out_dir)
    total = same = 0
    for seg in segs:
        name = policy or f"{seg.header.get('policy')}"  # the logged name, printed
        for r in replay(seg, policy=policy, params=params):
            total += 1
            same += r.match
            if as_json:
                print(json.dumps(_row(seg, name, r)))
            else:
                mark = "match" if r.match else "DIFFERS"
                print(f"t={r.now:9.3f}s  run: {describe(r.run)}  |  {name}: {describe(r.replay)}"
                      f"  [{mark}]")  # fmt: skip
    if not as_json:
        print(f"{total} decisions, {same} match, {total - same} differ ({len(segs)} controller(s))")
    path = out_dir / "metrics.jsonl" if out_dir.is_dir() else out_dir
    samples = replay_watch(watch_inputs(path), where=str(path))
    asked = [r for r in samples if r.run is not None or r.replay is not None]
    for r in asked:  # the samples where the run or the replay asked for executors
        if as_json:
            print(json.dumps({"time": r.now, "watch": True, "run": r.run, "replay": r.replay,
                              "match": r.match}))  # fmt: skip
        else:
            print(f"t={r.now:.3f} watch  run: {_ask(r.run)}  |  replay: {_ask(r.replay)}"
                  f"  [{'match' if r.match else 'DIFFERS'}]")  # fmt: skip
    if samples and not as_json:
        ok = sum(r.match for r in samples)
        print(f"{len(samples)} watch samples ({len(asked)} with a request), {ok} match, "
              f"{len(samples) - ok} differ")  # fmt: skip


def _ask(request: Mapping[str, Any] | None) -> str:
    if request is None:
        return "-"
    return f"request {request.get('executors')} executors: {request.get('reason', '')}"
