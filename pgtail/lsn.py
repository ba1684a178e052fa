"""Log sequence numbers: PostgreSQL's ``X/Y`` text form <-> 64-bit ints.

LSNs are plain ints everywhere inside pgtail; they are formatted only for output.
"""

from __future__ import annotations

from pgtail.errors import ConfigurationError

MAX_LSN = (1 << 64) - 1
INVALID_LSN = 0


def parse_lsn(text: str) -> int:
    """Parse ``'16/B374D848'`` into an int; raise `ConfigurationError` on bad input."""
    stripped = text.strip()
    high, sep, low = stripped.partition("/")
    if (
        not sep
        or not high
        or not low
        or len(high) > 8
        or len(low) > 8
        or not _is_hex(high)
        or not _is_hex(low)
    ):
        raise ConfigurationError(
            f"invalid LSN {text!r}", hint="an LSN is two hex numbers, like 16/B374D848"
        )
    return (int(high, 16) << 32) | int(low, 16)


def format_lsn(value: int) -> str:
    """Format an int LSN as PostgreSQL does: upper-case hex, no zero padding."""
    if value < 0 or value > MAX_LSN:
        raise ValueError(f"LSN out of range: {value}")
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"


def _is_hex(part: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in part)
