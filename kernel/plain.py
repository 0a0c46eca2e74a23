"""Text from someone else, made safe to show on a terminal: what is not plain text is shown as an escape, never acted on.

A server's message, a revocation's reason or a certificate's field may hold a terminal escape (ESC [ ... that
recolours, moves the cursor or retitles the window), a bidi override (U+202E, which shows "txt.exe" as "exe.txt"),
a NUL, a carriage return that writes over the line, or a line break that fakes a line of our own. `shown` writes
each as \\x1b, \\u202e and so on; the registry refuses them in a revocation's reason with `first_hidden`.
"""

from __future__ import annotations

import unicodedata

# Control (Cc), format (Cf: bidi embeddings, overrides and isolates, zero-width characters), surrogate, and line and
# paragraph separator characters: none is text a person reads, and each may change how the text around it shows.
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def is_hidden(character: str) -> bool:
    return unicodedata.category(character) in HIDDEN_CATEGORIES


def shown(text: object) -> str:
    """Return `text` (a str, or any value as str() writes it) with every hidden character escaped, line breaks too."""
    return "".join(_escape(c) if is_hidden(c) else c for c in str(text))


def first_hidden(text: str, *, allowed: str = "") -> str | None:
    """Return the first hidden character of `text` that is not in `allowed`, or None."""
    return next((c for c in text if c not in allowed and is_hidden(c)), None)


def _escape(character: str) -> str:
    code = ord(character)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
