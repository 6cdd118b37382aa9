#!/usr/bin/env python
"""Fuzz attncli for minutes rather than seconds: the targets of tests/test_fuzz.py, in a loop.

    python fuzz/long.py --minutes 5                     # every target, the time shared evenly
    python fuzz/long.py --minutes 2 --targets cache-entry,npz-zipped
    nohup python fuzz/long.py --minutes 5 > /tmp/fuzz_long.log 2>&1 &

(Run it with the Python of the environment attncli and hypothesis are installed in, from
anywhere: it finds tests/ itself.) Each target runs in batches of --batch examples under
hypothesis's "long" profile (registered in tests/test_fuzz.py: no example database, a fresh
random seed every batch), round-robin, until its share of the time is spent. At the end it
prints, per target, the test cases run and the outcome of each, one per case, so that the
outcomes add up to the cases:

    ok                      a result
    error: TYPE             the tool's own error (AttncliError or a subclass)
    known: NAME             an open crash, pinned by an xfail regression test in
                            tests/test_fuzz.py (KNOWN; "recognised, not run" for the two
                            recognised from the input: a hang, a memory blow-up)
    failed: TYPE            a contract violation, or a check's assertion: the case that found
                            a failure, and each case hypothesis ran while shrinking it
    rejected by hypothesis  a case hypothesis gave up on (its data ran out, or an assumption
                            did not hold) before the check ended
    no outcome              a check that returned without running its contract

then, apart, what a case may record besides its outcome (a second load from the cache, a
note), and every new failure with its input. Exit status 0 when there was no new failure,
1 otherwise. The vectors cache it uses is a temporary directory, never the user's.
"""

from __future__ import annotations

import argparse
import collections
import faulthandler
import logging
import os
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests"


def outcome_of(error: BaseException | None, recorded: collections.Counter) -> str:
    """A case's one outcome: `recorded`, what its contract run added to the target's own
    STATS, when the check ended; else what stopped it."""
    from hypothesis.errors import StopTest, UnsatisfiedAssumption

    if isinstance(error, (StopTest, UnsatisfiedAssumption)):
        return "rejected by hypothesis"
    if error is not None:
        return f"failed: {type(error).__name__}"
    labels = sorted(+recorded)
    if not labels:
        return "no outcome"
    if len(labels) == 1 and recorded[labels[0]] == 1:
        return labels[0]
    return "several: " + ", ".join(labels)


def counted(name: str, check, cases: dict, outcomes: dict, stats: dict):
    """The test hypothesis runs: count the case, run the target's check, and record the case's
    one outcome in outcomes[name] (see outcome_of), whatever the check did."""

    def test(**kwargs):
        cases[name] += 1
        before = stats[name].copy()
        error = None
        try:
            check(**kwargs)
        except BaseException as e:
            error = e
            raise
        finally:
            outcomes[name][outcome_of(error, stats[name] - before)] += 1

    return test


def run_batch(name: str, target, examples: int, cases: dict, outcomes: dict, stats: dict,
              failures: list) -> None:
    """One hypothesis run of `examples` cases of a target under the "long" profile; a failure
    hypothesis found (and shrank) is kept in `failures` with its report."""
    from hypothesis import given, settings
    from hypothesis.errors import FailedHealthCheck, InvalidArgument, Unsatisfiable

    run = settings(settings.get_profile("long"), max_examples=examples)(
        given(**target.strategies)(counted(name, target.check, cases, outcomes, stats)))
    try:
        run()
    except (InvalidArgument, FailedHealthCheck, Unsatisfiable):
        raise  # this script's mistake, not attncli's
    except Exception as e:  # hypothesis's report of a falsifying example, shrunk
        text = "".join(traceback.format_exception(e))
        failures.append((name, text))
        print(f"\n=== NEW FAILURE in {name} ===\n{text}", flush=True)


def summary(names: list[str], cases: dict, outcomes: dict, batches: dict, stats: dict, notes: dict,
            failures: list, minutes: float) -> str:
    """Per target, its cases and their outcomes (which add up to them), then apart what cases
    recorded besides (sub-runs such as a second load from the cache, notes), and its failures."""
    out = [f"== summary: {sum(cases.values()):,} test cases in {minutes:.1f} minutes; "
           f"{len(failures)} new failure(s) =="]
    for name in names:
        out.append(f"\n{name}: {cases[name]:,} test cases in {batches[name]} batch(es)")
        for outcome, count in sorted(outcomes[name].items(), key=lambda kv: (-kv[1], kv[0])):
            out.append(f"    {count:8,}  {outcome}")
        besides = [(f"{outcome} [{key[len(name) + 1:].strip('()')}]", count)
                   for key in sorted(k for k in stats if k.startswith(name + " ")) for outcome, count in stats[key].items()]
        besides += list(notes.get(name, {}).items())
        if besides:
            out.append("  besides, not cases of their own:")
            out.extend(f"    {count:8,}  {label}" for label, count in sorted(besides, key=lambda kv: (-kv[1], kv[0])))
        for failed, text in failures:
            if failed == name:
                out.append("    NEW FAILURE:\n" + "\n".join("      " + line for line in text.splitlines()[-25:]))
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="total time, shared by the targets (default 5)")
    parser.add_argument("--targets", default="", help="comma-separated target names (default: all)")
    parser.add_argument("--batch", type=int, default=300, help="examples a hypothesis run (default 300)")
    args = parser.parse_args()

    cache = tempfile.mkdtemp(prefix="attncli-fuzz-long-")
    os.environ["ATTNCLI_CACHE_DIR"] = cache  # before attncli is imported: never the user's cache
    sys.path.insert(0, str(TESTS))
    import shutil

    import test_fuzz as F

    # as in the pytest run (test_fuzz's pytestmark): gensim's numeric warnings on nonsense
    # headers and its log lines about undecodable words are not part of the contract
    warnings.simplefilter("ignore", RuntimeWarning)
    warnings.simplefilter("ignore", UserWarning)
    for name in ("gensim", "smart_open"):
        logging.getLogger(name).addHandler(logging.NullHandler())
        logging.getLogger(name).propagate = False

    names = [n for n in args.targets.split(",") if n] or list(F.TARGETS)
    unknown = sorted(set(names) - set(F.TARGETS))
    if unknown:
        parser.error(f"no target {', '.join(unknown)}; the targets are {', '.join(F.TARGETS)}")

    print(f"fuzzing {len(names)} targets for {args.minutes:g} minutes, batches of {args.batch}", flush=True)
    F.seeds()
    F.entries()
    F.some_vocabulary()
    budget = {name: args.minutes * 60 / len(names) for name in names}
    cases = {name: 0 for name in names}
    outcomes = {name: collections.Counter() for name in names}
    batches = {name: 0 for name in names}
    failures: list[tuple[str, str]] = []
    started = time.monotonic()
    try:
        with F.memory_cap():
            while any(b > 0 for b in budget.values()):
                for name in names:
                    if budget[name] <= 0:
                        continue
                    # a hang in C code, which SIGALRM cannot interrupt: dump every thread's stack and stop
                    faulthandler.dump_traceback_later(max(900, 60 * args.batch), exit=True)
                    t = time.monotonic()
                    try:
                        run_batch(name, F.TARGETS[name], args.batch, cases, outcomes, F.STATS, failures)
                    finally:
                        faulthandler.cancel_dump_traceback_later()
                    budget[name] -= time.monotonic() - t
                    batches[name] += 1
                elapsed = time.monotonic() - started
                print(f"[{elapsed / 60:5.1f} min] " + ", ".join(f"{n} {cases[n]}" for n in names), flush=True)
    finally:
        shutil.rmtree(cache, ignore_errors=True)

    minutes = (time.monotonic() - started) / 60
    print("\n" + summary(names, cases, outcomes, batches, F.STATS, F.NOTES, failures, minutes))
    known = {k.name: k.test for k in F.KNOWN}
    known.update(getattr(F, "RECOGNISED", {}))
    seen = sorted({o.split(": ", 1)[1].split(" (")[0] for c in F.STATS.values() for o in c if o.startswith("known: ")})
    if seen:
        print("\nknown open crashes met (each pinned by an xfail test in tests/test_fuzz.py):")
        for k in seen:
            print(f"    {k:32} {known.get(k, '')}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
