"""Allow ``python -m pgtail``."""

from __future__ import annotations

from pgtail.cli import main

if __name__ == "__main__":
    main()
