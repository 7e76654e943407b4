"""The whole-file scan: a dataset's head decides its layout (JSON Lines or a JSON array,
a BOM, CRLF line ends, binary data refused), then its chunks stream through the
Scanner (dataset_fast.py) and the duplicates are found from the row hashes.
"""

from __future__ import annotations

import gc
from array import array
from pathlib import Path

import msgspec

from ..core.model import ReadError
from ..core.positions import ByteIndex
from .dataset_duplicates import find_duplicates
from .dataset_fast import Scanner
from .dataset_records import (
    _BYTE_AT, BOM, MALFORMED, DatasetScan, FieldMap, LineFacts, LineProblem, _dec_any, _problem, check_record,
    sorted_problems)
from .dataset_sources import CHUNK_BYTES, DEFAULT_MAX_ROW, OverCap, Source, newline_counter
from .jsonpos import element_ranges

# How much of a file's head is looked at for NUL bytes (binary data, not a dataset): a
# JSON text never holds one raw, and a binary file shows one in its first few KiB.
NUL_CHECK_BYTES = 4096
# The head read first: the file's layout (JSON Lines or a JSON array) and its line ends
# (CRLF) are judged from it.
HEAD_BYTES = 1 << 17


def has_nul(head: bytes) -> bool:
    """Binary data: a NUL byte near the start (no JSON text holds one raw)."""
    return b"\x00" in head[:NUL_CHECK_BYTES]


def opens_array(head: bytes) -> bool:
    """Whether the first value of the file (after a BOM and whitespace) opens a JSON
    array: the file may then be one array of records rather than JSON Lines."""
    return head.removeprefix(BOM).lstrip(b" \t\r\n").startswith(b"[")


def scan_dataset(path: Path | str, data: bytes | None = None, *, max_row_bytes: int = 0,
                 block_bytes: int = CHUNK_BYTES, start: int = 0, end: int | None = None,
                 duplicates: bool = True, fields: FieldMap | None = None) -> DatasetScan:
    """Stream a JSONL dataset (or read a JSON array of records) into a DatasetScan.
    A row longer than `max_row_bytes` (default: caps.py max_row_mb) is not read;
    `block_bytes` is the size of the chunks it is read and decoded in. `start`/`end`: only
    that byte range of the file, cut at line boundaries, scanned as if it were the file.
    Without `duplicates` the duplicate search is left to the caller (the scan's hashes
    hold what it needs).

    Raises ReadError (one line) when the file cannot be read at all."""
    path = Path(path)
    name = str(path)
    try:
        with Source(path, data, max_row_bytes, block_bytes=block_bytes, start=start, end=end) as src:
            head = src.head(HEAD_BYTES)
            bom = head.startswith(BOM)
            skip = len(BOM) if bom else 0
            if has_nul(head):
                raise ReadError(f"{name}: binary data (NUL bytes), not a JSONL dataset")
            crlf = b"\r\n" in head
            if opens_array(head):
                data = src.all(head)
                jsonl = path.suffix.lower() in (".jsonl", ".ndjson")
                # A .jsonl file whose first row happens to be an array is JSONL with a
                # bad first line, not a JSON array: read it line by line.
                if not jsonl or _is_json_array(data[skip:]):
                    return _scan_json_array(name, data, skip, bom, crlf, duplicates, fields)
                with Source(path, data, block_bytes=block_bytes) as mem:
                    return _scan_jsonl(name, mem, mem.head(HEAD_BYTES), skip, bom, crlf, duplicates, fields)
            return _scan_jsonl(name, src, head, skip, bom, crlf, duplicates, fields)
    except OSError as e:
        raise ReadError(f"{name}: cannot read ({e.strerror or e})") from None


def _scan_jsonl(name: str, src: Source, head: bytes, skip: int, bom: bool, crlf: bool, duplicates: bool,
                fields: FieldMap | None = None) -> DatasetScan:
    sc = Scanner(name, fields)
    base = 0
    size = skip
    newlines = newline_counter(src.size())
    enabled = gc.isenabled()
    gc.disable()  # the chunk path allocates only acyclic objects; GC passes are pure cost
    try:
        for chunk in src.chunks(head, skip):
            if isinstance(chunk, OverCap):
                size += chunk.size
                sc.unread(base, chunk.size, src.max_row or DEFAULT_MAX_ROW)
                base += 1
                continue
            size += len(chunk)
            n = newlines(chunk) + (0 if chunk.endswith(b"\n") else 1)
            sc.run(base, chunk, n)
            base += n
    finally:
        if enabled:
            gc.enable()
    return _finish(sc, name, "jsonl", size, base, bom, crlf, duplicates)


def _is_json_array(data: bytes) -> bool:
    try:
        msgspec.json.decode(data, type=list[msgspec.Raw])
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, RecursionError):
        return False
    return True


def _scan_json_array(name: str, data: bytes, skip: int, bom: bool, crlf: bool, duplicates: bool,
                     fields: FieldMap | None = None) -> DatasetScan:
    """A pretty-printed (or compact) JSON array of records: each element is checked by
    the reference path and located at its first line."""
    sc = Scanner(name, fields)
    index = ByteIndex(data)
    lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    try:
        elements = msgspec.json.decode(data[skip:], type=list[msgspec.Raw])
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        m = _BYTE_AT.search(str(e))
        at = skip + int(m.group(1)) if m else len(data.rstrip())
        ln, col = index.position(min(at, len(data)))
        sc.problems.append(_problem(ln, MALFORMED, f"invalid JSON array at line {ln + 1}, column {col + 1}: "
                                                   f"{str(e).split(' (byte')[0]}", col, col + 1, column=col + 1))
        return _finish(sc, name, "json-array", len(data), lines, bom, crlf, duplicates, zero_hashes=lines)
    open_pos = data.find(b"[", skip)
    ranges = element_ranges(data, open_pos, len(elements))
    sc.exact = array("Q", bytes(8 * lines))
    sc.near = array("Q", bytes(8 * lines))
    for k, raw in enumerate(elements):
        if ranges is not None:
            start, end = ranges[0][k], ranges[1][k]
        else:  # a non-object element: no range from the object scanner
            start = end = open_pos
        span = index.span(start, end)
        try:
            obj = _dec_any.decode(bytes(raw))
        except msgspec.DecodeError:  # cannot happen after the typed decode; be safe
            continue
        f = check_record(span.start_line, obj, span.start_char + 1, fields)
        f = LineFacts(line=f.line, format=f.format, exact=f.exact, near=f.near, conversational=f.conversational,
                      problems=tuple(
            LineProblem(line=p.line, kind=p.kind, message=p.message, start=span.start_char,
                        end=span.end_char, end_line=span.end_line, evidence=p.evidence) for p in f.problems))
        sc.take(f)
        if f.exact:
            sc.exact[span.start_line] = f.exact
            sc.near[span.start_line] = f.near
    return _finish(sc, name, "json-array", len(data), lines, bom, crlf, duplicates)


def _finish(sc: Scanner, name: str, layout: str, size: int, lines: int, bom: bool, crlf: bool,
            duplicates: bool, zero_hashes: int = 0) -> DatasetScan:
    if zero_hashes:
        sc.exact = array("Q", bytes(8 * zero_hashes))
        sc.near = array("Q", bytes(8 * zero_hashes))
    dups, near = find_duplicates(sc.exact, sc.near) if duplicates else ((), ())
    formats = tuple(sorted(((f, n, sc.format_first[f]) for f, n in sc.format_rows.items()),
                           key=lambda t: (-t[1], t[2])))
    return DatasetScan(path=name, layout=layout, size=size, lines=lines, records=sc.records,
                       blank_lines=sc.blank, bom=bom, crlf=crlf, formats=formats,
                       problems=tuple(sorted_problems(sc.problems)), duplicates=dups, near_duplicates=near,
                       exact=sc.exact, near=sc.near, conversational_pairs=sc.pairs_conversational)


