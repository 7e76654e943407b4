"""Datasets in the editor: the engine's preflight (preflight.py, readers/dataset.py,
rules/dataset.py) on the buffer, kept up to date line by line.

Opening a dataset runs the reader's full scan once (its fast chunked path). After that an
edit re-scans only the lines it touched with the reader's own per-line reference path
(`scan_line`) and updates the scan's facts in place:

    per line   content hashes (exact, near) in two array('Q'), spliced like the buffer
    problems   by line; lines below a line-count-changing edit shift
    formats    rows per format and each format's first line
    duplicates hash -> lines for hashes seen twice or more; an edit recounts only the
               hashes it removed or added (an aligned byte search over the hash array),
               and the reader's `duplicates_from_groups` turns groups into the same duplicates a
               full scan finds

and the preflight rules run over the updated scan (`preflight.dataset_report`). Nothing
here decides what is wrong with a row: the reader states facts, the rules judge.
tests/test_lsp_datasets.py checks that after random edits the incremental report equals
a full re-scan of the same text.
"""

from __future__ import annotations

import dataclasses
from array import array
from itertools import compress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.model import Report
from .documents import LineEdit
from .kinds import optional_module

if TYPE_CHECKING:
    from ..core.config import Config

UNAVAILABLE = "dataset checks are not available in this version (no trainproof_lsp.judge.preflight)"
# How far to look for a format's next row when an edit removed its first one, before
# re-scanning the whole buffer instead (a rare format scattered through a big file).
_FIRST_LOOKAHEAD = 2000
_BOM = "\ufeff"
_INCREMENTAL_MAX_LINES = 2000  # lines an edit may touch and still be re-scanned line by line
_HEAD_BYTES = 4096  # how far the reader's head checks (layout, NUL bytes) look, and then some


def preflight():
    module = optional_module("judge.preflight")
    return module if module is not None and hasattr(module, "judge_dataset") else None


def available() -> bool:
    return preflight() is not None


def _reader():
    return optional_module("readers.dataset")


def incremental_available() -> bool:
    reader = _reader()
    return available() and reader is not None and all(
        hasattr(reader, n) for n in ("scan_dataset", "scan_line", "duplicates_from_groups", "DatasetScan"))


def judge_disk(path: Path, config: "Config") -> Report | None:
    module = preflight()
    return None if module is None else module.judge_dataset(path, config)


def _counts_as_record(facts: Any, malformed: str) -> bool:
    # The reader's own rule (readers/dataset.py _Scanner.take): a line is a record unless
    # it is blank or holds nothing but a MALFORMED problem.
    return not facts.blank and (facts.format is not None or not facts.problems
                                or facts.problems[0].kind != malformed)


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


def _groups(values: array, hashes: set[int]) -> dict[int, list[int]]:
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


class DatasetSession:
    """One dataset buffer's scan facts, updated by edits."""

    def __init__(self, path: Path, config: "Config", scan: Any, line_count: int) -> None:
        self._ds = _reader()
        self._pf = preflight()
        self.path = str(path)
        self.config = config
        # The scan's own arrays, padded or cut to the buffer's lines (not copied: the scan
        # is this session's, and a 100k-line buffer would copy 1.6 MB for nothing).
        pad = line_count - len(scan.exact)
        self.exact, self.near = scan.exact, scan.near
        if pad > 0:
            self.exact.frombytes(bytes(8 * pad))
            self.near.frombytes(bytes(8 * pad))
        del self.exact[line_count:], self.near[line_count:]
        self.problems: dict[int, list[Any]] = {}
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
        self.rescanned = 0  # lines re-scanned since the last report (for `show server info`)
        self._report: Report | None = None
        self._line_count = line_count
        self._trailing_empty = False

    # --- edits ------------------------------------------------------------------------------

    def _facts(self, line: int, text: str) -> Any:
        if line == 0 and text.startswith(_BOM):
            text = text[1:]
        return self._ds.scan_line(line, text.encode("utf-8", "replace"))

    def apply(self, edit: LineEdit, lines: list[str]) -> None:
        """Update the facts for `edit`, already applied to `lines`."""
        self._report = None
        if self.needs_rescan:
            return  # stale already: the next check scans the whole buffer
        if edit.whole or edit.count + len(edit.old) > _INCREMENTAL_MAX_LINES:
            # A whole-buffer replacement or a big paste: one full scan in a worker beats
            # thousands of per-line scans on the event loop.
            self.needs_rescan = True
            return
        ds = self._ds
        s, e, k, delta = edit.start, edit.end, edit.count, edit.delta
        # The "" after a final newline is no line to the reader: never count it.
        old_last, new_last = self._line_count - 1, len(lines) - 1
        old = [self._facts(s + i, text) for i, text in enumerate(edit.old)
               if not (s + i == old_last and text == "")]
        new = [self._facts(s + i, lines[s + i]) for i in range(k)]
        self.rescanned += len(new)
        counted_new = [f for f in new if not (f.line == new_last and lines[new_last] == "")]
        malformed = ds.MALFORMED
        # counters
        for sign, facts in ((-1, old), (1, counted_new)):
            for f in facts:
                if f.blank:
                    self.blank += sign
                if _counts_as_record(f, malformed):
                    self.records += sign
                if f.format is not None:
                    self.format_rows[f.format] = self.format_rows.get(f.format, 0) + sign
                if sign > 0 and f.conversational:
                    self.conversational_pairs = True
        self.size += sum(len(t.encode("utf-8", "replace")) + 1 for t in lines[s:s + k]) - \
            sum(len(t.encode("utf-8", "replace")) + 1 for t in edit.old)
        if s == 0 and lines:
            self.bom = lines[0].startswith(_BOM)
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
        self._regroup(self.exact, self.exact_groups, old_exact, [f.exact for f in new], e, delta)
        self._regroup(self.near, self.near_groups, old_near, [f.near for f in new], e, delta)
        # first line of each format
        firsts = {}
        for f, first in self.format_first.items():
            firsts[f] = first + delta if first > e else first
        for f, rows in list(self.format_rows.items()):
            if rows <= 0:
                self.format_rows.pop(f)
                firsts.pop(f, None)
        for f in new:
            if f.format is not None and (f.format not in firsts or firsts[f.format] > f.line):
                firsts[f.format] = f.line
        for f, first in list(firsts.items()):
            if s <= first <= e and not any(n.format == f and n.line == first for n in new):
                firsts[f] = self._next_of(f, s, lines)
        self.format_first = firsts
        self._line_count = len(lines)
        self._trailing_empty = bool(lines) and lines[-1] == ""
        if self._in_head(lines, s) and self._layout_may_change(lines, s, k):
            self.needs_rescan = True

    @staticmethod
    def _in_head(lines: list[str], s: int) -> bool:
        size = 0
        for i, line in enumerate(lines):
            if i >= s:
                return True
            size += len(line) + 1
            if size > _HEAD_BYTES:
                return False
        return True

    @staticmethod
    def _layout_may_change(lines: list[str], s: int, k: int) -> bool:
        """The reader decides the layout (JSON Lines or a JSON array) and rejects binary
        data from the file's head; an edit there may change that: re-scan the whole."""
        if any("\x00" in lines[i] for i in range(s, min(s + k, len(lines)))):
            return True
        for line in lines:
            stripped = line.lstrip(_BOM + " \t\r")
            if stripped:
                return stripped.startswith("[")
        return False

    @staticmethod
    def _regroup(values: array, groups: dict[int, list[int]], removed: array, added: list[int],
                 end: int, delta: int) -> None:
        """Groups after an edit: shifted below it, recounted for the hashes it removed
        or added (an aligned byte search over the spliced hash array)."""
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

    def _next_of(self, fmt: str, start: int, lines: list[str]) -> int:
        for line in range(start, min(len(lines), start + _FIRST_LOOKAHEAD)):
            if self.format_rows.get(fmt, 0) <= 0:
                break
            if self._facts(line, lines[line]).format == fmt:
                return line
        self.needs_rescan = True  # too far to look: the next check re-scans the buffer
        return start

    # --- the report ---------------------------------------------------------------------------

    def scan(self) -> Any:
        ds = self._ds
        dups, nears = ds.duplicates_from_groups(list(self.exact_groups.values()), list(self.near_groups.values()),
                                      self.exact)
        formats = tuple(sorted(((f, n, self.format_first.get(f, 0)) for f, n in self.format_rows.items() if n > 0),
                               key=lambda t: (-t[1], t[2])))
        problems = sorted((p for ps in self.problems.values() for p in ps), key=lambda p: (p.line, p.start, p.kind))
        lines = self._line_count - (1 if self._trailing_empty else 0)
        return ds.DatasetScan(path=self.path, layout="jsonl", size=self.size, lines=lines, records=self.records,
                              blank_lines=self.blank, bom=self.bom, crlf=self.crlf, formats=formats,
                              problems=tuple(problems), duplicates=dups, near_duplicates=nears,
                              exact=self.exact, near=self.near, conversational_pairs=self.conversational_pairs)

    def report(self) -> Report:
        if self._report is None:
            self._report = self._pf.dataset_report(self.scan(), self.config)
        return self._report


def open_session(path: Path, config: "Config", text: str | None, lines: list[str] | None
                 ) -> tuple[DatasetSession | None, Report]:
    """Runs in a worker thread on a snapshot of the buffer (its text, or a copy of its
    lines): the full scan, and a session when the layout allows line-by-line updates
    (JSON Lines; a JSON array is re-scanned whole)."""
    ds, pf = _reader(), preflight()
    if text is None:
        text = "\n".join(lines or ())
    data = text.encode("utf-8", "replace")
    try:
        scanned = ds.scan_dataset(path, data)
    except Exception:  # unreadable as a dataset: preflight says why (NOT-CHECKED)
        return None, pf.judge_dataset(path, config, data=data)
    report = pf.dataset_report(scanned, config)
    if scanned.layout != "jsonl":
        return None, report
    session = DatasetSession(path, config, scanned, text.count("\n") + 1)
    session._trailing_empty = text.endswith("\n")
    session._report = report
    return session, report
