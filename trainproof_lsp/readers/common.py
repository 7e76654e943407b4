"""Small pieces every metric reader needs: value coercion, JSON decoding with a
position on error, building a Run from parallel columns, and the incremental form every
text log reader takes (`Feed`).

One reader, one code path
-------------------------
A text log reader is an object with `feed(data) -> new records` and `finish() -> the
last records`, modelled on TensorBoard's resumable event-file loader: each `feed` returns
what the bytes given so far complete and keeps a partial last line (or a record still
open) for the next call; `finish` says the file ends here. The whole-file read
(`read_metrics_jsonl` and the rest) is `feed_all`: the file fed through the same object;
`watch` feeds each tailed file's appended bytes to one. So a file fed in pieces of any
size, cut inside a line, a CRLF or a UTF-8 character, gives exactly the records and
line numbers of the whole-file read (tests/test_feeds.py). A feed hands its records back
as a `Batch`: a sequence held as parallel columns, so the whole-file read costs no object
per record.
"""

from __future__ import annotations

import codecs
import errno
import json
import math
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO, Protocol, TypeVar, overload

from ..core.caps import not_regular
from ..core.model import ReadError, RecordSpans, Series, Span

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class Feed(Protocol[T_co]):
    """The incremental form of a reader (see the module doc)."""

    def feed(self, data: bytes) -> Sequence[T_co]:
        """The records the bytes so far complete (and not returned before)."""
        ...

    def finish(self) -> Sequence[T_co]:
        """The records the end of the file completes (a last line without a newline)."""
        ...


class Batch(Sequence[T]):
    """The records one `feed` call gives, held as parallel columns: no object per record,
    which keeps a whole-file read as fast as a plain loop (an object per record, holding
    its dict or tuple, doubles what the cyclic garbage collector walks). A subclass says
    how many there are (`__len__`) and builds the one asked for (`record`)."""

    def record(self, i: int) -> T:
        raise NotImplementedError

    @overload
    def __getitem__(self, i: int) -> T: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[T]: ...

    def __getitem__(self, i: int | slice) -> T | Sequence[T]:
        n = len(self)
        if isinstance(i, slice):
            return [self.record(j) for j in range(*i.indices(n))]
        if not -n <= i < n:
            raise IndexError(i)
        return self.record(i + n if i < 0 else i)


# The whole-file read feeds a file in pieces of this size: the lines of one piece are
# split and decoded at once (C speed), and no piece is copied more than once.
FULL_READ_CHUNK = 1 << 22


def feed_all(feed: Feed[T], data: bytes, chunk: int = FULL_READ_CHUNK) -> list[Sequence[T]]:
    """Every record of a whole file, in the batches its `feed` calls and `finish` gave:
    `data` fed through `feed`, then its end."""
    view = memoryview(data)
    batches = [feed.feed(bytes(view[start:start + chunk])) for start in range(0, len(data), chunk)]
    batches.append(feed.finish())
    return batches


class NotRegularFile(OSError):
    """A workspace path that is not a regular file (a FIFO, a device, a socket, a folder):
    never read. `strerror` is the one-line reason."""


# O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting for one
# (the regular-file check then refuses it); it changes nothing for a regular file's reads.
# O_NOCTTY: a terminal device never becomes the process's controlling terminal.
_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
               | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))


def open_regular(path: str | os.PathLike[str], buffering: int = -1) -> BinaryIO:
    """A workspace file opened for reading, only if it is a regular file (after symlinks).

    Every reader opens workspace files through here (or `read_regular`): a FIFO would
    block the open until someone writes to it, and /dev/zero or /dev/urandom behind a
    symlink never ends. The check is on the opened descriptor (fstat), so a file swapped
    for a FIFO after an earlier check is refused too. Raises NotRegularFile (an OSError)
    with the reason, or the OSError of the open."""
    from ..core.caps import not_regular

    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as e:
        # A socket cannot be opened at all (ENXIO): say what it is, not "no such device".
        why = not_regular(Path(path)) if e.errno in (errno.ENXIO, errno.EISDIR, errno.EOPNOTSUPP) else None
        if why is not None:
            raise NotRegularFile(errno.EINVAL, why, str(path)) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            why = not_regular(Path(path)) or "not a regular file: only regular files are read"
            raise NotRegularFile(errno.EINVAL, why, str(path))
        if _OPEN_FLAGS & getattr(os, "O_NONBLOCK", 0):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=buffering)
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str], limit: int | None = None) -> bytes:
    """The bytes of a regular file (`open_regular`); with `limit`, at most limit + 1 of
    them, so a caller's size check sees a file that grew past its cap while it was read
    without the read going on."""
    with open_regular(path) as fh:
        if limit is None:
            return fh.read()
        # Read what the file holds now (not `limit` bytes at once: read(n) allocates n),
        # then what a growing log appended meanwhile, in pieces, up to the limit.
        data = fh.read(min(os.fstat(fh.fileno()).st_size, limit) + 1)
        if len(data) <= limit:
            more = [data]
            held = len(data)
            while held <= limit:
                block = fh.read(min(FULL_READ_CHUNK, limit + 1 - held))
                if not block:
                    break
                more.append(block)
                held += len(block)
            if len(more) > 1:
                data = b"".join(more)
        return data


def file_data(path: Path, data: bytes | None) -> bytes:
    """The bytes to read: those given (an editor's buffer), else the file's (a regular
    file only)."""
    return read_regular(path) if data is None else data


class PointSink(Protocol):
    """Where a reader puts points: `Columns` for a whole read, a growing run in `watch`."""

    def add(self, name: str, source: str, step: int, value: float, record: int) -> None: ...


def record_spans(spans: Sequence[Span]) -> RecordSpans:
    """One Span per record -> the Run's parallel position columns."""
    return RecordSpans(start_lines=tuple(s.start_line for s in spans),
                       start_chars=tuple(s.start_char for s in spans),
                       end_lines=tuple(s.end_line for s in spans),
                       end_chars=tuple(s.end_char for s in spans))


class ByteLines:
    """Complete lines of a byte stream fed in pieces: split at b"\n" (the newline
    dropped, a CR before it kept), the partial last line held for the next piece, as
    `data.split(b"\n")` splits the whole."""

    def __init__(self) -> None:
        self._tail = b""

    def feed(self, data: bytes) -> list[bytes]:
        buf = self._tail + data if self._tail else data
        cut = buf.rfind(b"\n")
        if cut < 0:
            self._tail = buf
            return []
        self._tail = buf[cut + 1:]
        return buf[:cut].split(b"\n")

    def finish(self) -> list[bytes]:
        """The last line (empty when the file ends with a newline)."""
        tail, self._tail = self._tail, b""
        return [tail]


_BOM = codecs.BOM_UTF8


class TextUpToNewline:
    """A byte stream fed in pieces, decoded: each `feed` returns the text up to and
    including the last "\n" (a UTF-8 character or a CRLF cut between pieces waits for
    the next one); `finish` returns the rest.

    A decoding error is `NotText`, its byte counted as the whole-file
    `data.decode(encoding)` counts it (for utf-8-sig: after the BOM)."""

    def __init__(self, encoding: str = "utf-8", errors: str = "strict") -> None:
        self._decoder = codecs.getincrementaldecoder(encoding)(errors)
        self._sig = encoding == "utf-8-sig"
        self._fed = 0  # bytes given so far
        self._head = b""  # the first bytes (does the file start with a BOM?)
        self._tail = ""

    def _decode(self, data: bytes, final: bool) -> str:
        buffered = len(self._decoder.getstate()[0])
        try:
            text = self._decoder.decode(data, final)
        except UnicodeDecodeError as e:
            done = self._fed - buffered
            if self._sig and self._head.startswith(_BOM) and done >= len(_BOM):
                done -= len(_BOM)
            raise NotText(e.start + done, decode_error_text(e, done)) from None
        if len(self._head) < len(_BOM):
            self._head = (self._head + data)[:len(_BOM)]
        self._fed += len(data)
        return text

    def feed(self, data: bytes) -> str:
        text = self._decode(data, False)
        if self._tail:
            text = self._tail + text
        cut = text.rfind("\n") + 1
        self._tail = text[cut:]
        return text[:cut]

    def finish(self) -> str:
        text = self._tail + self._decode(b"", True)
        self._tail = ""
        return text


class NotText(Exception):
    """Bytes that do not decode: `byte` as the whole-file decode counts it, `detail` as
    Python words the error."""

    def __init__(self, byte: int, detail: str) -> None:
        super().__init__(detail)
        self.byte = byte
        self.detail = detail


def decode_error_text(e: UnicodeDecodeError, shift: int = 0) -> str:
    """str(e) for a decode error at `shift` bytes further into the file, as Python says
    it ("'utf-8' codec can't decode byte 0xff in position 12: invalid start byte")."""
    start, end = e.start + shift, e.end + shift
    if e.end == e.start + 1:
        return f"'{e.encoding}' codec can't decode byte 0x{e.object[e.start]:02x} in position {start}: {e.reason}"
    return f"'{e.encoding}' codec can't decode bytes in position {start}-{end - 1}: {e.reason}"

# Strings some loggers write for non-finite numbers ("NaN" in JSONL written by hand or by
# loggers that quote them; "inf" from str(float)).
_NONFINITE = {"nan": math.nan, "+nan": math.nan, "-nan": math.nan, "inf": math.inf,
              "+inf": math.inf, "infinity": math.inf, "+infinity": math.inf,
              "-inf": -math.inf, "-infinity": -math.inf}


def to_float(value: Any) -> float | None:
    """A metric value as float; None when it is not a number (null, text, a list)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        s = value.strip()
        lowered = s.lower()
        if lowered in _NONFINITE:
            return _NONFINITE[lowered]
        try:
            return float(s)
        except ValueError:
            return None
    return None


def to_step(value: Any) -> int | None:
    f = to_float(value)
    if f is None or not math.isfinite(f) or f != int(f):
        return None
    return int(f)


def decode_json(data: bytes, path: str) -> Any:
    """Strict-enough JSON for logs: NaN/Infinity accepted (HF writes them bare).

    Raises ReadError naming the line and column of a syntax error.
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start)
        raise ReadError(f"{path}: not UTF-8 text (byte {e.start}, line {line + 1})",
                        span=Span(line, 0, line, 0)) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ReadError(f"{path}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}",
                        span=Span(e.lineno - 1, e.colno - 1, e.lineno - 1, e.colno)) from None


class Columns:
    """Accumulates (step, value, record) per canonical series while a reader walks rows."""

    def __init__(self) -> None:
        self.steps: dict[str, list[int]] = {}
        self.values: dict[str, list[float]] = {}
        self.records: dict[str, list[int]] = {}
        self.source: dict[str, str] = {}
        self.ready: dict[str, Series] = {}

    def put(self, series: Series) -> None:
        """A series built elsewhere (already columnar)."""
        self.ready[series.name] = series

    def add(self, name: str, source: str, step: int, value: float, record: int) -> None:
        if name not in self.steps:
            self.steps[name], self.values[name], self.records[name] = [], [], []
            self.source[name] = source
        self.steps[name].append(step)
        self.values[name].append(value)
        self.records[name].append(record)

    def series(self) -> dict[str, Series]:
        out = {
            name: Series(name, self.source[name], tuple(self.steps[name]),
                         tuple(self.values[name]), tuple(self.records[name]))
            for name in self.steps
        }
        out.update(self.ready)
        return out
