"""Size caps: how much of one hostile file is read before the answer is NOT-CHECKED.

An opened folder may hold anything: a 1 GB one-line log, a zip whose 1 MB inflates to
1 GB, a pickle of two million globals. Each reader stops at its cap and says so (the size
and the cap, in the report), so every input answers within seconds and well under 1 GiB
of memory. The defaults sit far above what real runs write; raise them in
`[tool.trainproof.caps]` (or the editor setting `trainproof.caps`) for an unusual run.

    [tool.trainproof.caps]
    max_log_mb = 1024
    max_pickle_ops = 4000000
"""

from __future__ import annotations

import dataclasses
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

MIB = 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class Caps:
    # trainer_state.json and metric logs are read whole and parsed into typed columns; a
    # 1M-entry trainer_state.json is ~200 MB on disk (HF writes indent=2), so 512 MiB
    # leaves room for twice that and keeps the read far from 1 GiB.
    max_log_mb: int = 512
    # The budget is 400 MiB for a 1M-entry log; 2M entries stay under 1 GiB. Counted from
    # the `"step"` keys before parsing, so a compact 5M-entry file is refused in a second.
    max_log_entries: int = 2_000_000
    # One dataset row (one JSONL line). A 1M-token long-context sample is ~4 MB; a row
    # is checked at ~8 MB/s (decode, hashes, near-duplicate shingles), so 16 MiB is ~2 s.
    # A longer row is streamed past unread and is NOT-CHECKED.
    max_row_mb: int = 16
    # Pickle bytes walked per pickle. A 70 MiB array prefix before a payload is walked;
    # past the cap the report says how far the walk got.
    max_pickle_mb: int = 256
    # Pickle opcodes replayed per pickle: a torch state dict is ~25 opcodes a tensor
    # (1M covers 40k tensors) and an optimizer state a few 100k; 1M opcodes are ~3-5 s of
    # pure-Python replay on a busy machine.
    max_pickle_ops: int = 1_000_000
    # Bytes inflated from one compressed ZIP entry (torch.save writes STORED entries, so
    # real checkpoints never inflate anything; a zip bomb stops here).
    max_inflate_mb: int = 256
    # Tensors listed in one checkpoint file. A shard of the largest public models holds a
    # few thousand; 100k tensors are scanned in about 2 s.
    max_tensors: int = 100_000
    # Scalar points read from one run's TensorBoard event files. They stream into typed
    # columns at ~55 bytes a point (3M points: 203 MiB peak, benchmarks/bench_scale.py), so
    # 12M points stay near 700 MiB; a run logging 10 scalars at every one of 1M steps
    # holds 10M.
    max_events: int = 12_000_000
    # Bytes of one run's event files, in all. Images and histograms make them big while
    # their scalars stay few; records the reader does not decode are passed over at
    # ~1.3 GiB/s with their CRCs checked (google-crc32c), so 4 GiB is ~3 s of CPU.
    max_events_mb: int = 4096


DEFAULT_CAPS = Caps()
_FIELDS = {f.name for f in dataclasses.fields(Caps)}


class CapsError(ValueError):
    """A cap that cannot be used; the message names the key."""


def caps_from_table(table: Any, where: str, base: Caps = DEFAULT_CAPS) -> Caps:
    """`[tool.trainproof.caps]` (or the editor's `trainproof.caps` object) on top of `base`."""
    if not isinstance(table, Mapping):
        raise CapsError(f"{where}: caps must be a table of whole numbers")
    values: dict[str, int] = {}
    for key, value in table.items():
        if key not in _FIELDS:
            raise CapsError(f"{where}: caps.{key}: unknown cap; known: {', '.join(sorted(_FIELDS))}")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise CapsError(f"{where}: caps.{key} must be a whole number >= 1")
        values[key] = value
    return dataclasses.replace(base, **values)


def over(size: int, cap_mb: int) -> bool:
    return size > cap_mb * MIB


def mib(n: int) -> str:
    return f"{n / MIB:.1f} MiB"


_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


def not_regular(path: Path) -> str | None:
    """Why `path` must not be opened (it is not a regular file, after symlinks), or None.

    Only regular files are read: opening a FIFO blocks until someone writes to it, and a
    symlink to /dev/zero or /dev/urandom never ends."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        return f"cannot read ({e.strerror or e})"
    if stat.S_ISREG(mode):
        return None
    what = next((w for test, w in _KINDS if test(mode)), "not a regular file")
    via = " (through a symlink)" if os.path.islink(path) else ""
    return f"{what}{via}, not a regular file: only regular files are read"
