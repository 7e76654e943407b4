"""`trainproof-lsp watch LOG_OR_DIR`: tail growing logs and print each verdict change.

Reading only what is new
------------------------
- metric JSONL / CSV / TSV: a byte offset per file; each poll reads the bytes appended
  since and feeds them to the format's reader in its incremental form (`JsonlFeed`,
  `CsvFeed` in readers/metrics.py: the whole-file read is the same object fed the whole
  file), which keeps a partial last line for the next poll. Rows map onto series through
  the reader's `RowMapping`, computed again when a new column name appears (a test checks
  watch and the whole-file read agree). A log the reader cannot read (not UTF-8, a
  malformed CSV) is NOT-CHECKED, as `doctor` says, until it is rewritten from the start.
- TensorBoard event files: the appended bytes are fed to the event reader's incremental
  form (`EventReader.feed`, the code the whole read uses): it keeps a record cut by the
  writer until its end arrives, and each tag's first metadata, so TF2-style tensor
  scalars, whose metadata is only in a tag's first record, are still recognised.
- `trainer_state.json`: HF rewrites it whole at every checkpoint, so there is nothing to
  append to: it is read again, whole, only when its size or mtime changes (once per
  checkpoint). In an HF output_dir the newest `checkpoint-*/trainer_state.json` is the
  live one until the top-level file appears.
- other logs (Coqui text logs, JSON arrays of records): read again whole when their size
  or mtime changes.

A file that shrinks, or whose first bytes change (a restarted run, Lightning's CSVLogger
rewriting its header when a new metric appears), is read again from the start.

The verdict
-----------
Each log has its own growing run and `IncrementalJudge` (incremental.py): the verdict
printed is always the registry's verdict over the whole log so far, evaluated on the
bounded-cost schedule. A line (or, with --json, a verdict-stream object as in
stream.py) is printed when the verdict or its FAIL/WARN rule ids change.

A log (or run folder) that does not exist yet is waited for: `watch` is often started
before the training run that writes it.

The published verdict may lag a growing log by the bound incremental.py states; whenever
a log is quiet it is settled (`IncrementalJudge.settle`): on a poll that finds nothing
new, on a stall, before a FAIL is confirmed, at the end and on Ctrl-C. So the last verdict
printed is always `epoch`'s on the bytes the watch last read.

--until-fail exits 1 once a FAIL has stood for `--confirm` more records (default: the
unrecovered-spike rule's look-ahead, as the training callbacks use; see core.py) or the
log has stopped growing for --stall-timeout seconds, and a full evaluation of the whole
log so far still says FAIL. --stall-timeout S reports a log that has not grown for S
seconds (and again when it grows). Exit codes come from cli.exit_code over the final
reports: 1 FAIL, 2 not judged, else 0.

Ctrl-C (SIGINT)
---------------
`run` installs its own SIGINT handler, whatever the process inherited: a watch started in
the background by a script inherits SIGINT *ignored*, and Python then never turns it into
KeyboardInterrupt — `kill -INT` would be lost. The handler only raises at a safe point (a
wait between polls); during a poll it notes the request, and the loop ends after that
poll, reads what is new once more and settles every log, so the verdicts printed last are
over the bytes on disk. A second Ctrl-C ends at once, with the verdicts published so far.

Only regular files are opened (a FIFO would block the watch, /dev/zero would never end),
each open checked on the opened descriptor (readers/common.open_regular), and a log over its size cap
(`max_log_mb`; `max_events_mb` for an event file) is NOT-CHECKED, as `epoch` says.
"""

from __future__ import annotations

import contextlib
import copy
import os
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, TextIO

from ..core.caps import DEFAULT_CAPS, MIB, Caps, mib, not_regular
from ..core.config import Config
from ..core.formats import checkpoint_step, is_skipped_folder, is_watched_log
from ..readers.detect import HEAD_BYTES, Detected, detect
from ..judge.engine import event_file_findings, not_checked, read_run
from ..core.text import printable
from ..core.model import Finding, NotJudged, Outcome, ReadError, Report, Span, Verdict
from ..readers.common import NotRegularFile, open_regular
from ..readers.metrics import CsvFeed, GrowingRowMapping, JsonlFeed, Rows, map_columns
from ..readers.tensorboard import normalise_tag, split_of
from ..readers.trainer_state import read_trainer_state
from ..readers.tfevents import EventFileScan, EventPoint, EventReader
from ..readers.wandb_offline import FORMAT as WANDB_FORMAT, WandbRows, run_meta
from ..readers import adjacent, stdout_log, torchtune
from ..readers.metrics import no_loss_error
from ..readers.stdout_log import StdoutLines
from ..core.model import RunMeta
from ..judge.wandb_run import stopped_finding
from .core import change_lines, default_confirm, fail_ids
from .incremental import IncrementalJudge, LiveRun, Schedule, verdict_change
from .stream import STREAM_NAME, encode, stall_event, verdict_event

# Bytes compared at the start of a file on each change: a rewrite from the start shows here.
_HEAD_CHECK = 256


def cap_reason(path: Path, size: int, cap_mb: int, name: str) -> str | None:
    """The NOT-CHECKED reason for a log of `size` bytes over `cap_mb`, as the reader says it."""
    if size <= cap_mb * MIB:
        return None
    return f"{path}: {size} bytes ({mib(size)}), over the cap of {cap_mb} MiB for a log ({name}): not read"


@dataclass
class Poll:
    """What one poll of one log found."""

    grew: bool = False  # the file changed (bytes appended, or rewritten)
    replaced: bool = False  # the whole run was read again: evaluate in full
    error: str | None = None  # could not be read (a NOT-CHECKED reason)
    extra: tuple[Finding, ...] = ()


class _Tailer:
    """One watched log: its growing run, read incrementally."""

    def __init__(self, path: Path, fmt: str, column_map: Mapping[str, str] | None = None, *,
                 cap_mb: int = DEFAULT_CAPS.max_log_mb, cap_name: str = "max_log_mb") -> None:
        self.path = path
        self.fmt = fmt
        self.column_map = column_map  # the `columns` setting: names the alias table misses
        self.cap_mb, self.cap_name = cap_mb, cap_name
        self.live = LiveRun(path=str(path), format=fmt)
        self.offset = 0
        self.head = b""
        self.refused = ""  # why the file must not be read (not regular, over its cap)

    def columns(self) -> tuple[str, ...]:
        return self.live.series_names()

    def _restart(self) -> None:
        self.__init__(self.path, self.fmt, self.column_map,  # type: ignore[misc]
                      cap_mb=self.cap_mb, cap_name=self.cap_name)

    def _read_new(self) -> tuple[bytes, bool] | None:
        """(appended bytes, was the file read again from the start); None when it cannot
        be read (`refused` says why when it must not be)."""
        self.refused = ""
        irregular = not_regular(self.path)
        if irregular:
            self.refused = f"{self.path}: {irregular}"
            return None
        try:
            size = os.stat(self.path).st_size
        except OSError:
            return None
        refused = cap_reason(self.path, size, self.cap_mb, self.cap_name)
        if refused:
            self.refused = refused
            return None
        restarted = False
        if size < self.offset or (size != self.offset and self.head and not self._same_head()):
            self._restart()
            restarted = True
        if size == self.offset:
            return b"", restarted
        try:
            with open_regular(self.path) as fh:
                fh.seek(self.offset)
                data = fh.read(size - self.offset)  # (bounded: size is under the cap)
        except NotRegularFile as e:
            self.refused = f"{self.path}: {e.strerror}"
            return None
        except OSError:
            return None
        if len(self.head) < _HEAD_CHECK and self.offset < _HEAD_CHECK:
            self.head = (self.head + data)[:_HEAD_CHECK]
        self.offset += len(data)
        return data, restarted

    def _cannot_read(self) -> Poll:
        """The poll when _read_new gave None: why the file must not be read, or that it is gone."""
        return Poll(error=self.refused or f"{self.path}: cannot read (gone or not readable)")

    def _same_head(self) -> bool:
        try:
            with open_regular(self.path) as fh:
                return fh.read(len(self.head)) == self.head
        except OSError:
            return False

    def poll(self) -> Poll:
        raise NotImplementedError


class _LineTailer(_Tailer):
    """JSONL and CSV/TSV: the appended bytes fed to the format's reader (its incremental
    form, the one the whole-file read uses); rows mapped onto series as they come."""

    def __init__(self, path: Path, fmt: str, column_map: Mapping[str, str] | None = None,
                 **caps: Any) -> None:
        super().__init__(path, fmt, column_map, **caps)
        self.rows: JsonlFeed | CsvFeed = (
            CsvFeed(str(path), "\t" if path.suffix.lower() == ".tsv" else ",") if fmt == "metrics-csv"
            else JsonlFeed(str(path)))
        self.mapping = GrowingRowMapping(column_map)
        # Why the log cannot be read (as the whole-file read would say), until it is
        # rewritten from the start.
        self.unreadable = ""

    def poll(self) -> Poll:
        got = self._read_new()
        if got is None:
            return self._cannot_read()
        data, restarted = got
        if self.unreadable:  # (a file rewritten from the start is read afresh: see _restart)
            return Poll(error=self.unreadable)
        if not data:
            return Poll(grew=restarted, replaced=restarted)
        start = self.offset - len(data)
        if start < HEAD_BYTES and b"\x00" in data[: HEAD_BYTES - start]:
            # As the readers judge a whole file: NUL bytes at its start make it no text log.
            self.unreadable = f"{self.path}: binary data (NUL bytes), not a text log"
            return Poll(grew=True, error=self.unreadable)
        try:
            rows = self.rows.feed(data)
        except ReadError as e:
            self.unreadable = str(e)
            return Poll(grew=True, error=self.unreadable)
        self._take(rows, self.live, self.mapping, self.rows)
        return Poll(grew=True, replaced=restarted)

    @staticmethod
    def _take(rows: Rows, live: LiveRun, mapping: GrowingRowMapping, feed: JsonlFeed | CsvFeed) -> None:
        """A batch of the feed's rows appended to `live`, mapped onto series."""
        numbered = []
        # (The batch's columns, read directly: a Row object per row would cost more than
        # the row's own parsing.)
        for i, (values, line, end_line, end_char) in enumerate(
                zip(rows.values, rows.lines, rows.end_lines, rows.end_chars)):
            record = live.new_record(span=Span(line, 0, end_line, end_char))
            note = rows.notes.get(i)
            if note is not None:
                live.notes.append((record, note))
            numbered.append((record, values))
        if mapping.put(numbered, live, live.notes):
            live.unmapped = mapping.mapping.unmapped()
        if isinstance(feed, JsonlFeed):
            bad = feed.bad_lines_note()
            if bad is not None:
                live.lead_notes["bad-lines"] = bad

    def finished(self) -> tuple[LiveRun, tuple[str, ...]] | str | None:
        """The run as a whole-file read of the bytes so far sees it: the last line, which
        its writer has not ended (yet), read as the reader's `finish` reads it — on copies,
        so the tail goes on as before when the line is completed. (the run, its columns);
        a reason when that read fails; None when no such line is held (the common case:
        the copy of the feed is a few bytes; the run is copied only when a line is held)."""
        if self.unreadable:
            return None
        feed = copy.deepcopy(self.rows)
        bad = feed.bad if isinstance(feed, JsonlFeed) else 0
        try:
            rows = feed.finish()
        except ReadError as e:
            return str(e)
        if not rows.values and not rows.notes and (not isinstance(feed, JsonlFeed) or feed.bad == bad):
            return None
        live, mapping = copy.deepcopy(self.live), copy.deepcopy(self.mapping)
        self._take(rows, live, mapping, feed)
        return live, tuple(mapping.mapping.names)

    def columns(self) -> tuple[str, ...]:
        return tuple(self.mapping.mapping.names)


class _EventTailer(_Tailer):
    """TensorBoard event files: the event reader's incremental form (`EventReader.feed`)
    over the bytes appended since the last poll. The reader keeps a record cut by the
    writer until its end arrives, and each tag's first metadata, so TF2-style tensor
    scalars (metadata only in a tag's first record) are recognised in later records."""

    def __init__(self, path: Path, fmt: str, column_map: Mapping[str, str] | None = None,
                 **caps: Any) -> None:
        super().__init__(path, fmt, column_map, **caps)
        self.reader = EventReader(path=str(path), verify_crc=True)
        self.split = split_of(path)
        self.tags: dict[str, str] = {}  # normalised name -> tag
        self.chosen: dict[str, str] = {}  # canonical series -> normalised name
        self.by_tag: dict[str, str] = {}  # tag -> canonical series
        self.last_loss: tuple[int, float] | None = None  # (step, wall) for step time
        self.extra: list[Finding] = []
        self.problems_seen = 0

    def columns(self) -> tuple[str, ...]:
        return tuple(self.tags.values())

    def feed(self, data: bytes) -> list[EventPoint]:
        """The scalar points of the records `data` completes, in file order."""
        self.reader.feed(data)
        return self.reader.take_points()

    def finish(self) -> list[EventPoint]:
        """The points held back to the end (tensor scalars whose tag's metadata came
        after them); the reader then reports a cut last record."""
        self.reader.finish()
        return self.reader.take_points()

    def poll(self) -> Poll:
        if self.reader.stopped:
            return Poll(extra=tuple(self.extra))
        got = self._read_new()
        if got is None:
            return self._cannot_read()
        data, restarted = got
        if not data:
            return Poll(grew=restarted, replaced=restarted, extra=tuple(self.extra))
        self._apply(self.feed(data))
        # The file still holds a record its writer has not finished: read it again from
        # there on the next poll instead of keeping a second copy (`offset` is the end
        # of the last complete record).
        self.offset = self.reader.end_offset
        self.reader.drop_cut()
        return Poll(grew=True, replaced=restarted, extra=tuple(self.extra))

    def _apply(self, points: list[EventPoint]) -> None:
        reader = self.reader
        if len(reader.cols) != len(self.tags) and any(normalise_tag(t, self.split) not in self.tags
                                                      for t in reader.cols):
            for t in reader.cols:
                self.tags.setdefault(normalise_tag(t, self.split), t)
            chosen, _ = map_columns(self.tags, self.column_map)
            self.chosen = chosen
            self.by_tag = {self.tags[col]: series for series, col in chosen.items()}
        live = self.live
        derive_step_time = "step_time" not in self.chosen
        for off, tag, st, wall, value in points:
            series = self.by_tag.get(tag)
            if series is None:
                continue
            record = live.new_record(byte_offset=off)
            live.add(series, tag, st, value, record)
            if series == "loss" and derive_step_time:
                if self.last_loss is not None:
                    dstep, dwall = st - self.last_loss[0], wall - self.last_loss[1]
                    if dstep > 0 and dwall > 0:
                        live.add("step_time", "wall time / step", st, dwall / dstep, record)
                self.last_loss = (st, wall)
        damaged = [pr for pr in reader.problems[self.problems_seen:] if pr.kind != "truncated"]
        self.problems_seen = len(reader.problems)
        if damaged:
            self.extra.extend(event_file_findings([EventFileScan(
                path=str(self.path), records=reader.records, scalars={}, problems=tuple(damaged),
                crc_checked=True, crc_impl="")]))


class _WandbTailer(_Tailer):
    """A W&B offline run file: the record reader's incremental form (`WandbFeed`, the code
    the whole read uses) over the bytes appended since the last poll; a chunk the SDK has
    not finished writing is held until its end arrives. Damage (a bad CRC, broken framing)
    stops the read there, as `epoch` does, and is said as its NOT-CHECKED finding; a cut
    at the end is said only when the log is settled (`finished_extra`), as `epoch` would
    say it of the bytes so far."""

    def __init__(self, path: Path, fmt: str, column_map: Mapping[str, str] | None = None, *,
                 max_rows: int = DEFAULT_CAPS.max_log_entries, **caps: Any) -> None:
        super().__init__(path, fmt, column_map, **caps)
        self.max_rows = max_rows
        self.rows = WandbRows(str(path), column_map or None, max_rows=max_rows)
        self.unreadable = ""
        self.extra: tuple[Finding, ...] = ()
        self.config_seen = 0

    def _restart(self) -> None:
        self.__init__(self.path, self.fmt, self.column_map,  # type: ignore[misc]
                      max_rows=self.max_rows, cap_mb=self.cap_mb, cap_name=self.cap_name)

    def poll(self) -> Poll:
        got = self._read_new()
        if got is None:
            return self._cannot_read()
        data, restarted = got
        if self.unreadable:
            return Poll(error=self.unreadable)
        if not data:
            return Poll(grew=restarted, replaced=restarted, extra=self.extra)
        live = self.live
        try:
            self.rows.feed.feed(data)
            self.rows.pump(live, lambda offset: live.new_record(byte_offset=offset), live.notes)
        except ReadError as e:
            self.unreadable = str(e)
            return Poll(grew=True, error=self.unreadable)
        feed = self.rows.feed
        if len(feed.config) != self.config_seen:  # the run's config arrives in its first records
            self.config_seen = len(feed.config)
            live.meta = run_meta(str(self.path), feed.config)
        live.unmapped = self.rows.mapping.mapping.unmapped()
        if feed.problem is not None and not self.extra:
            self.extra = (stopped_finding(str(self.path), feed.problem, self.rows.rows),)
        return Poll(grew=True, replaced=restarted, extra=self.extra)

    def finished_extra(self) -> tuple[Finding, ...]:
        """The findings of a whole read of the bytes so far: a record the file still cuts
        short is said (on a copy of the reader: the tail goes on when the writer ends it)."""
        if self.unreadable or self.extra:
            return self.extra
        feed = copy.deepcopy(self.rows.feed)
        try:
            feed.finish()
        except ReadError:
            return self.extra
        if feed.problem is None:
            return self.extra
        return (stopped_finding(str(self.path), feed.problem, self.rows.rows),)

    def columns(self) -> tuple[str, ...]:
        return tuple(self.rows.mapping.mapping.names)


class _TextTailer(_Tailer):
    """Text logs read line by line: training stdout captured to a file and torchtune's
    DiskLogger files. Each completed line is given to the reader's own line function
    (`StdoutLines.line`, `torchtune.parse_line`: the whole read uses them too); a last line
    its writer has not ended is held until its newline arrives, and read as `epoch` reads
    it when the log is settled (`finished`)."""

    def __init__(self, path: Path, fmt: str, column_map: Mapping[str, str] | None = None,
                 **caps: Any) -> None:
        super().__init__(path, fmt, column_map, **caps)
        self.held = b""  # the last line, not ended yet
        self.lineno = 0  # lines completed so far
        self.line_offset = 0  # byte offset of the held line
        self.unreadable = ""
        classes, source = adjacent.find_num_classes(path)
        self.meta = RunMeta(checkpoint_steps=adjacent.checkpoint_steps(adjacent.run_root(path)),
                            vocab_size=classes, vocab_source=source)
        self.live.meta = self.meta
        self._state(self.live)

    def _state(self, live: LiveRun) -> None:
        if self.fmt == "stdout-log":
            self.stdout: StdoutLines | None = StdoutLines(
                live, lambda line, a, b: live.new_record(span=Span(line, a, line, b)))
        else:
            self.stdout = None
            self.mapping = GrowingRowMapping(self.column_map)
            self.other = 0
            self.first_other: int | None = None

    def _line(self, live: LiveRun, raw: bytes, offset: int) -> None:
        """One completed line (without its newline), at byte `offset` of the file."""
        lineno = self.lineno
        self.lineno += 1
        if self.stdout is not None:
            self.stdout.line(lineno, raw.decode("utf-8", "replace"))
            return
        if offset == 0 and raw.startswith(b"\xef\xbb\xbf"):
            raw, offset = raw[3:], 3
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:  # as the whole read says it
            raise ReadError(f"{self.path}: not UTF-8 text (byte {offset + e.start})") from None
        if not text.strip():
            return
        row = torchtune.parse_line(text)
        if row is None:
            self.other += 1
            self.first_other = lineno if self.first_other is None else self.first_other
            return
        record = live.new_record(span=Span(lineno, 0, lineno, len(text.rstrip())))
        self.mapping.put([(record, row)], live, live.notes)

    def _after(self, live: LiveRun) -> str | None:
        """The run's notes and meta brought up to date; why it cannot be judged yet."""
        if self.stdout is not None:
            if self.stdout.records:
                live.lead_notes["lines"] = self.stdout.summary()
            live.meta = replace(self.meta, max_steps=self.stdout.max_steps)
            if self.stdout.records and not self.stdout.judgeable():
                return str(stdout_log.no_lines_error(self.path))
            return None
        if self.other and self.first_other is not None:
            live.lead_notes["other"] = torchtune.other_lines_note(self.other, self.first_other)
        live.unmapped = self.mapping.mapping.unmapped()
        if live.records and not self.mapping.mapping.has_loss():
            return str(no_loss_error(str(self.path), self.mapping.mapping.names, "metric"))
        return None

    def poll(self) -> Poll:
        got = self._read_new()
        if got is None:
            return self._cannot_read()
        data, restarted = got
        if self.unreadable:
            return Poll(error=self.unreadable)
        if not data:
            return Poll(grew=restarted, replaced=restarted)
        data = self.held + data
        cut = data.rfind(b"\n")
        if cut < 0:
            self.held = data
            return Poll(grew=True, replaced=restarted)
        self.held = data[cut + 1:]
        try:
            for raw in data[:cut].split(b"\n"):
                self._line(self.live, raw, self.line_offset)
                self.line_offset += len(raw) + 1
        except ReadError as e:
            self.unreadable = str(e)
            return Poll(grew=True, error=self.unreadable)
        why = self._after(self.live)
        return Poll(grew=True, replaced=restarted, error=why)

    def finished(self) -> tuple[LiveRun, tuple[str, ...]] | str | None:
        """The run with the held last line read as `epoch` reads it (on copies); a reason
        when it cannot be judged; None when no line is held."""
        if self.unreadable or not self.held:
            return None
        held = copy.copy(self)
        held.live = copy.deepcopy(self.live)
        state = copy.deepcopy((self.stdout, getattr(self, "mapping", None)))
        held.stdout = state[0]
        if state[0] is not None:  # its records go to the copy of the run
            state[0].add = held.live.add
            state[0].new_record = lambda line, a, b: held.live.new_record(span=Span(line, a, line, b))
        else:
            assert isinstance(state[1], GrowingRowMapping)
            held.mapping = state[1]
        try:
            held._line(held.live, self.held, self.line_offset)
        except ReadError as e:
            return str(e)
        why = held._after(held.live)
        return why if why is not None else (held.live, held.columns())

    def columns(self) -> tuple[str, ...]:
        return self.live.series_names() if self.stdout is not None else tuple(self.mapping.mapping.names)


class _WholeTailer(_Tailer):
    """Logs rewritten whole (trainer_state.json) or read whole (Coqui text, JSON arrays):
    read again only when the size or mtime changes."""

    def __init__(self, path: Path, fmt: str, column_map: Mapping[str, str] | None = None,
                 **caps: Any) -> None:
        super().__init__(path, fmt, column_map, **caps)
        self.signature: tuple[int, int] | None = None
        self.failed: tuple[tuple[int, int], str] | None = None

    def poll(self) -> Poll:
        irregular = not_regular(self.path)
        if irregular:
            return Poll(error=f"{self.path}: {irregular}")
        try:
            st = os.stat(self.path)
        except OSError:
            return Poll(error=f"{self.path}: cannot read (gone or not readable)")
        sig = (st.st_size, st.st_mtime_ns)
        if sig == self.signature:
            return Poll()
        refused = cap_reason(self.path, st.st_size, self.cap_mb, self.cap_name)
        if refused:
            self.signature = sig
            return Poll(grew=True, error=refused)
        try:
            with open_regular(self.path) as fh:
                data = fh.read(st.st_size + 1)  # (bounded: what grew since the stat is read next time)
            if self.fmt == "hf-trainer-state":
                run = (read_trainer_state(self.path, data, columns=self.column_map) if self.column_map
                       else read_trainer_state(self.path, data))
            else:
                run = read_run(self.path, Detected("metrics", self.fmt), data, columns=self.column_map)
        except NotRegularFile as e:
            return Poll(grew=True, error=f"{self.path}: {e.strerror}")
        except (ReadError, OSError, ValueError, RecursionError) as e:
            # The writer may be mid-rewrite: an error counts only once the same bytes
            # fail twice.
            reason = str(e) if isinstance(e, ReadError) else f"{self.path}: unreadable ({e})"
            if self.failed is not None and self.failed[0] == sig:
                self.signature = sig
                return Poll(grew=True, error=reason)
            self.failed = (sig, reason)
            return Poll()
        self.signature, self.failed = sig, None
        self.live.replace(run)
        return Poll(grew=True, replaced=True)

    def columns(self) -> tuple[str, ...]:
        return self.live.series_names()

    def move(self, path: Path) -> None:
        """The live trainer_state.json is now another file (a newer checkpoint)."""
        self.path = path
        self.signature = None


def make_tailer(path: Path, fmt: str, columns: Mapping[str, str] | None = None,
                caps: Caps = DEFAULT_CAPS) -> _Tailer:
    if fmt in ("metrics-jsonl", "metrics-csv", "llamafactory-log", "swift-log"):  # (the stacks' logs are metric JSONL)
        return _LineTailer(path, fmt, columns, cap_mb=caps.max_log_mb)
    if fmt in ("stdout-log", "torchtune-log"):
        return _TextTailer(path, fmt, columns, cap_mb=caps.max_log_mb)
    if fmt == WANDB_FORMAT:
        return _WandbTailer(path, fmt, columns, cap_mb=caps.max_log_mb, max_rows=caps.max_log_entries)
    if fmt == "tfevents":
        return _EventTailer(path, fmt, columns, cap_mb=caps.max_events_mb, cap_name="max_events_mb")
    return _WholeTailer(path, fmt, columns, cap_mb=caps.max_log_mb)


# --- the watch loop ------------------------------------------------------------------

@dataclass
class _Watched:
    """A log's state in the watch: its tailer, judge and what was last said about it."""

    key: str  # the name it is shown under
    tailer: _Tailer
    judge: IncrementalJudge
    report: Report | None = None
    said: tuple[Any, ...] | None = None
    last_growth: float = 0.0
    stalled: bool = False
    fail_since: int | None = None  # records at the first FAIL of the current streak
    error: bool = False  # the last poll could not read it: its report is that NOT-CHECKED
    extra: tuple[Finding, ...] = ()  # the tailer's findings of its own (damaged event records)

    @property
    def name(self) -> str:
        """The log as `doctor` names its run: the file read now. In an HF output_dir
        that is the newest checkpoint's trainer_state.json until the top-level one is
        written (`key`, the output_dir's trainer_state.json, only keeps the run apart)."""
        return str(self.tailer.path)


@dataclass
class WatchOptions:
    interval: float = 2.0
    until_fail: bool = False
    stall_timeout: float | None = None
    json: bool = False
    confirm: int | None = None
    schedule: Schedule = field(default_factory=Schedule)


def _candidates(root: Path) -> dict[str, tuple[Path, str]]:
    """Logs below a folder: name shown -> (path, format). In an HF output_dir the
    top-level trainer_state.json, else the newest checkpoint's, stands for the run."""
    found: dict[str, tuple[Path, str]] = {}
    states: dict[Path, list[tuple[int, Path]]] = {}
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        dirs[:] = sorted(d for d in dirs if not is_skipped_folder(d))
        for f in sorted(files):
            if f == STREAM_NAME:
                continue  # the guardian's own output
            p = here / f
            if not is_watched_log(f):  # the logs of the table of formats (core/formats.py)
                continue
            if f == "trainer_state.json":
                n = checkpoint_step(here.name)
                if n is not None:
                    states.setdefault(here.parent, []).append((n, p))
                else:
                    states.setdefault(here, []).append((1 << 62, p))  # the top-level file wins
                continue
            found[str(p)] = (p, "")
    for owner, items in states.items():
        _, best = max(items)
        found[str(owner / "trainer_state.json")] = (best, "hf-trainer-state")
    return found


def _detect(path: Path) -> Detected:
    irregular = not_regular(path)
    if irregular:
        return Detected("other", "unknown", irregular)
    try:
        with open_regular(path) as fh:
            head = fh.read(HEAD_BYTES)
    except NotRegularFile as e:
        return Detected("other", "unknown", str(e.strerror))
    except OSError as e:
        return Detected("other", "unknown", f"cannot read ({e.strerror or e})")
    return detect(path, head)


class Watch:
    """The state of one `watch` invocation; `run()` loops until done."""

    def __init__(self, target: Path, config: Config, options: WatchOptions, *,
                 out: TextIO | None = None, err: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.target = target
        self.config = config
        self.options = options
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.clock = clock
        self.sleep = sleep
        self.logs: dict[str, _Watched] = {}
        self.ignored: dict[str, tuple[int, str]] = {}  # path -> (size when checked, reason)
        self.refused: dict[str, Report] = {}  # path -> NOT-CHECKED: named like a log, not a regular file
        self.confirm = options.confirm if options.confirm is not None else default_confirm(config)
        self.failed: _Watched | None = None
        self.interrupts = _Interrupts()

    # --- output -----------------------------------------------------------------------
    def _emit(self, event: dict[str, Any], lines: list[str]) -> None:
        if self.options.json:
            self.out.write(encode(event))
        else:
            # Paths, metric keys and messages come from the watched folder: a newline in a
            # folder's name must not start a line a CI runner reads as a command.
            self.out.write("".join(printable(line) + "\n" for line in lines))
        self.out.flush()

    def _info(self, line: str) -> None:
        print(f"trainproof-lsp watch: {printable(line)}", file=self.err if self.options.json else self.out, flush=True)

    # --- discovery --------------------------------------------------------------------
    def _discover(self) -> None:
        if self.target.is_dir():
            found = _candidates(self.target)
        else:
            found = {str(self.target): (self.target, "")}
        for key, (path, fmt) in found.items():
            w = self.logs.get(key)
            if w is not None:
                if isinstance(w.tailer, _WholeTailer) and w.tailer.path != path:
                    w.tailer.move(path)
                continue
            if not fmt:
                irregular = not_regular(path)
                if irregular and os.path.lexists(path):
                    # Named like a log but a FIFO, a device...: never opened, and said.
                    if key not in self.refused:
                        self.refused[key] = report = not_checked(key, "unknown", "unknown", f"{path}: {irregular}")
                        self._emit(verdict_event(report, source="watch", path=key, step=None, records=0,
                                                 previous=None), [f"{key}: NOT-CHECKED {report.reason}"])
                    continue
                self.refused.pop(key, None)
                try:
                    size = os.stat(path).st_size
                except OSError:
                    continue
                seen = self.ignored.get(key)
                if seen is not None and seen[0] == size:
                    continue
                d = _detect(path)
                if d.kind != "metrics" or d.format == "mlflow":
                    self.ignored[key] = (size, d.reason or "not a training log")
                    continue
                fmt = d.format
            self.ignored.pop(key, None)
            self.logs[key] = _Watched(key=key, tailer=make_tailer(path, fmt, self.config.columns, self.config.caps),
                                      judge=IncrementalJudge(self.config, self.options.schedule),
                                      last_growth=self.clock())

    # --- one poll ---------------------------------------------------------------------
    def poll_once(self) -> None:
        self._discover()
        now = self.clock()
        for w in list(self.logs.values()):
            got = w.tailer.poll()
            live = w.tailer.live
            report: Report | None
            w.error = got.error is not None
            w.extra = got.extra
            if got.error is not None:
                report = not_checked(w.name, "metrics", w.tailer.fmt, got.error)
                w.judge.report = report
            elif got.grew or got.replaced:
                report = w.judge.update(live, extra=got.extra, force=got.replaced,
                                        columns=w.tailer.columns())
            else:
                # Quiet: nothing new since the last poll. The published verdict becomes
                # the whole log's (at most one full evaluation per quiet spell).
                report = self._settle(w)
            if got.grew:
                w.last_growth = now
                if w.stalled:
                    w.stalled = False
                    self._emit(stall_event(path=w.name, step=live.last_step(), seconds=0.0, stalled=False),
                               [f"{w.name}: growing again"])
            elif (self.options.stall_timeout is not None and not w.stalled
                  and now - w.last_growth >= self.options.stall_timeout):
                w.stalled = True
                waited = now - w.last_growth
                self._emit(stall_event(path=w.name, step=live.last_step(), seconds=waited, stalled=True),
                           [f"{w.name}: stalled: no growth for {waited:.0f} s (last step {live.last_step()})"])
            if report is not None:
                self._publish(w, report)
            self._confirm(w)

    def _settle(self, w: _Watched) -> Report | None:
        """The whole log's report if the published one is stale (None: it is current, or
        the log cannot be read and its NOT-CHECKED stands). A line its writer has not
        ended is read as `epoch` reads it (`_LineTailer.finished`)."""
        if w.error:
            return None
        tailer = w.tailer
        if w.judge.report is not None and w.judge.judged == (tailer.live.records, w.extra, tailer.offset):
            return None  # settled over these very bytes, held last line included: no copies again
        if isinstance(tailer, _WandbTailer):  # a record the file still cuts short is said, as epoch says it
            return w.judge.settle(tailer.live, extra=tailer.finished_extra(), columns=tailer.columns())
        finished = tailer.finished() if isinstance(tailer, (_LineTailer, _TextTailer)) else None
        if isinstance(finished, str):
            if w.report is not None and w.report.reason == finished:
                return None
            return not_checked(w.name, "metrics", tailer.fmt, finished)
        if finished is not None:
            view, columns = finished
            return w.judge.settle(tailer.live, extra=w.extra, columns=columns, view=view, tag=tailer.offset)
        return w.judge.settle(tailer.live, extra=w.extra, columns=tailer.columns())

    def _publish(self, w: _Watched, report: Report) -> None:
        w.report = report
        change = verdict_change(report, w.said)
        if change is not None:
            w.said, previous = change
            live = w.tailer.live
            step = live.last_step()
            self._emit(verdict_event(report, source="watch", path=w.name, step=step,
                                     records=live.records, previous=previous),
                       [f"{w.name}: {line}" if i == 0 else line
                        for i, line in enumerate(change_lines(report, step, previous))])

    def settle_all(self) -> None:
        """Every log's published verdict made the whole log's (the watch is ending)."""
        for w in list(self.logs.values()):
            report = self._settle(w)
            if report is not None:
                self._publish(w, report)

    def _confirm(self, w: _Watched) -> None:
        report = w.report
        if report is None or report.verdict is not Verdict.FAIL:
            w.fail_since = None
            return
        records = w.tailer.live.records
        if w.fail_since is None:
            w.fail_since = records
        if self.failed is None and (records - w.fail_since >= self.confirm or w.stalled):
            # The FAIL may be from an evaluation some records old: confirm it on the
            # whole log as it is now.
            settled = self._settle(w)
            if settled is not None:
                self._publish(w, settled)
                if settled.verdict is not Verdict.FAIL:
                    w.fail_since = None
                    return
            report = w.report
            assert report is not None
            self.failed = w
            if self.options.until_fail:
                why = "the log stalled" if w.stalled and records - w.fail_since < self.confirm else \
                    f"still standing {records - w.fail_since} record(s) later"
                self._info(f"{w.name}: FAIL {', '.join(fail_ids(report))} confirmed ({why}); exiting")

    # --- the loop ---------------------------------------------------------------------
    def outcome(self) -> Outcome:
        reports: list[Report] = [w.report for w in self.logs.values() if w.report is not None]
        reports.extend(self.refused.values())
        pending = [NotJudged(path=w.name, reason="nothing logged yet") for w in self.logs.values()
                   if w.report is None]
        if not self.logs and not self.refused:
            where = str(self.target)
            reports.append(not_checked(where, "folder", "folder",
                                       f"{where}: no training log to watch"))
        return Outcome(reports=tuple(reports), not_judged=tuple(pending))

    def _appeared(self) -> bool:
        """The target is there to be judged: a folder, or a file with its first bytes (a
        log the trainer has just created is empty until its first write), or anything
        else (a FIFO, a device: refused at once, never waited for)."""
        try:
            st = self.target.stat()
        except OSError:
            return False
        return not stat.S_ISREG(st.st_mode) or st.st_size > 0

    def _nap(self, seconds: float) -> None:
        """The wait between polls: the one place a Ctrl-C is raised as KeyboardInterrupt
        (see `_Interrupts`)."""
        self.interrupts.nap(self.sleep, seconds)

    def _wait_for_target(self, start: float, max_seconds: float | None) -> bool:
        """A watch started before the training run: wait for the log (or the run folder)
        to appear, saying so once. False when Ctrl-C or `max_seconds` came first."""
        if self._appeared():
            return True
        try:  # the message inside: a Ctrl-C right after it is read is still this wait's
            self._info(f"waiting for {self.target} to appear (Ctrl-C to stop)")
            while not self._appeared():
                if max_seconds is not None and self.clock() - start >= max_seconds:
                    return False
                self._nap(self.options.interval)
        except KeyboardInterrupt:
            self._info("stopped (Ctrl-C)")
            return False
        return True

    def _refusal(self) -> Report | None:
        """Why the target cannot be watched at all, as a NOT-CHECKED report (None: it can)."""
        if self.target.is_dir():
            return None
        irregular = not_regular(self.target)
        if irregular:
            return not_checked(str(self.target), "unknown", "unknown", f"{self.target}: {irregular}")
        d = _detect(self.target)
        if d.kind != "metrics" or d.format == "mlflow":
            reason = d.reason or "not a training log this version can read"
            return not_checked(str(self.target), d.kind, d.format, f"{self.target}: {reason}")
        return None

    def run(self, *, max_seconds: float | None = None) -> Outcome:
        """Wait for the target, then poll until --until-fail is met, Ctrl-C, or
        `max_seconds` (tests) pass; then settle every log."""
        with self.interrupts.installed():
            _stage("handler")
            return self._run(max_seconds)

    def _run(self, max_seconds: float | None) -> Outcome:
        start = self.clock()
        early = None
        if not self._wait_for_target(start, max_seconds):
            why = "no such file or folder" if not self.target.exists() else "still empty"
            early = not_checked(str(self.target), "unknown", "unknown", f"{self.target}: {why}")
        else:
            early = self._refusal()
        if early is not None:
            if self.options.json:  # (text mode: the CLI prints the final verdicts)
                self._emit(verdict_event(early, source="watch", path=str(self.target), step=None,
                                         records=0, previous=None), [])
            return Outcome(reports=(early,))
        try:
            self._info(f"watching {self.target} every {self.options.interval:g} s"
                       + (" until a FAIL" if self.options.until_fail else "") + " (Ctrl-C to stop)")
            while True:
                _stage("poll")
                self.poll_once()
                if self.interrupts.requested:
                    raise KeyboardInterrupt
                if self.options.until_fail and self.failed is not None:
                    break
                if max_seconds is not None and self.clock() - start >= max_seconds:
                    break
                _stage("nap")
                self._nap(self.options.interval)
        except KeyboardInterrupt:
            self._info("stopped (Ctrl-C)")
            try:  # what the writer added last, then every log judged whole
                _stage("settle")
                self.poll_once()
                self.settle_all()
            except KeyboardInterrupt:
                self._info("interrupted again: the verdicts below are the last published, "
                           "not yet over the whole log")
            return self.outcome()
        _stage("settle")
        self.settle_all()
        return self.outcome()


class _Interrupts:
    """The watch's SIGINT handler. A Ctrl-C during a wait (`nap`) raises KeyboardInterrupt
    there; during a poll it is only noted (`requested`): the loop stops after the poll,
    whose state (a log half read into its columns) would otherwise be torn. A second
    Ctrl-C raises wherever it lands: the user wants out now."""

    def __init__(self) -> None:
        self.requested = False
        self._safe = False

    def __call__(self, signum: int, frame: Any) -> None:
        if self._safe or self.requested:
            self.requested = True
            raise KeyboardInterrupt
        self.requested = True

    def nap(self, sleep: Callable[[float], None], seconds: float) -> None:
        self._safe = True
        try:
            if self.requested:  # noted during the poll: this is the first safe point
                raise KeyboardInterrupt
            sleep(seconds)
        finally:
            self._safe = False

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """This handler for SIGINT while the watch runs (main thread only: elsewhere
        Python cannot set one), the previous one afterwards. Installed whatever the
        process inherited: a background job's SIGINT arrives ignored (SIG_IGN)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.signal(signal.SIGINT, self)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)


# TRAINPROOF_WATCH_STAGES=1 prints each stage of a watch to stderr the first time it is
# entered, so tests/test_watch.py can send SIGINT at each one (a debug hook, off by default).
_STAGES: set[str] | None = set() if os.environ.get("TRAINPROOF_WATCH_STAGES") else None


def _stage(name: str) -> None:
    if _STAGES is not None and name not in _STAGES:
        _STAGES.add(name)
        print(f"trainproof-lsp watch: stage {name}", file=sys.stderr, flush=True)


def watch(target: Path, config: Config, options: WatchOptions, **kwargs: Any) -> Outcome:
    return Watch(target, config, options, **kwargs).run()


__all__ = ["Watch", "WatchOptions", "make_tailer", "watch"]
