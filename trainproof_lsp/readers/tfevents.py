"""Exact, fast reader for TensorBoard event files, decoded from the wire format.

Nothing here imports tensorflow, tensorboard or protobuf: the two formats involved
are small and stable, so they are walked by hand over the file's bytes. The only
optional dependencies are the C CRC-32C implementations (``google_crc32c``, else
``crc32c``); without either, a pure-Python table CRC is used and the scan says so
(``EventFileScan.crc_impl == "python"``, which is slow: ~10 MB/s).

Wire shapes
-----------
TFRecord framing, repeated to end of file (all integers little-endian)::

    uint64 length | uint32 masked_crc32c(length bytes) | data[length] | uint32 masked_crc32c(data)
    masked(crc) = ((crc >> 15) | (crc << 17)) + 0xA282EAD8   (mod 2**32)

Protobuf messages used (field number, wire type)::

    Event          wall_time 1 fixed64 double | step 2 varint int64 | file_version 3 string
                   summary 5 msg  (oneof "what" with 3, 4, 6, 7, 8, 9)
    Summary        value 1 repeated msg
    Summary.Value  tag 1 | node_name 7 | metadata 9 msg
                   oneof: simple_value 2 fixed32 float | 3, 4, 5, 6 (histo/image/audio) | tensor 8 msg
    SummaryMetadata  plugin_data 1 msg { plugin_name 1 string }
    TensorProto    dtype 1 | tensor_shape 2 msg { dim 2 msg { size 1 } } | tensor_content 4 bytes
                   float_val 5 | double_val 6 | int_val 7 | int64_val 10 | bool_val 11
                   half_val 13 | uint32_val 16 | uint64_val 17   (packed or not)

What counts as a scalar point
-----------------------------
Exactly what ``EventAccumulator`` stores, with nothing filtered or purged:

* every ``Value`` whose oneof is ``simple_value`` (tag = ``Value.tag``);
* every ``Value`` whose oneof is ``tensor`` (tag = ``Value.tag`` or, when empty,
  ``Value.node_name``) when the tensor holds exactly one element (every dim is 1,
  or no dims) of a numeric/bool dtype, and the first ``SummaryMetadata`` seen in
  this file for that tag names the ``scalars`` plugin. This is how the scalars
  dashboard reads tensor scalars. Tensors seen before their tag's first metadata
  are held back and kept only if that metadata later says ``scalars``.
* A one-element tensor with no value at all decodes as 0.0 (TensorFlow fills
  missing tensor values with zeros). Integer values are converted to float, so
  int64 beyond 2**53 loses precision exactly as ``float(x)`` does.

Everything else in a summary (histograms, images, audio, text, other plugins'
tensors, non-scalar tensors) is counted in ``skipped_values`` and not decoded.
Unlike ``EventAccumulator(purge_orphaned_data=True)``, points are never purged on
restarts or out-of-order steps: a linter needs to see exactly those.

Corruption and truncation policy (mirrors TensorBoard)
------------------------------------------------------
TensorBoard's reader (``event_file_loader.RawEventFileLoader`` over TF's record
reader, or the ``PyRecordReader_New`` stub without TF) checks both CRCs of every
record and, on any ``DataLossError`` -- a truncated header/data/footer or a CRC
mismatch -- stops reading the file, keeping every record before it (it retries
from that offset on the next poll, in case a writer completes the record). We do
the same, and say so instead of staying silent:

* ``truncated``: fewer bytes remain than the record's header or its declared
  length needs. Everything before the cut is returned; the problem names the
  cut record's offset. (The normal state of a killed or still-running writer.)
* ``bad-length-crc``: the length field's CRC does not match. Reading stops: the
  framing can no longer be trusted. This check is always done, even with
  ``verify_crc=False``, because it is almost free (lengths repeat, so the
  expected CRC is cached per length) and it is what stops a torn or foreign file
  from being misframed into garbage.
* ``bad-data-crc`` (only with ``verify_crc=True``): the data CRC does not match.
  Reading stops at that record, as TensorBoard does. Without ``verify_crc``
  the payload is trusted and such corruption is only caught if the bytes no
  longer parse.
* ``bad-proto``: the framing is intact but the payload is not a valid Event
  (varint or length running past the record, bad wire type, invalid UTF-8 in a
  tag). TensorBoard would raise here; since the framing is sound we report the
  record, skip it, and continue with the next one.

A file that is not an event file at all yields one problem at offset 0 / record
0 and no records: ``truncated`` when it is shorter than a 12-byte record header,
otherwise ``bad-length-crc`` (the length CRC is checked first, as TensorBoard
does, and foreign bytes fail it with probability 1 - 2**-32). An empty file is
a clean scan with ``records == 0``. Only ``OSError`` from opening/reading the
file propagates.

The file is streamed: ``EventReader.feed(bytes)`` reads the complete records of
each piece and keeps a record cut at its end for the next piece, so memory is the
points' typed columns (32 bytes a point) plus one piece, never the file (mmap would
also avoid the copy but turns a file truncated by its writer mid-read into a
SIGBUS, and this runs inside a long-lived language server). The whole read and the
watch's tail of a growing file are the same code: the feed.

Speed
-----
Each record's framing and header (wall_time, step) are decoded with
``struct.unpack_from`` at offsets, never by slicing. Event payloads are then
matched against byte templates learnt from the first record of each shape: all
bytes of the payload except the value itself are identical from one step to the
next for a given tag, so once the full protobuf walk (the slow path) has decoded
a record, later records with the same bytes around the value are decoded by one
dict lookup plus one ``unpack_from``. The walk is the only authority on meaning;
a template is only a memo of "these exact bytes parse to that", so results are
identical with or without it.
"""

from __future__ import annotations

import importlib
import os
import struct
from itertools import repeat
from operator import attrgetter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..core.columns import Floats, Ints

__all__ = [
    "CRC_IMPL_NAMES",
    "EventFileProblem",
    "EventFileScan",
    "EventPoint",
    "EventReader",
    "ScalarSeries",
    "crc_implementation",
    "encode_file_version_event",
    "encode_scalar_event",
    "encode_tensor_scalar_event",
    "frame_record",
    "masked_crc32c",
    "read_event_file",
    "scan_event_bytes",
]


@dataclass(frozen=True, slots=True)
class ScalarSeries:
    """All scalar points of one tag, in file order, as parallel typed columns."""

    tag: str
    steps: Ints
    wall_times: Floats
    values: Floats
    offsets: Ints  # byte offset of the record that held each point


@dataclass(frozen=True, slots=True)
class EventFileProblem:
    """Something wrong with the file; see the module docstring for the policy."""

    kind: str  # "truncated" | "bad-length-crc" | "bad-data-crc" | "bad-proto"
    offset: int  # byte offset of the record
    record: int  # 0-based record index
    message: str


@dataclass(frozen=True, slots=True)
class EventFileScan:
    """Result of reading one event file."""

    path: str
    records: int  # complete, framed records read (bad-proto ones included)
    scalars: dict[str, ScalarSeries]  # insertion order = first appearance
    problems: tuple[EventFileProblem, ...]
    crc_checked: bool  # True when every data CRC read was verified
    crc_impl: str  # "google-crc32c" | "crc32c" | "python" (slow) | "none"
    skipped_values: int = 0  # Summary.Values that were not scalar points
    file_version: str | None = None  # e.g. "brain.Event:2", last one seen
    end_offset: int = 0  # bytes consumed: end of the last record accepted


CRC_IMPL_NAMES = ("google-crc32c", "crc32c", "python", "none")

# ---------------------------------------------------------------------------
# CRC-32C
# ---------------------------------------------------------------------------

_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF
_SIGN64 = 1 << 63
_CRC_MASK_DELTA = 0xA282EAD8


def _make_crc_table() -> tuple[int, ...]:
    # Reflected Castagnoli polynomial; one table entry per byte value.
    poly = 0x82F63B78
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return tuple(table)


_CRC_TABLE = _make_crc_table()


def _crc32c_py(data: bytes) -> int:
    """Pure-Python CRC-32C: the last-resort fallback (roughly 10 MB/s)."""
    crc = _MASK32
    table = _CRC_TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ _MASK32


# Standard check value for CRC-32C: used to reject a same-named but different module.
_CRC_CHECK = (b"123456789", 0xE3069283)


def _select_crc() -> tuple[Callable[[bytes], int], str]:
    # importlib rather than import statements: both modules are optional and untyped.
    try:
        google_crc32c = importlib.import_module("google_crc32c")
        # Its own pure-Python fallback is no faster than ours; only take the C build.
        if getattr(google_crc32c, "implementation", "c") == "c":
            fn: Callable[[bytes], int] = google_crc32c.value
            if fn(_CRC_CHECK[0]) == _CRC_CHECK[1]:
                return fn, "google-crc32c"
    except Exception:  # ImportError, or a broken build: fall through to the next
        pass
    try:
        fn = importlib.import_module("crc32c").crc32c
        if fn(_CRC_CHECK[0]) == _CRC_CHECK[1]:
            return fn, "crc32c"
    except Exception:
        pass
    return _crc32c_py, "python"


# Resolved lazily (importing a CRC extension is not free) and cached. Tests may
# replace it to force a backend.
_crc_backend: tuple[Callable[[bytes], int], str] | None = None


def _crc() -> tuple[Callable[[bytes], int], str]:
    global _crc_backend
    if _crc_backend is None:
        _crc_backend = _select_crc()
    return _crc_backend


def crc_implementation() -> str:
    """Name of the CRC-32C implementation ``verify_crc=True`` would use."""
    return _crc()[1]


def _mask(crc: int) -> int:
    return ((((crc >> 15) | (crc << 17)) & _MASK32) + _CRC_MASK_DELTA) & _MASK32


def masked_crc32c(data: bytes) -> int:
    """The masked CRC-32C that TFRecord framing stores."""
    return _mask(_crc()[0](bytes(data)))


# ---------------------------------------------------------------------------
# Protobuf primitives (slow path: bounds-checked, raise _BadProto)
# ---------------------------------------------------------------------------


class _BadProto(Exception):
    """Payload is not a valid protobuf message; caught per record."""


_U32 = struct.Struct("<I").unpack_from
_QI = struct.Struct("<QI").unpack_from
# Record header plus the first 14 data bytes: length, length CRC, first key byte,
# wall_time, next key byte, and 4 raw bytes that hold the step varint (when present).
_HEAD_STRUCT = struct.Struct("<QIBdBI")
_HEAD = _HEAD_STRUCT.unpack_from
_HEAD_SIZE = _HEAD_STRUCT.size


def _varint(buf: bytes, i: int, end: int) -> tuple[int, int]:
    """Decode a varint at i (must end before `end`); return (uint64 value, next i)."""
    if i >= end:
        raise _BadProto("varint runs past end of message")
    b = buf[i]
    if b < 0x80:
        return b, i + 1
    result = b & 0x7F
    shift = 7
    i += 1
    while True:
        if i >= end:
            raise _BadProto("varint runs past end of message")
        if shift > 63:
            raise _BadProto("varint longer than 10 bytes")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            # Protobuf keeps the low 64 bits of an over-long 10th byte.
            return result & _MASK64, i
        shift += 7


def _fast_varint(buf: bytes, i: int, end: int) -> tuple[int, int]:
    """Fast-path step varint of 4+ bytes, as int64; on any malformation return a
    position past `end` so the caller's template lookup cannot match."""
    result = 0
    shift = 0
    while i < end and shift <= 63:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            result &= _MASK64
            return (result - (1 << 64) if result & _SIGN64 else result), i
        shift += 7
    return 0, end + 1


def _signed64(v: int) -> int:
    return v - (1 << 64) if v & _SIGN64 else v


def _skip(buf: bytes, i: int, end: int, wire: int, fnum: int) -> int:
    """Skip one field's payload of the given wire type; return the next offset."""
    if wire == 0:
        return _varint(buf, i, end)[1]
    if wire == 1:
        i += 8
    elif wire == 2:
        n, i = _varint(buf, i, end)
        i += n
    elif wire == 5:
        i += 4
    elif wire == 3:
        # Group (proto2 relic): skip nested fields until the matching end-group.
        while True:
            key, i = _varint(buf, i, end)
            if key >> 3 == 0:
                raise _BadProto("field number 0")
            if key & 7 == 4:
                if key >> 3 != fnum:
                    raise _BadProto("mismatched end-group")
                return i
            i = _skip(buf, i, end, key & 7, key >> 3)
    else:
        raise _BadProto(f"invalid wire type {wire}")
    if i > end:
        raise _BadProto("field runs past end of message")
    return i


def _fields(buf: bytes, i: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """Yield (field_number, wire_type, payload_start, payload_end) for one message.

    For wire type 0 payload_start..payload_end is the varint; for 2 it is the
    bytes after the length prefix; for 1/5 the 8/4 fixed bytes.
    """
    while i < end:
        key, i = _varint(buf, i, end)
        fnum = key >> 3
        wire = key & 7
        if fnum == 0:
            raise _BadProto("field number 0")
        if wire == 2:
            n, j = _varint(buf, i, end)
            k = j + n
            if k > end:
                raise _BadProto("length-delimited field runs past end of message")
            yield fnum, 2, j, k
            i = k
        else:
            k = _skip(buf, i, end, wire, fnum)
            yield fnum, wire, i, k
            i = k


def _utf8(buf: bytes, s: int, e: int) -> str:
    try:
        return buf[s:e].decode("utf-8")
    except UnicodeDecodeError as exc:
        # protobuf rejects invalid UTF-8 in proto3 string fields the same way.
        raise _BadProto(f"invalid UTF-8 in string field: {exc.reason}") from None


# ---------------------------------------------------------------------------
# Tensor scalars
# ---------------------------------------------------------------------------

# struct results are untyped; these name the two roles they play.
_Unpack = Callable[[bytes, int], tuple[Any, ...]]  # a Struct's bound unpack_from
_Post = Callable[[Any], float]  # turns the unpacked item into the float we report


def _bf16(bits: int) -> float:
    # bfloat16 is the top half of a float32.
    return float(_F32(((bits & 0xFFFF) << 16).to_bytes(4, "little"), 0)[0])


def _f16(bits: int) -> float:
    return float(struct.unpack("<e", (bits & 0xFFFF).to_bytes(2, "little"))[0])


def _wrap(bits: int, signed: bool) -> Callable[[int], float]:
    """Varint -> C-style cast to an integer of `bits` bits -> float."""
    mask = (1 << bits) - 1
    sign = 1 << (bits - 1)

    def conv(v: int) -> float:
        v &= mask
        if signed and v & sign:
            v -= mask + 1
        return float(v)

    return conv


def _bool(v: int) -> float:
    return 1.0 if v else 0.0


class _Dtype(NamedTuple):
    content_fmt: str  # struct format of one element in tensor_content
    post: _Post | None  # conversion after unpacking tensor_content (None: already a float)
    field: int  # repeated TensorProto field holding values when there is no tensor_content
    varint: Callable[[int], float] | None  # decoder when that field is varint-encoded, else fixed width


_DTYPES: dict[int, _Dtype] = {
    1: _Dtype("<f", None, 5, None),  # DT_FLOAT: float_val (fixed32)
    2: _Dtype("<d", None, 6, None),  # DT_DOUBLE: double_val (fixed64)
    3: _Dtype("<i", float, 7, _wrap(32, True)),  # DT_INT32: int_val
    4: _Dtype("<B", float, 7, _wrap(8, False)),  # DT_UINT8: int_val
    5: _Dtype("<h", float, 7, _wrap(16, True)),  # DT_INT16: int_val
    6: _Dtype("<b", float, 7, _wrap(8, True)),  # DT_INT8: int_val
    9: _Dtype("<q", float, 10, _wrap(64, True)),  # DT_INT64: int64_val
    10: _Dtype("<?", float, 11, _bool),  # DT_BOOL: bool_val
    14: _Dtype("<H", _bf16, 13, _bf16),  # DT_BFLOAT16: half_val holds the bit patterns
    17: _Dtype("<H", float, 7, _wrap(16, False)),  # DT_UINT16: int_val
    19: _Dtype("<e", None, 13, _f16),  # DT_HALF: half_val holds the bit patterns
    22: _Dtype("<I", float, 16, _wrap(32, False)),  # DT_UINT32: uint32_val
    23: _Dtype("<Q", float, 17, _wrap(64, False)),  # DT_UINT64: uint64_val
}
# One bound unpack_from per format, shared so templates can compare them by identity.
_STRUCTS: dict[str, _Unpack] = {d.content_fmt: struct.Struct(d.content_fmt).unpack_from for d in _DTYPES.values()}
_WIDTH: dict[_Unpack, int] = {u: struct.calcsize(fmt) for fmt, u in _STRUCTS.items()}
_F32 = _STRUCTS["<f"]
_F64 = _STRUCTS["<d"]


class _Scalar(NamedTuple):
    """A decoded scalar and, when its bytes sit at a fixed-width spot, where and how
    to re-read it (what lets the record become a template)."""

    value: float
    pos: int  # absolute offset of the value's bytes, or -1 (varint-encoded / implied zero)
    unpack: _Unpack | None
    post: _Post | None


def _tensor_scalar(buf: bytes, spans: list[tuple[int, int]]) -> _Scalar | None:
    """Decode a TensorProto (possibly split over several merged spans) as a scalar.

    Mirrors ``tensor_util.make_ndarray``: tensor_content wins when non-empty,
    otherwise the dtype's own repeated field; returns None when the tensor is not
    exactly one element of a supported dtype.
    """
    dtype = 0
    dims_ok = True
    content: tuple[int, int] | None = None
    fixed: dict[int, list[int]] = {}  # float_val/double_val -> offsets of each value
    varints: dict[int, list[int]] = {}  # varint-encoded repeated fields -> values
    for ts, te in spans:
        for fnum, wire, s, e in _fields(buf, ts, te):
            if fnum == 1 and wire == 0:
                dtype = _varint(buf, s, e)[0]
            elif fnum == 2 and wire == 2:
                # TensorShapeProto { dim 2 { size 1 } }: dims across merges concatenate.
                for sf, sw, ss, se in _fields(buf, s, e):
                    if sf == 2 and sw == 2:
                        size = 0
                        for df, dw, ds, de in _fields(buf, ss, se):
                            if df == 1 and dw == 0:
                                size = _signed64(_varint(buf, ds, de)[0])
                        if size != 1:
                            dims_ok = False
            elif fnum == 4 and wire == 2:
                content = (s, e)
            elif fnum in (5, 6):
                width = 4 if fnum == 5 else 8
                offs = fixed.setdefault(fnum, [])
                if wire == 2:  # packed: wire shape = key, len, len/width values
                    if (e - s) % width:
                        raise _BadProto("packed fixed-width field has a partial value")
                    offs.extend(range(s, e, width))
                elif wire == (5 if width == 4 else 1):
                    offs.append(s)
            elif fnum in (7, 10, 11, 13, 16, 17):
                vals = varints.setdefault(fnum, [])
                if wire == 2:  # packed varints
                    i = s
                    while i < e:
                        v, i = _varint(buf, i, e)
                        vals.append(v)
                elif wire == 0:
                    vals.append(_varint(buf, s, e)[0])
    spec = _DTYPES.get(dtype)
    if spec is None or not dims_ok:
        return None
    if content is not None and content[1] > content[0]:
        s, e = content
        unpack = _STRUCTS[spec.content_fmt]
        if e - s != _WIDTH[unpack]:
            return None
        raw = unpack(buf, s)[0]
        return _Scalar(spec.post(raw) if spec.post is not None else raw, s, unpack, spec.post)
    if spec.varint is None:
        offs = fixed.get(spec.field, [])
        if len(offs) > 1:
            return None
        if not offs:
            return _Scalar(0.0, -1, None, None)  # TensorFlow zero-fills missing values
        unpack = _F32 if spec.field == 5 else _F64
        return _Scalar(unpack(buf, offs[0])[0], offs[0], unpack, None)
    vals = varints.get(spec.field, [])
    if len(vals) > 1:
        return None
    return _Scalar(spec.varint(vals[0]) if vals else 0.0, -1, None, None)


# ---------------------------------------------------------------------------
# Slow path: a full walk of one Event
# ---------------------------------------------------------------------------


class _Value(NamedTuple):
    """One parsed Summary.Value."""

    tag: str
    node_name: str
    plugin: str | None  # plugin_data.plugin_name; None when the value has no metadata
    kind: int  # field number of the "value" oneof member set last, 0 if none
    scalar: _Scalar | None  # simple_value, or the tensor read as a scalar (None: not one)


_EVENT_WHAT_OTHER = frozenset((3, 4, 6, 7, 8, 9))  # oneof "what" members besides summary
_VALUE_ONEOF = frozenset((2, 3, 4, 5, 6, 8))


def _parse_value(buf: bytes, s: int, e: int) -> _Value:
    tag = ""
    node = ""
    plugin: str | None = None
    kind = 0
    simple_pos = -1
    tensor_spans: list[tuple[int, int]] = []
    for fnum, wire, fs, fe in _fields(buf, s, e):
        if fnum == 1 and wire == 2:
            tag = _utf8(buf, fs, fe)
        elif fnum == 7 and wire == 2:
            node = _utf8(buf, fs, fe)
        elif fnum == 9 and wire == 2:
            # SummaryMetadata { plugin_data 1 { plugin_name 1 } }; repeated
            # occurrences merge, so the last plugin_name on the wire wins.
            if plugin is None:
                plugin = ""
            for mf, mw, ms, me in _fields(buf, fs, fe):
                if mf == 1 and mw == 2:
                    for pf, pw, ps, pe in _fields(buf, ms, me):
                        if pf == 1 and pw == 2:
                            plugin = _utf8(buf, ps, pe)
        elif fnum in _VALUE_ONEOF:
            if fnum == 2:
                if wire != 5:
                    continue  # wrong wire type: protobuf keeps it as an unknown field
                kind = 2
                simple_pos = fs
            elif wire == 2:
                if fnum == 8:
                    if kind != 8:
                        tensor_spans = []  # another oneof member was set in between
                    tensor_spans.append((fs, fe))  # repeated message fields merge
                kind = fnum
    scalar: _Scalar | None = None
    if kind == 2:
        scalar = _Scalar(_F32(buf, simple_pos)[0], simple_pos, _F32, None)
    elif kind == 8:
        scalar = _tensor_scalar(buf, tensor_spans)
    return _Value(tag, node, plugin, kind, scalar)


def _parse_event(buf: bytes, s: int, e: int) -> tuple[float, int, str | None, list[_Value], int]:
    """Walk one Event. Returns (wall, step, file_version, values, template_q).

    template_q is the offset where the summary field starts when the event has
    exactly the shape the fast path handles (``09 wall [10 step] 2a summary``
    and nothing else), else -1.
    """
    wall = 0.0
    step = 0
    file_version: str | None = None
    summaries: list[tuple[int, int]] = []
    layout: list[tuple[int, int]] = []  # (field number, key offset) of top-level fields
    i = s
    while i < e:
        key_at = i
        key, i = _varint(buf, i, e)
        fnum = key >> 3
        wire = key & 7
        if fnum == 0:
            raise _BadProto("field number 0")
        layout.append((fnum, key_at if i == key_at + 1 else -1))
        if fnum == 1 and wire == 1:
            if i + 8 > e:
                raise _BadProto("wall_time runs past end of record")
            wall = _F64(buf, i)[0]
            i += 8
        elif fnum == 2 and wire == 0:
            v, i = _varint(buf, i, e)
            step = _signed64(v)
        elif wire == 2 and (fnum == 5 or fnum in _EVENT_WHAT_OTHER):
            n, i = _varint(buf, i, e)
            j = i + n
            if j > e:
                raise _BadProto(f"field {fnum} runs past end of record")
            if fnum == 5:
                summaries.append((i, j))  # repeated occurrences merge: values concatenate
            else:
                summaries = []  # another member of the "what" oneof replaces the summary
                if fnum == 3:
                    file_version = buf[i:j].decode("utf-8", "replace")
            i = j
        else:
            i = _skip(buf, i, e, wire, fnum)
    values: list[_Value] = []
    for ss, se in summaries:
        for fnum, wire, vs, ve in _fields(buf, ss, se):
            if fnum == 1 and wire == 2:
                values.append(_parse_value(buf, vs, ve))
    # Memoisable only when the fast path reads the same header the walk did:
    # one-byte keys 09 (wall_time) and 10 (step), then the summary field to the end.
    q = -1
    shape = [f for f, _ in layout]
    if (
        (shape == [1, 5] or shape == [1, 2, 5])
        and all(at >= 0 for _, at in layout)
        and buf[s] == 0x09
        and (shape == [1, 5] or buf[s + 9] == 0x10)
    ):
        q = layout[-1][1]
    return wall, step, file_version, values, q


# ---------------------------------------------------------------------------
# Scanner
# ---------------------------------------------------------------------------

# Templates are bounded so a file with a distinct tag in every record cannot
# grow memory beyond the columns themselves by much.
_MAX_TEMPLATES = 4096
# Bytes read from a file per feed: the file is never in memory whole, only this much
# (plus a record cut at the chunk's end, kept for the next feed).
CHUNK_BYTES = 4 << 20

_Columns = tuple[Ints, Floats, Floats, Ints]  # steps, wall_times, values, offsets
_Appenders = tuple[Callable[[int], None], Callable[[float], None], Callable[[float], None], Callable[[int], None]]
# A value slot of a template: offset (absolute while building, then relative to
# the summary field's start), how to read and convert it, and which columns get it.
_Slot = tuple[int, _Unpack, _Post | None, _Appenders]
# Template: fixed byte runs to compare (offset relative to the summary start, bytes), and the slots.
_Template = tuple[tuple[tuple[int, bytes], ...], tuple[_Slot, ...]]


class EventPoint(NamedTuple):
    """One scalar point, as the incremental reader hands new points to a tailer."""

    offset: int  # byte offset of its record in the file
    tag: str
    step: int
    wall: float
    value: float


_offset_of = attrgetter("offset")


class EventReader:
    """An event file read incrementally: `feed(bytes)` as many times as bytes arrive,
    then `finish()` for the scan. A record cut at the end of a feed is kept and
    completed by the next one, so feeding a file in pieces of any size gives exactly
    the scan of the whole file (`read_event_file` feeds it in CHUNK_BYTES pieces; the
    watch feeds what a writer appended since its last poll). Only the typed columns of
    the points and the cut record are held, never the file.

    After a damaged record that stops reading (bad length CRC, bad data CRC) further
    feeds are ignored (`stopped`), as TensorBoard stops at such a record.
    """

    def __init__(self, *, path: str = "<bytes>", verify_crc: bool = False) -> None:
        self.path = path
        self.verify_crc = verify_crc
        self._crc_fn, self._crc_name = _crc()
        self.cols: dict[str, _Columns] = {}
        # First SummaryMetadata plugin name seen per tag ("" = metadata without a plugin).
        self.plugin_of: dict[str, str] = {}
        # Tensor scalars whose tag had no metadata yet: tag -> [(step, wall, value, offset)].
        self.pending: dict[str, list[tuple[int, float, float, int]]] = {}
        # Summary bytes minus the trailing float32 -> columns: the common simple_value shape.
        self.simple: dict[bytes, _Appenders] = {}
        # Summary length -> [(prefix length, {prefix bytes: template})]: every other
        # fixed-width shape (tensor scalars, several values per event).
        self.tmpl: dict[int, list[tuple[int, dict[bytes, _Template]]]] = {}
        self.n_templates = 0
        self.skipped = 0
        self.file_version: str | None = None
        self.problems: list[EventFileProblem] = []
        self.lcrc: dict[int, int] = {}  # length -> expected masked CRC of its 8 bytes
        self.records = 0  # complete, framed records read
        self.end_offset = 0  # absolute offset of the first byte not consumed
        self.stopped = False
        self._rest = b""  # a record cut at the end of the last feed

    # --- columns ---------------------------------------------------------------------
    def columns(self, tag: str) -> _Columns:
        c = self.cols.get(tag)
        if c is None:
            c = self.cols[tag] = (Ints(), Floats(), Floats(), Ints())
        return c

    def _add(self, tag: str, step: int, wall: float, value: float, offset: int) -> _Appenders:
        c = self.columns(tag)
        app = (c[0].append, c[1].append, c[2].append, c[3].append)
        app[0](step)
        app[1](wall)
        app[2](value)
        app[3](offset)
        return app

    def points(self) -> int:
        """Scalar points held in the columns now."""
        return sum(len(c[0]) for c in self.cols.values())

    def take_points(self) -> list[EventPoint]:
        """The points read since the last call, in file order, emptied from the columns
        (a tailer keeps its own series and wants each point once; the tags, templates and
        metadata stay, so later records are read as before)."""
        out: list[EventPoint] = []
        for tag, (steps, walls, values, offsets) in self.cols.items():
            if len(steps):
                out.extend(map(EventPoint, offsets, repeat(tag), steps, walls, values))
                # Emptied in place: the templates hold these columns' append methods.
                del steps[:], walls[:], values[:], offsets[:]
        out.sort(key=_offset_of)
        return out

    # --- records -----------------------------------------------------------------------
    def slow_record(self, buf: bytes, s: int, e: int, offset: int, record: int) -> None:
        """Fully decode one record, apply it, and memoise its shape if possible."""
        try:
            wall, step, fv, values, q = _parse_event(buf, s, e)
        except (_BadProto, IndexError, struct.error) as exc:
            self.problems.append(EventFileProblem("bad-proto", offset, record, f"record is not a valid Event: {exc}"))
            return
        # Apply: nothing below can raise, so a record is all-or-nothing.
        if fv is not None:
            self.file_version = fv
        plugin_of = self.plugin_of
        slots: list[_Slot] = []
        cacheable = q >= 0 and bool(values)
        for v in values:
            if v.plugin is not None and v.tag not in plugin_of:
                plugin_of[v.tag] = v.plugin  # EventAccumulator keeps only the first metadata per tag
            sc = v.scalar
            if sc is None:
                self.skipped += 1  # histogram, image, audio, text, non-scalar tensor, empty value
                cacheable = False
                continue
            if v.kind == 8:
                stag = v.tag or v.node_name
                p = plugin_of.get(stag)
                if p is None:  # no metadata yet: decide at the end
                    self.pending.setdefault(stag, []).append((step, wall, sc.value, offset))
                    cacheable = False
                    continue
                if p != "scalars":
                    self.skipped += 1
                    cacheable = False
                    continue
            else:
                stag = v.tag
            app = self._add(stag, step, wall, sc.value, offset)
            if sc.unpack is None:
                cacheable = False
            else:
                slots.append((sc.pos, sc.unpack, sc.post, app))
        if cacheable and self.n_templates < _MAX_TEMPLATES:
            self._memoise(buf, q, e, slots)

    def _memoise(self, buf: bytes, q: int, e: int, slots: list[_Slot]) -> None:
        """Remember that the bytes q..e, read with new values in `slots`, decode the same way.

        Only new keys count towards _MAX_TEMPLATES: a key whose stored template
        keeps missing (bytes after the value vary) is overwritten in place.
        """
        if len(slots) == 1:
            vpos, unpack, post, app = slots[0]
            if vpos == e - 4 and unpack is _F32 and post is None:
                key = buf[q : e - 4]
                if key not in self.simple:
                    self.n_templates += 1
                self.simple[key] = app
                return
        # Generic shape: the prefix is the dict key; the bytes between and after the
        # value slots must match too.
        checks: list[tuple[int, bytes]] = []
        for k, (vpos, unpack, _post, _app) in enumerate(slots):
            seg_start = vpos + _WIDTH[unpack]
            seg_end = slots[k + 1][0] if k + 1 < len(slots) else e
            if seg_end < seg_start:
                return  # slots out of order or overlapping (odd merges): not worth memoising
            if seg_end > seg_start:
                checks.append((seg_start - q, buf[seg_start:seg_end]))
        first = slots[0][0]
        template: _Template = (tuple(checks), tuple((vpos - q, u, p, a) for vpos, u, p, a in slots))
        groups = self.tmpl.setdefault(e - q, [])
        plen = first - q
        key = buf[q:first]
        for gplen, d in groups:
            if gplen == plen:
                if key not in d:
                    self.n_templates += 1
                d[key] = template
                return
        self.n_templates += 1
        groups.append((plen, {key: template}))

    def feed(self, data: bytes) -> int:
        """Read the complete records in `data` (after any record cut at the end of the
        previous feed); keep a record cut at its end for the next feed. Returns the
        number of records read."""
        if self.stopped:
            return 0
        before = self.records
        buf = self._rest + bytes(data) if self._rest else bytes(data)
        base = self.end_offset
        pos = self._scan(buf, base, final=False)
        self._rest = b"" if self.stopped else buf[pos:]
        return self.records - before

    def drop_cut(self) -> None:
        """Forget the record cut at the end of the last feed: the caller will feed it
        again from `end_offset` (a tailer that re-reads a growing file from there)."""
        self._rest = b""

    def finish(self) -> EventFileScan:
        """The scan of everything fed: a record still cut is the file's truncated tail."""
        if self._rest and not self.stopped:
            self._scan(self._rest, self.end_offset, final=True)
            self._rest = b""
        return EventFileScan(
            path=self.path,
            records=self.records,
            scalars=self._series(),
            problems=tuple(self.problems),
            crc_checked=self.verify_crc,
            crc_impl=self._crc_name if self.verify_crc else "none",
            skipped_values=self.skipped,
            file_version=self.file_version,
            end_offset=self.end_offset,
        )

    def _series(self) -> dict[str, ScalarSeries]:
        reorder = False
        for tag, points in self.pending.items():
            if self.plugin_of.get(tag) != "scalars":
                self.skipped += len(points)
                continue
            # Metadata arrived after these tensors: merge them back in file order.
            reorder = True
            c = self.columns(tag)
            merged = sorted([*zip(c[0], c[1], c[2], c[3], strict=True), *points], key=lambda r: r[3])
            self.cols[tag] = (
                Ints([r[0] for r in merged]),
                Floats([r[1] for r in merged]),
                Floats([r[2] for r in merged]),
                Ints([r[3] for r in merged]),
            )
        self.pending = {}
        items = list(self.cols.items())
        if reorder:
            items.sort(key=lambda kv: kv[1][3][0])
        return {tag: ScalarSeries(tag, c[0], c[1], c[2], c[3]) for tag, c in items}

    def _scan(self, buf: bytes, base: int, *, final: bool) -> int:
        """Read the records of `buf` (whose first byte is at file offset `base`); returns
        where reading stopped. A cut record ends the scan: a problem when `final`, else
        the caller keeps it."""
        crc_fn = self._crc_fn
        verify_crc = self.verify_crc
        problems = self.problems
        # Everything the loop touches is bound to a local: globals and attribute
        # lookups cost more than the work they guard.
        simple = self.simple
        simple_get = simple.get
        tmpl_get = self.tmpl.get
        slow = self.slow_record
        head = _HEAD
        qi = _QI
        f32 = _F32
        u32 = _U32
        mask = _mask
        lcrc_cache = self.lcrc
        lcrc_get = lcrc_cache.get
        size = len(buf)
        head_limit = size - _HEAD_SIZE  # records starting at or before this can be read by _HEAD
        pos = 0
        rec = self.records
        while pos < size:
            # Framing: uint64 length | uint32 masked crc(length) | data | uint32 masked crc(data),
            # read together with the first 14 data bytes, which in nearly every event
            # are 09 <wall_time f64> 10 <step varint...>.
            if pos <= head_limit:
                n, lcrc, b0, wall, b9, x = head(buf, pos)
            elif size - pos >= 12:
                n, lcrc = qi(buf, pos)
                b0 = b9 = x = -1  # too near the end to peek: the slow path decodes it
                wall = 0.0
            else:
                if final:
                    problems.append(EventFileProblem(
                        "truncated", base + pos, rec, f"record header cut off: {size - pos} of 12 bytes present"))
                break
            if lcrc_get(n) != lcrc:
                want = mask(crc_fn(buf[pos : pos + 8]))
                if want != lcrc:
                    problems.append(
                        EventFileProblem(
                            "bad-length-crc", base + pos, rec,
                            f"length field ({n}) fails its CRC; framing lost, stopped here"
                        )
                    )
                    self.stopped = True
                    break
                if len(lcrc_cache) < 65536:
                    lcrc_cache[n] = want
            s = pos + 12
            e = s + n
            if e + 4 > size:
                if final:
                    problems.append(
                        EventFileProblem(
                            "truncated",
                            base + pos,
                            rec,
                            f"record declares {n} data bytes + 4 CRC bytes but only {size - s} remain",
                        )
                    )
                break
            if verify_crc:
                c = crc_fn(buf[s:e])
                if (((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8 & 0xFFFFFFFF != u32(buf, e)[0]:
                    problems.append(EventFileProblem("bad-data-crc", base + pos, rec,
                                                     "record data fails its CRC; stopped here"))
                    self.stopped = True
                    break

            # Fast path. Wire shape: 09 <wall f64> [10 <step varint>] <summary bytes seen before>
            if b0 == 0x09 and n > 9:
                if b9 == 0x10:
                    # Step varint from the 4 bytes after its key, unrolled for the usual
                    # 1-3 bytes. If it runs past the record, q ends past e, where no
                    # template can match and the slow path takes over.
                    if not x & 0x80:
                        step = x & 0x7F
                        q = s + 11
                    elif not x & 0x8000:
                        step = x & 0x7F | x >> 1 & 0x3F80
                        q = s + 12
                    elif not x & 0x800000:
                        step = x & 0x7F | x >> 1 & 0x3F80 | x >> 2 & 0x1FC000
                        q = s + 13
                    else:
                        step, q = _fast_varint(buf, s + 10, e)
                else:
                    step = 0
                    q = s + 9
                # (Files of tensor scalars only never fill `simple`: skip its lookup.)
                app = simple_get(buf[q : e - 4]) if simple else None
                if app is not None:
                    sa, wa, va, oa = app
                    sa(step)
                    wa(wall)
                    va(f32(buf, e - 4)[0])
                    oa(base + pos)
                    rec += 1
                    pos = e + 4
                    continue
                groups = tmpl_get(e - q)
                if groups is not None:
                    hit = False
                    for plen, d in groups:
                        ent = d.get(buf[q : q + plen])
                        if ent is None:
                            continue
                        checks, slots = ent
                        for rs, seg in checks:
                            if not buf.startswith(seg, q + rs):
                                break
                        else:
                            for rp, unpack, post, (sa, wa, va, oa) in slots:
                                v = unpack(buf, q + rp)[0]
                                sa(step)
                                wa(wall)
                                va(post(v) if post is not None else v)
                                oa(base + pos)
                            hit = True
                            break
                    if hit:
                        rec += 1
                        pos = e + 4
                        continue
            slow(buf, s, e, base + pos, rec)
            rec += 1
            pos = e + 4
        self.records = rec
        self.end_offset = base + pos
        return pos


def scan_event_bytes(data: bytes, *, path: str = "<bytes>", verify_crc: bool = False) -> EventFileScan:
    """Scan an in-memory event file. See the module docstring for semantics."""
    reader = EventReader(path=path, verify_crc=verify_crc)
    reader.feed(data)
    return reader.finish()


class TooManyPoints(Exception):
    """An event file holds more scalar points than the reader was allowed to keep."""

    def __init__(self, points: int, offset: int) -> None:
        super().__init__(points, offset)
        self.points, self.offset = points, offset


def read_event_file(path: str | os.PathLike[str], *, verify_crc: bool = False,
                    max_points: int | None = None) -> EventFileScan:
    """Read one TensorBoard event file, streamed in CHUNK_BYTES pieces (memory: the
    points' columns, not the file). Only OSError and, past `max_points` scalar points
    (counted after each piece), TooManyPoints propagate.

    verify_crc=True checks every record's data CRC (C speed with google-crc32c or
    crc32c installed; ``crc_impl`` says which); length CRCs are always checked.
    """
    name = os.fsdecode(path)
    reader = EventReader(path=name, verify_crc=verify_crc)
    with open(path, "rb") as f:
        while not reader.stopped:
            chunk = f.read(CHUNK_BYTES)
            if not chunk:
                break
            reader.feed(chunk)
            if max_points is not None and (held := reader.points()) > max_points:
                raise TooManyPoints(held, reader.end_offset)
    return reader.finish()


# ---------------------------------------------------------------------------
# Writing (fixtures, benchmarks): the minimal encoder for scalar events
# ---------------------------------------------------------------------------


def _enc_varint(v: int) -> bytes:
    v &= _MASK64  # negative int64 -> 10-byte two's complement, as protobuf does
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _enc_len(fnum: int, payload: bytes) -> bytes:
    return _enc_varint(fnum << 3 | 2) + _enc_varint(len(payload)) + payload


def _enc_header(wall_time: float, step: int) -> bytes:
    # proto3 omits default (zero) scalars, so do we: output matches SerializeToString().
    out = b""
    if wall_time != 0.0 or struct.pack("<d", wall_time) != bytes(8):
        out += b"\x09" + struct.pack("<d", wall_time)
    if step:
        out += b"\x10" + _enc_varint(step)
    return out


def encode_scalar_event(tag: str, step: int, value: float, wall_time: float) -> bytes:
    """Serialise Event{wall_time, step, summary{value{tag, simple_value}}}."""
    val = _enc_len(1, tag.encode("utf-8")) if tag else b""
    val += b"\x15" + struct.pack("<f", value)
    return _enc_header(wall_time, step) + _enc_len(5, _enc_len(1, val))


def encode_tensor_scalar_event(tag: str, step: int, value: float, wall_time: float, *,
                               metadata: bool = True, data_class: bool = True) -> bytes:
    """Serialise the Event TF2 and tensorboard.summary writers make for a scalar:
    summary{value{tag, tensor{DT_FLOAT, shape [], float_val}, metadata}}. The metadata
    (plugin_data.plugin_name "scalars", and data_class SCALAR unless `data_class` is
    False) is left out when `metadata` is False: writers put it on a tag's first record only."""
    tensor = b"\x08\x01" + _enc_len(2, b"") + _enc_len(5, struct.pack("<f", value))
    val = _enc_len(1, tag.encode("utf-8")) + _enc_len(8, tensor)
    if metadata:
        val += _enc_len(9, _enc_len(1, _enc_len(1, b"scalars")) + (b"\x20\x01" if data_class else b""))
    return _enc_header(wall_time, step) + _enc_len(5, _enc_len(1, val))


def encode_file_version_event(wall_time: float, version: str = "brain.Event:2") -> bytes:
    """Serialise the Event{wall_time, file_version} that starts every event file."""
    return _enc_header(wall_time, 0) + _enc_len(3, version.encode("utf-8"))


def frame_record(data: bytes) -> bytes:
    """Wrap one serialised Event in TFRecord framing."""
    header = struct.pack("<Q", len(data))
    return (
        header
        + struct.pack("<I", masked_crc32c(header))
        + data
        + struct.pack("<I", masked_crc32c(data))
    )
