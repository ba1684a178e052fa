"""Allow ``python -m pgtail``."""

from __future__ import annotations

from pgtail.cli import main


def _run() -> None:
    try:
        main()
    finally:
        # CPython ends a ``-m`` run by killing itself with SIGINT, whatever exit code main
        # chose, once a KeyboardInterrupt has escaped code run from a string (dataclasses
        # and namedtuple build their methods so), even though pgtail caught it further
        # up: a Ctrl-C during start-up exited -2, not 130. Running a string clears that
        # flag; an interrupt that escapes main sets it again on its way out.
        exec("pass")  # noqa: S102 - a constant


if __name__ == "__main__":
    _run()
