"""Scale, the logs part: time, peak memory and throughput as logs grow, beside the peers.

    python benchmarks/bench_scale.py --only logs [--quick]     (with the datasets part: no --only)
    python benchmarks/bench_scale_logs.py [--quick] [--keep DIR]

Logs (the `logs_*` functions):
  trainer_state.json with 20k / 200k / 1M log entries (HF's layout: json.dumps(indent=2,
  sort_keys=True), train entries every step, an eval entry every 50), judged by
  `trainproof-lsp doctor` and by the published `trainproof doctor --json`
  (`pip install trainproof==0.22.0`; skipped when not importable);
  a TensorBoard event file with 30k / 300k / 3M scalar events (8 tags, round-robin,
  this package's own encoder), judged by `trainproof-lsp doctor` and loaded by
  TensorBoard's `EventAccumulator(size_guidance scalars=0).Reload()` (skipped without
  tensorboard).

Every measurement runs in a fresh child process that reports its own CPU time and peak
RSS (`getrusage(RUSAGE_SELF).ru_maxrss`); the wall time is the child's whole life,
interpreter start and imports included. Ratios are peer / ours (above 1: we are faster
or smaller), on CPU time (stable on a shared machine) and on wall time.
Targets: 1M-entry trainer_state.json <= 400 MiB peak; 3M-event tfevents <= 250 MiB and
>= 6x faster than EventAccumulator. --quick runs the smallest size of each (a smoke test).

Exit status: 0; 2 when a target is missed at a size that has one.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

MIB = 1024 * 1024

# --- one measurement, in a child process ------------------------------------------------

# The child runs one job and prints one JSON line: its CPU seconds and peak RSS (KiB on
# Linux). Output of the job itself goes to /dev/null.
_CHILD = r"""
import json, os, resource, sys, time
sys.path.insert(0, {root!r})
kind, path = sys.argv[1], sys.argv[2]
devnull = open(os.devnull, "w")
real_stdout, sys.stdout = sys.stdout, devnull
t0 = time.perf_counter()
points = None
try:
    if kind == "lsp-doctor":
        from trainproof_lsp.cli import main
        main(["doctor", path])
    elif kind == "trainproof-doctor":
        sys.argv = ["trainproof", "doctor", path, "--json"]
        from trainproof.cli import main
        main()
    elif kind == "event-accumulator":
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
        ea = EventAccumulator(path, size_guidance={{"scalars": 0, "tensors": 0}})
        ea.Reload()
        points = sum(len(ea.Scalars(t)) for t in ea.Tags()["scalars"])
except SystemExit:
    pass
work = time.perf_counter() - t0
ru = resource.getrusage(resource.RUSAGE_SELF)
sys.stdout = real_stdout
print(json.dumps({{"cpu": ru.ru_utime + ru.ru_stime, "maxrss_kib": ru.ru_maxrss, "work": work,
                   "points": points}}))
"""


def measure(kind: str, path: Path) -> dict[str, Any]:
    """Run one job in a fresh interpreter: wall seconds (whole process), CPU seconds,
    peak RSS in MiB."""
    code = _CHILD.format(root=str(ROOT))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, kind, str(path)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONHASHSEED": "0"})
    wall = time.perf_counter() - t0
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"{kind} on {path} failed:\n{proc.stderr[-2000:]}")
    got = json.loads(lines[-1])
    return {"wall": wall, "cpu": got["cpu"], "rss": got["maxrss_kib"] / 1024, "points": got["points"]}


def importable(module: str) -> bool:
    code = f"import {module}"
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


# --- logs: generators -----------------------------------------------------------------

_TS_HEAD = {"best_global_step": None, "best_metric": None, "best_model_checkpoint": None}


def logs_trainer_state_entries(entries: int, seed: int = 0) -> Iterator[dict[str, Any]]:
    """The log_history of benchmarks/bench_trainer_state.make_state, one entry at a time."""
    rng = random.Random(seed)
    for i in range(1, entries + 1):
        step = i * 5
        if i % 50 == 0:
            yield {"epoch": step / 1000, "eval_loss": 2.0 / math.log(i + 2) + 0.5,
                   "eval_runtime": 3.2, "eval_samples_per_second": 40.1,
                   "eval_steps_per_second": 5.0, "step": step}
        yield {"epoch": step / 1000, "grad_norm": 0.5 + rng.random(),
               "learning_rate": 2e-4 * (1 - i / (entries + 1)),
               "loss": (2.5 / math.log(i + 2) + 0.3) * (1 + 0.15 * rng.uniform(-1, 1)),
               "step": step}
    yield {"epoch": entries * 5 / 1000, "step": entries * 5, "total_flos": 1.2e17,
           "train_loss": 1.1, "train_runtime": 36000.0, "train_samples_per_second": 7.1,
           "train_steps_per_second": 0.9}


def logs_write_trainer_state(path: Path, entries: int) -> int:
    """Write the same bytes as json.dumps(make_state(entries), indent=2, sort_keys=True),
    streamed (a 1M-entry state as one dict would take ~1.5 GB here). Returns the number of
    log entries."""
    tail = {"epoch": entries * 5 / 1000, "eval_steps": 250, "global_step": entries * 5,
            "is_hyper_param_search": False, "is_local_process_zero": True,
            "is_world_process_zero": True}
    after = {"logging_steps": 5, "max_steps": entries * 5, "num_input_tokens_seen": 0,
             "num_train_epochs": 1, "save_steps": 500, "stateful_callbacks": {}, "total_flos": 1.2e17,
             "train_batch_size": 8, "trial_name": None, "trial_params": None}

    def fields(d: dict[str, Any]) -> list[str]:
        return [f"  {json.dumps(k)}: {json.dumps(v, indent=2, sort_keys=True)}" for k, v in sorted(d.items())]

    n = 0
    with path.open("w", encoding="utf-8") as fh:
        fh.write("{\n" + ",\n".join(fields({**_TS_HEAD, **tail})) + ',\n  "log_history": [\n')
        first = True
        for entry in logs_trainer_state_entries(entries):
            text = json.dumps(entry, indent=2, sort_keys=True).replace("\n", "\n    ")
            fh.write(("    " if first else ",\n    ") + text)
            first = False
            n += 1
        fh.write("\n  ],\n" + ",\n".join(fields(after)) + "\n}\n")
    return n


def logs_write_tfevents(path: Path, events: int) -> int:
    """An event file of `events` scalar events (8 tags) with this package's encoder."""
    from bench_tfevents import generate

    generate(path, events, 8, "simple")
    return events


# --- logs: the table -------------------------------------------------------------------

def _row(label: str, n: int, unit: str, size: int, m: dict[str, Any]) -> str:
    return (f"  {label:28s} {m['wall']:8.2f} {m['cpu']:8.2f} {m['rss']:9.0f} "
            f"{n / m['cpu']:>12,.0f} {unit}/s {size / MIB / m['cpu']:7.1f} MiB/s")


def _ratio(peer: dict[str, Any] | None, ours: dict[str, Any], name: str) -> str:
    if peer is None:
        return f"  vs {name}: not run"
    return (f"  vs {name}: {peer['cpu'] / ours['cpu']:.1f}x faster (CPU), {peer['wall'] / ours['wall']:.1f}x (wall); "
            f"peak RSS {ours['rss']:.0f} vs {peer['rss']:.0f} MiB ({peer['rss'] / ours['rss']:.2f}x)")


def logs_run(folder: Path, quick: bool) -> bool:
    """Both log families at their three sizes; True when every target holds."""
    ok = True
    have_tp = importable("trainproof.cli")
    have_ea = importable("tensorboard.backend.event_processing.event_accumulator")
    header = f"  {'':28s} {'wall s':>8s} {'CPU s':>8s} {'peak MiB':>9s} {'throughput (per CPU s)':>30s}"

    def one_size(path: Path, write: Callable[[Path, int], object], n: int, what: str, unit: str,
                 peer_kind: str | None, peer_label: str) -> tuple[dict, dict | None]:
        """Write the input once (kept with --keep), then ours and the peer on it."""
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            write(path, n)
        size = path.stat().st_size
        print(f"{n:,} {what} ({size / 1e6:.1f} MB)")
        print(header)
        ours = measure("lsp-doctor", path)
        print(_row("trainproof-lsp doctor", n, unit, size, ours))
        peer = measure(peer_kind, path) if peer_kind is not None else None
        if peer is not None:
            print(_row(peer_label, n, unit, size, peer))
        return ours, peer

    print("trainer_state.json -> doctor")
    for entries in (20_000,) if quick else (20_000, 200_000, 1_000_000):
        ours, peer = one_size(folder / f"ts{entries}" / "trainer_state.json", logs_write_trainer_state, entries,
                              "train entries", "entries", "trainproof-doctor" if have_tp else None,
                              "trainproof 0.22 doctor")
        print(_ratio(peer, ours, "trainproof"))
        if entries == 1_000_000:
            hit = ours["rss"] <= 400
            ok &= hit
            print(f"  target: peak RSS <= 400 MiB: {ours['rss']:.0f} MiB, {'met' if hit else 'MISSED'}")
        print()

    print("TensorBoard event file -> doctor")
    for events in (30_000,) if quick else (30_000, 300_000, 3_000_000):
        ours, peer = one_size(folder / f"tb{events}" / "events.out.tfevents.1700000000.bench", logs_write_tfevents,
                              events, "scalar events", "events", "event-accumulator" if have_ea else None,
                              "EventAccumulator.Reload")
        if peer is not None:
            if peer["points"] != events:
                print(f"  (EventAccumulator returned {peer['points']:,} points)")
        print(_ratio(peer, ours, "EventAccumulator"))
        if events == 3_000_000:
            hit_rss = ours["rss"] <= 250
            speed = peer["cpu"] / ours["cpu"] if peer is not None else math.nan
            hit_speed = speed >= 6
            ok &= hit_rss and hit_speed
            print(f"  target: peak RSS <= 250 MiB: {ours['rss']:.0f} MiB, {'met' if hit_rss else 'MISSED'}; "
                  f">= 6x EventAccumulator: {speed:.1f}x (CPU), {'met' if hit_speed else 'MISSED'}")
        print()
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smallest size of each input only (smoke test)")
    ap.add_argument("--only", choices=("logs",), help="run one part only")
    ap.add_argument("--keep", metavar="DIR", help="generate inputs into DIR and keep them (reused if present)")
    args = ap.parse_args(argv)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    tmp = None
    if args.keep:
        folder = Path(args.keep)
        folder.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="bench_scale_")
        folder = Path(tmp.name)
    try:
        ok = True
        if args.only in (None, "logs"):
            ok &= logs_run(folder / "logs", args.quick)
        return 0 if ok else 2
    finally:
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    raise SystemExit(main())
