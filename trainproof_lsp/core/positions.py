"""All coordinate math lives here.

Internal spans are 0-based lines and 0-based code-point columns (what Python string
indices are). Three outside conventions meet them:
- LSP wants 0-based lines and UTF-16 code-unit columns;
- text output and SARIF want 1-based lines and columns;
- readers that scan bytes know byte offsets and need lines and columns.
"""

from __future__ import annotations

from bisect import bisect_right

from .model import Span


def line_starts(data: bytes) -> list[int]:
    """Byte offset of the start of every line (line 0 starts at 0)."""
    starts = [0]
    find = data.find
    pos = find(b"\n")
    while pos != -1:
        starts.append(pos + 1)
        pos = find(b"\n", pos + 1)
    return starts


class ByteIndex:
    """Maps byte offsets of one file to (line, code-point column)."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._starts = line_starts(data)

    def line_of(self, offset: int) -> int:
        return bisect_right(self._starts, offset) - 1

    def position(self, offset: int) -> tuple[int, int]:
        line = self.line_of(offset)
        start = self._starts[line]
        # Columns count code points: decode the line's prefix (lines are short).
        column = len(self._data[start:offset].decode("utf-8", "replace"))
        return line, column

    def span(self, start: int, end: int) -> Span:
        """Span of bytes [start, end)."""
        sl, sc = self.position(start)
        el, ec = self.position(end)
        return Span(sl, sc, el, ec)


def utf16_column(line_text: str, column: int) -> int:
    """Code-point column -> UTF-16 code units, for LSP clients."""
    prefix = line_text[:column]
    # Characters outside the BMP take two UTF-16 code units.
    return column + sum(1 for ch in prefix if ord(ch) > 0xFFFF)


def one_based(span: Span) -> tuple[int, int, int, int]:
    """(start line, start column, end line, end column), 1-based, for text and SARIF."""
    return span.start_line + 1, span.start_char + 1, span.end_line + 1, span.end_char + 1


# --- LSP position encodings -------------------------------------------------------------
# A client and server agree on one unit for columns at `initialize` ("utf-16" is the
# default and what VS Code uses; Neovim >= 0.10 offers "utf-8" first, Emacs "utf-32").
# Internally a column is always a code-point index into the line's str.


def _units(ch: str, encoding: str) -> int:
    if encoding == "utf-8":
        return len(ch.encode("utf-8", "surrogatepass"))
    if encoding == "utf-32":
        return 1
    return 2 if ord(ch) > 0xFFFF else 1


def client_column(line_text: str, column: int, encoding: str = "utf-16") -> int:
    """Code-point column -> the client's column unit for `encoding`."""
    column = max(0, min(column, len(line_text)))
    prefix = line_text[:column]
    if encoding == "utf-32" or prefix.isascii():
        return column
    if encoding == "utf-8":
        return len(prefix.encode("utf-8", "surrogatepass"))
    return utf16_column(line_text, column)


def code_point_column(line_text: str, column: int, encoding: str = "utf-16") -> int:
    """The client's column (in `encoding` units) -> code-point column, clamped to the line.

    A column that falls inside a character (half a surrogate pair, the middle of a UTF-8
    sequence) rounds down to the character's start, as the LSP specification asks.
    """
    if column <= 0:
        return 0
    if encoding == "utf-32" or line_text.isascii():
        return min(column, len(line_text))
    units = 0
    for index, ch in enumerate(line_text):
        units += _units(ch, encoding)
        if units > column:
            return index
        if units == column:
            return index + 1
    return len(line_text)
