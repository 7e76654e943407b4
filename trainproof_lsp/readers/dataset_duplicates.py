"""Duplicate rows of a dataset, found from its per-line content hashes.

Hashes live in two `array('Q')` indexed by line (0 = no record on that line), so memory
is 16 bytes per line; duplicates are found at the end by sorting hashes (numpy when
installed, a pure-Python fallback otherwise), never with a dict of lines.
"""

from __future__ import annotations

import sys
from array import array
from itertools import compress
from operator import ne
from typing import Iterable, Sequence

from .dataset_records import Duplicate

# Below this many lines a dict is faster than importing numpy; once numpy is imported (the
# language server loads it at start when installed) it is ~3x faster than the dict from a
# few thousand lines on (10k lines: 0.7 ms vs 2.3 ms).
_NUMPY_FROM = 200_000
NUMPY_FROM_BYTES = 40 << 20  # ~200k lines of a typical SFT dataset
_NUMPY_LOADED_FROM = 4_000


def find_duplicates(exact: array[int], near: array[int]) -> tuple[tuple[Duplicate, ...], tuple[Duplicate, ...]]:
    """Exact duplicates (same content hash as an earlier line) and near duplicates (same
    near hash as an earlier line, but no exact copy of any earlier line). Index = line;
    hash 0 = no record. Each names the first line it repeats."""
    n = len(exact)
    if n >= _NUMPY_FROM or (n >= _NUMPY_LOADED_FROM and "numpy" in sys.modules):
        try:
            return _duplicates_numpy(exact, near)
        except ImportError:
            pass
    return _duplicates_dict(exact, near) if n < 2 * _NUMPY_FROM else _duplicates_sorted(exact, near)


def _later_copies(values: array[int]) -> tuple[list[int], list[int]]:
    """Lines whose hash an earlier line has (hash 0, no record, excluded), and for each
    the first line with that hash; in C-level passes (one dict built backwards, so that
    each hash keeps its first line)."""
    hashes = values.tolist()
    n = len(hashes)
    first = dict(zip(hashes[::-1], range(n - 1, -1, -1)))
    firsts = list(map(first.__getitem__, hashes))
    lines = [line for line in compress(range(n), map(ne, firsts, range(n))) if hashes[line]]
    return lines, [firsts[line] for line in lines]


def _duplicates_dict(exact: array[int], near: array[int]) -> tuple[tuple[Duplicate, ...], tuple[Duplicate, ...]]:
    lines, firsts = _later_copies(exact)
    dups = tuple(Duplicate(line=l, first=f) for l, f in zip(lines, firsts))
    is_dup = set(lines)
    lines, firsts = _later_copies(near)
    # An exact copy of a near-duplicate is an exact duplicate, reported as such.
    nears = tuple(Duplicate(line=l, first=f) for l, f in zip(lines, firsts) if l not in is_dup)
    return dups, nears


def _groups_sorted(values: array[int]) -> dict[int, list[int]]:
    """hash -> lines, for hashes that occur more than once (pure Python, no numpy)."""
    order = sorted(range(len(values)), key=values.__getitem__)
    groups: dict[int, list[int]] = {}
    prev = None
    run: list[int] = []
    for i in order:
        v = values[i]
        if v != prev:
            if prev and len(run) > 1:
                groups[prev] = run
            run = [i]
            prev = v
        else:
            run.append(i)
    if prev and len(run) > 1:
        groups[prev] = run
    return groups


def duplicates_from_groups(exact_groups: Iterable[Sequence[int]], near_groups: Iterable[Sequence[int]],
                           exact: array[int]) -> tuple[tuple[Duplicate, ...], tuple[Duplicate, ...]]:
    """Duplicates from groups of lines sharing an exact / a near hash (each group in line
    order): what `find_duplicates` finds, for callers that keep the groups themselves
    (the language server updates them edit by edit)."""
    dups = [Duplicate(line=l, first=g[0]) for g in exact_groups for l in g[1:]]
    is_dup = {d.line for d in dups}
    nears: list[Duplicate] = []
    for g in near_groups:
        seen: set[int] = set()
        first = g[0]
        for l in g:
            e = exact[l]
            if l != first and l not in is_dup and e not in seen:
                nears.append(Duplicate(line=l, first=first))
            seen.add(e)
    dups.sort(key=lambda d: d.line)
    nears.sort(key=lambda d: d.line)
    return tuple(dups), tuple(nears)


def _duplicates_sorted(exact: array[int], near: array[int]) -> tuple[tuple[Duplicate, ...], tuple[Duplicate, ...]]:
    eg = [sorted(g) for g in _groups_sorted(exact).values()]
    ng = [sorted(g) for g in _groups_sorted(near).values()]
    return duplicates_from_groups(eg, ng, exact)


def _groups_numpy(values: array[int]) -> list[list[int]]:
    """Lines of every hash that occurs more than once, each group in line order.

    Memory stays flat (CONTRACTS.md §8: <= 64 MiB for 1M lines): the hashes are sorted in 16
    slices by their top 4 bits rather than as one 8-byte-per-line copy, and membership is
    tested a slice of lines at a time."""
    import numpy as np

    h = np.frombuffer(values, dtype=np.uint64)
    step = 1 << 16
    tops = np.empty(len(h), dtype=np.uint8)
    for lo in range(0, len(h), step):  # top 4 bits, without an 8-byte-per-line temporary
        tops[lo:lo + step] = h[lo:lo + step] >> np.uint64(60)
    repeated = []
    for part in range(16):
        sub = np.sort(h[tops == part])
        if len(sub) > 1:
            same = sub[1:] == sub[:-1]
            if same.any():
                repeated.append(sub[1:][same])
        del sub
    if not repeated:
        return []
    rep = np.unique(np.concatenate(repeated))
    rep = rep[rep != 0]
    if not len(rep):
        return []
    del tops
    groups: dict[int, list[int]] = {}
    for lo in range(0, len(h), step):
        block = h[lo:lo + step]
        hit = np.flatnonzero(np.isin(block, rep))
        for line, v in zip((hit + lo).tolist(), block[hit].tolist()):
            groups.setdefault(v, []).append(line)
    return list(groups.values())


def _duplicates_numpy(exact: array[int], near: array[int]) -> tuple[tuple[Duplicate, ...], tuple[Duplicate, ...]]:
    eg = _groups_numpy(exact)
    ng = _groups_numpy(near)
    return duplicates_from_groups(eg, ng, exact)
