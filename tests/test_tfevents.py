"""Exact-agreement and robustness tests for trainproof_lsp.readers.tfevents.

The reference is TensorBoard's own EventAccumulator reading the same files,
written by the real writers (torch, tensorboardX, tensorboard). Tests that need
those packages skip when they are missing; the raw-bytes tests always run.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import random
import struct
from pathlib import Path
from typing import Any

import pytest
import tfevents_writers as tw

from trainproof_lsp.readers import tfevents
from trainproof_lsp.readers.tfevents import EventFileScan, frame_record, read_event_file, scan_event_bytes

# ---------------------------------------------------------------------------
# Reference: EventAccumulator
# ---------------------------------------------------------------------------

Pts = list[tuple[int, float, float]]  # (step, wall_time, value)


def _decode_tensor(tp: Any) -> float | None:
    """One-element tensor -> float via tensor_util.make_ndarray (bfloat16 and the
    uint32/uint64 repeated fields by hand: the TF stub's make_ndarray lacks them)."""
    import numpy as np
    from tensorboard.util import tensor_util

    if tp.dtype in (tw.DT_UINT32, tw.DT_UINT64) and not tp.tensor_content:
        # make_ndarray does not read uint32_val/uint64_val; take protobuf's decode.
        vals = list(tp.uint32_val if tp.dtype == tw.DT_UINT32 else tp.uint64_val)
        return float(vals[0]) if len(vals) == 1 else None
    if tp.dtype == tw.DT_BFLOAT16:
        if tp.tensor_content:
            bits = np.frombuffer(tp.tensor_content, dtype=np.uint16)
        else:
            bits = np.array(list(tp.half_val), dtype=np.uint16)
        arr = (bits.astype(np.uint32) << 16).view(np.float32)
    else:
        arr = tensor_util.make_ndarray(tp)
    if arr.size != 1:
        return None
    return float(arr.reshape(-1)[0])


def ea_scalars(path: str) -> dict[str, Pts]:
    """Every scalar point EventAccumulator gives: simple_value scalars plus
    one-element tensors whose tag's metadata names the scalars plugin."""
    ea_mod = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    ea = ea_mod.EventAccumulator(path, size_guidance={"scalars": 0, "tensors": 0})
    ea.Reload()
    out: dict[str, Pts] = {}
    tags = ea.Tags()
    for tag in tags["scalars"]:
        out[tag] = [(e.step, e.wall_time, e.value) for e in ea.Scalars(tag)]
    for tag in tags["tensors"]:
        md = ea.summary_metadata.get(tag)  # first metadata seen for the tag, if any
        if md is None or md.plugin_data.plugin_name != "scalars":
            continue
        pts = [(e.step, e.wall_time, _decode_tensor(e.tensor_proto)) for e in ea.Tensors(tag)]
        assert tag not in out, "tests never mix simple and tensor values under one tag"
        out[tag] = [p for p in pts if p[2] is not None]  # type: ignore[misc]
    return {t: p for t, p in out.items() if p}


def ours(scan: EventFileScan) -> dict[str, Pts]:
    return {tag: list(zip(s.steps, s.wall_times, s.values, strict=True)) for tag, s in scan.scalars.items()}


def _same_value(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def assert_same(got: dict[str, Pts], want: dict[str, Pts]) -> None:
    assert sorted(got) == sorted(want)
    for tag in want:
        g, w = got[tag], want[tag]
        assert len(g) == len(w), tag
        assert [p[0] for p in g] == [p[0] for p in w], tag
        assert [p[1] for p in g] == [p[1] for p in w], tag
        for (_, _, gv), (_, _, wv) in zip(g, w, strict=True):
            assert _same_value(gv, wv), (tag, gv, wv)
            assert type(gv) is float


def check_against_ea(path: str, *, expect_points: int | None = None) -> EventFileScan:
    """Our reader (with and without CRC) must give exactly EventAccumulator's points."""
    want = ea_scalars(path)
    scan = read_event_file(path)
    scan_crc = read_event_file(path, verify_crc=True)
    assert scan.problems == () and scan_crc.problems == ()
    assert scan_crc.crc_checked and scan_crc.crc_impl in tfevents.CRC_IMPL_NAMES
    assert not scan.crc_checked and scan.crc_impl == "none"
    assert_same(ours(scan), want)
    assert_same(ours(scan_crc), want)
    assert_offsets_are_records(path, scan)
    if expect_points is not None:
        assert sum(len(s.steps) for s in scan.scalars.values()) == expect_points
    return scan


def assert_offsets_are_records(path: str, scan: EventFileScan) -> None:
    data = Path(path).read_bytes()
    starts = set(tw.record_offsets(data))
    assert scan.records == len(starts)
    for s in scan.scalars.values():
        assert len(s.steps) == len(s.wall_times) == len(s.values) == len(s.offsets)
        assert all(o in starts for o in s.offsets)
        assert list(s.offsets) == sorted(s.offsets)


def _points(tags: list[str], n: int, *, wall0: float = 1.7e9) -> list[tw.Point]:
    rnd = random.Random(1234)
    pts = []
    for i in range(n):
        tag = tags[i % len(tags)]
        # float32-representable values, so every writer stores them exactly
        v = struct.unpack("<f", struct.pack("<f", rnd.uniform(-10, 10)))[0]
        pts.append((tag, i // len(tags) * 7, v, wall0 + i * 0.25))
    return pts


# ---------------------------------------------------------------------------
# Real writers vs EventAccumulator
# ---------------------------------------------------------------------------


def test_torch_add_scalar_matches_event_accumulator(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("tensorboard")
    pts = _points(["train/loss", "train/lr", "eval/acc"], 600)
    pts.append(("train/loss", 10**6, float("nan"), 1.8e9))
    pts.append(("train/loss", 10**6 + 1, float("inf"), 1.8e9 + 1))
    path = tw.write_torch(str(tmp_path), pts)
    scan = check_against_ea(path, expect_points=len(pts))
    assert list(scan.scalars) == ["train/loss", "train/lr", "eval/acc"]  # first appearance
    assert scan.file_version == "brain.Event:2"
    assert scan.skipped_values == 0


@pytest.mark.parametrize("double_precision", [False, True])
def test_torch_new_style_tensor_scalars_match(tmp_path: Path, double_precision: bool) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("tensorboard")
    pts = _points(["a", "b/c"], 300)
    pts.append(("a", 999_999_999, 1e-30, 2e9))
    path = tw.write_torch(str(tmp_path), pts, new_style=True, double_precision=double_precision)
    check_against_ea(path, expect_points=len(pts))


def test_torch_mixed_summaries_skip_non_scalars(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("tensorboard")
    path = tw.write_torch_mixed(str(tmp_path), 12)
    scan = check_against_ea(path, expect_points=24)
    # 12 histograms + 4 texts + 1 image
    assert scan.skipped_values == 12 + 4 + 1
    assert list(scan.scalars) == ["loss", "lr"]


@pytest.mark.parametrize("display_name", ["", "Loss (display)"])
def test_tensorboardx_matches(tmp_path: Path, display_name: str) -> None:
    pytest.importorskip("tensorboardX")
    pytest.importorskip("tensorboard")
    pts = _points(["loss", "acc", "x/y/z"], 400)
    path = tw.write_tensorboardx(str(tmp_path), pts, display_name=display_name)
    check_against_ea(path, expect_points=len(pts))


def test_tensorboard_summary_writer_matches(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    pts = _points(["m/loss", "m/acc"], 300)
    pts.append(("m/acc", -3, 0.0, 0.0))  # negative step, zero value and wall_time
    path = tw.write_tb_writer(str(tmp_path), pts)
    check_against_ea(path, expect_points=len(pts))


# Values exactly representable in every dtype they are written as.
_DTYPE_VALUES: dict[int, list[float | int | bool]] = {
    tw.DT_FLOAT: [0.0, -1.5, 3.140625, 1e-40, float("inf"), float("nan")],
    tw.DT_DOUBLE: [0.0, 2.0**-1074, -1e300, 0.1],
    tw.DT_HALF: [0.0, 65504.0, -2.0**-24, 0.5],
    tw.DT_BFLOAT16: [0.0, 1.0, -1.5 * 2.0**100, 0.0078125, float("inf")],
    tw.DT_INT32: [0, -1, 2**31 - 1, -(2**31)],
    tw.DT_INT64: [0, -1, 2**53, -(2**62)],
    tw.DT_INT8: [-128, 127, 0],
    tw.DT_UINT8: [0, 255],
    tw.DT_INT16: [-32768, 32767],
    tw.DT_UINT16: [0, 65535],
    tw.DT_UINT32: [0, 2**32 - 1],
    tw.DT_UINT64: [0, 2**53],
    tw.DT_BOOL: [True, False],
}


@pytest.mark.parametrize("content", [False, True], ids=["repeated-field", "tensor_content"])
@pytest.mark.parametrize("dtype", sorted(_DTYPE_VALUES))
def test_tensor_scalar_dtypes_match(tmp_path: Path, dtype: int, content: bool) -> None:
    pytest.importorskip("tensorboard")
    md = tw.scalars_metadata()
    events = []
    step = 0
    tagged: set[str] = set()
    for _rep in range(3):  # repeat so later records go through the memoised fast path
        for shape in ((), (1,), (1, 1)):
            tag = f"t/{len(shape)}"
            for v in _DTYPE_VALUES[dtype]:
                tp = tw.tensor_proto(dtype, v, content=content, shape=shape)
                # TF1's FileWriter writes metadata only on a tag's first value
                events.append(tw.tensor_event(tag, step, 1e9 + step, tp, metadata=None if tag in tagged else md))
                tagged.add(tag)
                step += 1
    path = tw.write_tb_events(str(tmp_path), events)
    scan = check_against_ea(path, expect_points=len(events))
    assert scan.skipped_values == 0


def test_multi_value_events_and_other_plugins(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto import event_pb2, summary_pb2

    events = []
    for step in range(50):
        ev = tw.simple_event([("a", step * 0.5), ("b", -step * 1.0), ("a", step + 0.25)], step, 5.0 + step)
        events.append(ev)
        # a one-element tensor of another plugin, and a 2-element "scalars" tensor: both skipped
        other = tw.tensor_event("txt", step, 5.0 + step, tw.tensor_proto(tw.DT_FLOAT, 1.0, content=False),
                                metadata=tw.scalars_metadata("text"))
        events.append(other)
        vec = tw.tensor_proto(tw.DT_FLOAT, 1.0, content=False, shape=(2,))
        vec.float_val.append(2.0)
        events.append(tw.tensor_event("vec", step, 5.0 + step, vec, metadata=tw.scalars_metadata()))
        # a histogram value in the same event as a scalar
        hist = summary_pb2.Summary.Value(tag="h", histo=summary_pb2.HistogramProto(min=0, max=1, num=2))
        sv = summary_pb2.Summary.Value(tag="c", simple_value=float(step))
        events.append(event_pb2.Event(wall_time=7.0, step=step, summary=summary_pb2.Summary(value=[hist, sv])))
    path = tw.write_tb_events(str(tmp_path), events)
    want = ea_scalars(path)
    want.pop("vec", None)  # EventAccumulator keeps it as a tensor; it is not a scalar
    scan = read_event_file(path, verify_crc=True)
    assert scan.problems == ()
    assert_same(ours(scan), want)
    assert scan.skipped_values == 50 * 3


def test_tensor_before_metadata_is_kept_when_metadata_says_scalars(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    md = tw.scalars_metadata()
    f = tw.DT_FLOAT
    events = [
        tw.tensor_event("late", 0, 1.0, tw.tensor_proto(f, 1.0, content=False)),
        tw.tensor_event("early", 0, 1.0, tw.tensor_proto(f, 9.0, content=False), metadata=md),
        tw.tensor_event("late", 1, 2.0, tw.tensor_proto(f, 2.0, content=False), metadata=md),
        tw.tensor_event("late", 2, 3.0, tw.tensor_proto(f, 3.0, content=False)),
        tw.tensor_event("never", 0, 1.0, tw.tensor_proto(f, 4.0, content=False)),
    ]
    path = tw.write_tb_events(str(tmp_path), events)
    scan = check_against_ea(path, expect_points=4)
    assert list(scan.scalars) == ["late", "early"]
    assert scan.scalars["late"].steps == (0, 1, 2)
    assert scan.skipped_values == 1  # "never" has no metadata at all


def test_extreme_steps_and_walls_match(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    steps = [0, 1, 127, 128, 16383, 16384, 2**21 - 1, 2**21, 2**28, 2**35, 2**63 - 1, -1, -(2**63), 5]
    events = [tw.simple_event([("s", float(i))], st, float(i) * 1e8) for i, st in enumerate(steps)]
    events += [tw.simple_event([("s", 0.0)], st, -1.5) for st in steps]
    path = tw.write_tb_events(str(tmp_path), events)
    scan = check_against_ea(path, expect_points=2 * len(steps))
    assert scan.scalars["s"].steps == tuple(steps + steps)


# ---------------------------------------------------------------------------
# Truncation and corruption
# ---------------------------------------------------------------------------


def _small_file(tmp_path: Path) -> tuple[str, bytes]:
    pts = _points(["loss", "acc"], 20)
    data = tw.raw_event_bytes(pts)
    return tw.write_raw(str(tmp_path / "events.out.tfevents.0.full"), data), data


def test_truncated_file_matches_event_accumulator_at_every_cut(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    _, data = _small_file(tmp_path)
    offsets = tw.record_offsets(data)
    last, prev = offsets[-1], offsets[-2]
    for cut in range(prev + 1, len(data)):
        path = tw.write_raw(str(tmp_path / f"events.out.tfevents.cut{cut}"), data[:cut])
        scan = read_event_file(path, verify_crc=True)
        if cut == last:  # a record boundary: a clean, shorter file
            assert scan.problems == () and scan.records == len(offsets) - 1
            continue
        cut_record = last if cut > last else prev
        assert len(scan.problems) == 1, cut
        p = scan.problems[0]
        assert (p.kind, p.offset, p.record) == ("truncated", cut_record, offsets.index(cut_record))
        assert scan.records == offsets.index(cut_record)
        assert scan.end_offset == cut_record
        if cut in (prev + 5, last - 1, last + 11, len(data) - 1):  # EventAccumulator is slow-ish: sample
            assert_same(ours(scan), ea_scalars(path))
        assert ours(read_event_file(path)) == ours(scan)


def test_truncated_without_tensorboard(tmp_path: Path) -> None:
    _, data = _small_file(tmp_path)
    offsets = tw.record_offsets(data)
    scan = scan_event_bytes(data[: offsets[5] + 3])
    assert [(p.kind, p.offset, p.record) for p in scan.problems] == [("truncated", offsets[5], 5)]
    assert scan.records == 5
    assert sum(len(s.steps) for s in scan.scalars.values()) == 4  # record 0 is file_version


def test_flipped_data_byte_is_bad_data_crc(tmp_path: Path) -> None:
    _, data = _small_file(tmp_path)
    offsets = tw.record_offsets(data)
    k = 7
    bad = bytearray(data)
    bad[offsets[k] + 12 + 3] ^= 0x40  # inside the wall_time of record k
    path = tw.write_raw(str(tmp_path / "events.out.tfevents.flip"), bytes(bad))
    scan = read_event_file(path, verify_crc=True)
    assert [(p.kind, p.offset, p.record) for p in scan.problems] == [("bad-data-crc", offsets[k], k)]
    assert scan.records == k and scan.crc_checked
    assert sum(len(s.steps) for s in scan.scalars.values()) == k - 1
    # Without CRC verification the flip goes unnoticed (documented), but nothing breaks.
    loose = read_event_file(path)
    assert loose.problems == () and loose.records == len(offsets)
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        return
    assert_same(ours(scan), ea_scalars(path))  # TensorBoard stops at the same record


def test_flipped_length_byte_is_bad_length_crc_even_without_verify(tmp_path: Path) -> None:
    _, data = _small_file(tmp_path)
    offsets = tw.record_offsets(data)
    bad = bytearray(data)
    bad[offsets[4]] ^= 0x01  # length 1 off: would misframe everything after
    for verify in (False, True):
        scan = scan_event_bytes(bytes(bad), verify_crc=verify)
        assert [(p.kind, p.offset, p.record) for p in scan.problems] == [("bad-length-crc", offsets[4], 4)]
        assert scan.records == 4


def test_flipped_data_crc_byte(tmp_path: Path) -> None:
    _, data = _small_file(tmp_path)
    offsets = tw.record_offsets(data)
    bad = bytearray(data)
    bad[offsets[3] - 1] ^= 0xFF  # last byte of record 2's data CRC
    scan = scan_event_bytes(bytes(bad), verify_crc=True)
    assert [(p.kind, p.offset, p.record) for p in scan.problems] == [("bad-data-crc", offsets[2], 2)]


def test_bad_proto_record_is_reported_and_skipped() -> None:
    good = tw.raw_event_bytes([("x", 1, 1.0, 1.0), ("x", 2, 2.0, 2.0)], file_version=False)
    junk_payloads = [
        b"\x0a\xff\xff",  # length-delimited field longer than the record
        b"\x09\x00",  # fixed64 cut short
        b"\x0f",  # wire type 7
        b"\x2a\x04\x0a\x02\x0a\x05",  # nested length overrun
        b"\x2a\x06\x0a\x04\x0a\x02\xff\xfe",  # invalid UTF-8 tag
        b"\x10" + b"\xff" * 11,  # varint longer than 10 bytes
        b"\x00\x00",  # field number 0
    ]
    data = good
    for junk in junk_payloads:
        data += frame_record(junk)
    data += tw.raw_event_bytes([("x", 3, 3.0, 3.0)], file_version=False)
    scan = scan_event_bytes(data, verify_crc=True)
    offsets = tw.record_offsets(data)
    assert [(p.kind, p.offset, p.record) for p in scan.problems] == [
        ("bad-proto", offsets[2 + i], 2 + i) for i in range(len(junk_payloads))
    ]
    assert scan.scalars["x"].steps == (1, 2, 3)
    assert scan.records == len(offsets)


@pytest.mark.parametrize(
    "blob",
    [
        b"hello, I am not an event file\n" * 10,
        b"\x00" * 3,
        b"\x01" * 11,
        os.urandom(4096),
        struct.pack("<Q", 5) + b"\x00" * 40,  # plausible length, wrong length CRC
        b"PK\x03\x04" + b"\x00" * 100,
    ],
)
def test_not_an_event_file(tmp_path: Path, blob: bytes) -> None:
    path = tw.write_raw(str(tmp_path / "events.out.tfevents.garbage"), blob)
    for verify in (False, True):
        scan = read_event_file(path, verify_crc=verify)
        assert scan.records == 0 and scan.scalars == {}
        assert len(scan.problems) == 1
        p = scan.problems[0]
        assert (p.offset, p.record) == (0, 0)
        # Shorter than a record header: truncated; otherwise the length CRC fails.
        assert p.kind == ("truncated" if len(blob) < 12 else "bad-length-crc")


def test_empty_file(tmp_path: Path) -> None:
    path = tw.write_raw(str(tmp_path / "events.out.tfevents.empty"), b"")
    scan = read_event_file(Path(path), verify_crc=True)
    assert scan == EventFileScan(
        path=path, records=0, scalars={}, problems=(), crc_checked=True, crc_impl=scan.crc_impl
    )


def test_missing_file_raises_oserror(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        read_event_file(tmp_path / "nope")
    with pytest.raises(OSError):
        read_event_file(tmp_path)  # a directory


# ---------------------------------------------------------------------------
# CRC implementations and the encoder
# ---------------------------------------------------------------------------


def test_crc_implementations_agree() -> None:
    rnd = random.Random(7)
    blobs = [b"", b"123456789", bytes(range(256))] + [rnd.randbytes(rnd.randrange(1, 300)) for _ in range(50)]
    impls = [tfevents._crc32c_py]
    for mod, fn in (("google_crc32c", "value"), ("crc32c", "crc32c")):
        with contextlib.suppress(ImportError):
            impls.append(getattr(importlib.import_module(mod), fn))
    for b in blobs:
        assert len({f(b) for f in impls}) == 1
    assert tfevents._crc32c_py(b"123456789") == 0xE3069283


def test_pure_python_crc_backend_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tfevents, "_crc_backend", (tfevents._crc32c_py, "python"))
    data = tw.raw_event_bytes(_points(["a"], 30))
    scan = scan_event_bytes(data, verify_crc=True)
    assert scan.crc_impl == "python" and scan.crc_checked and scan.problems == ()
    assert len(scan.scalars["a"].steps) == 30
    bad = bytearray(data)
    bad[-6] ^= 1
    assert scan_event_bytes(bytes(bad), verify_crc=True).problems[0].kind == "bad-data-crc"


def test_encoder_matches_protobuf() -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto import event_pb2

    cases = [("loss", 5, 0.5, 1.7e9), ("", 0, 0.0, 0.0), ("ünï/cødé", -7, -1e-3, -0.0), ("t", 2**63 - 1, 1e30, 1.0)]
    for tag, step, value, wall in cases:
        ev = tw.simple_event([(tag, value)], step, wall)
        assert tfevents.encode_scalar_event(tag, step, value, wall) == ev.SerializeToString()
    fv = event_pb2.Event(wall_time=3.5, file_version="brain.Event:2")
    assert tfevents.encode_file_version_event(3.5) == fv.SerializeToString()


def test_framing_matches_tensorboard_writer(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.summary.writer.record_writer import RecordWriter

    payload = tfevents.encode_scalar_event("a", 1, 2.0, 3.0)
    with open(tmp_path / "rec", "wb") as f:
        w = RecordWriter(f)
        w.write(payload)
        w.flush()
    assert (tmp_path / "rec").read_bytes() == frame_record(payload)


# ---------------------------------------------------------------------------
# The memoised fast path must agree with the full protobuf walk, always
# ---------------------------------------------------------------------------


def _scan_slow(data: bytes, monkeypatch: pytest.MonkeyPatch, verify: bool = False) -> EventFileScan:
    with monkeypatch.context() as m:
        m.setattr(tfevents, "_MAX_TEMPLATES", 0)  # never memoise: every record is walked
        return scan_event_bytes(data, verify_crc=verify)


def _assert_scans_equal(a: EventFileScan, b: EventFileScan) -> None:
    assert a.records == b.records and a.problems == b.problems and a.skipped_values == b.skipped_values
    assert list(a.scalars) == list(b.scalars)
    for tag in a.scalars:
        sa, sb = a.scalars[tag], b.scalars[tag]
        assert (sa.steps, sa.wall_times, sa.offsets) == (sb.steps, sb.wall_times, sb.offsets)
        assert all(_same_value(x, y) for x, y in zip(sa.values, sb.values, strict=True))


def test_fast_path_equals_full_walk_on_real_writers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    path = tw.write_torch_mixed(str(tmp_path), 40)
    data = Path(path).read_bytes()
    _assert_scans_equal(scan_event_bytes(data), _scan_slow(data, monkeypatch))


def test_fast_path_equals_full_walk_under_mutation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutate payload bytes (re-framing with valid CRCs so every record is read):
    whatever the bytes become, the memoised path must decode them exactly as
    the full walk does, and nothing may raise."""
    rnd = random.Random(99)
    base_payloads = [tfevents.encode_file_version_event(1.0)]
    for i in range(60):
        base_payloads.append(tfevents.encode_scalar_event(["a", "bb", "a/c"][i % 3], i * 37, i * 0.5, 10.0 + i))
    try:
        md = tw.scalars_metadata()
        for i in range(30):
            for dt, content in ((tw.DT_FLOAT, False), (tw.DT_DOUBLE, True), (tw.DT_INT64, True), (tw.DT_HALF, False)):
                tp = tw.tensor_proto(dt, i, content=content)
                ev = tw.tensor_event(f"t{dt}{content}", i * 300, 1.0 * i, tp, metadata=md)
                base_payloads.append(ev.SerializeToString())
            base_payloads.append(tw.simple_event([("m1", i), ("m2", -i)], i, 2.0).SerializeToString())
    except ImportError:
        pass
    for _trial in range(300):
        payloads = list(base_payloads)
        for _ in range(rnd.randrange(1, 6)):
            k = rnd.randrange(len(payloads))
            p = bytearray(payloads[k])
            op = rnd.random()
            if op < 0.6 and p:
                p[rnd.randrange(len(p))] = rnd.randrange(256)
            elif op < 0.8 and p:
                del p[rnd.randrange(len(p))]
            else:
                p.insert(rnd.randrange(len(p) + 1), rnd.randrange(256))
            payloads[k] = bytes(p)
        # Put the mutated records after intact copies, so templates exist when they are read.
        data = b"".join(frame_record(p) for p in base_payloads + payloads)
        _assert_scans_equal(scan_event_bytes(data), _scan_slow(data, monkeypatch))


def test_template_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tfevents, "_MAX_TEMPLATES", 10)
    pts = [(f"tag{i}", i, float(i), 1.0) for i in range(100)] * 2
    scan = scan_event_bytes(tw.raw_event_bytes(pts))
    assert len(scan.scalars) == 100 and all(s.steps == (i, i) for i, s in enumerate(scan.scalars.values()))


def test_crc_backend_selection_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = importlib.import_module
    missing: set[str] = set()

    def fake_import(name: str, package: str | None = None) -> Any:
        if name in missing:
            raise ImportError(name)
        return real_import(name, package)

    monkeypatch.setattr(tfevents.importlib, "import_module", fake_import)
    expected = []
    for mod, label in (("google_crc32c", "google-crc32c"), ("crc32c", "crc32c")):
        try:
            real_import(mod)
        except ImportError:
            missing.add(mod)
        else:
            expected.append(label)
    if expected:
        assert tfevents._select_crc()[1] == expected[0]
    missing.add("google_crc32c")
    assert tfevents._select_crc()[1] == ("crc32c" if "crc32c" in expected else "python")
    missing.add("crc32c")
    fn, name = tfevents._select_crc()
    assert (fn, name) == (tfevents._crc32c_py, "python")
