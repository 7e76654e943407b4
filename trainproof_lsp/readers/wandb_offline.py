"""W&B offline runs: `wandb/offline-run-<time>-<id>/run-<id>.wandb`, read without `wandb`.

What `wandb.init(mode="offline")` leaves behind (the SDK's own writer; `wandb sync` uploads
this file later) is a record log in LevelDB's log format, with its own file header. All
integers little-endian:

    file     ":W&B" | uint16 0xBEE1 | uint8 version 0                    (7 bytes, once)
    blocks   of 32768 bytes (the first one counts the file header); each holds chunks
    chunk    uint32 crc | uint16 length | uint8 type | data[length]
             crc = CRC-32 (zlib's) of the type byte followed by the data
             type 1 FULL (a whole record), 2 FIRST, 3 MIDDLE, 4 LAST (a record in pieces)
             fewer than 7 bytes left in a block: zero padding to the block's end

Each record is a protobuf `Record` (wandb/proto/wandb_internal.proto). The fields read here
(field number, wire type):

    Record         num 1 varint | history 2 msg | config 5 msg | run 17 msg
    HistoryRecord  item 1 msg (repeated) | step 2 msg
    HistoryStep    num 1 varint
    HistoryItem    key 1 string | nested_key 2 string (repeated) | boolean 4 varint |
                   integer 5 zigzag varint | number 6 double | value_json 16 string
    RunRecord      config 4 msg (a ConfigRecord)
    ConfigRecord   update 1 msg (repeated), a ConfigItem: key 1 | nested_key 2 | value_json 16

A history record is one `wandb.log` call: its items become one row of named values
(`train/loss`, `train/global_step`, `_step`, ...) that map onto series through the metric
alias table (readers/metrics.py), as a W&B history export does. Its position is its byte
offset in the file and its index among the history records. Values that are not numbers
(tables, images, histograms as JSON objects) are passed over; `NaN`/`Infinity` are read.

The run's config (the `config` of wandb.init, and what HF's WandbCallback adds: the
TrainingArguments and the model config) gives `max_steps`, `logging_steps` and the number
of classes (`vocab_size`, or `num_labels` for a classifier), as an adjacent config.json does.

Damage: the file is read up to the first chunk that is cut short (the writer died, or is
writing it now), fails its CRC, or breaks the framing; the records before it are the run,
and the cut or damage is reported (`WandbProblem`) for the judge to say as NOT-CHECKED. A
file without the W&B header is not read at all.

The whole read is `WandbFeed` fed the whole file; `watch` feeds it the bytes appended
since its last poll (a chunk cut by the writer is kept until its end arrives).
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from ..core.caps import DEFAULT_CAPS
from ..core.model import ReadError, RecordSpans, Run, RunMeta
from . import adjacent
from .common import Columns, PointSink, file_data
from .metrics import GrowingRowMapping, no_loss_error

FORMAT = "wandb-offline"
# The file's own header: ident, magic (little-endian 0xBEE1), version.
FILE_HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
BLOCK = 32768  # LevelDB's log block
CHUNK_HEADER = 7  # crc (4), length (2), type (1)
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4

# Config values read for the run's meta, and how long a value_json may be to be decoded at
# all (these are numbers, short lists of class names or short strings: a 64 KiB value is
# something else, and decoding it would only cost time).
_CONFIG_KEYS = frozenset({"vocab_size", "num_labels", "id2label", "architectures", "problem_type", "max_steps",
                          "logging_steps", "text_config"})
_MAX_CONFIG_JSON = 64 * 1024
# A history value longer than this is not a number (W&B writes a double in at most ~25
# characters): a table or an image's metadata, passed over without parsing.
_MAX_NUMBER_JSON = 40


class _Malformed(Exception):
    """A record's protobuf bytes do not parse."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WandbProblem:
    """Where reading stopped before the file's end, and why."""

    kind: str  # "truncated" | "bad-crc" | "bad-framing"
    offset: int  # byte offset of the chunk (or record) where it stopped
    record: int  # index of the record it stopped in (0-based, all record kinds)
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryRow:
    """One `wandb.log` call: its numeric values by name, where its record starts."""

    values: dict[str, float]
    offset: int  # byte offset of the record's first chunk
    record: int  # index among all records of the file


# --- protobuf, as far as these messages need it ---------------------------------------------

def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    for i in range(pos, min(pos + 10, len(buf))):
        b = buf[i]
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i + 1
        shift += 7
    raise _Malformed(f"varint at byte {pos} does not end")


def _fields(buf: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of one message: an int for varints and fixed
    widths, bytes for length-delimited fields. Groups (wire types 3, 4) are not in these
    messages: malformed."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            if pos + 8 > end:
                raise _Malformed("fixed64 past the message's end")
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = _varint(buf, pos)
            if pos + n > end:
                raise _Malformed("length-delimited field past the message's end")
            value, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            if pos + 4 > end:
                raise _Malformed("fixed32 past the message's end")
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise _Malformed(f"wire type {wire}")
        yield number, wire, value


def _text(value: Any) -> str:
    return bytes(value).decode("utf-8", "replace")


def _item(buf: bytes) -> tuple[str, Any]:
    """(name, raw value) of a HistoryItem or ConfigItem: the value as its JSON text, or a
    number from the typed fields."""
    key = ""
    nested: list[str] = []
    value: Any = None
    for number, wire, v in _fields(buf):
        if number == 1 and wire == 2:
            key = _text(v)
        elif number == 2 and wire == 2:
            nested.append(_text(v))
        elif number == 16 and wire == 2:
            value = _text(v) if len(v) <= _MAX_CONFIG_JSON else None
        elif number == 6 and wire == 1:
            value = struct.unpack("<d", v)[0]
        elif number == 5 and wire == 0:
            value = float((v >> 1) ^ -(v & 1))  # zigzag
        elif number == 4 and wire == 0:
            value = None  # a boolean is not a metric
    # A nested key is the path of a nested dict logged (`{"train": {"loss": x}}`); W&B
    # names it with dots.
    return (".".join(nested) if nested else key), value


def _number(raw: Any) -> float | None:
    if isinstance(raw, float):
        return raw
    if not isinstance(raw, str) or len(raw) > _MAX_NUMBER_JSON:
        return None
    try:
        return float(raw)  # JSON numbers, and NaN / Infinity / -Infinity as W&B writes them
    except ValueError:
        return None


def _history(buf: bytes) -> dict[str, float]:
    values: dict[str, float] = {}
    step: int | None = None
    for number, wire, v in _fields(buf):
        if number == 1 and wire == 2:
            name, raw = _item(v)
            x = _number(raw)
            if name and x is not None:
                values[name] = x
        elif number == 2 and wire == 2:
            for n2, w2, v2 in _fields(v):
                if n2 == 1 and w2 == 0:
                    step = v2 - (1 << 64) if v2 >= 1 << 63 else v2
    if step is not None and "_step" not in values:
        values["_step"] = float(step)
    return values


def _config(buf: bytes, into: dict[str, Any]) -> None:
    for number, wire, v in _fields(buf):
        if number == 1 and wire == 2:
            name, raw = _item(v)
            if name in _CONFIG_KEYS and isinstance(raw, str):
                try:
                    into[name] = json.loads(raw)
                except (ValueError, RecursionError):  # not JSON, or nested past the decoder's depth
                    continue


# --- the record log --------------------------------------------------------------------------

class WandbFeed:
    """The record log read as it arrives: `feed(bytes)` the file from its start, in pieces
    of any size; `take()` the history rows completed so far; `finish()` at the end of the
    bytes (a chunk still incomplete is then the file's cut). Reading stops at the first
    damage (`problem`); a file without the W&B header raises ReadError."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.buf = bytearray()
        self.pos = 0  # file offset of buf[0]
        self.records = 0  # records completed (every kind)
        self.parts: list[bytes] = []  # chunks of a record given in pieces
        self.part_start = 0
        self.rows: list[HistoryRow] = []
        self.config: dict[str, Any] = {}
        self.problem: WandbProblem | None = None
        self.bad_records: list[tuple[int, int, str]] = []  # (record, offset, why): framed, not parsed

    @property
    def end_offset(self) -> int:
        """Bytes consumed: the end of the last chunk accepted."""
        return self.pos

    def take(self) -> list[HistoryRow]:
        rows, self.rows = self.rows, []
        return rows

    def _stop(self, kind: str, offset: int, message: str) -> None:
        self.problem = WandbProblem(kind=kind, offset=offset, record=self.records, message=message)

    def feed(self, data: bytes) -> None:
        if self.problem is not None:
            return
        self.buf += data
        buf, at = self.buf, 0
        while self.problem is None:
            pos = self.pos + at
            if pos == 0:
                if len(buf) - at < len(FILE_HEADER):
                    if not FILE_HEADER.startswith(bytes(buf[at:])):
                        raise ReadError(f"{self.path}: not a W&B run file (no `:W&B` header)")
                    break
                if bytes(buf[at:at + len(FILE_HEADER)]) != FILE_HEADER:
                    raise ReadError(f"{self.path}: not a W&B run file (no `:W&B` header, or a version "
                                    f"other than 0: {bytes(buf[at:at + 7])!r})")
                at += len(FILE_HEADER)
                continue
            left = BLOCK - pos % BLOCK
            if left < CHUNK_HEADER:  # the block's trailer: padding
                if len(buf) - at < left:
                    break
                at += left
                continue
            if len(buf) - at < CHUNK_HEADER:
                break
            crc, length, kind = struct.unpack_from("<IHB", buf, at)
            if kind not in (FULL, FIRST, MIDDLE, LAST) or CHUNK_HEADER + length > left:
                self._stop("bad-framing", pos, f"chunk header at byte {pos} is not W&B's (type {kind}, "
                                               f"{length} bytes, {left} left in its block)")
                break
            if len(buf) - at < CHUNK_HEADER + length:
                break
            chunk = bytes(buf[at + CHUNK_HEADER:at + CHUNK_HEADER + length])
            if zlib.crc32(chunk, zlib.crc32(bytes((kind,)))) != crc:
                self._stop("bad-crc", pos, f"chunk at byte {pos} fails its CRC")
                break
            if kind in (FULL, FIRST):
                if self.parts:
                    self._stop("bad-framing", pos, f"record started at byte {self.part_start} has no last "
                                                   f"chunk before byte {pos}")
                    break
                if kind == FULL:
                    self._record(chunk, pos)
                else:
                    self.parts, self.part_start = [chunk], pos
            else:
                if not self.parts:
                    self._stop("bad-framing", pos, f"chunk at byte {pos} continues a record that never started")
                    break
                self.parts.append(chunk)
                if kind == LAST:
                    whole, self.parts = b"".join(self.parts), []
                    self._record(whole, self.part_start)
            at += CHUNK_HEADER + length
        del buf[:at]
        self.pos += at

    def finish(self) -> None:
        """The end of the bytes: anything held back is a record the file cuts short."""
        if self.problem is not None:
            return
        if self.pos == 0 and not self.buf:
            raise ReadError(f"{self.path}: empty file (W&B has not written its header yet)")
        if self.pos == 0:
            raise ReadError(f"{self.path}: not a W&B run file ({len(self.buf)} bytes, a cut `:W&B` header)")
        left = BLOCK - self.pos % BLOCK
        if self.buf and not (left < CHUNK_HEADER and not any(self.buf)):
            start = self.part_start if self.parts else self.pos
            self._stop("truncated", start, f"the file ends inside record {self.records} "
                                           f"(byte {start}; {len(self.buf)} byte(s) of a chunk)")
        elif self.parts:
            self._stop("truncated", self.part_start, f"the file ends inside record {self.records} "
                                                     f"(byte {self.part_start}; its last chunk is missing)")

    def _record(self, data: bytes, offset: int) -> None:
        index = self.records
        self.records += 1
        try:
            for number, wire, v in _fields(data):
                if wire != 2:
                    continue
                if number == 2:
                    self.rows.append(HistoryRow(values=_history(v), offset=offset, record=index))
                elif number == 5:
                    _config(v, self.config)
                elif number == 17:
                    for n2, w2, v2 in _fields(v):
                        if n2 == 4 and w2 == 2:
                            _config(v2, self.config)
        except _Malformed as e:
            self.bad_records.append((index, offset, str(e)))


@dataclass(frozen=True, slots=True, kw_only=True)
class WandbScan:
    """One .wandb file read: the run its history makes, and where reading stopped early."""

    run: Run
    records: int  # records read (every kind)
    history: int  # history records among them
    problem: WandbProblem | None


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def run_meta(path: str, config: Mapping[str, Any]) -> RunMeta:
    """What the run's config says: planned and logging steps, and the number of classes
    (vocab_size, or num_labels for a classifier: HF's WandbCallback logs the model config
    there), else from a config.json or hparams.yaml beside the file."""
    classes = adjacent.classes_of(config)
    source = f"{path} (W&B run config)" if classes else None
    if classes is None:
        classes, source = adjacent.find_num_classes(Path(path))
    return RunMeta(max_steps=_positive(config.get("max_steps")), logging_steps=_positive(config.get("logging_steps")),
                   vocab_size=classes, vocab_source=source)


class WandbRows:
    """History rows onto series as they come, for the whole read and `watch` alike: the
    feed's rows mapped through the alias table (computed again when a new name appears,
    so earlier rows keep the mapping they were read with), each row one record placed by
    its byte offset. At most `max_rows` history records (caps.max_log_entries)."""

    def __init__(self, path: str, columns: Mapping[str, str] | None = None, *,
                 max_rows: int = DEFAULT_CAPS.max_log_entries) -> None:
        self.path = path
        self.feed = WandbFeed(path)
        self.mapping = GrowingRowMapping(columns)
        self.max_rows = max_rows
        self.rows = 0
        self.bad_seen = 0

    def pump(self, sink: PointSink, new_record: Callable[[int], int], notes: list[tuple[int, str]]) -> int:
        """The rows the feed completed since the last call into `sink` (`new_record(byte
        offset)` opens a record and gives its index); the number of rows. ReadError past
        `max_rows`."""
        rows = self.feed.take()
        self.rows += len(rows)
        if self.rows > self.max_rows:
            raise ReadError(f"{self.path}: more than {self.max_rows} history records, over the cap "
                            "for a log (max_log_entries): not read")
        numbered = [(new_record(r.offset), r.values) for r in rows]
        for index, offset, why in self.feed.bad_records[self.bad_seen:]:
            at = numbered[-1][0] if numbered else -1
            notes.append((at, f"record {index} at byte {offset} is not a W&B record ({why}); not used"))
        self.bad_seen = len(self.feed.bad_records)
        self.mapping.put(numbered, sink, notes)
        return len(rows)


# The whole read feeds the file in pieces of this size, so the rows of one piece are
# mapped and dropped before the next (a row's dict is far bigger than its points).
_PIECE = 1 << 20


def scan_wandb_offline(path: str | Path, data: bytes | None = None, *,
                       columns: Mapping[str, str] | None = None,
                       max_rows: int = DEFAULT_CAPS.max_log_entries) -> WandbScan:
    """A .wandb file read whole (`data`: its bytes, already read within the caps)."""
    name = str(path)
    data = file_data(Path(path), data)
    rows = WandbRows(name, columns, max_rows=max_rows)
    found = Columns()
    offsets: list[int] = []
    notes: list[tuple[int, str]] = []

    def new_record(offset: int) -> int:
        offsets.append(offset)
        return len(offsets) - 1

    view = memoryview(data)
    for at in range(0, len(data), _PIECE):
        rows.feed.feed(bytes(view[at:at + _PIECE]))
        rows.pump(found, new_record, notes)
    rows.feed.finish()
    rows.pump(found, new_record, notes)
    feed = rows.feed
    if not offsets:
        where = f"; {feed.problem.message}" if feed.problem is not None else ""
        raise ReadError(f"{name}: no history records (nothing logged with wandb.log) in its "
                        f"{feed.records} record(s){where}")
    mapping = rows.mapping.mapping
    if not mapping.has_loss():
        raise no_loss_error(name, mapping.names, "metric")
    run = Run(path=name, format=FORMAT, series=found.series(), record_spans=RecordSpans(byte_offsets=offsets),
              meta=run_meta(name, feed.config), sources=(name,), unmapped=mapping.unmapped(), notes=tuple(notes))
    return WandbScan(run=run, records=feed.records, history=len(offsets), problem=feed.problem)


def read_wandb_offline(path: str | Path, data: bytes | None = None, *,
                       columns: Mapping[str, str] | None = None) -> Run:
    """The run of a .wandb file (where reading stopped is `scan_wandb_offline`'s)."""
    return scan_wandb_offline(path, data, columns=columns).run


# W&B's run folder (`offline-run-<time>-<id>`, or `run-<time>-<id>` of an online run) keeps
# the run's captured console in files/output.log: the same run as its run-<id>.wandb.
_RUN_FOLDER = re.compile(r"(?:offline-)?run-\d{8}_\d{6}-[A-Za-z0-9]+")
CONSOLE_REASON = "the W&B run's captured console: its run is judged once, from the run's run-<id>.wandb"


def is_console_of_run(path: Path) -> bool:
    """`wandb/<run folder>/files/output.log` beside its run-<id>.wandb."""
    run_folder = path.parent.parent
    if path.name != "output.log" or path.parent.name != "files" or not _RUN_FOLDER.fullmatch(run_folder.name):
        return False
    run_id = run_folder.name.rsplit("-", 1)[1]
    return (run_folder / f"run-{run_id}.wandb").is_file()


def looks_like_wandb(head: bytes) -> bool:
    """A file's first bytes are a W&B record log's header."""
    return head[:len(FILE_HEADER)] == FILE_HEADER


__all__ = ["FORMAT", "FILE_HEADER", "WandbFeed", "WandbProblem", "WandbRows", "WandbScan", "HistoryRow",
           "run_meta", "scan_wandb_offline", "is_console_of_run", "CONSOLE_REASON", "read_wandb_offline", "looks_like_wandb"]
