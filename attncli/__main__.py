"""The attncli command (its entry point), and python -m attncli.

Its first act holds Ctrl-C, SIGTERM and SIGHUP (ending.hold), before the imports that take
most of a start-up (numpy, click): one that comes meanwhile ends the run as soon as the run
can end cleanly on it, in one line and with its status, not with a traceback from the midst
of an import. So this module, and the package's __init__ before it, import nothing else first.
"""

from attncli.system import ending


def main() -> None:
    held = ending.hold()
    from attncli.cli import cli  # numpy and click: imported only once the signals are held

    cli.main(prog_name="attncli", held=held)


if __name__ == "__main__":
    main()
