"""The one place that turns generated source into functions.

pgtail writes a few hot functions per table or per column count at run time (tuple
readers, row encoders, frozen-object constructors): straight-line code with no loop or
call per column is 1.3-2.3x faster on the row path. Every such function is built here:

- its source is registered with :mod:`linecache` under a unique ``<pgtail …>`` file name,
  so a traceback through generated code shows the generated line;
- ``PGTAIL_NO_CODEGEN=1`` turns generation off: each call site then uses its plain,
  hand-written implementation, which must give byte-identical results (the test suite
  runs the encoder and decoder tests both ways).

Call sites read the switch when they build, never per row. What they build at import or
keep in a process-wide cache they register with `on_reset`, so that `reset` (for a
process that changes the switch after import: the tests) rebuilds it.

Per-table code is written from the table's shape only (its column types, key positions),
with names and other per-table data in the namespace it runs in: `define_shared` compiles
each distinct source once per process and binds the compiled code to each table's
namespace, so a database of thousands of tables of a few shapes compiles a few times,
not once (or three times) per table.
"""

from __future__ import annotations

import dataclasses
import itertools
import linecache
import os
from collections.abc import Callable, Sequence
from types import CodeType, FunctionType
from typing import Any, TypeVar

_counter = itertools.count(1)
_resets: list[Callable[[], None]] = []
# (source, function names) -> their compiled code, for `define_shared`; bounded: a
# process that meets more shapes than this compiles again (never unbounded memory)
_shared: dict[tuple[str, tuple[str, ...]], tuple[CodeType, ...]] = {}
SHARED_MAX = 4096


def enabled() -> bool:
    """Whether call sites should use generated code (``PGTAIL_NO_CODEGEN`` unset or ``0``).

    Read at each call, not at import: call sites consult it when they build (never per
    row), and register what they keep with `on_reset`, so tests can switch it per test.
    """
    return os.environ.get("PGTAIL_NO_CODEGEN", "") in ("", "0")


def on_reset(rebuild: Callable[[], None]) -> Callable[[], None]:
    """Register ``rebuild`` (clear a call site's caches of built functions, rebuild what it
    built at import) to run on `reset`; returns it, so it can decorate."""
    _resets.append(rebuild)
    return rebuild


def reset() -> None:
    """Make every call site build afresh under the current ``PGTAIL_NO_CODEGEN``.

    Only for a process that changes the switch after import (the tests, which run the
    encoders and decoders both ways); pgtail itself never needs it.
    """
    for rebuild in _resets:
        rebuild()


def compile_source(source: str, label: str) -> CodeType:
    """Compile ``source`` (one or more definitions) and register it with linecache.

    ``label`` says what the code is, e.g. ``"jsonl insert public.orders"``; the file
    name becomes ``<pgtail LABEL #N>``, unique per call so two versions never share lines.
    """
    filename = f"<pgtail {label} #{next(_counter)}>"
    text = source if source.endswith("\n") else source + "\n"
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    return compile(text, filename, "exec")


def define(source: str, name: str, label: str, namespace: dict[str, Any]) -> Callable[..., Any]:
    """Execute generated ``source`` in ``namespace`` and return the function ``name`` it
    defines. ``namespace`` holds the globals the generated code refers to."""
    exec(compile_source(source, label), namespace)  # noqa: S102 - generated here, by pgtail
    function: Callable[..., Any] = namespace[name]
    return function


def define_all(
    source: str, names: Sequence[str], label: str, namespace: dict[str, Any]
) -> list[Callable[..., Any]]:
    """`define` for a ``source`` that defines several functions: those named ``names``,
    in that order."""
    exec(compile_source(source, label), namespace)  # noqa: S102 - generated here, by pgtail
    return [namespace[name] for name in names]


def define_shared(
    source: str, names: Sequence[str], label: str, namespace: dict[str, Any]
) -> list[Callable[..., Any]]:
    """`define_all` for source that holds no per-table data (only the shape: indexes,
    the choice of code per column type), whose globals come from ``namespace``: compiled
    once per distinct ``source`` in the process, then bound to each ``namespace``
    (``namespace`` itself is left as it was). ``label`` names the shape, not a table:
    the compiled lines serve every table of that shape."""
    key = (source, tuple(names))
    codes = _shared.get(key)
    if codes is None:
        scratch: dict[str, Any] = {}
        exec(compile_source(source, label), scratch)  # noqa: S102 - generated here, by pgtail
        codes = tuple(scratch[name].__code__ for name in names)
        if len(_shared) >= SHARED_MAX:
            _shared.clear()
        _shared[key] = codes
    return [FunctionType(code, namespace, name) for code, name in zip(codes, names, strict=True)]


def code_of(source: str, name: str, label: str) -> CodeType:
    """The code object of function ``name`` defined in ``source``, for call sites that
    bind one compiled body to several namespaces with :class:`types.FunctionType`."""
    namespace: dict[str, Any] = {}
    exec(compile_source(source, label), namespace)  # noqa: S102
    code: CodeType = namespace[name].__code__
    return code


@on_reset
def _forget_shared() -> None:
    _shared.clear()


_T = TypeVar("_T")


def fast_constructor(cls: type[_T]) -> Callable[..., _T]:
    """A positional constructor for a frozen slots dataclass that skips ``__init__``.

    A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``;
    setting the slots directly is a third faster, which counts on the row hot path
    (TupleData, Insert, Update, Delete). Same object, same fields, same order. Without
    generated code, the class itself.
    """
    if not enabled():
        return cls
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    args = ", ".join(names)
    body = "".join(f"    _set_{name}(obj, {name})\n" for name in names)
    source = f"def make({args}):\n    obj = _new(cls)\n{body}    return obj\n"
    namespace: dict[str, Any] = {"_new": object.__new__, "cls": cls}
    for name in names:
        namespace[f"_set_{name}"] = getattr(cls, name).__set__
    return define(source, "make", f"pgoutput {cls.__name__} constructor", namespace)
