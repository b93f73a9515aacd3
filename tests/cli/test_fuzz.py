"""Fuzzing every command: malformed input ends in one line and exit 2 (3: infeasible).

Generated files (random bytes, random YAML, the bundled examples with a key added,
removed or a value replaced by NaN, negative, huge or mistyped values) and generated
option values go through the real entry point. Commands that would start Spark
(``run``, ``demo``, ``profile``) get only input that must be refused before Spark
starts: each case carries at least one invalid item.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamscale.cli.app import main

EXAMPLES = Path(__file__).parents[2] / "examples"
TOPOLOGIES = ["microbench.yaml", "linear.yaml", "diamond.yaml", "albic-pipeline.yaml"]
OTHERS = ["cluster.yaml", "microbench-snapshot.yaml", "microbench-plan.yaml"]

BAD_SCALARS = st.sampled_from(
    [math.nan, math.inf, -math.inf, -1, 0, -1e300, 1e300, 10**30, -(10**30), "abc", "", None,
     True, [], {}, [1, "x"], {"a": None}, "1e999", 0.5, 3]
)  # fmt: skip
BAD_NUMBERS = st.sampled_from(["nan", "inf", "-inf", "-1", "0", "1e999", "abc", "", "1e400", "-0"])

FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _mutate(doc: Any, rnd: random.Random, value: Any) -> Any:
    """``doc`` with one node replaced by ``value``, deleted, or given an unknown key."""
    if isinstance(doc, dict) and doc:
        key = rnd.choice(list(doc))
        roll = rnd.random()
        if roll < 0.15:
            return {k: v for k, v in doc.items() if k != key}
        if roll < 0.3:
            return {**doc, "unknown_" + str(key): value}
        if roll < 0.55 or not isinstance(doc[key], dict | list):
            return {**doc, key: value}
        return {**doc, key: _mutate(doc[key], rnd, value)}
    if isinstance(doc, list) and doc:
        i = rnd.randrange(len(doc))
        out = list(doc)
        out[i] = _mutate(doc[i], rnd, value) if rnd.random() < 0.7 else value
        return out
    return value


def _check(code: int, err: str, allowed: tuple[int, ...] = (0, 2, 3)) -> None:
    assert "Traceback" not in err, err
    assert code in allowed, (code, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) <= 3, err
    if code != 0:
        assert lines and lines[0].startswith("streamscale: error:"), err


def _write(tmp: Path, name: str, data: bytes) -> Path:
    p = tmp / name
    p.write_bytes(data)
    return p


@FUZZ
@given(data=st.binary(max_size=300), suffix=st.sampled_from([".yaml", ".json", ".yml", ""]))
def test_validate_random_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes, suffix: str
) -> None:
    path = _write(tmp_path, "f" + suffix, data)
    code = main(["validate", str(path)])
    _check(code, capsys.readouterr().err)


@FUZZ
@given(name=st.sampled_from(TOPOLOGIES + OTHERS), seed=st.integers(0, 10**6), value=BAD_SCALARS)
def test_validate_mutated_examples(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, seed: int, value: Any
) -> None:
    doc = yaml.safe_load((EXAMPLES / name).read_text())
    bad = _mutate(doc, random.Random(seed), value)
    path = _write(tmp_path, name, yaml.safe_dump(bad).encode())
    code = main(["validate", str(path), "--rate", "100"])
    _check(code, capsys.readouterr().err)


@FUZZ
@given(
    which=st.sampled_from(["topology", "cluster"]), seed=st.integers(0, 10**6), value=BAD_SCALARS
)
def test_plan_on_mutated_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], which: str, seed: int, value: Any
) -> None:
    topo, cluster = EXAMPLES / "microbench.yaml", EXAMPLES / "cluster.yaml"
    src = topo if which == "topology" else cluster
    bad = _mutate(yaml.safe_load(src.read_text()), random.Random(seed), value)
    path = _write(tmp_path, src.name, yaml.safe_dump(bad).encode())
    args = [str(path if which == "topology" else topo), "--cluster"]
    args.append(str(path if which == "cluster" else cluster))
    code = main(["plan", *args, "--rate", "1000"])
    _check(code, capsys.readouterr().err)


@FUZZ
@given(
    option=st.sampled_from(["--rate", "--seed", "--param", "--allocator", "--current", "--x"]),
    value=BAD_NUMBERS | st.text(max_size=12),
)
def test_plan_bad_options(capsys: pytest.CaptureFixture[str], option: str, value: str) -> None:
    args = [str(EXAMPLES / "microbench.yaml"), "--cluster", str(EXAMPLES / "cluster.yaml")]
    if option == "--param":
        value = f"{value or 'k'}={value}"
    code = main(["plan", *args, option, value])
    _check(code, capsys.readouterr().err)


# Each case below holds an item that is invalid whatever else is drawn, so Spark never starts.
INVALID_RUN = st.sampled_from(
    [
        ["--policy", "no-such-policy"],
        ["--param", "no_such_setting=1"],
        ["--param", "theta=0.5"],
        ["--param", "interval_s=-2"],
        ["--param", "max_cores=nan"],
        ["--master", "nowhere"],
        ["--duration", "-5"],
        ["--duration", "nan"],
        ["--max-batches", "0"],
        ["--out", "/proc/streamscale/x"],
        ["--unknown-flag"],
    ]
)
OPTIONAL_RUN = st.lists(
    st.sampled_from(
        [
            ["--policy", "static"],
            ["--param", "theta=1.5"],
            ["--duration", "3"],
            ["--seed", "4"],
            ["--max-batches", "2"],
        ]
    ),
    max_size=3,
)


@FUZZ
@given(bad=INVALID_RUN, extra=OPTIONAL_RUN, job=st.sampled_from(["microbench.yaml", "random"]))
def test_run_refuses_before_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: list[str], extra: list[list[str]],
    job: str,
) -> None:  # fmt: skip
    path = EXAMPLES / job if job != "random" else _write(tmp_path, "job.yaml", b"\xff\x00{")
    argv = ["run", str(path), *[t for pair in extra for t in pair], *bad]
    code = main(argv)
    _check(code, capsys.readouterr().err, allowed=(2,))


INVALID_DEMO = st.sampled_from(
    [
        ["--policies", "elastic,nope"],
        ["--policies", ","],
        ["--duration", "0"],
        ["--cost-ms", "-1"],
        ["--alpha", "nan"],
        ["--rate", "inf"],
        ["--keys", "0"],
        ["--trigger", "-1"],
        ["--seed", "x"],
        ["--out", "/proc/streamscale/x"],
    ]
)


@FUZZ
@given(bad=INVALID_DEMO, extra=st.sampled_from([[], ["--omega", "4"], ["--alpha", "1.0"]]))
def test_demo_refuses_before_spark(
    capsys: pytest.CaptureFixture[str], bad: list[str], extra: list[str]
) -> None:
    code = main(["demo", *extra, *bad])
    _check(code, capsys.readouterr().err, allowed=(2,))


INVALID_PROFILE = st.sampled_from(
    [
        ["--threads", "2,4"],
        ["--threads", "1,1"],
        ["--threads", "x"],
        ["--rates", "-5,10"],
        ["--rates", "nan"],
        ["--start-rate", "1e9"],
        ["--growth", "1"],
        ["--trial-seconds", "0"],
        ["--warmup", "-1"],
        ["--param", "nope=1"],
        ["--param", "digits=-4"],
        ["--param", "noequals"],
        ["--out", "/nonexistent-dir/m.yaml"],
    ]
)


@FUZZ
@given(bad=INVALID_PROFILE, task=st.sampled_from(["pi", "xml_parse", "bogus"]))
def test_profile_refuses_before_spark(
    capsys: pytest.CaptureFixture[str], bad: list[str], task: str
) -> None:
    if task == "xml_parse" and bad[1].startswith("digits"):
        bad = ["--param", "elements=0"]
    code = main(["profile", task, *bad])
    _check(code, capsys.readouterr().err, allowed=(2,))


@FUZZ
@given(
    name=st.sampled_from(["albic", "nope", ""]),
    option=st.sampled_from(["--seed", "--out", "--quick-x"]),
    value=BAD_NUMBERS,
)
def test_reproduce_bad_arguments(
    capsys: pytest.CaptureFixture[str], name: str, option: str, value: str
) -> None:
    if name == "albic" and option == "--seed":
        value = value if value not in ("0", "-0") else "-3"  # a valid seed would run it
    if name == "albic" and option == "--out":
        value = "/proc/streamscale/" + value
    code = main(["reproduce", name, option, value])
    _check(code, capsys.readouterr().err, allowed=(2,))


def test_a_value_with_line_breaks_is_named_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    # found by test_plan_bad_options: \r and NEL in a bad value split the error line
    args = [str(EXAMPLES / "microbench.yaml"), "--cluster", str(EXAMPLES / "cluster.yaml")]
    code = main(["plan", *args, "--allocator", "\x1e0\r0\x85"])
    err = capsys.readouterr().err
    _check(code, err)
    assert err.count("\n") == 1 and "\\r" in err and "unknown allocator" in err
