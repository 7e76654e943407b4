"""Preflight on every core: big JSONL files split at line boundaries, shards spread over
worker processes, and the parts' scans merged into the scan one pass would have made.

    plan_parts(path, size, ...)           -> [(start, end), ...]   byte ranges, whole lines
    scan_files(paths, config, jobs=N)     -> [DatasetScan | Report, ...]  (one per path)
    merge_parts(name, parts)              -> DatasetScan
    duplicates_of(exact, near)            -> (duplicates, near duplicates)

Only the reader's public face is used: `scan_dataset(path, data=<bytes of a range>,
max_row_bytes=...)` and the `DatasetScan` record. A worker gets a path and a byte range,
reads the range itself and sends back one DatasetScan: counts, the problems it found and
two typed arrays of row hashes — no row text crosses the process boundary. The merge
shifts every line number by the lines before its range, sums the counts, concatenates
the hash arrays and finds duplicates over the whole file, so the report is the one
`--jobs 1` gives, byte for byte (tests/test_preflight_parallel.py).

Duplicates are found by hash partition (`hash_pieces` -> `partition_duplicates`): the
same functions run in one process here and as separate tasks on a Dask cluster
(judge/dask_preflight.py), where no single node holds every hash.
"""

from __future__ import annotations

import os
import sys
import time
from array import array
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, Iterable, Sequence

from ..core.caps import not_regular
from ..core.model import Outcome, ReadError, Report
from ..readers.common import open_regular
from ..readers import lfs
from ..readers.dataset import DatasetScan, Duplicate, LineProblem, scan_dataset
from .cross_files import across_of_group

if TYPE_CHECKING:  # (workers import this module: they need the reader, not the settings)
    from ..core.config import Config

# A range is cut only just before a line that starts with `{`: the reader decides a
# file's layout (JSON array or lines) and refuses binary data from the first bytes it
# reads, so a range must not start with `[`, whitespace or NUL bytes where the whole file
# did not. The cut moves on to the next such line.
_ROW_START = b"{"
# Bytes after a cut checked for NUL (the reader looks at the first 4 KiB of a file; more
# is checked here so that a change of that window does not make a range look binary).
_NUL_WINDOW = 1 << 16
# The first range is at least this long: the reader notes CRLF line endings from the
# first bytes it reads (128 KiB today), and the merged scan takes that note from the
# first range, so it must see at least as much of the file as one whole pass does.
FIRST_PART_MIN = 1 << 20
# Work is split into about this many ranges per worker, so that a slow range or a busy
# core does not leave the other workers idle at the end.
_PARTS_PER_JOB = 4
# A range is at most this long (a range of a URL is read into the worker's memory whole;
# a local file's is streamed).
MAX_PART_BYTES = 64 << 20
# Below this much data in all, files are scanned in this process: starting workers
# (~0.1 s each, importing the reader) costs more than they would save.
POOL_FROM_BYTES = 16 << 20
# Progress is shown only for work that lasts longer than this many seconds.
PROGRESS_AFTER_S = 2.0
# Duplicates are searched one slice of the hash space at a time (by its top bits), so
# the sort's temporaries are a quarter of the file's hashes (4 slices cost ~10% less time
# than 16 on a 1M-line file; the temporaries are 8 bytes a line of one slice).
HASH_SLICE_BITS = 2
HASH_SLICES = 1 << HASH_SLICE_BITS


def default_jobs() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


# --- planning ---------------------------------------------------------------------------


def _open(path: str) -> IO[bytes]:
    """A local file, or an fsspec URL (s3://, gs://, ...; fsspec is imported only then)."""
    if "://" in path:
        import fsspec  # type: ignore[import-untyped,unused-ignore]  # untyped where fsspec lacks py.typed (optional: fsspec, for URLs)

        return fsspec.open(path, "rb").open()  # type: ignore[no-any-return,unused-ignore]
    return open_regular(path)  # a FIFO or a device: NotRegularFile, never a blocked open


def file_size(path: str) -> int:
    if "://" in path:
        import fsspec  # optional: fsspec, for URLs

        fs, _, [p] = fsspec.get_fs_token_paths(path)
        return int(fs.size(p))
    return os.stat(path).st_size


def _next_cut(fh: IO[bytes], pos: int, limit: int) -> int:
    """The first line start at or after `pos` where a range may begin (see _ROW_START),
    or `limit` when there is none before it."""
    while pos < limit:
        fh.seek(pos - 1)
        # Find the end of the line that holds byte pos-1.
        while True:
            block = fh.read(1 << 16)
            if not block:
                return limit
            nl = block.find(b"\n")
            if nl >= 0:
                pos = fh.tell() - len(block) + nl + 1
                break
        if pos >= limit:
            return limit
        fh.seek(pos)
        head = fh.read(_NUL_WINDOW)
        nul = head.find(b"\x00")
        if nul >= 0:  # on past the NUL byte (each one is passed once, not once a line)
            pos += nul + 1
        elif head.startswith(_ROW_START):
            return pos
        else:
            pos += 1
    return limit


def plan_parts(path: str, size: int, *, jobs: int, part_bytes: int | None = None,
               first_min: int = FIRST_PART_MIN) -> list[tuple[int, int]]:
    """Byte ranges of whole lines that cover the file. A file that is not JSON Lines by
    its first byte (a JSON array, binary data), or too small to be worth it, is one range."""
    if part_bytes is None:
        part_bytes = min(MAX_PART_BYTES, max(first_min, size // max(1, jobs * _PARTS_PER_JOB)))
    if size <= max(part_bytes, first_min):
        return [(0, size)]
    with _open(path) as fh:
        head = fh.read(_NUL_WINDOW)
        first = head[3:] if head.startswith(b"\xef\xbb\xbf") else head
        if not first.lstrip(b" \t\r\n").startswith(_ROW_START) or b"\x00" in head:
            return [(0, size)]
        cuts = [0]
        target = max(part_bytes, first_min)
        while target < size:
            cut = _next_cut(fh, max(target, cuts[-1] + 1), size)
            if cut >= size:
                break
            cuts.append(cut)
            target = cut + part_bytes
    return [(a, b) for a, b in zip(cuts, cuts[1:] + [size])]


# --- one range ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class PartFailed:
    """A range that could not be scanned: the one-line reason."""

    reason: str
    error: ReadError | None = None
    lfs_pointer: bool = False  # the file is a Git LFS pointer: reported as one, as preflight's _scan does


def scan_part(path: str, start: int, end: int, max_row_bytes: int, whole: bool,
              fields: dict[str, str] | None = None) -> DatasetScan | PartFailed:
    """Scan one byte range of a file (in a worker). The file's own name is kept;
    `fields`: the field mapping setting (`--field text=content`)."""
    try:
        if "://" not in path:  # streamed from the file, range or whole (a range is never held in memory)
            scan = scan_dataset(path, max_row_bytes=max_row_bytes, start=start, end=None if whole else end,
                                duplicates=whole, fields=fields)
        else:
            with _open(path) as fh:
                fh.seek(start)
                data = fh.read(end - start)
            scan = scan_dataset(path, data=data, max_row_bytes=max_row_bytes, duplicates=whole, fields=fields)
    except ReadError as e:
        return PartFailed(reason=str(e), error=e)
    except OSError as e:
        return PartFailed(reason=f"{path}: cannot read ({e.strerror or e})")
    except (ValueError, RecursionError, MemoryError) as e:  # never a traceback, never a FAIL
        return PartFailed(reason=f"{path}: unreadable ({type(e).__name__}: {e})")
    # (A range's duplicates are searched for over the whole file, in merge_parts.)
    return replace(scan, path=path)


# --- merging ----------------------------------------------------------------------------


def _shifted(p: LineProblem, by: int) -> LineProblem:
    if not by:
        return p
    return replace(p, line=p.line + by, end_line=None if p.end_line is None else p.end_line + by)


def _hashes(values: array[int], lines: int) -> array[int]:
    """A range's hashes, exactly one per line (0 = no record)."""
    if len(values) == lines:
        return values
    out = array("Q", values[:lines])
    if len(out) < lines:
        out.extend(array("Q", bytes(8 * (lines - len(out)))))
    return out


def merge_parts(name: str, parts: Sequence[DatasetScan], *, find_duplicates: bool = True) -> DatasetScan:
    """The scan of a whole file from the scans of its ranges, in file order. Without
    `find_duplicates` (a cluster finds them by partition) the duplicates are left empty."""
    if len(parts) == 1 and find_duplicates:  # the whole file in one pass: its duplicates are found already
        return replace(parts[0], path=name)
    problems: list[LineProblem] = []
    exact, near = array("Q"), array("Q")
    rows: dict[str, int] = {}
    first_line: dict[str, int] = {}
    offset = 0
    for part in parts:
        problems.extend(_shifted(p, offset) for p in part.problems)
        exact.extend(_hashes(part.exact, part.lines))
        near.extend(_hashes(part.near, part.lines))
        for fmt, n, first in part.formats:
            rows[fmt] = rows.get(fmt, 0) + n
            first_line[fmt] = min(first_line.get(fmt, first + offset), first + offset)
        offset += part.lines
    formats = tuple(sorted(((f, n, first_line[f]) for f, n in rows.items()), key=lambda t: (-t[1], t[2])))
    problems.sort(key=lambda p: (p.line, p.start, p.kind))
    dups, nears = duplicates_of(exact, near) if find_duplicates else ((), ())
    head = parts[0]
    return DatasetScan(path=name, layout=head.layout, size=sum(p.size for p in parts), lines=offset,
                       records=sum(p.records for p in parts), blank_lines=sum(p.blank_lines for p in parts),
                       bom=head.bom, crlf=head.crlf, formats=formats, problems=tuple(problems),
                       duplicates=dups, near_duplicates=nears, exact=exact, near=near,
                       conversational_pairs=any(p.conversational_pairs for p in parts))


# --- duplicates by hash partition --------------------------------------------------------

# One piece of a hash partition: (file index, lines, hashes) of the rows whose exact
# (or near) hash falls in the partition. Lines count from the file's first line.
Piece = tuple[int, "array[int]", "array[int]"]


def hash_pieces(values: array[int], *, file: int, first_line: int, partitions: int) -> list[Piece]:
    """The non-zero hashes of consecutive lines (`first_line` on), split by partition
    (hash % partitions): typed arrays only."""
    try:
        import numpy as np  # optional: numpy, for big hash arrays
    except ImportError:
        return _hash_pieces_py(values, file=file, first_line=first_line, partitions=partitions)
    h = np.frombuffer(values, dtype=np.uint64) if len(values) else np.zeros(0, np.uint64)
    out: list[Piece] = []
    which = h % np.uint64(partitions) if partitions > 1 else None
    for p in range(partitions):
        keep = (h != 0) if which is None else ((which == p) & (h != 0))
        idx = np.flatnonzero(keep)
        out.append((file, array("q", (idx + first_line).astype(np.int64).tobytes()),
                    array("Q", h[idx].tobytes())))
    return out


def _hash_pieces_py(values: array[int], *, file: int, first_line: int, partitions: int) -> list[Piece]:
    out: list[Piece] = [(file, array("q"), array("Q")) for _ in range(partitions)]
    for i, v in enumerate(values):
        if v:
            _, lines, hashes = out[v % partitions]
            lines.append(first_line + i)
            hashes.append(v)
    return out


@dataclass(frozen=True, kw_only=True)
class PartitionResult:
    """What one hash partition found. Lines are 0-based lines of their file.

    duplicates: (file, line, first line in that file with the hash)
    overlap:    (eval line, training file, first training line with the hash); the
                training file is the first one (in the order given) holding the hash.
    across:     (training file, line, earlier training file, its first line): the first
                row of a file with a hash an earlier file holds (cross_files.py)."""

    duplicates: tuple[tuple[int, int, int], ...] = ()
    overlap: tuple[tuple[int, int, int, int], ...] = ()  # (..., hash)
    across: tuple[tuple[int, int, int, int], ...] = ()


def partition_duplicates(pieces: Iterable[Piece], *, eval_file: int | None = None,
                         train_files: frozenset[int] = frozenset()) -> PartitionResult:
    """Rows sharing a hash within a partition: later rows of a file repeat its first
    one; a training file's first row with it repeats an earlier training file's first
    row; an eval row repeats the first training row with its hash."""
    groups: dict[int, list[tuple[int, int]]] = {}
    try:
        import numpy as np  # optional: numpy, for big hash arrays
    except ImportError:
        np = None  # type: ignore[assignment]
    if np is not None:
        pieces = list(pieces)
        if not pieces:
            return PartitionResult()
        files = np.concatenate([np.full(len(l), f, dtype=np.int64) for f, l, _ in pieces])
        lines = np.concatenate([np.frombuffer(l, dtype=np.int64) if len(l) else np.zeros(0, np.int64)
                                for _, l, _ in pieces])
        hashes = np.concatenate([np.frombuffer(h, dtype=np.uint64) if len(h) else np.zeros(0, np.uint64)
                                 for _, _, h in pieces])
        # The repeated hashes from one sort; then the rows holding them (few, usually).
        hs = np.sort(hashes)
        same = hs[1:] == hs[:-1]
        if not same.any():
            return PartitionResult()
        sel = np.flatnonzero(np.isin(hashes, np.unique(hs[1:][same])))
        del hs, same
        for f, l, h in zip(files[sel].tolist(), lines[sel].tolist(), hashes[sel].tolist()):
            groups.setdefault(h, []).append((f, l))
    else:
        for f, ls, hs_ in pieces:
            for l, h in zip(ls, hs_):
                groups.setdefault(h, []).append((f, l))
    dups: list[tuple[int, int, int]] = []
    overlap: list[tuple[int, int, int, int]] = []
    across: list[tuple[int, int, int, int]] = []
    for h, members in groups.items():
        if len(members) < 2:
            continue
        members.sort()
        first_in: dict[int, int] = {}
        for f, l in members:
            if f in first_in:
                dups.append((f, l, first_in[f]))
            else:
                first_in[f] = l
        if len(first_in) > 1 and train_files:
            across.extend(across_of_group([m for m in members if m[0] in train_files]))
        if eval_file is not None and eval_file in first_in:
            train = next(((f, l) for f, l in members if f in train_files), None)
            if train is not None:
                overlap.extend((l, train[0], train[1], h) for f, l in members if f == eval_file)
    return PartitionResult(duplicates=tuple(dups), overlap=tuple(overlap), across=tuple(sorted(across)))


def duplicates_from(exact: Iterable[tuple[int, int]], near: Iterable[tuple[int, int]]
                    ) -> tuple[tuple[Duplicate, ...], tuple[Duplicate, ...]]:
    """(line, first) pairs of one file's exact and near repeats -> the scan's duplicate
    tuples: a row that is an exact repeat is reported as that, never also as a near one."""
    dups = sorted(exact)
    is_dup = {l for l, _ in dups}
    nears = sorted((l, f) for l, f in near if l not in is_dup)
    return (tuple(Duplicate(line=l, first=f) for l, f in dups),
            tuple(Duplicate(line=l, first=f) for l, f in nears))


def duplicates_of(exact: array[int], near: array[int]) -> tuple[tuple[Duplicate, ...], tuple[Duplicate, ...]]:
    """Exact and near duplicates of one file from its hash arrays (index = line), one
    hash slice at a time."""
    found: list[list[tuple[int, int]]] = [[], []]
    try:
        import numpy as np  # optional: numpy, for big hash arrays
    except ImportError:
        np = None  # type: ignore[assignment]
    for k, values in enumerate((exact, near)):
        if np is None:
            pieces = hash_pieces(values, file=0, first_line=0, partitions=HASH_SLICES)
            for piece in pieces:
                found[k].extend((l, f) for _, l, f in partition_duplicates([piece]).duplicates)
            continue
        h = np.frombuffer(values, dtype=np.uint64) if len(values) else np.zeros(0, np.uint64)
        # The slice of every line once, by the hash's top bits (1 byte a line).
        which = (h >> np.uint64(64 - HASH_SLICE_BITS)).astype(np.uint8)
        for p in range(HASH_SLICES):
            lines = np.flatnonzero(which == p)
            hs = h[lines]
            ordered = np.sort(hs)
            same = ordered[1:] == ordered[:-1]
            if not same.any():
                continue
            repeated = np.unique(ordered[1:][same])
            repeated = repeated[repeated != 0]  # 0: no record
            del ordered, same
            hit = np.isin(hs, repeated)
            first: dict[int, int] = {}
            for line, v in zip(lines[hit].tolist(), hs[hit].tolist()):  # in line order
                if v in first:
                    found[k].append((line, first[v]))
                else:
                    first[v] = line
        del which
    return duplicates_from(found[0], found[1])


# --- progress ---------------------------------------------------------------------------


class Progress:
    """Bytes scanned, on stderr (never stdout): silent for the first PROGRESS_AFTER_S
    seconds, then a bar on a terminal or a plain line every few seconds otherwise."""

    def __init__(self, total: int, *, stream: IO[str] | None = None, label: str = "preflight") -> None:
        self.total, self.done, self.label = max(1, total), 0, label
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = self.last = time.monotonic()
        self.shown = False

    def advance(self, nbytes: int) -> None:
        self.done += nbytes
        now = time.monotonic()
        if now - self.start < PROGRESS_AFTER_S or (not self.tty and now - self.last < 5.0 and self.shown):
            return
        self.last, self.shown = now, True
        pct = 100 * self.done / self.total
        mb = f"{self.done / 1e6:.0f}/{self.total / 1e6:.0f} MB"
        if self.tty:
            bar = "#" * int(pct / 5)
            self.stream.write(f"\r{self.label} [{bar:<20}] {pct:5.1f}% {mb}")
        else:
            self.stream.write(f"{self.label}: {pct:.0f}% ({mb}, {now - self.start:.0f} s)\n")
        self.stream.flush()

    def close(self) -> None:
        if self.shown and self.tty:
            self.stream.write("\n")
            self.stream.flush()


# --- many files, many workers ------------------------------------------------------------


def _failed(name: str, failure: PartFailed) -> Report:
    from .engine import not_checked  # start-up: spawned workers import this module and need only the reader

    if failure.lfs_pointer:
        return not_checked(name, lfs.KIND, lfs.FORMAT, failure.reason)
    return not_checked(name, "dataset", "dataset", failure.reason, failure.error)


def _pool(jobs: int) -> ProcessPoolExecutor:
    import multiprocessing as mp  # start-up: only a parallel run needs it

    # forkserver where there is one (no copy of a parent's threads or locks, unlike fork);
    # spawn elsewhere. Workers import only the reader.
    import threading  # start-up: only a parallel run needs it

    if sys.platform == "linux" and threading.active_count() == 1:
        # One thread (the command line): a fork copies no lock held by another thread, and
        # the workers start with every module already imported.
        ctx: Any = mp.get_context("fork")
    elif "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        # The server imports the reader once; each worker is a fork of it, ready at once.
        ctx.set_forkserver_preload([__name__])
    else:
        ctx = mp.get_context("spawn")
    return ProcessPoolExecutor(max_workers=jobs, mp_context=ctx)


def _plan(path: str, size: int, jobs: int, part_bytes: int | None, first_min: int) -> list[tuple[int, int]]:
    try:
        return plan_parts(path, size, jobs=jobs, part_bytes=part_bytes, first_min=first_min)
    except OSError:  # (a folder, a file gone): one range, which the reader reports as one pass does
        return [(0, size)]


def scan_files(paths: Sequence[str], config: Config, *, jobs: int, part_bytes: int | None = None,
               first_min: int = FIRST_PART_MIN, progress: Callable[[int], Progress] | None = None
               ) -> list[DatasetScan | Report]:
    """Every file scanned, big ones in ranges, on `jobs` worker processes; one scan (or a
    NOT-CHECKED report) per path, in order."""
    max_row = config.caps.max_row_mb * 2**20
    fields = dict(config.fields) or None
    sizes: list[int | PartFailed] = []
    for p in paths:
        irregular = not_regular(Path(p)) if "://" not in p else None
        if irregular:  # a FIFO would block the open, /dev/zero never ends
            sizes.append(PartFailed(reason=f"{p}: {irregular}"))
            continue
        try:
            size = file_size(p)
        except OSError as e:
            sizes.append(PartFailed(reason=f"{p}: cannot read ({e.strerror or e})"))
            continue
        # A Git LFS pointer in the dataset's place: not downloaded, not judged (as preflight's _scan).
        pointer = lfs.pointer_at(p) if size <= lfs.MAX_POINTER_BYTES and "://" not in p else None
        sizes.append(PartFailed(reason=f"{p}: {pointer}", lfs_pointer=True) if pointer is not None else size)
    total = sum(n for n in sizes if isinstance(n, int))
    # Workers only for enough work (or when the caller sets the range size); without
    # them every file is one range, scanned as one pass would.
    pool = jobs > 1 and (total >= POOL_FROM_BYTES or part_bytes is not None)
    plans: list[list[tuple[int, int]] | PartFailed] = [
        n if isinstance(n, PartFailed) else _plan(p, n, jobs, part_bytes, first_min) if pool else [(0, n)]
        for p, n in zip(paths, sizes)]
    results: dict[tuple[int, int], DatasetScan | PartFailed] = {}
    shown = progress(total) if progress is not None else None
    tasks = [(i, k, a, b, len(plan) == 1) for i, plan in enumerate(plans) if not isinstance(plan, PartFailed)
             for k, (a, b) in enumerate(plan)]
    if not pool or len(tasks) <= 1:
        for i, k, a, b, whole in tasks:
            results[i, k] = scan_part(paths[i], a, b, max_row, whole, fields)
            if shown is not None:
                shown.advance(b - a)
    else:
        try:  # imported once here, before the workers fork: they count newlines with it
            import numpy  # noqa: F401 (optional: numpy, for big hash arrays)
        except ImportError:
            pass
        with _pool(min(jobs, len(tasks))) as workers:
            # Biggest ranges first, so that the last ones to finish are short.
            futures: dict[Future[DatasetScan | PartFailed], tuple[int, int, int]] = {
                workers.submit(scan_part, paths[i], a, b, max_row, whole, fields): (i, k, b - a)
                for i, k, a, b, whole in sorted(tasks, key=lambda t: t[2] - t[3])}
            from concurrent.futures import as_completed  # start-up: only a parallel run needs it

            for fut in as_completed(futures):
                i, k, n = futures[fut]
                try:
                    results[i, k] = fut.result()
                except BrokenProcessPool:  # a worker was killed (out of memory, a signal)
                    results[i, k] = PartFailed(reason=f"{paths[i]}: a worker process died while scanning it "
                                                      "(out of memory?); try --jobs 1")
                if shown is not None:
                    shown.advance(n)
    if shown is not None:
        shown.close()
    out: list[DatasetScan | Report] = []
    for i, plan in enumerate(plans):
        if isinstance(plan, PartFailed):
            out.append(_failed(paths[i], plan))
            continue
        parts = [results[i, k] for k in range(len(plan))]
        failed = next((r for r in parts if isinstance(r, PartFailed)), None)
        if failed is not None:
            out.append(_failed(paths[i], failed))
            continue
        out.append(merge_parts(paths[i], [r for r in parts if isinstance(r, DatasetScan)]))
    return out


def scanner(scans: dict[str, DatasetScan | Report]) -> Callable[[Path | str], DatasetScan | Report]:
    """The `scan` hook of judge/preflight.preflight over scans made beforehand."""
    return lambda p: scans[str(p)]


def expand_shards(paths: Sequence[Path | str]) -> list[Path | str]:
    """A folder stands for its dataset shards (*.jsonl, *.ndjson, *.json, sorted by name);
    a quoted glob (`'data/*.jsonl'`, `'s3://b/sft/*.jsonl'`) for the files it matches.
    Other paths stay as given."""
    import glob  # start-up: only a parallel run needs it

    out: list[Path | str] = []
    for p in paths:
        s = str(p)
        # A folder without shards, or a glob that matches nothing, stays as given: it is
        # then reported as unreadable, never silently dropped.
        if "://" not in s and os.path.isdir(s):
            found = sorted((q for q in Path(s).iterdir() if q.suffix.lower() in (".jsonl", ".ndjson", ".json")
                            and q.is_file()), key=lambda q: str(q))
            out.extend(found or [p])
        elif "://" not in s and not os.path.exists(s) and any(c in s for c in "*?["):
            out.extend([Path(q) for q in sorted(glob.glob(s))] or [p])
        elif "://" in s and any(c in s for c in "*?["):
            try:
                import fsspec  # optional: fsspec, for URLs
            except ImportError:
                out.append(s)  # reported as unreadable, with its name
                continue
            fs, pattern = fsspec.core.url_to_fs(s)
            out.extend([fs.unstrip_protocol(q) for q in sorted(fs.glob(pattern))] or [s])
        else:
            out.append(p)
    return out


def preflight_jobs(paths: Sequence[Path | str], config: Config, *, jobs: int, eval_path: Path | str | None = None,
                   tokenizer_dir: Path | str | None = None, max_len: int | None = None,
                   part_bytes: int | None = None, first_min: int = FIRST_PART_MIN,
                   progress: Callable[[int], Progress] | None = None, map_options: Any = None,
                   batch: Path | str | None = None) -> Outcome:
    """`preflight` with every dataset scanned on `jobs` worker processes."""
    from . import preflight as pre  # start-up: spawned workers import this module and need only the reader

    names = [str(p) for p in paths] + ([str(eval_path)] if eval_path is not None else [])
    scans = scan_files(names, config, jobs=jobs, part_bytes=part_bytes, first_min=first_min, progress=progress)
    return pre.preflight(paths, config, eval_path=eval_path, tokenizer_dir=tokenizer_dir, max_len=max_len,
                         scan=scanner(dict(zip(names, scans))), map_options=map_options, batch=batch)


def run_preflight(paths: Sequence[Path | str], config: Config, *, eval_path: Path | str | None = None,
                  tokenizer_dir: Path | str | None = None, max_len: int | None = None,
                  jobs: int | None = None, map_options: Any = None, batch: Path | str | None = None) -> Outcome:
    """`preflight` as the command line runs it without --dask: in this process (`jobs`
    1) or on worker processes (default: one per available core). On a Dask cluster:
    dask_preflight.preflight_dask."""
    from . import preflight as pre  # start-up: spawned workers import this module and need only the reader

    if jobs is not None and jobs < 1:
        return Outcome(reports=(), error="--jobs must be at least 1")
    url = next((str(p) for p in [*paths, eval_path] if p is not None and "://" in str(p)), None)
    if url is not None:
        return Outcome(reports=(), error=f"{url}: URLs are read on a Dask cluster only (--dask ADDRESS)")
    jobs = jobs or default_jobs()
    from .speech import preflight_speech  # start-up: speech listings only (their audio read on `jobs` processes)

    spoken, paths, eval_path, tokenizer_dir = preflight_speech(paths, config, eval_path=eval_path,
                                                               tokenizer_dir=tokenizer_dir, jobs=jobs)
    if spoken and not paths and eval_path is None and tokenizer_dir is None and batch is None:
        return Outcome(reports=tuple(spoken))
    if jobs == 1:
        outcome = pre.preflight(paths, config, eval_path=eval_path, tokenizer_dir=tokenizer_dir, max_len=max_len,
                                map_options=map_options, batch=batch)
    else:
        outcome = preflight_jobs(paths, config, jobs=jobs, eval_path=eval_path, tokenizer_dir=tokenizer_dir,
                                 max_len=max_len, progress=Progress, map_options=map_options, batch=batch)
    return Outcome(reports=tuple(spoken) + outcome.reports, not_judged=outcome.not_judged,
                   passed_over=outcome.passed_over, error=outcome.error)


__all__ = ["run_preflight", "plan_parts", "scan_part", "merge_parts", "scan_files", "duplicates_of", "hash_pieces",
           "partition_duplicates", "duplicates_from", "preflight_jobs", "expand_shards", "default_jobs",
           "Progress", "PartFailed", "FIRST_PART_MIN"]
