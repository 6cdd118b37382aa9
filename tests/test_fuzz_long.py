"""fuzz/long.py's summary adds up: one outcome per test case, whatever the case did (a
result, an error, a failure hypothesis shrank, a rejected example, no contract run), and
what a case records besides its outcome (a second run, a note) listed apart."""

from __future__ import annotations

import collections
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import reject
from hypothesis import strategies as st

import test_fuzz as F
from attncli.errors import InputError

LONG = Path(__file__).resolve().parent.parent / "fuzz" / "long.py"


@pytest.fixture(scope="module")
def long():
    spec = importlib.util.spec_from_file_location("fuzz_long", LONG)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Target:
    strategies: dict
    check: callable


def _fail(message):
    raise InputError(message)


def check_mixed(x: int) -> None:
    """Every kind of case: ok, the tool's error, a rejected example, no contract run; with a
    second run and a note besides, in some."""
    if x % 5 == 0:
        reject()
    if x % 5 == 1:
        return  # no contract run
    kind, _ = F.run_contract("sum-mixed", (lambda: x) if x % 5 == 2 else (lambda: _fail(f"bad {x}")))
    if kind == "ok":
        F.run_contract("sum-mixed (again)", lambda: x)
        F.NOTES["sum-mixed"]["note: an even one"] += x % 2 == 0


def check_failing(x: int) -> None:
    """A result, then a failed assertion for most inputs: hypothesis finds it and shrinks it,
    running many more failing cases."""
    F.run_contract("sum-failing", lambda: x)
    assert x < 3


TARGETS = {
    "sum-mixed": Target(dict(x=st.integers(0, 1000)), check_mixed),
    "sum-failing": Target(dict(x=st.integers(0, 1000)), check_failing),
}


def _blocks(text: str) -> dict[str, tuple[int, list[int], list[str]]]:
    """Per target in a summary: (its cases, the counts of its outcomes, their labels)."""
    blocks = {}
    for block in text.split("\n\n")[1:]:
        lines = block.splitlines()
        name, cases = re.match(r"(\S+): ([\d,]+) test cases", lines[0]).groups()
        counts, labels = [], []
        for line in lines[1:]:
            if not line.startswith("    ") or "NEW FAILURE" in line:
                break
            count, label = line.split(None, 1)
            counts.append(int(count.replace(",", "")))
            labels.append(label)
        blocks[name] = (int(cases.replace(",", "")), counts, labels)
    return blocks


def test_the_outcomes_of_every_target_add_up_to_its_cases(long):
    names = list(TARGETS)
    cases = {n: 0 for n in names}
    outcomes = {n: collections.Counter() for n in names}
    failures = []
    for _ in range(2):  # two batches each
        for name in names:
            long.run_batch(name, TARGETS[name], 60, cases, outcomes, F.STATS, failures)
    assert [name for name, _ in failures] == ["sum-failing", "sum-failing"]
    for name in names:
        assert sum(outcomes[name].values()) == cases[name] > 0, (name, outcomes[name])
    mixed = outcomes["sum-mixed"]
    assert {"ok", "error: InputError", "no outcome", "rejected by hypothesis"} <= set(mixed)
    assert outcomes["sum-failing"]["failed: AssertionError"] > 0 and outcomes["sum-failing"]["ok"] > 0
    text = long.summary(names, cases, outcomes, {n: 2 for n in names}, F.STATS, F.NOTES, failures, 0.1)
    blocks = _blocks(text)
    assert set(blocks) == set(names)
    for name, (shown, counts, labels) in blocks.items():
        assert shown == cases[name] == sum(counts), (name, text)
        assert dict(zip(labels, counts)) == dict(outcomes[name])
    assert f"{sum(cases.values()):,} test cases" in text.splitlines()[0]
    besides = text[text.index("sum-mixed:"):].split("besides")[1]
    assert "ok [again]" in besides and "note: an even one" in besides


@pytest.mark.parametrize("error,recorded,outcome", [
    (None, {"ok": 1}, "ok"),
    (None, {"error: VectorsError": 1}, "error: VectorsError"),
    (None, {}, "no outcome"),
    (None, {"ok": 1, "error: InputError": 1}, "several: error: InputError, ok"),
    (AssertionError("x"), {"ok": 1}, "failed: AssertionError"),
    (F.ContractViolation("x"), {}, "failed: ContractViolation"),
])
def test_outcome_of_each_kind_of_case(long, error, recorded, outcome):
    assert long.outcome_of(error, collections.Counter(recorded)) == outcome


def test_a_case_hypothesis_stopped_is_rejected_not_failed(long):
    from hypothesis.errors import StopTest, UnsatisfiedAssumption

    assert long.outcome_of(StopTest(0), collections.Counter()) == "rejected by hypothesis"
    assert long.outcome_of(UnsatisfiedAssumption(), collections.Counter({"ok": 1})) == "rejected by hypothesis"
