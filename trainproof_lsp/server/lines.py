"""The text of the lines findings cite in files that are not open, for column units.

A finding's columns are counted in code points; an editor wants UTF-16 (or UTF-8) units,
so a diagnostic on a line with non-ASCII text needs that line's text. Only that: the
server reads a cited file up to the last line its findings cite, keeps those lines and
nothing else, and only for regular text files under a size cap. A checkpoint, an event
file or anything else binary, an oversize file, a FIFO or a device gives no line text: the
diagnostic is placed where the finding says (its span's columns as they are, or line 0
for a record or byte offset), and no byte of it is read past the first block.

    load({path: {line, ...}})   in a worker thread (ServerState.load_lines)
    lines(path, line)           on the loop: a kept line, else None (never a read)
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import BinaryIO

from ..core.model import Finding

# A file over this size gives no line text: scanning it for newlines would cost the
# worker ~1 s a GiB for columns that differ from the reader's only on non-ASCII lines.
MAX_FILE_BYTES = 256 << 20
# A cited line longer than this is not kept (its columns go out as counted): one-line
# logs and JSON arrays would otherwise keep megabytes per finding.
MAX_LINE_BYTES = 1 << 20
# What all kept lines of all files may hold, least recently used first out. Hundreds of
# cited lines of ordinary length are a few hundred KiB.
CACHE_BYTES = 32 << 20
# Read size. The first block also decides text or binary: a NUL byte in it is binary.
BLOCK_BYTES = 1 << 16
# A kept line's cost beyond its characters (the str object and its dict slot).
_LINE_OVERHEAD = 100


def cited_lines(findings: Iterable[Finding], *, related_only: bool = False) -> dict[str, set[int]]:
    """The lines each file's findings (and their related locations) are placed on: what
    `load` reads. A finding without a span (a record, a byte offset) cites no line."""
    out: dict[str, set[int]] = {}
    for f in findings:
        locations = [r.location for r in f.related]
        if not related_only:
            locations.append(f.location)
        for loc in locations:
            span = loc.span
            if loc.path and span is not None:
                out.setdefault(loc.path, set()).update((max(span.start_line, 0), max(span.end_line, 0)))
    return out


@dataclass(eq=False)
class _Kept:
    stamp: tuple[int, int, int]  # (size, mtime_ns, inode): a changed file is read again
    lines: dict[int, str | None] = field(default_factory=dict)  # None: known, but not kept
    text: bool = True  # False: binary, oversize or not a regular file; no line is read
    cost: int = 0


class DiskLines:
    """Kept line text of files that are not open (see the module doc)."""

    def __init__(self, budget: int = CACHE_BYTES) -> None:
        self._kept: OrderedDict[str, _Kept] = OrderedDict()
        self._budget = budget
        self._cost = 0

    @property
    def cost(self) -> int:
        """What the kept lines hold, in bytes (about)."""
        return self._cost

    def load(self, wanted: Mapping[str, Iterable[int]]) -> None:
        """Read the cited lines of each file not kept yet (or changed since). Blocking:
        the server calls it in a worker thread."""
        from ..readers.common import open_regular  # start-up: the readers load on first use

        for path, lines in wanted.items():
            want = {n for n in lines if n >= 0}
            if not path or not want:
                continue
            try:
                fh = open_regular(path)
            except OSError:
                self._put(path, _Kept(stamp=(-1, -1, -1), text=False))
                continue
            with fh:
                st = os.fstat(fh.fileno())
                stamp = (st.st_size, st.st_mtime_ns, st.st_ino)
                kept = self._kept.get(path)
                if kept is not None and kept.stamp == stamp and (not kept.text or want <= kept.lines.keys()):
                    self._kept.move_to_end(path)
                    continue
                if kept is None or kept.stamp != stamp:
                    kept = _Kept(stamp=stamp, text=st.st_size <= MAX_FILE_BYTES)
                missing = sorted(want - kept.lines.keys())
                if kept.text and missing:
                    got = read_lines(fh, missing)
                    if got is None:
                        kept = _Kept(stamp=stamp, text=False)
                    else:
                        kept.lines.update(dict.fromkeys(missing))  # past the end: known, no text
                        kept.lines.update(got)
                self._put(path, kept)

    def _put(self, path: str, kept: _Kept) -> None:
        old = self._kept.pop(path, None)
        if old is not None:
            self._cost -= old.cost
        kept.cost = sum(_LINE_OVERHEAD + (len(t) if t else 0) for t in kept.lines.values())
        self._kept[path] = kept
        self._cost += kept.cost
        while self._cost > self._budget and self._kept:
            _, out = self._kept.popitem(last=False)
            self._cost -= out.cost

    def __call__(self, path: str, line: int) -> str | None:
        """The kept text of `line` (without its CR), or None: the columns go out as they
        are. Never reads a file (it runs on the event loop)."""
        kept = self._kept.get(path)
        if kept is None:
            return None
        return kept.lines.get(line)


def read_lines(fh: BinaryIO, wanted: list[int]) -> dict[int, str | None] | None:
    """The text of `wanted` lines (sorted, 0-based) of an open file, read in blocks up to
    the last of them: {line: text} (None for a line over MAX_LINE_BYTES; a line past the
    end is left out). None when the file is binary (a NUL byte in its first block)."""
    out: dict[int, str | None] = {}
    want = set(wanted)
    last = wanted[-1]
    line = 0  # the line the next byte read belongs to
    pending: list[bytes] | None = [] if 0 in want else None  # pieces of `line`, when wanted and short
    held = 0
    first = True
    while line <= last:
        block = fh.read(BLOCK_BYTES)
        if first:
            first = False
            if b"\x00" in block:
                return None
        if not block:
            break
        n = block.count(b"\n")
        if pending is None and bisect_right(wanted, line + n) == bisect_right(wanted, line):
            line += n  # no wanted line starts in this block, and the current one is not wanted
            continue
        parts = block.split(b"\n")
        for i, part in enumerate(parts[:-1]):
            here = line + i
            if i == 0 and pending is not None:
                if held + len(part) <= MAX_LINE_BYTES:
                    out[here] = _text(b"".join(pending) + part)
                else:
                    out[here] = None
            elif i > 0 and here in want:
                out[here] = _text(part) if len(part) <= MAX_LINE_BYTES else None
            elif i == 0 and here in want:
                out[here] = None  # it grew past the cap in an earlier block
        line += n
        tail = parts[-1]
        if n:
            pending, held = ([tail], len(tail)) if line in want else (None, 0)
        elif pending is not None:
            pending.append(tail)
            held += len(tail)
        if pending is not None and held > MAX_LINE_BYTES:
            pending, held = None, 0
            out[line] = None
    if pending is not None and line in want and line not in out:
        out[line] = _text(b"".join(pending))  # the last line, without a newline
    return out


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace").removesuffix("\r")


__all__ = ["DiskLines", "cited_lines", "read_lines", "MAX_FILE_BYTES", "MAX_LINE_BYTES", "CACHE_BYTES"]
