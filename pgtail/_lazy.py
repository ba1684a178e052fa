"""A package's names imported when first used (PEP 562), so that importing one of its
modules does not import them all: ``pgtail slot list`` or a shell completion then
loads the catalog's slot queries, not the doctor's facts nor the decoder.

The package lists its names once, as imports under ``if TYPE_CHECKING:`` (what mypy and
an editor read), and ends with ``__getattr__, __dir__ = lazy_names(__name__)`` under
``if not TYPE_CHECKING:`` (so that mypy still flags a name it does not have). On the
first use of a name, `lazy_names` reads those imports from the package's source and
imports that one module; the value is then kept in the package like any import's.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from typing import Any


def type_checking_imports(source: str) -> dict[str, tuple[str, str]]:
    """name -> (module, name in it) of the ``from M import ...`` statements under the
    top-level ``if TYPE_CHECKING:`` blocks of ``source``."""
    found: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Name)):
            continue
        if node.test.id != "TYPE_CHECKING":
            continue
        for statement in node.body:
            if isinstance(statement, ast.ImportFrom) and statement.module and not statement.level:
                for alias in statement.names:
                    found[alias.asname or alias.name] = (statement.module, alias.name)
    return found


def lazy_names(package: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` (its ``__name__``)."""
    module = sys.modules[package]
    table: dict[str, tuple[str, str]] = {}

    def names() -> dict[str, tuple[str, str]]:
        if not table:  # through its loader: from a file, or a zip (Spark's --py-files)
            source = module.__spec__.loader.get_source(package)  # type: ignore[union-attr]
            if source is None:
                raise ImportError(f"{package} is installed without its source", name=package)
            table.update(type_checking_imports(source))
        return table

    def __getattr__(name: str) -> Any:  # noqa: N807 - the module hook's name
        where = names().get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where[0]), where[1])
        setattr(module, name, value)
        return value

    def __dir__() -> list[str]:  # noqa: N807
        return sorted(set(vars(module)) | set(names()))

    return __getattr__, __dir__
