"""The incremental evaluation: the same verdict as the CLI, at a per-log cost that does not
grow with the run's history (counted in the cost model's units, and timed)."""

from __future__ import annotations

import math
import time

from trainproof_lsp.core.config import Config
from trainproof_lsp.judge.engine import judge_run
from trainproof_lsp.guardian.incremental import IncrementalJudge, LiveRun, Schedule
from trainproof_lsp.output.render import report_json


def healthy(i: int) -> float:
    return 0.8 + 3.0 / math.sqrt(1 + i / 10) * (1 + 0.02 * ((i * 7) % 5 - 2))


def feed(judge: IncrementalJudge, live: LiveRun, values, start: int = 0):
    reports = []
    for i, v in enumerate(values, start):
        r = live.new_record()
        live.add("loss", "loss", i + 1, v, r)
        live.add("lr", "learning_rate", i + 1, 1e-3, r)
        reports.append(judge.update(live))
    return reports


def test_every_published_report_is_the_cli_report_of_the_log_so_far():
    live = LiveRun(path="run", format="live-test")
    judge = IncrementalJudge(Config(), Schedule(tail_window=64))
    values = [healthy(i) for i in range(400)] + [float("nan")] * 3 + [healthy(400)] * 20
    for i, v in enumerate(values):
        r = live.new_record()
        live.add("loss", "loss", i + 1, v, r)
        got = judge.update(live)
        if got is not None:
            assert report_json(got) == report_json(judge_run(live.snapshot(), Config()))


def test_a_nan_far_into_the_run_is_published_at_the_log_that_shows_it():
    live = LiveRun(path="run", format="live-test")
    judge = IncrementalJudge(Config(), Schedule(tail_window=128, budget=4.0))
    feed(judge, live, [healthy(i) for i in range(5000)])
    assert judge.report is not None and judge.report.verdict.value == "PASS"
    got = feed(judge, live, [float("nan")], start=5000)[0]
    assert got is not None, "the tail saw TP-NAN appear: a full evaluation is triggered at once"
    assert "TP-NAN" in {f.id for f in got.findings} and got.verdict.value == "FAIL"
    assert judge.stats.triggered >= 1


def test_what_only_the_whole_history_shows_is_caught_by_the_scheduled_evaluation():
    # A run that never improves but is noisy: each tail window looks like any plateau
    # (TP-DEAD-RUN stands down on a late-starting window); the whole history does not.
    live = LiveRun(path="run", format="live-test")
    judge = IncrementalJudge(Config(), Schedule(tail_window=32, budget=4.0))
    values = [4.16 * (1 + 0.03 * ((i * 7) % 5 - 2)) for i in range(400)]
    feed(judge, live, values)
    assert "TP-DEAD-RUN" in {f.id for f in judge.report.findings}


def test_per_log_cost_does_not_grow_with_history_length():
    w, budget, n = 128, 4.0, 12_000
    live = LiveRun(path="run", format="live-test")
    judge = IncrementalJudge(Config(), Schedule(tail_window=w, budget=budget))
    times = []
    for i in range(n):
        t = time.perf_counter()
        r = live.new_record()
        live.add("loss", "loss", i + 1, healthy(i), r)
        live.add("lr", "learning_rate", i + 1, 1e-3, r)
        judge.update(live)
        times.append(time.perf_counter() - t)
    s = judge.stats
    # The cost model: every full evaluation together <= budget*N + N (+ the first W logs,
    # judged whole); each tail evaluation touches at most W points per series.
    assert s.full_records <= budget * n + n + w * w
    assert s.tail_points <= s.tail_evals * w * 2
    # Full evaluations follow a geometric schedule: O(log N) of them, not O(N).
    assert s.full_evals - w <= math.log(n / w) / math.log(1 + 1 / budget) + 2
    # Timed: a log late in the run costs no more than one early in it. Each side is the
    # cheapest of ten blocks of 300 consecutive logs (each block carries its share of
    # full evaluations), so another process stealing the CPU for a moment cannot fail it.
    def cheapest_block(logs: list[float]) -> float:
        return min(sum(logs[i:i + 300]) / 300 for i in range(0, 3_000, 300))

    early = cheapest_block(times[w + 1_000: w + 4_000])
    late = cheapest_block(times[-3_000:])
    assert late < 2 * early, (early, late)
