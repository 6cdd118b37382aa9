"""attncli explore: its start-up in a real terminal (a pty) against `attncli scores`, and
the time a key press takes to redraw on a 30-token sentence.

    python benchmarks/explore.py            # 9 interleaved start-ups each, 50 key presses
    python benchmarks/explore.py --quick    # 3 and 10

Start-up: from the process's start to the first screen holding the sentence's last token,
read from the pty; then q ends it. Against it, `attncli scores SENTENCE --json` to its exit.
Key presses: on the same pty (200 x 50), the time from a key written to it to the changed
text read back (the side panel's "column k", the title's "temperature t"), their medians.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import re
import select
import statistics
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from vectors import PYTHON, machine  # noqa: E402

ATTNCLI = str(Path(PYTHON).with_name("attncli"))
SENTENCE = "The earth is like an orange"
LONG = ("the river bank was green and the old man sat on it with his dog while the children ran to the water "
        "and the birds sang in the tall trees")  # 30 tokens


def explore_startup() -> float:
    """Seconds from the start of `attncli explore` to a screen that shows the sentence."""
    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
    start = time.perf_counter()
    proc = subprocess.Popen([ATTNCLI, "explore", SENTENCE], stdin=follower, stdout=follower, stderr=follower,
                            env=env, close_fds=True)
    os.close(follower)
    seen = b""
    try:
        while b"orange" not in seen.replace(b"\x1b", b""):
            ready, _, _ = select.select([leader], [], [], 10)
            if not ready:
                raise SystemExit("explore drew nothing in 10 s")
            seen += os.read(leader, 65536)
        took = time.perf_counter() - start
        os.write(leader, b"q")
        while proc.poll() is None:  # read what it writes as it ends, or it may block on a full pty
            ready, _, _ = select.select([leader], [], [], 0.1)
            if ready:
                try:
                    os.read(leader, 65536)
                except OSError:
                    break
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(leader)
    return took


def scores_time() -> float:
    start = time.perf_counter()
    subprocess.run([ATTNCLI, "scores", SENTENCE, "--json"], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


ANSI = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b[@-_]")


class Screen:
    """`attncli explore` on a pty of the given size: keys in, the text it writes out."""

    def __init__(self, sentence: str, columns: int = 200, lines: int = 50):
        self.leader, follower = pty.openpty()
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color"}
        self.proc = subprocess.Popen([ATTNCLI, "explore", sentence], stdin=follower, stdout=follower,
                                     stderr=follower, env=env, close_fds=True)
        os.close(follower)
        self.seen = b""

    def wait_for(self, text: bytes, timeout: float = 10) -> None:
        """Read until `text` appears in what was written since the last wait."""
        deadline = time.monotonic() + timeout
        while text not in ANSI.sub(b"", self.seen):
            ready, _, _ = select.select([self.leader], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise SystemExit(f"explore did not show {text!r} within {timeout} s")
            self.seen += os.read(self.leader, 65536)
        self.seen = b""

    def press(self, key: bytes, then: bytes) -> float:
        start = time.perf_counter()
        os.write(self.leader, key)
        self.wait_for(then)
        return time.perf_counter() - start

    def close(self) -> None:
        os.write(self.leader, b"q")
        deadline = time.monotonic() + 5
        while self.proc.poll() is None and time.monotonic() < deadline:  # read what it writes as it ends
            ready, _, _ = select.select([self.leader], [], [], 0.1)
            if ready:
                try:
                    os.read(self.leader, 65536)
                except OSError:
                    break
        if self.proc.poll() is None:
            self.proc.kill()
        os.close(self.leader)


def key_latency(presses: int) -> tuple[list[float], list[float]]:
    """A press of the right arrow, and of +, on a 30-token sentence: seconds from the key
    written to the pty to the changed text read back from it."""
    screen = Screen(LONG)
    moves, changes = [], []
    try:
        screen.wait_for(b"trees")
        for k in range(1, presses + 1):
            moves.append(screen.press(b"\x1b[C", f"column {k % 30} ".encode()))
            changes.append(screen.press(b"+", f"temperature {1 + k / 10:g}".encode()))
    finally:
        screen.close()
    return moves, changes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    runs, presses = (3, 10) if args.quick else (9, 50)
    load = open("/proc/loadavg").read().split()[:3]
    explore_times, scores_times = [], []
    explore_startup()  # the first start compiles the .pyc files of textual: not counted
    for _ in range(runs):
        explore_times.append(explore_startup())
        scores_times.append(scores_time())
    moves, changes = key_latency(presses)
    load_after = open("/proc/loadavg").read().split()[:3]
    e, s = statistics.median(explore_times), statistics.median(scores_times)
    print(f"machine: {machine()}")
    print(f"load average before / after: {' '.join(load)} / {' '.join(load_after)}\n")
    print("| figure | median | target |")
    print("| --- | ---: | --- |")
    print(f"| `attncli explore` to its first screen ({runs} runs) | {e:.2f} s | under 1 s |")
    print(f"| `attncli scores ... --json` to its exit (interleaved) | {s:.2f} s | |")
    print(f"| explore against scores | {e / s:.2f}x | |")
    print(f"| a cursor move on 30 tokens, key to redrawn text ({len(moves)} presses) | "
          f"{statistics.median(moves) * 1000:.0f} ms | under 100 ms |")
    print(f"| a temperature change (a new document) on 30 tokens ({len(changes)} presses) | "
          f"{statistics.median(changes) * 1000:.0f} ms | under 100 ms |")


if __name__ == "__main__":
    main()
