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


def element_ranges(data: bytes, open_pos: int, count: int) -> tuple[list[int], list[int]] | None:
    """[start, end) byte offsets of the first `count` object elements of the array at
    `open_pos`. Tries the layout `json.dump(indent=N)` writes first (each element's
    braces alone on their lines at one indentation — HF's trainer_state.json), and
    falls back to a token scan for any other layout. None if the array does not hold
    `count` objects."""
    fast = _indented_ranges(data, open_pos, count)
    if fast is not None:
        return fast
    return _scanned_ranges(data, open_pos, count)


def _indented_ranges(data: bytes, open_pos: int, count: int) -> tuple[list[int], list[int]] | None:
    # Shape: `[\n<indent>{\n ... \n<indent>},\n<indent>{ ... \n<indent>}\n<outer>]`
    nl = data.find(b"\n", open_pos)
    if nl == -1 or data[open_pos + 1 : nl].strip():
        return None
    first = nl + 1
    indent_end = first
    while indent_end < len(data) and data[indent_end] in b" \t":
        indent_end += 1
    if indent_end >= len(data) or data[indent_end] != 0x7B:  # '{'
        return None if count else ([], [])
    indent = data[first:indent_end]
    opener = b"\n" + indent + b"{"
    closer = b"\n" + indent + b"}"
    starts: list[int] = []
    ends: list[int] = []
    find = data.find
    pos = first - 1  # the '\n' before the first element
    for _ in range(count):
        if find(opener, pos, pos + len(opener)) != pos:
            return None
        start = pos + 1 + len(indent)
        close = find(closer, start)
        if close == -1:
            return None
        end = close + len(closer)
        starts.append(start)
        ends.append(end)
        # Between elements only ",": the next element's "\n<indent>{" follows at once.
        pos = end + 1 if data[end : end + 1] == b"," else end
    return starts, ends


def _scanned_ranges(data: bytes, open_pos: int, count: int) -> tuple[list[int], list[int]] | None:
    starts: list[int] = []
    ends: list[int] = []
    depth = 0
    for m in _TOKENS.finditer(data, open_pos):
        tok = m.group()
        c = tok[0]
        if c == 0x22:  # '"': strings never change depth
            continue
        if c in (0x5B, 0x7B):  # '[' '{'
            depth += 1
            if depth == 2 and c == 0x7B:
                starts.append(m.start())
        else:
            depth -= 1
            if depth == 1 and c == 0x7D:
                ends.append(m.end())
            if depth == 0:
                break
    if len(starts) < count or len(ends) < count:
        return None
    return starts[:count], ends[:count]
