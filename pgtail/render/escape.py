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


# U+0080..U+009F in UTF-8: JSON lets them stand raw in a string, where a terminal may act
# on them (CSI, the 8-bit escape) or a reader take U+0085 for a line break
_C1 = re.compile(rb"\xc2([\x80-\x9f])")


def c1_escaped(lines: bytes) -> bytes:
    """JSON text with its C1 control characters escaped (``\\u0085``). Valid JSON has
    them only inside strings, where the escape means the same; and in UTF-8 the bytes
    C2 80..9F are nothing else."""
    return _C1.sub(lambda m: b"\\u%04x" % m.group(1)[0], lines)
