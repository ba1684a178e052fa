"""pgtail: tail PostgreSQL logical replication (pgoutput) as tables, JSON lines or SQL."""

from __future__ import annotations

__version__ = "0.1.0"
