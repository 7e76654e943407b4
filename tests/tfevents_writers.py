"""Helpers that write TensorBoard event files for tests/test_tfevents.py.

Real writers (torch, tensorboardX, tensorboard) are imported lazily inside each
helper so this module imports without them; the test module skips the tests
that need them with pytest.importorskip. The raw helpers use only
trainproof_lsp.readers.tfevents' own encoder and framing.
"""

from __future__ import annotations

import glob
import os
import struct
from collections.abc import Iterable, Sequence
from typing import Any

from trainproof_lsp.readers.tfevents import encode_file_version_event, encode_scalar_event, frame_record

# (tag, step, value, wall_time)
Point = tuple[str, int, float, float]

# TensorFlow DataType enum values used by the tensor-scalar tests.
DT_FLOAT, DT_DOUBLE, DT_INT32, DT_UINT8, DT_INT16, DT_INT8 = 1, 2, 3, 4, 5, 6
DT_INT64, DT_BOOL, DT_BFLOAT16, DT_UINT16, DT_HALF, DT_UINT32, DT_UINT64 = 9, 10, 14, 17, 19, 22, 23


def _only_event_file(logdir: str) -> str:
    files = sorted(glob.glob(os.path.join(logdir, "**", "*tfevents*"), recursive=True))
    assert len(files) == 1, files
    return files[0]


# ---------------------------------------------------------------------------
# Real writers
# ---------------------------------------------------------------------------


def write_torch(
    logdir: str, points: Iterable[Point], *, new_style: bool = False, double_precision: bool = False
) -> str:
    """torch.utils.tensorboard.SummaryWriter.add_scalar; returns the event file path."""
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(logdir)
    for tag, step, value, wall in points:
        w.add_scalar(tag, value, step, walltime=wall, new_style=new_style, double_precision=double_precision)
    w.close()
    return _only_event_file(logdir)


def write_torch_mixed(logdir: str, steps: int) -> str:
    """Scalars interleaved with histograms, text and an image (non-scalars to skip)."""
    import numpy as np
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(logdir)
    rng = np.random.default_rng(0)
    for step in range(steps):
        w.add_scalar("loss", 1.0 / (step + 1), step, walltime=1000.0 + step)
        w.add_histogram("weights", rng.normal(size=50), step, walltime=1000.0 + step)
        w.add_scalar("lr", 0.1 * 0.9**step, step, walltime=1000.0 + step, new_style=True)
        if step % 3 == 0:
            w.add_text("note", f"step {step}", step, walltime=1000.0 + step)
        if step == 2:
            w.add_image("img", rng.random((3, 4, 4)), step, walltime=1000.0 + step)
    w.close()
    return _only_event_file(logdir)


def write_tensorboardx(logdir: str, points: Iterable[Point], *, display_name: str = "") -> str:
    """tensorboardX.SummaryWriter.add_scalar (display_name adds metadata without a plugin)."""
    import tensorboardX

    w = tensorboardX.SummaryWriter(logdir)
    for tag, step, value, wall in points:
        w.add_scalar(tag, value, step, walltime=wall, display_name=display_name)
    w.close()
    return _only_event_file(logdir)


def write_tb_writer(logdir: str, points: Iterable[Point]) -> str:
    """tensorboard.summary.Writer: the TensorBoard-native tensor-scalar writer."""
    from tensorboard.summary import Writer

    w = Writer(logdir)
    for tag, step, value, wall in points:
        w.add_scalar(tag, value, step, wall_time=wall)
    w.close()
    return _only_event_file(logdir)


def write_tb_events(logdir: str, events: Sequence[Any]) -> str:
    """Write Event protos with TensorBoard's own EventFileWriter (adds file_version)."""
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    w = EventFileWriter(logdir)
    for ev in events:
        w.add_event(ev)
    w.close()
    return _only_event_file(logdir)


# ---------------------------------------------------------------------------
# Proto builders (tensorboard.compat.proto)
# ---------------------------------------------------------------------------


def scalars_metadata(plugin: str = "scalars") -> Any:
    from tensorboard.compat.proto import summary_pb2

    return summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name=plugin))


def tensor_proto(dtype: int, value: float | int | bool, *, content: bool, shape: Sequence[int] = ()) -> Any:
    """A one-element TensorProto of `dtype`, in its repeated field or in tensor_content."""
    import numpy as np
    from tensorboard.compat.proto import tensor_pb2, tensor_shape_pb2

    shape_proto = tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in shape])
    tp = tensor_pb2.TensorProto(dtype=dtype, tensor_shape=shape_proto)
    np_types = {
        DT_FLOAT: np.float32,
        DT_DOUBLE: np.float64,
        DT_INT32: np.int32,
        DT_UINT8: np.uint8,
        DT_INT16: np.int16,
        DT_INT8: np.int8,
        DT_INT64: np.int64,
        DT_BOOL: np.bool_,
        DT_UINT16: np.uint16,
        DT_HALF: np.float16,
        DT_UINT32: np.uint32,
        DT_UINT64: np.uint64,
    }
    if dtype == DT_BFLOAT16:
        # bfloat16 = top 16 bits of the float32 (truncation; tests pick exact values).
        bits = struct.unpack("<I", struct.pack("<f", float(value)))[0] >> 16
        if content:
            tp.tensor_content = struct.pack("<H", bits)
        else:
            tp.half_val.append(bits)
        return tp
    arr: Any = np.array(value, dtype=np_types[dtype])
    if content:
        tp.tensor_content = arr.tobytes()
        return tp
    if dtype == DT_FLOAT:
        tp.float_val.append(float(arr))
    elif dtype == DT_DOUBLE:
        tp.double_val.append(float(arr))
    elif dtype in (DT_INT32, DT_UINT8, DT_INT16, DT_INT8, DT_UINT16):
        tp.int_val.append(int(arr))
    elif dtype == DT_INT64:
        tp.int64_val.append(int(arr))
    elif dtype == DT_BOOL:
        tp.bool_val.append(bool(arr))
    elif dtype == DT_HALF:
        tp.half_val.append(int(arr.view(np.uint16)))
    elif dtype == DT_UINT32:
        tp.uint32_val.append(int(arr))
    elif dtype == DT_UINT64:
        tp.uint64_val.append(int(arr))
    return tp


def tensor_event(tag: str, step: int, wall: float, tp: Any, *, metadata: Any | None = None) -> Any:
    from tensorboard.compat.proto import event_pb2, summary_pb2

    value = summary_pb2.Summary.Value(tag=tag, tensor=tp)
    if metadata is not None:
        value.metadata.CopyFrom(metadata)
    return event_pb2.Event(wall_time=wall, step=step, summary=summary_pb2.Summary(value=[value]))


def simple_event(values: Sequence[tuple[str, float]], step: int, wall: float) -> Any:
    """One Event holding several simple_value Values (TF1 merged-summary shape)."""
    from tensorboard.compat.proto import event_pb2, summary_pb2

    return event_pb2.Event(
        wall_time=wall,
        step=step,
        summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=t, simple_value=v) for t, v in values]),
    )


# ---------------------------------------------------------------------------
# Raw files (no tensorboard needed)
# ---------------------------------------------------------------------------


def raw_event_bytes(points: Iterable[Point], *, file_version: bool = True) -> bytes:
    """Framed file_version record + one framed simple-scalar record per point."""
    parts = [frame_record(encode_file_version_event(1000.0))] if file_version else []
    parts.extend(frame_record(encode_scalar_event(t, s, v, w)) for t, s, v, w in points)
    return b"".join(parts)


def write_raw(path: str, data: bytes) -> str:
    with open(path, "wb") as f:
        f.write(data)
    return path


def record_offsets(data: bytes) -> list[int]:
    """Byte offset of every complete record in a well-formed file."""
    out = []
    pos = 0
    while pos + 12 <= len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        if pos + 16 + n > len(data):
            break
        out.append(pos)
        pos += 16 + n
    return out
