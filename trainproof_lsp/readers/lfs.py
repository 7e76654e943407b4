"""Git LFS pointer files: what a plain checkout leaves where an LFS-tracked file should be.

A repository whose checkpoints or datasets live in Git LFS holds, after a checkout that
fetched no LFS objects (`actions/checkout` without `lfs: true`, `GIT_LFS_SKIP_SMUDGE=1`),
a small text file in place of each of them:

    version https://git-lfs.github.com/spec/v1
    oid sha256:<64 hex digits>
    size 267832560

Whatever its name says, such a file is not the file it stands for: it is one NOT-CHECKED
("not downloaded"), never a malformed dataset, a corrupt checkpoint or an unreadable log.
Every door (doctor, epoch, preflight, the checkpoint reader, the engine's judge_file that
an editor buffer goes through) asks this module, from the file's first bytes.
"""

from __future__ import annotations

import re
from pathlib import Path

from .common import open_regular

# What a report on a pointer says it judged (doctor, epoch, preflight, the checkpoint reader).
KIND = "lfs-pointer"
FORMAT = "git-lfs-pointer"

# Git LFS's own scanner reads a blob as a possible pointer only below 1024 bytes (its
# blobSizeCutoff); a pointer is ~130 bytes. A file of more than 1 KiB is never taken for one.
MAX_POINTER_BYTES = 1024

# The spec's first line (and the pre-1.0 "hawser" name git-lfs still accepts); then keys
# in sorted order, each `key value` on its own line; `oid` and `size` are required.
_POINTER = re.compile(
    rb"version https://(?:git-lfs\.github\.com|hawser\.github\.com)/spec/v1\r?\n"
    rb"(?:[a-z0-9.-]+ [^\r\n]*\r?\n)*?"
    rb"oid sha256:[0-9a-f]{64}\r?\n"
    rb"(?:[a-z0-9.-]+ [^\r\n]*\r?\n)*?"
    rb"size (\d{1,19})\r?\n?"
    rb"(?:[a-z0-9.-]+ [^\r\n]*\r?\n?)*")


def pointer_size(data: bytes) -> int | None:
    """The size of the file a Git LFS pointer stands for, when `data` (a file's whole
    content, or its first bytes when they are all of it) is such a pointer; else None."""
    if len(data) > MAX_POINTER_BYTES or not data.startswith(b"version https://"):
        return None
    m = _POINTER.fullmatch(data)
    return int(m.group(1)) if m else None


def pointer_reason(size: int) -> str:
    """The one line every door says about a pointer (without the path)."""
    return f"Git LFS pointer to a {size:,}-byte file, not downloaded: run `git lfs pull`"


def pointer_at(path: Path | str, data: bytes | None = None) -> str | None:
    """The reason for a file (on disk, or the editor buffer `data`) that is a Git LFS
    pointer; None for any other file, or one that cannot be read (the caller's own read
    says why). Reads at most 1 KiB and one byte, from a regular file only."""
    if data is None:
        try:
            with open_regular(Path(path)) as fh:
                data = fh.read(MAX_POINTER_BYTES + 1)
        except OSError:
            return None
    size = pointer_size(data[:MAX_POINTER_BYTES + 1])
    return None if size is None else pointer_reason(size)


__all__ = ["KIND", "FORMAT", "MAX_POINTER_BYTES", "pointer_size", "pointer_reason", "pointer_at"]
