"""Text that is safe to write to a terminal: control characters, C1 controls, bidi and
zero-width marks as ``\\uXXXX`` escapes. Every human-readable output uses it for text
that comes from the database (names, values, messages), so a name holding an escape
sequence cannot rewrite an administrator's terminal."""

from __future__ import annotations

import re

UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


def escape_text(text: str) -> str:
    """Unsafe characters as ``\\uXXXX`` escapes (for names and message contents)."""
    if UNSAFE.search(text) is None:
        return text
    return UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
