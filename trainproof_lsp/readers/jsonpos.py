"""Source positions of the elements of a JSON array, without a second full parse.

Used by the trainer_state.json and JSON-array readers: the values come from a fast
decoder, the positions from here.
"""

from __future__ import annotations

import re

# A JSON string (with escapes) or a structural bracket. Everything else between
# brackets is skipped by the regex engine in C.
_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def array_start(data: bytes, key: bytes | None) -> int:
    """Byte offset of the '[' that opens the array under `key` (top level if None)."""
    if key is None:
        pos = 0
        while pos < len(data) and data[pos] in b" \t\r\n\xef\xbb\xbf":
            pos += 1
        return pos if pos < len(data) and data[pos] == 0x5B else -1
    # The key as it appears at the top level of a pretty or compact dump.
    m = re.search(rb'"' + re.escape(key) + rb'"\s*:\s*\[', data)
    return m.end() - 1 if m else -1


def indent_layout(data: bytes, open_pos: int) -> tuple[int, bytes, bytes, bytes] | None:
    """For the array opening at `open_pos` in the layout `json.dump(indent=N)` writes:
    the offset of its first element's `{`, the elements' indentation, and the byte
    strings that close an element (`\n<ind>}`) and separate two (`\n<ind>},\n<ind>{`).
    None when the array is not laid out so (compact, empty, or not objects)."""
    nl = data.find(b"\n", open_pos)
    if nl == -1 or data[open_pos + 1 : nl].strip():
        return None
    first = nl + 1
    brace = first
    while brace < len(data) and data[brace] in b" \t":
        brace += 1
    if brace >= len(data) or data[brace] != 0x7B:  # '{'
        return None
    indent = data[first:brace]
    closer = b"\n" + indent + b"}"
    return brace, indent, closer, closer + b",\n" + indent + b"{"


def element_ranges(data: bytes, open_pos: int, count: int) -> tuple[list[int], list[int]] | None:
    """[start, end) byte offsets of the first `count` object elements of the array at
    `open_pos`, by a token scan (any layout). None if the array does not hold `count`
    objects."""
    starts, ends, _ = object_spans(data, open_pos)
    if len(starts) < count or len(ends) < count:
        return None
    return starts[:count], ends[:count]


def object_spans(data: bytes, open_pos: int) -> tuple[list[int], list[int], bool]:
    """[start, end) byte offsets of the object elements of the array at `open_pos`, by a
    token scan (strings skipped whole by the regex, in C), and whether the array closed
    with every bracketed element an object. A number or string element is not a token:
    a caller that must rule those out checks the gaps between the objects."""
    starts: list[int] = []
    ends: list[int] = []
    depth = 0
    only_objects = True
    for m in _TOKENS.finditer(data, open_pos):
        c = m.group()[0]
        if c == 0x22:  # '"': strings never change depth
            continue
        if c in (0x5B, 0x7B):  # '[' '{'
            depth += 1
            if depth == 2:
                if c == 0x7B:
                    starts.append(m.start())
                else:
                    only_objects = False
        else:
            depth -= 1
            if depth == 1 and c == 0x7D:  # '}'
                ends.append(m.end())
            if depth == 0:
                break
    return starts, ends, depth == 0 and only_objects
