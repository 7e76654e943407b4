"""The dataset reader's incremental form: a JSON Lines buffer whose lines change, and
its scan kept up to date without reading it all again.

`DatasetFeed.start(path, text)` runs the full scan (the fast chunk path) once. After
that `replace(start, end, count, old, lines)` — lines [start, end] of the old text
became `count` lines at `start` — re-scans only those lines with the reader's own
per-line reference path (`scan_line`) and updates the facts in place:

    per line   content hashes (exact, near) in two array('Q'), spliced like the buffer
    problems   by line; lines below a line-count-changing edit shift
    formats    rows per format and each format's first line
    duplicates hash -> lines for hashes seen twice or more; an edit recounts only the
               hashes it removed or added (an aligned byte search over the hash array),
               and `duplicates_from_groups` turns groups into the duplicates a full
               scan finds

`scan()` gives the updated DatasetScan, equal to a full scan of the same text (the
language server's tests check this after random edits). Where an edit could change
what a full scan decides about the whole file (the layout or binary data, from the
head), `needs_rescan` is set and the caller scans the buffer again.
"""

from __future__ import annotations

import dataclasses
from array import array
from itertools import compress
from pathlib import Path
from typing import Sequence

from .dataset_duplicates import duplicates_from_groups
from .dataset_records import BOM, DatasetScan, FieldMap, LineFacts, LineProblem, counts_as_record, scan_line, sorted_problems
from .dataset_scan import HEAD_BYTES, has_nul, opens_array, scan_dataset

# How far to look for a format's next row when an edit removed its first one, before
# asking for a re-scan of the whole buffer instead (a rare format scattered through a
# big file): 2,000 per-line checks take a few milliseconds.
FIRST_LOOKAHEAD = 2000


def _positions(raw: bytes, value: int) -> list[int]:
    """Indexes of `value` in an array('Q') given as its bytes (aligned matches only)."""
    pattern = array("Q", [value]).tobytes()
    out: list[int] = []
    find = raw.find
    at = find(pattern)
    while at != -1:
        if at % 8 == 0:
            out.append(at // 8)
            at = find(pattern, at + 8)
        else:
            at = find(pattern, at + 1)
    return out


def _groups(values: array[int], hashes: set[int]) -> dict[int, list[int]]:
    """hash -> every line holding it, for the given hashes (those seen more than once)."""
    groups: dict[int, list[int]] = {}
    if not hashes:
        return groups
    if len(hashes) <= 64:  # a few groups: C-speed byte searches
        raw = values.tobytes()
        for h in hashes:
            groups[h] = _positions(raw, h)
        return groups
    for line in compress(range(len(values)), map(hashes.__contains__, values)):  # many: one C-level pass
        groups.setdefault(values[line], []).append(line)
    return groups


def _regroup(values: array[int], groups: dict[int, list[int]], removed: array[int], added: list[int],
             end: int, delta: int) -> None:
    """Groups after an edit: shifted below it, recounted for the hashes it removed or
    added (an aligned byte search over the spliced hash array)."""
    touched = {h for h in removed if h} | {h for h in added if h}
    if delta:
        for h, lines in groups.items():
            if h not in touched:
                groups[h] = [ln + delta if ln > end else ln for ln in lines]
    if touched:
        raw = values.tobytes()
        for h in touched:
            lines = _positions(raw, h)
            if len(lines) > 1:
                groups[h] = lines
            else:
                groups.pop(h, None)


def line_facts(line: int, text: str, fields: FieldMap | None = None) -> LineFacts:
    """The facts of one line of a buffer (its text without the newline), as the full
    scan states them: a BOM opening the first line is not part of its record."""
    raw = text.encode("utf-8", "replace")
    if line == 0 and raw.startswith(BOM):
        raw = raw[len(BOM):]
    return scan_line(line, raw, fields)


class DatasetFeed:
    """One JSON Lines buffer's scan, updated line range by line range."""

    def __init__(self, scan: DatasetScan, line_count: int, *, trailing_newline: bool,
                 fields: FieldMap | None = None) -> None:
        """`scan`: the full scan of the buffer (JSON Lines layout); `line_count`: its lines
        as an editor counts them (the "" after a final newline included). The feed takes
        over the scan's hash arrays (a 100k-line buffer would copy 1.6 MB for nothing)."""
        self.path = scan.path
        self.fields = dict(fields) if fields else None  # the field mapping the scan was made with
        pad = line_count - len(scan.exact)
        self.exact, self.near = scan.exact, scan.near
        if pad > 0:
            self.exact.frombytes(bytes(8 * pad))
            self.near.frombytes(bytes(8 * pad))
        del self.exact[line_count:], self.near[line_count:]
        self.problems: dict[int, list[LineProblem]] = {}
        for p in scan.problems:
            self.problems.setdefault(p.line, []).append(p)
        self.records = scan.records
        self.blank = scan.blank_lines
        self.size = scan.size
        self.bom = scan.bom
        self.crlf = scan.crlf
        self.conversational_pairs = scan.conversational_pairs
        self.format_rows = {f: n for f, n, _ in scan.formats}
        self.format_first = {f: first for f, _, first in scan.formats}
        # Duplicate groups from the full scan's findings of them. A near group whose only
        # repeats are exact copies yields no near duplicate and may be left out: any edit
        # that could change that touches its hash, and touched hashes are recounted.
        self.exact_groups = _groups(self.exact, {self.exact[d.first] for d in scan.duplicates})
        self.near_groups = _groups(self.near, {self.near[d.first] for d in scan.near_duplicates})
        self.needs_rescan = False
        self.rescanned = 0  # lines re-scanned (the caller resets it when it reports)
        self._line_count = line_count
        self._trailing_empty = trailing_newline

    @classmethod
    def start(cls, path: Path | str, text: str, fields: FieldMap | None = None
              ) -> tuple[DatasetScan, DatasetFeed | None]:
        """The full scan of a buffer, and a feed for it when its layout allows line-by-line
        updates (JSON Lines; a JSON array is scanned whole each time). Raises ReadError
        as `scan_dataset` does."""
        scan = scan_dataset(path, text.encode("utf-8", "replace"), fields=fields)
        if scan.layout != "jsonl":
            return scan, None
        return scan, cls(scan, text.count("\n") + 1, trailing_newline=text.endswith("\n"), fields=fields)

    def replace(self, start: int, end: int, count: int, old: Sequence[str], lines: Sequence[str]) -> None:
        """Lines [start, end] of the old text (whose text was `old`) became the `count`
        lines at `start` of `lines`, the whole new text by line."""
        if self.needs_rescan:
            return  # stale already: the caller scans the whole buffer next
        s, e, k = start, end, count
        delta = k - (e - s + 1)
        # The "" after a final newline is no line to the reader: never count it.
        old_last, new_last = self._line_count - 1, len(lines) - 1
        gone = [line_facts(s + i, text, self.fields) for i, text in enumerate(old)
                if not (s + i == old_last and text == "")]
        new = [line_facts(s + i, lines[s + i], self.fields) for i in range(k)]
        self.rescanned += len(new)
        counted_new = [f for f in new if not (f.line == new_last and lines[new_last] == "")]
        for sign, facts in ((-1, gone), (1, counted_new)):
            for f in facts:
                if f.blank:
                    self.blank += sign
                if counts_as_record(f):
                    self.records += sign
                if f.format is not None:
                    self.format_rows[f.format] = self.format_rows.get(f.format, 0) + sign
                if sign > 0 and f.conversational:
                    self.conversational_pairs = True
        self.size += sum(len(t.encode("utf-8", "replace")) + 1 for t in lines[s:s + k]) - \
            sum(len(t.encode("utf-8", "replace")) + 1 for t in old)
        if any(t.endswith("\r") for t in lines[s:s + k]):
            self.crlf = True
        # problems by line
        for line in range(s, e + 1):
            self.problems.pop(line, None)
        if delta:
            self.problems = {(ln + delta if ln > e else ln): (
                [dataclasses.replace(p, line=p.line + delta,
                                     end_line=None if p.end_line is None else p.end_line + delta) for p in ps]
                if ln > e else ps) for ln, ps in self.problems.items()}
        for f in new:
            if f.problems:
                self.problems[f.line] = list(f.problems)
        # hashes and duplicate groups
        old_exact, old_near = self.exact[s:e + 1], self.near[s:e + 1]
        self.exact[s:e + 1] = array("Q", [f.exact for f in new])
        self.near[s:e + 1] = array("Q", [f.near for f in new])
        _regroup(self.exact, self.exact_groups, old_exact, [f.exact for f in new], e, delta)
        _regroup(self.near, self.near_groups, old_near, [f.near for f in new], e, delta)
        # first line of each format
        firsts = {f: first + delta if first > e else first for f, first in self.format_first.items()}
        for fmt, rows in list(self.format_rows.items()):
            if rows <= 0:
                self.format_rows.pop(fmt)
                firsts.pop(fmt, None)
        for f in new:
            if f.format is not None and (f.format not in firsts or firsts[f.format] > f.line):
                firsts[f.format] = f.line
        for fmt, first in list(firsts.items()):
            if s <= first <= e and not any(n.format == fmt and n.line == first for n in new):
                firsts[fmt] = self._next_of(fmt, s, lines)
        self.format_first = firsts
        self._line_count = len(lines)
        self._trailing_empty = bool(lines) and lines[-1] == ""
        head = _head(lines, s)
        if head is not None:
            self.bom = head.startswith(BOM)
            if has_nul(head) or opens_array(head):  # binary, or maybe a JSON array now
                self.needs_rescan = True

    def _next_of(self, fmt: str, start: int, lines: Sequence[str]) -> int:
        for line in range(start, min(len(lines), start + FIRST_LOOKAHEAD)):
            if self.format_rows.get(fmt, 0) <= 0:
                break
            if line_facts(line, lines[line], self.fields).format == fmt:
                return line
        self.needs_rescan = True  # too far to look: the caller re-scans the buffer
        return start

    def scan(self) -> DatasetScan:
        """The scan of the buffer as it is now."""
        dups, nears = duplicates_from_groups(list(self.exact_groups.values()), list(self.near_groups.values()),
                                             self.exact)
        formats = tuple(sorted(((f, n, self.format_first.get(f, 0)) for f, n in self.format_rows.items() if n > 0),
                               key=lambda t: (-t[1], t[2])))
        problems = sorted_problems(p for ps in self.problems.values() for p in ps)
        lines = self._line_count - (1 if self._trailing_empty else 0)
        return DatasetScan(path=self.path, layout="jsonl", size=self.size, lines=lines, records=self.records,
                           blank_lines=self.blank, bom=self.bom, crlf=self.crlf, formats=formats,
                           problems=tuple(problems), duplicates=dups, near_duplicates=nears,
                           exact=self.exact, near=self.near, conversational_pairs=self.conversational_pairs)


def _head(lines: Sequence[str], start: int) -> bytes | None:
    """The buffer's head as the full scan reads it (its first HEAD_BYTES bytes), when an
    edit starting at line `start` reaches into it; None when it does not."""
    parts: list[bytes] = []
    size = 0
    for i, line in enumerate(lines):
        if size >= HEAD_BYTES:
            return None if i <= start else b"\n".join(parts)[:HEAD_BYTES]
        raw = line.encode("utf-8", "replace")
        parts.append(raw)
        size += len(raw) + 1
    return b"\n".join(parts)[:HEAD_BYTES]
