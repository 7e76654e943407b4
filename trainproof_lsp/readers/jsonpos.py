"""Source positions of the elements of a JSON array, without a second full parse.

Used by the trainer_state.json and JSON-array readers: the values come from a fast
decoder, the positions from here.
"""

from __future__ import annotations

import re

# A short JSON string without escapes, a structural bracket, or a lone quote: the start
# of a long string or of one with escapes, which `_string_end` skips with bytes.find (a
# regex walks a long string ~50x slower than memchr does). Everything else between
# brackets is skipped by the regex engine in C. No string is matched as a repeated group
# such as `(?:[^"\\]|\\.)*`: Python's re keeps a backtracking record for every
# repetition of a group (~125 bytes a character: one 8 MiB string took 1 GB).
_SHORT_STRING = 4096
_TOKENS = re.compile(rb'"[^"\\]{0,%d}"|[\[\]{}"]' % _SHORT_STRING)


# The rest of a string after an escaped quote: runs without escapes (a character class,
# which keeps no record) and at most this many escapes a match, so one match keeps at most
# ~0.5 MB of records however long the string; `_string_end` goes on match after match.
_ESCAPES_PER_MATCH = 4096
_STRING_REST = re.compile(rb'[^"\\]*(?:\\.[^"\\]*){0,%d}' % _ESCAPES_PER_MATCH, re.DOTALL)


def _string_end(data: bytes, at: int) -> int:
    """The offset just past the closing quote of the string whose opening quote is at
    `at`, or -1 when it never closes. Linear in the string, in time and memory."""
    q = data.find(b'"', at + 1)
    if q < 0:
        return -1
    if data[q - 1] != 0x5C:  # no backslash before the first quote: it closes the string
        return q + 1  # (data[at] is a quote, so q - 1 >= at never reads before the string)
    pos = at + 1
    n = len(data)
    while True:  # escapes: walked by the bounded pattern
        m = _STRING_REST.match(data, pos)
        end = m.end() if m is not None else pos  # (it always matches: each part may match nothing)
        if end >= n or (end == pos and data[end] != 0x22) or (data[end] == 0x5C and end + 1 >= n):
            return -1  # the end, a backslash at the end, or (never) no progress
        pos = end
        if data[pos] == 0x22:  # '"'
            return pos + 1
        # Stopped at the escape the bound left for the next match.


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
    pos = open_pos
    while pos >= 0:
        resume = -1  # where to scan on from after a string with escapes
        for m in _TOKENS.finditer(data, pos):
            at = m.start()
            c = data[at]
            if c == 0x22:  # '"': strings never change depth
                if m.end() == at + 1:  # a lone quote: a string with escapes (or one never closed)
                    resume = _string_end(data, at)
                    if resume >= 0:
                        break
                continue
            if c in (0x5B, 0x7B):  # '[' '{'
                depth += 1
                if depth == 2:
                    if c == 0x7B:
                        starts.append(at)
                    else:
                        only_objects = False
            else:
                depth -= 1
                if depth == 1 and c == 0x7D:  # '}'
                    ends.append(at + 1)
                if depth == 0:
                    return starts, ends, only_objects
        pos = resume
    return starts, ends, False
