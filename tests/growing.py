"""A log written in pieces while `watch` polls it: the watch's own poll after each piece,
then the settle it does at its end (no waits, no clock: every poll is called, not timed).
The stack-reader, stdout-log and W&B tests check the watched verdict against `epoch`'s."""

from __future__ import annotations

import io
from pathlib import Path

from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import Report
from trainproof_lsp.guardian.watch import Watch, WatchOptions


def watch_growing(data: bytes, dest: Path, pieces: int) -> Watch:
    """`watch` over `dest` while `data` is appended to it in `pieces` cuts at arbitrary
    bytes (inside lines and records), polled after each; settled at the end."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(b"")
    w = Watch(dest, Config(), WatchOptions(interval=0.0), out=io.StringIO(), err=io.StringIO())
    step = len(data) // pieces + 1
    for at in range(0, len(data), step):
        with dest.open("ab") as fh:
            fh.write(data[at:at + step])
        w.poll_once()
    w.settle_all()
    return w


def watched_report(w: Watch) -> Report:
    (report,) = w.outcome().reports
    return report


def same_findings(a: Report, b: Report) -> bool:
    key = [(f.id, f.level, f.message, f.location) for f in a.findings]
    return a.verdict is b.verdict and key == [(f.id, f.level, f.message, f.location) for f in b.findings]
