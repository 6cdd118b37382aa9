"""The attncli command (its entry point), and python -m attncli.

Its first act holds Ctrl-C, SIGTERM and SIGHUP (ending.hold), before the imports that take
most of a start-up (numpy, click): one that comes meanwhile ends the run as soon as the run
can end cleanly on it, in one line and with its status, not with a traceback from the midst
of an import. So this module, and the package's __init__ before it, import nothing else first.
"""

import os

from attncli.system import ending


def main() -> None:
    held = ending.hold()
    # OpenBLAS's threads wait spinning after each product for 2^28 cycles (its default),
    # on the cores numpy's own one-thread work (a softmax, a document's sums) then runs on;
    # told to sleep after 2^4, a 1,024-piece document through a 1B model on 2 cores took
    # 18.7 s against 23.8 (benchmarks/README.md). Read once, as numpy loads it: here, before
    # numpy; the user's own setting kept.
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
    from attncli.cli import cli  # numpy and click: imported only once the signals are held

    cli.main(prog_name="attncli", held=held)


if __name__ == "__main__":
    main()
