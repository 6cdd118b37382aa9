#!/usr/bin/env python
"""Fuzz attncli for minutes rather than seconds: the targets of tests/test_fuzz.py, in a loop.

    python fuzz/long.py --minutes 5                     # every target, the time shared evenly
    python fuzz/long.py --minutes 2 --targets cache-entry,npz-zipped
    nohup python fuzz/long.py --minutes 5 > /tmp/fuzz_long.log 2>&1 &

(Run it with the Python of the environment attncli and hypothesis are installed in, from
anywhere: it finds tests/ itself.) Each target runs in batches of --batch examples under
hypothesis's "long" profile (registered in tests/test_fuzz.py: no example database, a fresh
random seed every batch), round-robin, until its share of the time is spent. At the end it
prints, per target, the test cases run and their outcomes:

    ok                      a result
    error: TYPE             the tool's own error (AttncliError or a subclass)
    known: NAME             an open crash, pinned by an xfail regression test in
                            tests/test_fuzz.py (KNOWN; "recognised, not run" for the two
                            recognised from the input: a hang, a memory blow-up)

and every new failure (a contract violation hypothesis found and shrank) with its input.
Exit status 0 when there was no new failure, 1 otherwise. The vectors cache it uses is a
temporary directory, never the user's.
"""

from __future__ import annotations

import argparse
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


def counted(name: str, check, cases: dict):
    """The test hypothesis runs: count the case, then the target's check."""

    def test(**kwargs):
        cases[name] += 1
        check(**kwargs)

    return test


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

    from hypothesis import given, settings
    from hypothesis.errors import FailedHealthCheck, InvalidArgument, Unsatisfiable

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
    batches = {name: 0 for name in names}
    failures: list[tuple[str, str]] = []
    started = time.monotonic()
    try:
        with F.memory_cap():
            while any(b > 0 for b in budget.values()):
                for name in names:
                    if budget[name] <= 0:
                        continue
                    target = F.TARGETS[name]
                    run = settings(settings.get_profile("long"), max_examples=args.batch)(
                        given(**target.strategies)(counted(name, target.check, cases)))
                    # a hang in C code, which SIGALRM cannot interrupt: dump every thread's stack and stop
                    faulthandler.dump_traceback_later(max(900, 60 * args.batch), exit=True)
                    t = time.monotonic()
                    try:
                        run()
                    except (InvalidArgument, FailedHealthCheck, Unsatisfiable):
                        raise  # this script's mistake, not attncli's
                    except Exception as e:  # hypothesis's report of a falsifying example, shrunk
                        text = "".join(traceback.format_exception(e))
                        failures.append((name, text))
                        print(f"\n=== NEW FAILURE in {name} ===\n{text}", flush=True)
                    finally:
                        faulthandler.cancel_dump_traceback_later()
                    budget[name] -= time.monotonic() - t
                    batches[name] += 1
                elapsed = time.monotonic() - started
                print(f"[{elapsed / 60:5.1f} min] " + ", ".join(f"{n} {cases[n]}" for n in names), flush=True)
    finally:
        shutil.rmtree(cache, ignore_errors=True)

    minutes = (time.monotonic() - started) / 60
    print(f"\n== summary: {sum(cases.values()):,} test cases in {minutes:.1f} minutes; "
          f"{len(failures)} new failure(s) ==")
    for name in names:
        print(f"\n{name}: {cases[name]:,} test cases in {batches[name]} batch(es)")
        for key in sorted(k for k in F.STATS if k == name or k.startswith(name + " ")):
            for outcome, count in sorted(F.STATS[key].items(), key=lambda kv: -kv[1]):
                label = f"{outcome}" if key == name else f"{outcome} [{key[len(name) + 1:]}]"
                print(f"    {count:8,}  {label}")
        for failed, text in failures:
            if failed == name:
                print("    NEW FAILURE:\n" + "\n".join("      " + line for line in text.splitlines()[-25:]))
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
