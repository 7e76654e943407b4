"""Benchmark trainproof_lsp.readers.tfevents against TensorBoard's EventAccumulator.

Generates an event file of N scalar events (default 1,000,000) in a temp dir,
with this package's encoder and TFRecord framing (byte-identical to what
TensorBoard's writer produces; tests/test_tfevents.py checks that), then in the
same run:

1. checks exact agreement with EventAccumulator on a prefix file, then times
   EventAccumulator(size_guidance scalars=0, tensors=0).Reload() on the whole
   file and checks exact agreement on every point it returns;
2. times this reader without CRC, and with every data CRC verified (reporting
   which CRC implementation was used);
3. times the published ``trainproof`` package's ``trainproof.tfevents.read_scalars``
   if it is importable (``pip install trainproof==0.22.0``).

Prints events/s for each and the ratios against the targets (>= 10x
EventAccumulator without CRC, >= 6x with CRC in C, >= 2x trainproof).

    python benchmarks/bench_tfevents.py [--events N] [--tags K] [--style simple|tensor]
                                        [--repeat R] [--skip-ea] [--keep DIR] [--strict]

Exit status: 1 if any reader disagrees with EventAccumulator; 2 with --strict
when a speed target is missed; else 0.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from trainproof_lsp.readers import tfevents  # noqa: E402

TAGS = [
    "train/loss",
    "train/lr",
    "train/grad_norm",
    "train/tokens_per_s",
    "eval/loss",
    "eval/acc",
    "sys/gpu_mem",
    "epoch",
]


# ---------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------


def generate(path: Path, n_events: int, n_tags: int, style: str) -> int:
    """Write file_version + n_events scalar records; return the file size."""
    tags = (TAGS * (n_tags // len(TAGS) + 1))[:n_tags]
    if n_tags > len(TAGS):
        tags = [f"{t}/{i}" for i, t in enumerate(tags)]
    encode = tfevents.encode_scalar_event if style == "simple" else tfevents.encode_tensor_scalar_event
    frame = tfevents.frame_record
    wall0 = 1.7e9
    with open(path, "wb") as f:
        f.write(frame(tfevents.encode_file_version_event(wall0)))
        chunk: list[bytes] = []
        for i in range(n_events):
            step = i // n_tags
            # float32-exact, varied values: a decaying curve with some noise
            value = struct.unpack("<f", struct.pack("<f", math.exp(-step * 1e-5) + ((i * 2654435761) % 1000) * 1e-4))[0]
            chunk.append(frame(encode(tags[i % n_tags], step, value, wall0 + i * 0.01)))
            if len(chunk) >= 65536:
                f.write(b"".join(chunk))
                chunk.clear()
        f.write(b"".join(chunk))
    return path.stat().st_size


def write_prefix(src: Path, dst: Path, records: int) -> None:
    data = src.read_bytes()
    pos = 0
    for _ in range(records):
        (n,) = struct.unpack_from("<Q", data, pos)
        pos += 16 + n
    dst.write_bytes(data[:pos])


# ---------------------------------------------------------------------------
# Readers
# ---------------------------------------------------------------------------

Points = dict[str, list[tuple[int, float, float]]]


def ea_points(path: Path) -> tuple[Points, float]:
    """Load with EventAccumulator; return (points, Reload seconds)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    gc.collect()
    t0 = time.perf_counter()
    ea = EventAccumulator(str(path), size_guidance={"scalars": 0, "tensors": 0})
    ea.Reload()
    dt = time.perf_counter() - t0
    out: Points = {}
    for tag in ea.Tags()["scalars"]:
        out[tag] = [(e.step, e.wall_time, e.value) for e in ea.Scalars(tag)]
    for tag in ea.Tags()["tensors"]:
        md = ea.summary_metadata.get(tag)
        if md is not None and md.plugin_data.plugin_name == "scalars":
            out[tag] = [(e.step, e.wall_time, float(tensor_util.make_ndarray(e.tensor_proto))) for e in ea.Tensors(tag)]
    return out, dt


def our_points(scan: tfevents.EventFileScan) -> Points:
    return {t: list(zip(s.steps, s.wall_times, s.values, strict=True)) for t, s in scan.scalars.items()}


def best_of(repeat: int, fn: Callable[[], Any]) -> tuple[Any, float]:
    """Run fn `repeat` times; return the last result and the best wall time."""
    best = math.inf
    result: Any = None
    for _ in range(max(1, repeat)):
        result = None  # drop the previous result before timing the next run
        gc.collect()
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return result, best


def same(a: Points, b: Points) -> bool:
    if sorted(a) != sorted(b):
        return False
    return all(a[t] == b[t] for t in a)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000, help="scalar events to generate (default 1,000,000)")
    ap.add_argument("--tags", type=int, default=8, help="distinct tags, logged round-robin (default 8)")
    ap.add_argument("--style", choices=("simple", "tensor"), default="simple",
                    help="simple_value events (torch/tensorboardX) or tensor scalars (tensorboard Writer/Keras)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per fast reader, best taken (default 3)")
    ap.add_argument("--prefix", type=int, default=5000, help="records in the EventAccumulator prefix check")
    ap.add_argument("--skip-ea", action="store_true", help="do not run EventAccumulator")
    ap.add_argument("--keep", metavar="DIR", help="write the event file into DIR and keep it")
    ap.add_argument("--strict", action="store_true", help="exit 2 when a speed target is missed")
    args = ap.parse_args(argv)

    tmp = None
    if args.keep:
        folder = Path(args.keep)
        folder.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="bench_tfevents_")
        folder = Path(tmp.name)
    try:
        return run(args, folder)
    finally:
        if tmp is not None:
            tmp.cleanup()


def run(args: argparse.Namespace, folder: Path) -> int:
    n = args.events
    path = folder / "events.out.tfevents.1700000000.bench"
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus; style={args.style}, tags={args.tags}")
    t0 = time.perf_counter()
    size = generate(path, n, args.tags, args.style)
    print(f"generated {n:,} events ({size / 1e6:.1f} MB) in {time.perf_counter() - t0:.1f}s -> {path}")

    ok = True
    rows: list[tuple[str, float]] = []
    ea_dt: float | None = None

    crc_impl = tfevents.crc_implementation()  # import the CRC extension before any timing
    scan, dt_nocrc = best_of(args.repeat, lambda: tfevents.read_event_file(path))
    assert scan.problems == () and scan.records == n + 1, scan.problems
    got = our_points(scan)
    assert sum(len(v) for v in got.values()) == n
    rows.append(("trainproof_lsp (no CRC)", dt_nocrc))

    scan_crc, dt_crc = best_of(args.repeat, lambda: tfevents.read_event_file(path, verify_crc=True))
    assert scan_crc.problems == () and our_points(scan_crc) == got
    rows.append((f"trainproof_lsp (CRC, {crc_impl})", dt_crc))

    tp_dt: float | None = None
    try:
        from trainproof.tfevents import read_scalars  # the published package's reader
    except ImportError:
        print("trainproof not importable: skipping (pip install trainproof==0.22.0)")
    else:
        tp, tp_dt = best_of(args.repeat, lambda: read_scalars(path))
        tp_points = {t: [(s, w, v) for s, v, w in pts] for t, pts in tp.items()}
        agree = same(tp_points, got) if args.style == "simple" else sum(map(len, tp.values())) == n
        print(f"trainproof.tfevents.read_scalars agrees with us: {agree}")
        rows.append(("trainproof 0.22 read_scalars", tp_dt))

    if not args.skip_ea:
        try:
            from tensorboard.compat import tf
        except ImportError:
            print("tensorboard not importable: skipping EventAccumulator")
        else:
            prefix = folder / "events.out.tfevents.1700000000.prefix"
            write_prefix(path, prefix, min(args.prefix, n + 1))
            want, _ = ea_points(prefix)
            prefix_ok = same(our_points(tfevents.read_event_file(prefix, verify_crc=True)), want)
            verdict = "exact" if prefix_ok else "MISMATCH"
            print(f"EventAccumulator prefix check ({min(args.prefix, n + 1):,} records): {verdict}")
            ok &= prefix_ok
            reader = "TF stub, pure-Python CRC" if tf.__version__ == "stub" else f"TensorFlow {tf.__version__}"
            print(f"EventAccumulator on {n:,} events ({reader}), 1 run ...", flush=True)
            want, ea_dt = ea_points(path)
            full_ok = same(got, want)
            verdict = "exact" if full_ok else "MISMATCH"
            print(f"EventAccumulator full check ({sum(map(len, want.values())):,} points): {verdict}")
            ok &= full_ok
            rows.append(("EventAccumulator (Reload)", ea_dt))

    print()
    print(f"{'reader':40s} {'seconds':>9s} {'events/s':>12s}")
    for name, dt in rows:
        print(f"{name:40s} {dt:9.3f} {n / dt:12,.0f}")
    print(f"(fast readers: best of {args.repeat}; EventAccumulator: 1 run; all include reading the file)")
    print()

    targets_met = True

    def ratio(label: str, num: float, den: float | None, target: float | None) -> None:
        nonlocal targets_met
        if den is None:
            print(f"{label:52s}   n/a")
            return
        r = den / num
        if target is None:
            print(f"{label:52s} {r:6.1f}x  (no target: pure-Python CRC)")
            return
        hit = r >= target
        targets_met &= hit
        print(f"{label:52s} {r:6.1f}x  (target >= {target:g}x: {'met' if hit else 'MISSED'})")

    ratio("speedup vs EventAccumulator, no CRC", dt_nocrc, ea_dt, 10)
    ratio(f"speedup vs EventAccumulator, CRC ({crc_impl})", dt_crc, ea_dt, 6 if crc_impl != "python" else None)
    ratio("speedup vs trainproof 0.22 (both no CRC)", dt_nocrc, tp_dt, 2)
    rate = n / dt_nocrc
    targets_met &= rate > 700_000
    print(f"events/s without CRC: {rate:,.0f} (target > 700,000: {'met' if rate > 700_000 else 'MISSED'})")
    # Wrong results always fail; missed speed targets only with --strict (timings are noisy).
    if not ok:
        print("RESULT MISMATCH")
        return 1
    return 0 if targets_met or not args.strict else 2


if __name__ == "__main__":
    raise SystemExit(main())
