"""Progress lines on stderr that a reader gone away does not turn into a failure.

``pgtail demo 2>&1 | tee log`` or ``pgtail spark run 2>&1 | tee log``: Ctrl-C reaches
tee too, so the command's last lines ("stopped ...") go to a closed pipe. Such a line is
dropped, and stderr points at /dev/null from then on (the interpreter's final flush stays
quiet): the command still cleans up and exits with its own status (130).
"""

from __future__ import annotations

import contextlib
import os
import sys


def progress_line(text: str) -> None:
    """``text`` and a newline on stderr, flushed; dropped when stderr is closed."""
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError):  # a closed pipe; a closed file object
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, sys.stderr.fileno())
            finally:
                os.close(devnull)
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()  # what the failed write left, now to /dev/null
