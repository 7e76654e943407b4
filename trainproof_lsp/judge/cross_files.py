"""Rows of a training file that repeat a row of an earlier file (TP-PRE-DUPLICATE-ACROSS-FILES).

    across_of_group(members)            -> [(file, line, first file, first line), ...]
    across_files(arrays)                -> the same, for whole files' hash arrays
    earlier_copies(files, exact, near)  -> {file: (EarlierCopy, ...)}

Files are numbered in the order they were given. A row counts when it is the first row
of its file with its hash (later ones are the file's own duplicates, TP-PRE-DUPLICATE-TEXT)
and an earlier file holds that hash; it points at the first row holding it (the earliest
file, then its earliest line). `across_of_group` is the one definition: the local search
here and the hash partitions of a cluster (judge/parallel.partition_duplicates) both apply
it to the rows sharing a hash, so their findings are the same.
"""

from __future__ import annotations

from array import array
from typing import Iterable, Mapping, Sequence

from ..rules.dataset import EarlierCopy

# The search runs one slice of the hash space at a time (by the hash's top bits), so that
# its temporaries are a quarter of the rows' hashes, as in judge/parallel.duplicates_of.
_SLICE_BITS = 2

Across = tuple[int, int, int, int]  # (file, line, first file, first line); lines 0-based


def across_of_group(members: Sequence[tuple[int, int]]) -> list[Across]:
    """Rows sharing one hash, as (file, line) sorted: the first row of every file after
    the first file holding it, each with that first row."""
    if not members:
        return []
    f0, l0 = members[0]
    seen = {f0}
    out: list[Across] = []
    for f, l in members:
        if f not in seen:
            seen.add(f)
            out.append((f, l, f0, l0))
    return out


def across_files(arrays: Sequence[tuple[int, array[int]]]) -> list[Across]:
    """The repeats across files of (file, hash array indexed by line; 0 = no record)."""
    if len(arrays) < 2:
        return []
    try:
        import numpy as np  # optional: numpy, for big hash arrays
    except ImportError:
        return _across_py(arrays)
    out: list[Across] = []
    hs = [(f, np.frombuffer(a, dtype=np.uint64) if len(a) else np.zeros(0, np.uint64)) for f, a in arrays]
    for part in range(1 << _SLICE_BITS):
        files, lines, hashes = [], [], []
        for f, h in hs:
            idx = np.flatnonzero(((h >> np.uint64(64 - _SLICE_BITS)) == part) & (h != 0))
            files.append(np.full(len(idx), f, dtype=np.int64))
            lines.append(idx.astype(np.int64))
            hashes.append(h[idx])
        allh = np.concatenate(hashes)
        ordered = np.sort(allh)
        same = ordered[1:] == ordered[:-1]
        if not same.any():
            continue
        sel = np.flatnonzero(np.isin(allh, np.unique(ordered[1:][same])))
        del ordered, same
        groups: dict[int, list[tuple[int, int]]] = {}
        for f, l, v in zip(np.concatenate(files)[sel].tolist(), np.concatenate(lines)[sel].tolist(),
                           allh[sel].tolist()):
            groups.setdefault(v, []).append((f, l))
        for members in groups.values():
            members.sort()
            out.extend(across_of_group(members))
    out.sort()
    return out


def _across_py(arrays: Sequence[tuple[int, array[int]]]) -> list[Across]:
    first: dict[int, tuple[int, int]] = {}
    out: list[Across] = []
    for f, values in sorted(arrays, key=lambda t: t[0]):
        mine: set[int] = set()
        for l, h in enumerate(values):
            if not h or h in mine:
                continue
            mine.add(h)
            if h in first:
                out.append((f, l, *first[h]))
            else:
                first[h] = (f, l)
    out.sort()
    return out


def earlier_copies(paths: Mapping[int, str], exact: Iterable[Across], near: Iterable[Across]
                   ) -> dict[int, tuple[EarlierCopy, ...]]:
    """Each file's rows repeating an earlier file's row: exactly, else up to letter case
    and outer whitespace (a row that is an exact repeat is never also a near one)."""
    found: dict[int, dict[int, EarlierCopy]] = {}
    for f, l, f0, l0 in exact:
        found.setdefault(f, {})[l] = EarlierCopy(line=l, path=paths[f0], file=f0, first_line=l0, exact=True)
    for f, l, f0, l0 in near:
        mine = found.setdefault(f, {})
        if l not in mine:
            mine[l] = EarlierCopy(line=l, path=paths[f0], file=f0, first_line=l0, exact=False)
    return {f: tuple(c for _, c in sorted(by.items())) for f, by in found.items() if by}


__all__ = ["across_of_group", "across_files", "earlier_copies", "Across"]
