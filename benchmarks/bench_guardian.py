"""The live guardian's cost per log, against re-judging the whole history every log.

    python benchmarks/bench_guardian.py [N]      (default N = 100000 logged entries)

1. IncrementalJudge (guardian/incremental.py): N log entries (loss, learning rate, grad
   norm) appended one at a time, each followed by `update`. Prints the mean time per log
   in blocks at several history lengths, the slowest single log, and the work counters.
   Side by side, in the same run: one `judge_run` over the whole history at the same
   lengths — what a guardian without the schedule would pay on every log.
2. watch's JSONL tailer: a log grown in 200 appends; bytes read vs the file's size and
   the time per poll.
"""

from __future__ import annotations

import io
import json
import math
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainproof_lsp.core.config import Config
from trainproof_lsp.judge.engine import judge_run
from trainproof_lsp.guardian.incremental import IncrementalJudge, LiveRun, Schedule
from trainproof_lsp.guardian.watch import Watch, WatchOptions


def loss(i: int) -> float:
    return 0.8 + 3.0 / math.sqrt(1 + i / 10) * (1 + 0.02 * ((i * 7) % 5 - 2))


def bench_judge(n: int) -> None:
    schedule = Schedule()
    live = LiveRun(path="run", format="live-bench")
    judge = IncrementalJudge(Config(), schedule)
    times = []
    marks = [m for m in (1_000, 10_000, 100_000, 1_000_000) if m <= n]
    full_at: dict[int, float] = {}
    for i in range(n):
        t = time.perf_counter()
        r = live.new_record()
        live.add("loss", "loss", i + 1, loss(i), r)
        live.add("lr", "learning_rate", i + 1, 1e-3, r)
        live.add("grad_norm", "grad_norm", i + 1, 1.0 + 0.1 * ((i * 3) % 4), r)
        judge.update(live)
        times.append(time.perf_counter() - t)
        if i + 1 in marks:
            snap = live.snapshot()
            t = time.perf_counter()
            judge_run(snap, Config())
            full_at[i + 1] = time.perf_counter() - t
    print(f"incremental judge, {n} logs, tail_window={schedule.tail_window}, budget={schedule.budget}")
    # Mean over the logs from m/2 to m: each such range holds its share (about 3) of the
    # scheduled full evaluations, so this is the amortised cost at that history length.
    print(f"  {'history':>9}  {'mean/log over (m/2, m]':>24}  {'one full judge_run at m':>26}")
    for m in marks:
        block = times[m // 2:m]
        print(f"  {m:>9}  {sum(block) / len(block) * 1e6:>21.0f} us  {full_at[m] * 1e6:>23.0f} us")
    s = judge.stats
    print(f"  slowest single log: {max(times) * 1e3:.1f} ms; total {sum(times):.2f} s "
          f"({sum(times) / n * 1e6:.0f} us/log overall)")
    print(f"  full evaluations: {s.full_evals} ({s.triggered} triggered), {s.full_records} records judged "
          f"= {s.full_records / n:.2f}x the records; tail evaluations: {s.tail_evals}")


def bench_watch(lines: int = 50_000, appends: int = 200) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "metrics.jsonl"
        log.write_text("", encoding="utf-8")
        w = Watch(log, Config(), WatchOptions(), out=io.StringIO(), err=io.StringIO())
        per = lines // appends
        polls = []
        step = 0
        for _ in range(appends):
            with log.open("a", encoding="utf-8") as fh:
                for _ in range(per):
                    step += 1
                    fh.write(json.dumps({"step": step, "loss": round(loss(step), 6), "learning_rate": 1e-3}) + "\n")
            t = time.perf_counter()
            w.poll_once()
            polls.append(time.perf_counter() - t)
        tail = w.logs[str(log)].tailer
        size = log.stat().st_size
        print(f"watch, JSONL grown to {lines} lines ({size / 1e6:.1f} MB) in {appends} appends of {per} lines")
        print(f"  bytes read: {tail.offset} = file size {size} (each byte once)")
        print(f"  poll time: first {polls[0] * 1e3:.1f} ms, last {polls[-1] * 1e3:.1f} ms, "
              f"mean {sum(polls) / len(polls) * 1e3:.1f} ms ({per} new lines each)")


if __name__ == "__main__":
    bench_judge(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
    bench_watch()
