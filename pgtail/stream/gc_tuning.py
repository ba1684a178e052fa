"""Fewer cyclic garbage collections while a stream runs (see `fewer_collections`)."""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

# Every change allocates a few container objects (its Change, row dicts, arrays) and the
# assembler holds up to its memory bound of them until the commit. With the default
# first-generation threshold (700) the cyclic collector rescans them again and again:
# about a tenth of the CPU of draining a large transaction (bench/drain.py). They form
# no cycles, so while streaming the collector runs less often.
_GC_FIRST_GENERATION = 50_000
_gc_lock = threading.Lock()
_gc_streams = 0  # streams running in this process (threads may run several)
_gc_before: tuple[int, ...] = ()


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    global _gc_streams, _gc_before
    with _gc_lock:
        if not _gc_streams:
            _gc_before = gc.get_threshold()
            if 0 < _gc_before[0] < _GC_FIRST_GENERATION:
                gc.set_threshold(_GC_FIRST_GENERATION, *_gc_before[1:])
        _gc_streams += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_streams -= 1
            if not _gc_streams:
                gc.set_threshold(*_gc_before)
