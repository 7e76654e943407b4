"""Untrusted text made safe to print on one line.

Paths, column names and messages come from the files judged: a run folder's name, a
metric key, a chat template's `raise_exception` text. Printed raw, a newline in one
starts a line of its own (a CI log reads `::error file=...::`, `::add-mask::` or
`##vso[task.setvariable ...]` there as a command), an ESC sequence drives the terminal,
and a bidi override shows text in another order than it is. `printable` spells those
characters out instead, so a line of output is one line and reads as it is.
"""

from __future__ import annotations

import re

# C0 controls and DEL, C1 controls, the bidi embeddings/overrides/isolates and marks
# (U+202A-202E, U+2066-2069, U+200E/200F, U+061C), and the Unicode line and paragraph
# separators (U+2028/2029: a line break to some viewers).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _spelled(m: re.Match[str]) -> str:
    c = m.group()
    named = _NAMED.get(c)
    if named is not None:
        return named
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def printable(text: str) -> str:
    """`text` with every control, bidi and line-separator character written as its escape
    (a newline as `\\n`, ESC as `\\x1b`, U+202E as `\\u202e`); other text unchanged."""
    return _UNSAFE.sub(_spelled, text)
