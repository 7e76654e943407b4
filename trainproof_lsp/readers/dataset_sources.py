"""Where a dataset's bytes come from: a file or a buffer, cut into whole-line chunks
(rows longer than the row cap streamed past unread), and the records of a dataset for
the checks that need the rows themselves (token lengths, chat templates).
"""

from __future__ import annotations

import os
import sys
from io import BytesIO
from operator import methodcaller
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator, Protocol

import msgspec

from ..core.caps import DEFAULT_CAPS, MIB
from ..core.positions import ByteIndex
from .common import open_regular, read_regular
from .dataset_duplicates import NUMPY_FROM_BYTES
from .dataset_records import BOM, _dec_any
from .jsonpos import element_ranges

# Bytes per read and decode. Large enough that per-chunk overhead stays small, small
# enough that the decoded rows of one chunk stay in cache, memory stays flat, and a broken
# line (which makes the typed decoder read the lines before it in its chunk again: half a
# chunk on average) costs little. Measured: clean files scan as fast at 64 KiB as at
# 128 KiB (within noise; 2 MiB chunks cost +12% on bench_preflight.py's 1M-line file),
# and 1,000 broken lines in 1M chat rows cost 8% of a clean pass at 64 KiB
# (benchmarks/bench_broken_lines.py) against 12% at 128 KiB on a 300k-row cut of it.
CHUNK_BYTES = 1 << 16
# A longer row is streamed past unread (caps.py max_row_mb holds the why).
DEFAULT_MAX_ROW = DEFAULT_CAPS.max_row_mb * MIB


class OverCap(bytes):
    """Stands in for one line longer than the row cap, which was streamed past unread:
    `size` is its length in bytes (with its newline, when it has one)."""

    size: int


def over_cap(size: int) -> OverCap:
    marker = OverCap(b"\n")
    marker.size = size
    return marker


class Reads(Protocol):
    """What the chunker reads from: an open file, or a byte range of one."""

    def read(self, n: int = -1, /) -> bytes: ...


def file_chunks(fh: Reads, first: bytes, max_row: int = 0, *, block_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
    """Whole-line chunks: each ends with a newline except possibly the last. A line
    longer than `max_row` bytes is not kept: it is streamed past and yielded as one
    OverCap (parts of a long line are collected in a list, never re-concatenated)."""
    max_row = max_row or DEFAULT_MAX_ROW
    cut = first.rfind(b"\n")
    if cut >= 0:  # the whole lines of the head go out as they are
        yield first[:cut + 1]
        first = first[cut + 1:]
    parts = [first] if first else []  # the pending (unfinished) line
    held = len(first)
    if held > max_row:
        parts, held, skipping = [], 0, held
    else:
        skipping = 0  # bytes of an over-cap line streamed past so far (0: not skipping)
    while True:
        block = fh.read(block_bytes)
        if not block:
            if skipping:
                yield over_cap(skipping)
            elif parts:
                yield b"".join(parts)
            return
        if skipping:
            nl = block.find(b"\n")
            if nl < 0:
                skipping += len(block)
                continue
            yield over_cap(skipping + nl + 1)
            skipping, block = 0, block[nl + 1:]
            if not block:
                continue
        cut = block.rfind(b"\n")
        if cut < 0:
            parts.append(block)
            held += len(block)
            if held > max_row:  # the pending line is already longer than the cap
                skipping, parts, held = held, [], 0
            continue
        nl = block.find(b"\n")
        if parts and held + nl > max_row:
            # The pending line ends in this block, over the cap. (Lines that start and end
            # inside one block are shorter than CHUNK_BYTES, itself below any cap.)
            yield over_cap(held + nl + 1)
            parts, held = [], 0
            block, cut = block[nl + 1:], cut - nl - 1
            if cut < 0:
                parts, held = ([block], len(block)) if block else ([], 0)
                continue
        yield b"".join(parts + [block[: cut + 1]]) if parts else block[: cut + 1]
        parts = [block[cut + 1:]] if cut + 1 < len(block) else []
        held = len(block) - cut - 1


def memory_chunks(data: bytes, start: int, max_row: int = 0, *, block_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
    max_row = max_row or DEFAULT_MAX_ROW
    pos, n = start, len(data)
    while pos < n:
        nl = data.find(b"\n", pos, pos + max_row + 1)
        if nl < 0 and n - pos > max_row:  # one line longer than the row cap
            nl = data.find(b"\n", pos)
            end = n if nl < 0 else nl + 1
            yield over_cap(end - pos)
            pos = end
            continue
        end = data.rfind(b"\n", pos, pos + block_bytes)
        if pos + block_bytes >= n:
            end = n
        elif end < 0:  # a line longer than a chunk but within the cap: that line alone
            end = n if nl < 0 else nl + 1
        else:
            end += 1
        yield data[pos:end]
        pos = end


class _Range:
    """The bytes [start, end) of an open file, read like a file of their own."""

    def __init__(self, fh: BinaryIO, start: int, end: int) -> None:
        fh.seek(start)
        self.fh, self.left = fh, max(0, end - start)

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        block = self.fh.read(n) if n else b""
        self.left -= len(block)
        return block


class Source:
    """A file, a byte range of one ([start, end), cut at line boundaries), or an in-memory
    buffer, read from its start in whole-line chunks of about `block_bytes`. A range is
    streamed like a whole file, never read into memory at once."""

    def __init__(self, path: Path, data: bytes | None, max_row: int = 0, *, block_bytes: int = CHUNK_BYTES,
                 start: int = 0, end: int | None = None) -> None:
        self.path, self.data = path, data
        self.fh: BinaryIO | None = None
        self.reader: Reads | None = None
        self.length: int | None = None  # a range's
        self.max_row = max_row
        self.block_bytes = block_bytes
        self.start, self.end = start, end

    def __enter__(self) -> Source:
        if self.data is None:
            self.fh = self.reader = open_regular(self.path, buffering=0)
            if self.start or self.end is not None:
                end = self.end if self.end is not None else os.fstat(self.fh.fileno()).st_size
                self.reader = _Range(self.fh, self.start, end)
                self.length = max(0, end - self.start)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fh is not None:
            self.fh.close()

    def _file(self) -> Reads:
        assert self.reader is not None, "a file source is read inside its `with`"
        return self.reader

    def head(self, n: int) -> bytes:
        return self.data[:n] if self.data is not None else self._file().read(n)

    def all(self, head: bytes) -> bytes:
        if self.data is not None:
            return self.data
        return head + self._file().read()

    def chunks(self, head: bytes, skip: int) -> Iterator[bytes]:
        if self.data is not None:
            return memory_chunks(self.data, skip, self.max_row, block_bytes=self.block_bytes)
        return file_chunks(self._file(), head[skip:], self.max_row, block_bytes=self.block_bytes)

    def size(self) -> int:
        if self.data is not None:
            return len(self.data)
        assert self.fh is not None, "a file source is read inside its `with`"
        return self.length if self.length is not None else os.fstat(self.fh.fileno()).st_size


def newline_counter(size: int) -> Callable[[bytes], int]:
    """Newlines in a chunk: numpy's compare-and-count (4-5x bytes.count) when numpy is
    loaded, or the input is big enough that the duplicate search will load it anyway."""
    if "numpy" in sys.modules or size >= NUMPY_FROM_BYTES:
        try:  # (an import, not a sys.modules lookup: another thread may be importing it now)
            import numpy as np
        except ImportError:
            pass
        else:
            newline, u8, frombuffer, count_nonzero = np.uint8(10), np.uint8, np.frombuffer, np.count_nonzero
            return lambda chunk: int(count_nonzero(frombuffer(chunk, u8) == newline))
    count: Callable[[bytes], int] = methodcaller("count", b"\n")
    return count




def iter_records(path: Path | str, *, layout: str = "jsonl", data: bytes | None = None
                 ) -> Iterator[tuple[int, dict[str, Any]]]:
    """(0-based line, record) for every JSON object of a dataset file, streamed.

    `layout` is the scan's ("jsonl" or "json-array", `DatasetScan.layout`).
    JSONL lines that are not JSON objects are passed over (the dataset rules report them);
    the records of a JSON array are placed at the line their `{` is on."""
    if layout == "json-array":
        yield from _array_records(read_regular(path) if data is None else data)
        return
    with (BytesIO(data) if data is not None else open_regular(path)) as fh:
        for line, raw in enumerate(fh):
            if line == 0 and raw.startswith(BOM):
                raw = raw[len(BOM):]
            if not raw.strip():
                continue
            try:
                obj = _dec_any.decode(raw)  # trailing "\r\n" is JSON whitespace
            except (msgspec.DecodeError, RecursionError):
                continue
            if isinstance(obj, dict):
                yield line, obj


def _array_records(data: bytes) -> Iterator[tuple[int, dict[str, Any]]]:
    skip = len(BOM) if data.startswith(BOM) else 0
    try:
        elements = msgspec.json.decode(data[skip:], type=list[msgspec.Raw])
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return  # a broken array is TP-PRE-MALFORMED-JSONL; nothing to count
    records = []
    for raw in elements:
        try:
            obj = _dec_any.decode(bytes(raw))
        except (msgspec.DecodeError, RecursionError):
            continue
        if isinstance(obj, dict):
            records.append(obj)
    # The scanner finds the `{` of object elements only, in order, so asking for as many
    # ranges as there are objects pairs each object with its own start.
    ranges = element_ranges(data, data.find(b"[", skip), len(records))
    if ranges is None:
        return
    index = ByteIndex(data)
    for start, obj in zip(ranges[0], records):
        yield index.line_of(start), obj


