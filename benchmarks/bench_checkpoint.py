"""Checkpoint scan speed: read_checkpoint (CRC of every entry + pickle walk + NaN/Inf/zero
scan of every tensor) on a synthetic torch-ZIP archive and a safetensors file, with numpy
and with the pure-bytes fallback, side by side with `zipfile.testzip()` (CRC only — what
the published trainproof's checkpoint check does) on the same file in the same run.

    python benchmarks/bench_checkpoint.py [--mb 256]

The archive is written here without torch, in torch.save's layout (data.pkl with
_rebuild_tensor_v2 persistent ids, STORED 64-byte-aligned data/<key> entries), holding
normally distributed float32 weights. Timings are warm-cache (the file is read once first).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import struct
import sys
import tempfile
import time
import zipfile
from array import array
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainproof_lsp.readers.checkpoint import read_checkpoint  # noqa: E402

TENSOR_ELEMS = 1 << 20  # 4 MiB of float32 per tensor


def _unicode(s: str) -> bytes:
    raw = s.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def _int(n: int) -> bytes:
    return b"J" + struct.pack("<i", n)


def _tuple(items: list[int]) -> bytes:
    return b"(" + b"".join(_int(i) for i in items) + b"t"


def data_pkl(tensors: list[tuple[str, str, int, tuple[int, int]]]) -> bytes:
    """torch.save's data.pkl for a flat state dict, opcode by opcode (protocol 2)."""
    out = bytearray(b"\x80\x02ccollections\nOrderedDict\n)R(")
    for name, key, numel, shape in tensors:
        out += _unicode(name) + b"ctorch._utils\n_rebuild_tensor_v2\n("
        out += b"(" + _unicode("storage") + b"ctorch\nFloatStorage\n" + _unicode(key) + _unicode("cpu") + _int(numel) + b"tQ"
        out += _int(0) + _tuple(list(shape)) + _tuple([shape[1], 1]) + b"\x89ccollections\nOrderedDict\n)RtR"
    out += b"u."
    return bytes(out)


def weights_block() -> bytes:
    rng = random.Random(0)
    return array("f", (rng.gauss(0.0, 0.02) for _ in range(TENSOR_ELEMS))).tobytes()


def write_torch_zip(path: Path, count: int, block: bytes) -> None:
    tensors = [(f"layers.{i}.weight", str(i), TENSOR_ELEMS, (1024, 1024)) for i in range(count)]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("bench/data.pkl", data_pkl(tensors))
        zf.writestr("bench/byteorder", "little")
        for _, key, _, _ in tensors:
            zf.writestr(f"bench/data/{key}", block)
        zf.writestr("bench/version", "3\n")


def write_safetensors(path: Path, count: int, block: bytes) -> None:
    header = {f"layers.{i}.weight": {"dtype": "F32", "shape": [1024, 1024],
                                     "data_offsets": [i * len(block), (i + 1) * len(block)]} for i in range(count)}
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with path.open("wb") as fh:
        fh.write(struct.pack("<Q", len(raw)) + raw)
        for _ in range(count):
            fh.write(block)


def best_of(n: int, fn) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=256, help="checkpoint size in MiB (default 256)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    count = max(1, args.mb // 4)
    block = weights_block()
    try:
        import numpy

        numpy_version = numpy.__version__
    except ImportError:
        numpy_version = None
    with tempfile.TemporaryDirectory() as scratch:
        pt = Path(scratch) / "bench.pt"
        st = Path(scratch) / "bench.safetensors"
        write_torch_zip(pt, count, block)
        write_safetensors(st, count, block)
        for p in (pt, st):
            p.read_bytes()  # warm the page cache
        mb = pt.stat().st_size / 2 ** 20
        print(f"checkpoint: {count} float32 tensors of 1024x1024, {mb:.0f} MiB "
              f"(best of {args.repeat}, warm cache; numpy {numpy_version or 'not installed'})")

        def testzip() -> None:
            with zipfile.ZipFile(pt) as zf:
                assert zf.testzip() is None

        rows = [("zipfile.testzip (CRC only; published trainproof's check)", pt, testzip)]
        for label, path in (("torch ZIP", pt), ("safetensors", st)):
            if numpy_version:
                rows.append((f"read_checkpoint {label}, numpy scan", path,
                             lambda path=path: _read(path, use_numpy=True)))
            rows.append((f"read_checkpoint {label}, pure-bytes scan", path,
                         lambda path=path: _read(path, use_numpy=False)))
        for label, path, fn in rows:
            seconds = best_of(args.repeat, fn)
            size = path.stat().st_size / 2 ** 20
            print(f"  {label:<58} {seconds * 1000:8.1f} ms  {size / seconds:8.0f} MB/s")


def _read(path: Path, *, use_numpy: bool) -> None:
    if use_numpy:
        os.environ.pop("TRAINPROOF_NO_NUMPY", None)
    else:
        os.environ["TRAINPROOF_NO_NUMPY"] = "1"
    facts = read_checkpoint(path)
    assert facts.scanned and not facts.problems and all(t.scanned and not t.nan for t in facts.tensors)
    assert facts.numpy_used is use_numpy


if __name__ == "__main__":
    main()
