"""Read + judge a 200k-entry trainer_state.json, side by side with a plain json.load.

    python benchmarks/bench_trainer_state.py [--entries 200000] [--repeat 5]

Generates a trainer_state.json the way HF writes it (json.dumps(indent=2,
sort_keys=True)): train entries every logging step, an eval entry every 50, a final
summary entry; the loss falls like 1/log(step) with +/-15% batch noise. Times (best of --repeat, same process, same file):
  json.load           the peer: values only, no positions, no rules
  read (positions)    trainproof_lsp's reader: values + each entry's line range
  read + judge        reader + every single-run rule (what `epoch` does)
Target: read + judge <= 1.5x json.load.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainproof_lsp.core.config import Config  # noqa: E402
from trainproof_lsp.judge.engine import judge_run  # noqa: E402
from trainproof_lsp.readers.trainer_state import read_trainer_state  # noqa: E402


def make_state(entries: int, seed: int = 0) -> dict:
    rng = random.Random(seed)
    log = []
    for i in range(1, entries + 1):
        step = i * 5
        if i % 50 == 0:
            log.append({"epoch": step / 1000, "eval_loss": 2.0 / math.log(i + 2) + 0.5,
                        "eval_runtime": 3.2, "eval_samples_per_second": 40.1,
                        "eval_steps_per_second": 5.0, "step": step})
        log.append({"epoch": step / 1000, "grad_norm": 0.5 + rng.random(),
                    "learning_rate": 2e-4 * (1 - i / (entries + 1)),
                    "loss": (2.5 / math.log(i + 2) + 0.3) * (1 + 0.15 * rng.uniform(-1, 1)),
                    "step": step})
    log.append({"epoch": entries * 5 / 1000, "step": entries * 5, "total_flos": 1.2e17,
                "train_loss": 1.1, "train_runtime": 36000.0, "train_samples_per_second": 7.1,
                "train_steps_per_second": 0.9})
    return {"best_global_step": None, "best_metric": None, "best_model_checkpoint": None,
            "epoch": entries * 5 / 1000, "eval_steps": 250, "global_step": entries * 5,
            "is_hyper_param_search": False, "is_local_process_zero": True,
            "is_world_process_zero": True, "log_history": log, "logging_steps": 5,
            "max_steps": entries * 5, "num_input_tokens_seen": 0, "num_train_epochs": 1,
            "save_steps": 500, "stateful_callbacks": {}, "total_flos": 1.2e17,
            "train_batch_size": 8, "trial_name": None, "trial_params": None}


def best_of(repeat: int, fn) -> tuple[float, object]:
    best, result = math.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trainer_state.json"
        path.write_text(json.dumps(make_state(args.entries), indent=2, sort_keys=True) + "\n")
        size = path.stat().st_size
        n_entries = len(json.loads(path.read_bytes())["log_history"])

        def peer():
            with path.open("rb") as fh:
                return json.load(fh)

        t_json, _ = best_of(args.repeat, peer)
        t_read, run = best_of(args.repeat, lambda: read_trainer_state(path))
        t_all, report = best_of(args.repeat, lambda: judge_run(read_trainer_state(path), Config()))
        spans_ok = run.record_spans.span(n_entries - 1) is not None
        print(f"file: {n_entries} log entries, {size / 1e6:.1f} MB (positions for every entry: {spans_ok})")
        print(f"json.load (peer)        {t_json * 1000:8.1f} ms")
        print(f"read with positions     {t_read * 1000:8.1f} ms   {t_read / t_json:5.2f}x json.load")
        print(f"read + judge (all rules){t_all * 1000:8.1f} ms   {t_all / t_json:5.2f}x json.load"
              f"   (target <= 1.50x; verdict {report.verdict.value})")
        return 0 if t_all / t_json <= 1.5 else 1


if __name__ == "__main__":
    raise SystemExit(main())
