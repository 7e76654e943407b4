"""Preflight on a Dask cluster: `preflight --dask ADDRESS` (the `dask` extra).

The work, and where its data lives:

1. scan: one task per byte range of every shard (judge/parallel.py plans the ranges);
   the scan, with its hash arrays, stays in the memory of the worker that made it.
2. counts: each scan's counts and problems (no hashes) come back to this process, which
   works out the line numbers each range starts at.
3. pieces: on the worker that holds a scan, its hashes are split by partition
   (hash % P): P small typed arrays per range and hash kind.
4. partitions: one task per partition takes that partition's pieces from every range and
   finds the rows sharing a hash — later rows of a file repeat its first one; a training
   file's first row with a hash an earlier training file holds repeats that file's row
   (judge/cross_files.py); an eval row repeats the first training row with its hash.
   Only what they find comes back: no node ever holds all the hashes.

The report is built from those facts by the same rules, so it equals a local run's
(tests/test_preflight_dask.py). Paths may be fsspec URLs (s3://, gs://, ...) the workers
can read; the workers need trainproof-lsp installed (the tasks are its functions).
"""

from __future__ import annotations

import operator
from array import array
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

from ..core.caps import not_regular
from ..core.config import Config
from ..core.model import Outcome, Report
from ..readers import lfs
from ..readers.dataset import DatasetScan
from ..rules.dataset import ACROSS_FILES, EarlierCopy
from .cross_files import earlier_copies
from .parallel import (FIRST_PART_MIN, PartFailed, PartitionResult, Progress, _failed, duplicates_from, file_size,
                       hash_pieces, merge_parts, partition_duplicates, scan_part, scanner, _plan)

MISSING_DASK = "--dask needs the dask extra: pip install 'trainproof-lsp[dask]'"
# Hash partitions per worker thread: a few each, so that partitions stay small and the
# cluster stays busy while the last ones run.
_PARTITIONS_PER_THREAD = 2
# Seconds to wait for the scheduler before giving up with a one-line error.
CONNECT_TIMEOUT_S = 30


def _counts(scan: DatasetScan | PartFailed) -> DatasetScan | PartFailed:
    """A scan without its hashes: what comes back from the cluster."""
    if isinstance(scan, PartFailed):
        return scan
    return replace(scan, exact=array("Q"), near=array("Q"))


def _pieces(scan: DatasetScan, which: str, file: int, first_line: int, partitions: int) -> list[Any]:
    return hash_pieces(getattr(scan, which), file=file, first_line=first_line, partitions=partitions)


def _sparse(cited: dict[int, int], length: int) -> array[int]:
    """A hash array holding only the cited lines' hashes (0 elsewhere). Both arrays of a
    file get the same length: the overlap rule walks them side by side."""
    out = array("Q", bytes(8 * length))
    for line, h in cited.items():
        out[line] = h
    return out


def preflight_dask(paths: Sequence[Path | str], config: Config, *, address: Any,
                   eval_path: Path | str | None = None, tokenizer_dir: Path | str | None = None,
                   max_len: int | None = None, part_bytes: int | None = None, first_min: int = FIRST_PART_MIN,
                   partitions: int | None = None, progress: Callable[[int], Progress] | None = None,
                   map_options: Any = None) -> Outcome:
    """`preflight` with the scans and the duplicate search on the Dask cluster at
    `address` (a scheduler address, or a `distributed.Client`/cluster object)."""
    try:
        import distributed  # optional: the dask extra
    except ImportError:
        return Outcome(reports=(), error=MISSING_DASK)
    dist: Any = distributed  # untyped
    from . import preflight as pre  # start-up: dask workers import this module and need only the reader

    names = [str(p) for p in paths] + ([str(eval_path)] if eval_path is not None else [])
    try:
        client = address if isinstance(address, dist.Client) else dist.Client(address, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError, ValueError) as e:
        return Outcome(reports=(), error=f"--dask {address}: cannot reach the scheduler ({' '.join(str(e).split())})")
    try:
        scans, across = find_on_cluster(client, names, config,
                                        eval_file=len(paths) if eval_path is not None else None,
                                        part_bytes=part_bytes, first_min=first_min, partitions=partitions,
                                        progress=progress)
    finally:
        if client is not address:
            closing: Any = client
            closing.close()
    return pre.preflight(paths, config, eval_path=eval_path, tokenizer_dir=tokenizer_dir, max_len=max_len,
                         scan=scanner(dict(zip(names, scans))), across=across, map_options=map_options)


def scan_on_cluster(client: Any, names: Sequence[str], config: Config, *, eval_file: int | None,
                    part_bytes: int | None = None, first_min: int = FIRST_PART_MIN, partitions: int | None = None,
                    progress: Callable[[int], Progress] | None = None) -> list[DatasetScan | Report]:
    return find_on_cluster(client, names, config, eval_file=eval_file, part_bytes=part_bytes, first_min=first_min,
                           partitions=partitions, progress=progress)[0]


def find_on_cluster(client: Any, names: Sequence[str], config: Config, *, eval_file: int | None,
                    part_bytes: int | None = None, first_min: int = FIRST_PART_MIN, partitions: int | None = None,
                    progress: Callable[[int], Progress] | None = None
                    ) -> tuple[list[DatasetScan | Report], dict[int, tuple[EarlierCopy, ...]]]:
    """The scans (as `scan_on_cluster`) and the rows of each training file that repeat a
    row of an earlier one (by position in `names`), found by the same partition tasks."""
    import distributed  # optional: the dask extra

    as_completed: Any = distributed.as_completed

    threads = max(1, sum(client.nthreads().values()))
    parts_n = partitions or threads * _PARTITIONS_PER_THREAD
    max_row = config.caps.max_row_mb * 2**20
    plans: list[list[tuple[int, int]] | PartFailed] = []
    total = 0
    for name in names:
        # A FIFO would block the open and /dev/zero never ends: refused as one process
        # refuses it (parallel.scan_files), with the same words.
        irregular = not_regular(Path(name)) if "://" not in name else None
        if irregular:
            plans.append(PartFailed(reason=f"{name}: {irregular}"))
            continue
        try:
            size = file_size(name)
            # A Git LFS pointer in the dataset's place: not downloaded, not judged (as with --jobs).
            pointer = lfs.pointer_at(name) if size <= lfs.MAX_POINTER_BYTES and "://" not in name else None
            if pointer is not None:
                plans.append(PartFailed(reason=f"{name}: {pointer}", lfs_pointer=True))
                continue
            plans.append(_plan(name, size, threads, part_bytes, first_min))
            total += size
        except OSError as e:
            plans.append(PartFailed(reason=f"{name}: cannot read ({e.strerror or e})"))
    # 1. scans, held on the workers
    scan_futs: dict[tuple[int, int], Any] = {}
    for i, plan in enumerate(plans):
        if isinstance(plan, PartFailed):
            continue
        for k, (a, b) in enumerate(plan):
            scan_futs[i, k] = client.submit(scan_part, names[i], a, b, max_row, False, dict(config.fields) or None,
                                            pure=False)
    # 2. their counts and problems, here
    count_futs = {client.submit(_counts, f, pure=False): key for key, f in scan_futs.items()}
    shown = progress(total) if progress is not None else None
    counted: dict[tuple[int, int], DatasetScan | PartFailed] = {}
    for fut in as_completed(list(count_futs)):
        key = count_futs[fut]
        counted[key] = fut.result()
        if shown is not None:
            plan = plans[key[0]]
            if not isinstance(plan, PartFailed):
                shown.advance(plan[key[1]][1] - plan[key[1]][0])
    if shown is not None:
        shown.close()
    merged: dict[int, DatasetScan | Report] = {}
    offsets: dict[tuple[int, int], int] = {}
    for i, plan in enumerate(plans):
        if isinstance(plan, PartFailed):
            merged[i] = _failed(names[i], plan)
            continue
        got = [counted[i, k] for k in range(len(plan))]
        failed = next((g for g in got if isinstance(g, PartFailed)), None)
        if failed is not None:
            merged[i] = _failed(names[i], failed)
            continue
        line = 0
        for k, g in enumerate(got):
            offsets[i, k] = line
            line += g.lines if isinstance(g, DatasetScan) else 0
        merged[i] = merge_parts(names[i], [g for g in got if isinstance(g, DatasetScan)], find_duplicates=False)
    # 3. pieces of each hash partition, cut where the scans are
    found: dict[str, list[PartitionResult]] = {}
    train = frozenset(i for i, m in merged.items() if isinstance(m, DatasetScan) and i != eval_file)
    for which in ("exact", "near"):
        by_part: list[list[Any]] = [[] for _ in range(parts_n)]
        for (i, k), off in offsets.items():
            pieces = client.submit(_pieces, scan_futs[i, k], which, i, off, parts_n, pure=False)
            for p in range(parts_n):
                by_part[p].append(client.submit(operator.getitem, pieces, p, pure=False))
        # 4. one task per partition
        reduced = [client.submit(partition_duplicates, pieces, eval_file=eval_file, train_files=train, pure=False)
                   for pieces in by_part]
        found[which] = client.gather(reduced)
    del scan_futs
    across: dict[int, tuple[EarlierCopy, ...]] = {}
    if len(train) > 1 and config.enabled(ACROSS_FILES):
        across = earlier_copies(dict(enumerate(names)), [a for r in found["exact"] for a in r.across],
                                [a for r in found["near"] for a in r.across])
    return _assemble(names, merged, found, eval_file), across


def _assemble(names: Sequence[str], merged: dict[int, DatasetScan | Report], found: dict[str, list[PartitionResult]],
              eval_file: int | None) -> list[DatasetScan | Report]:
    """The file scans, with the duplicates the partitions found, and hash arrays that
    hold just the hashes the overlap rule will cite."""
    dups: dict[str, dict[int, list[tuple[int, int]]]] = {"exact": {}, "near": {}}
    cited: dict[str, dict[int, dict[int, int]]] = {"exact": {}, "near": {}}
    exact_hit: set[int] = set()
    for which in ("exact", "near"):
        for result in found[which]:
            for f, line, first in result.duplicates:
                dups[which].setdefault(f, []).append((line, first))
    overlaps = {w: sorted(o for r in found[w] for o in r.overlap) for w in ("exact", "near")}
    for which in ("exact", "near"):
        for eval_line, tf, tline, h in overlaps[which]:
            if which == "near" and eval_line in exact_hit:
                continue  # an exact copy is reported as that
            if which == "exact":
                exact_hit.add(eval_line)
            if eval_file is not None:
                cited[which].setdefault(eval_file, {})[eval_line] = h
            cited[which].setdefault(tf, {})[tline] = h
    out: list[DatasetScan | Report] = []
    for i in range(len(names)):
        m = merged[i]
        if isinstance(m, DatasetScan):
            d, n = duplicates_from(dups["exact"].get(i, ()), dups["near"].get(i, ()))
            ce, cn = cited["exact"].get(i, {}), cited["near"].get(i, {})
            length = max([*ce, *cn], default=-1) + 1
            m = replace(m, duplicates=d, near_duplicates=n, exact=_sparse(ce, length), near=_sparse(cn, length))
        out.append(m)
    return out


__all__ = ["preflight_dask", "scan_on_cluster", "find_on_cluster", "MISSING_DASK"]
