"""Datasets in the editor: the engine's preflight on the buffer, kept up to date line by
line by the dataset reader's incremental form (readers/dataset_session.py DatasetFeed).

Opening a dataset runs the reader's full scan once; after that each edit hands the
changed line range to the feed, which re-scans only those lines, and the preflight rules
run over the updated scan (`preflight.dataset_report`). Nothing here reads rows or
decides what is wrong with one: the reader states facts, the rules judge.
tests/test_lsp_datasets.py checks that after random edits the incremental report equals
a full re-scan of the same text.

The reader and the judge are imported where they are first used: the language server
starts (and answers `initialize`) before their imports have been paid for.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..core.model import Report
from .documents import LineEdit

if TYPE_CHECKING:
    from ..core.config import Config
    from ..readers.dataset_session import DatasetFeed

_INCREMENTAL_MAX_LINES = 2000  # lines an edit may touch and still be re-scanned line by line


class DatasetSession:
    """One dataset buffer in the editor: its reader feed, and the report over it."""

    def __init__(self, path: Path, config: "Config", feed: "DatasetFeed") -> None:
        self.path = str(path)
        self.config = config
        self.feed = feed
        self._report: Report | None = None

    @property
    def needs_rescan(self) -> bool:
        return self.feed.needs_rescan

    @property
    def rescanned(self) -> int:
        """Lines re-scanned since the last report (for `show server info`)."""
        return self.feed.rescanned

    @rescanned.setter
    def rescanned(self, value: int) -> None:
        self.feed.rescanned = value

    def apply(self, edit: LineEdit, lines: list[str]) -> None:
        """Update the facts for `edit`, already applied to `lines`."""
        self._report = None
        if edit.whole or edit.count + len(edit.old) > _INCREMENTAL_MAX_LINES:
            # A whole-buffer replacement or a big paste: one full scan in a worker beats
            # thousands of per-line scans on the event loop.
            self.feed.needs_rescan = True
            return
        self.feed.replace(edit.start, edit.end, edit.count, edit.old, lines)

    def report(self) -> Report:
        if self._report is None:
            from ..judge.preflight import dataset_report

            self._report = dataset_report(self.feed.scan(), self.config)
        return self._report


def open_session(path: Path, config: "Config", text: str | None, lines: list[str] | None
                 ) -> tuple[DatasetSession | None, Report]:
    """Runs in a worker thread on a snapshot of the buffer (its text, or a copy of its
    lines): the full scan, and a session when the layout allows line-by-line updates
    (JSON Lines; a JSON array is re-scanned whole)."""
    from ..judge.preflight import dataset_report, judge_dataset
    from ..readers.dataset_session import DatasetFeed

    if text is None:
        text = "\n".join(lines or ())
    try:
        scanned, feed = DatasetFeed.start(path, text, config.fields or None)
    except Exception:  # unreadable as a dataset: preflight says why (NOT-CHECKED)
        return None, judge_dataset(path, config, data=text.encode("utf-8", "replace"))
    report = dataset_report(scanned, config)
    if feed is None:
        return None, report
    session = DatasetSession(path, config, feed)
    session._report = report
    return session, report
