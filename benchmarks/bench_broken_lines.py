"""What a broken line costs, and what a line costs in memory.

    python benchmarks/bench_broken_lines.py [--lines 1000000] [--broken 1000] [--repeat 2]

1. Throughput: a chat dataset (`{"messages": [...]}` rows, ~550 bytes each: 1M rows are ~550 MB) is written
   twice into a temporary folder: clean, and with `--broken` rows malformed at random
   lines (cut short, a NaN, text after the value, not an object, two objects on a
   line, in turn). Both are scanned by the dataset reader (`scan_dataset`) in the
   same run, each in its own child process pinned to one core; the best CPU time of
   `--repeat` runs is reported. A broken line should cost about what a clean one does:
   the broken file's throughput within 15% of the clean file's.
2. Memory: `preflight` (`judge_dataset`) on text files of 100k and 1M lines, each in a
   child process; peak RSS (ru_maxrss, or the kernel's VmHWM where
   ru_maxrss would count the parent's) and its growth per line between the two sizes
   (budget: ~20 bytes per line: two 8-byte row hashes and nothing per row besides).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The rows are made of the same words as bench_preflight.py's (a sibling script: this
# folder is on sys.path when a benchmark is run as a script).
from bench_preflight import _sentence

ROOT = Path(__file__).resolve().parents[1]

MAX_SLOWDOWN = 0.15  # broken file's throughput may be at most this much below the clean one's
MAX_BYTES_PER_LINE = 20.0  # peak RSS growth per line between 100k and 1M lines


def chat_rows(lines: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    rows = []
    for i in range(lines):
        msgs = [{"role": "system", "content": "You are a helpful assistant."}] if i % 3 == 0 else []
        msgs += [{"role": "user", "content": f"{_sentence(rng, 14, 26)} (#{i})"},
                 {"role": "assistant", "content": _sentence(rng, 64, 86)}]
        rows.append(json.dumps({"messages": msgs}))
    return rows


# Ways a line is broken, taken in turn: cut short (the line ends inside a value), a NaN
# (not JSON), text after the value, a value that is not an object, two objects on a line.
BREAKS = ("cut", "nan", "trailing", "not-object", "two-values")


def _break(row: str, k: int) -> str:
    how = BREAKS[k % len(BREAKS)]
    if how == "cut":
        return row[:-7]
    if how == "nan":
        return row.replace('"content": "', '"content": NaN, "x": "', 1)
    if how == "trailing":
        return row + " x"
    if how == "not-object":
        return "[" + row + "]"
    return row + row


def write_pair(folder: Path, lines: int, broken: int) -> tuple[Path, Path, list[int]]:
    rows = chat_rows(lines)
    clean = folder / "chat_clean.jsonl"
    clean.write_text("\n".join(rows) + "\n")
    bad_lines = sorted(random.Random(11).sample(range(lines), broken))
    for k, i in enumerate(bad_lines):
        rows[i] = _break(rows[i], k)
    bad = folder / "chat_broken.jsonl"
    bad.write_text("\n".join(rows) + "\n")
    return clean, bad, bad_lines


def text_file(path: Path, lines: int) -> None:
    rng = random.Random(3)
    with path.open("w") as out:
        for i in range(lines):
            out.write(json.dumps({"text": f"{_sentence(rng, 20, 40)} #{i}"}) + "\n")


def _child(what: str, path: str) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[-1]})
    import resource

    sys.path.insert(0, str(ROOT))
    from trainproof_lsp.core.config import Config
    from trainproof_lsp.judge.preflight import judge_dataset
    from trainproof_lsp.readers.dataset import scan_dataset

    try:
        import numpy  # noqa: F401  (the duplicate search uses it on large files)
    except ImportError:
        pass
    t0 = time.process_time()
    if what == "scan":
        scan = scan_dataset(path)
        out = {"problems": len(scan.problems), "malformed_lines": [p.line for p in scan.problems
                                                                   if p.kind == "malformed"]}
    else:
        report = judge_dataset(path, Config())
        out = {"findings": len(report.findings)}
    out["cpu_s"] = time.process_time() - t0
    out["rss_kib"] = _peak_rss_kib(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    print(json.dumps(out))


def _peak_rss_kib(ru_maxrss: int) -> int:
    """This process's peak RSS. ru_maxrss survives exec, so a child started by a big
    parent would report the parent's peak; the kernel's VmHWM is this image's own."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return ru_maxrss
    m = re.search(r"^VmHWM:\s+(\d+) kB", status, re.M)
    return int(m.group(1)) if m else ru_maxrss


def run_child(what: str, path: Path) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--child", what, str(path)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr.strip()[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def broken_line_cost(folder: Path, lines: int, broken: int, repeat: int) -> float:
    """Clean vs broken throughput in one run; returns the ratio broken/clean."""
    clean, bad, bad_lines = write_pair(folder, lines, broken)
    best = {}
    for name, path in (("clean", clean), ("broken", bad)):
        runs = [run_child("scan", path) for _ in range(repeat)]
        r = min(runs, key=lambda r: r["cpu_s"])
        if name == "broken":
            assert r["malformed_lines"] == bad_lines, "the broken lines were not all found, or found elsewhere"
        size = path.stat().st_size
        best[name] = size / 1e6 / r["cpu_s"]
        print(f"{name:<7} {lines:,} chat rows, {size / 1e6:.1f} MB: {r['cpu_s']:.2f} s CPU, "
              f"{best[name]:.1f} MB/s, {r['problems']} problem(s)")
    ratio = best["broken"] / best["clean"]
    extra_us = (1 / best["broken"] - 1 / best["clean"]) * bad.stat().st_size / broken
    print(f"broken/clean throughput: {ratio:.3f} (budget >= {1 - MAX_SLOWDOWN:.2f}): "
          f"{'met' if ratio >= 1 - MAX_SLOWDOWN else 'NOT met'}; "
          f"{broken} broken lines cost {extra_us:.0f} us each beyond a clean line")
    return ratio


def memory_per_line(folder: Path, sizes: tuple[int, int]) -> float:
    rss = {}
    for n in sizes:
        path = folder / f"text_{n}.jsonl"
        text_file(path, n)
        r = run_child("preflight", path)
        rss[n] = r["rss_kib"] * 1024
        print(f"preflight {n:>9,} lines ({path.stat().st_size / 1e6:.1f} MB): peak RSS {rss[n] / 2**20:.1f} MiB, "
              f"{r['cpu_s']:.2f} s CPU")
        path.unlink()
    lo, hi = sizes
    growth = (rss[hi] - rss[lo]) / (hi - lo)
    print(f"peak RSS growth: {growth:.1f} bytes/line between {lo:,} and {hi:,} lines "
          f"(budget <= ~{MAX_BYTES_PER_LINE:.0f}): {'met' if growth <= MAX_BYTES_PER_LINE * 1.1 else 'NOT met'}")
    return growth


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--broken", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--memory-lines", type=int, nargs=2, default=(100_000, 1_000_000))
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(*args.child)
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="tp-bench-broken-"))
    try:
        print(f"python {sys.version.split()[0]}, one core pinned per child, best of {args.repeat} (CPU time)")
        broken_line_cost(tmp, args.lines, args.broken, args.repeat)
        memory_per_line(tmp, tuple(args.memory_lines))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
