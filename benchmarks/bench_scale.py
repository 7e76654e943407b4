"""Scale: size -> time, peak RSS and throughput, beside the peers, in one run.

    python benchmarks/bench_scale.py [--only logs|datasets|jobs] [--quick] [--repeat N] [--pairs N]

Logs (`--only logs`): trainer_state.json of 20k/200k/1M entries and event files of
30k/300k/3M scalar events, beside the published `trainproof` and TensorBoard's
EventAccumulator; the code and its details are in bench_scale_logs.py.

Datasets (`--only datasets`, `dataset_*` below): JSONL files of 100k, 1M and 4M lines
(text and chat rows in blocks of 10,000 lines with faults injected, as in
bench_preflight.py; the 4M-line file is four copies of the 1M-line one with every row id
renumbered, so rows stay distinct). Each size is checked by `trainproof-lsp preflight
--jobs 1` and by the published `trainproof` preflight (`pip install trainproof==0.22.0`,
the `peers` extra), each in its own child process pinned to one core; peak RSS is the
child's own (VmHWM, or ru_maxrss).

Jobs (`--only jobs`): on the 1M-line file, `--jobs 2` against `--jobs 1` with two cores
allowed, in `--pairs` pairs run back to back, their JSON output compared byte for byte;
then the whole command (interpreter start and imports included) for both.
--quick: 20k/100k/200k lines (jobs: 100k), for a smoke test.

The machine's other load is printed with the figures (os.getloadavg): speed-ups measured
on busy cores understate what idle cores give.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

# --- datasets ----------------------------------------------------------------------------

DATASET_SIZES = (100_000, 1_000_000, 4_000_000)
DATASET_QUICK_SIZES = (20_000, 100_000, 200_000)
# Targets (issue: scale). Peak RSS may grow by about this many bytes per line (two 8-byte
# hashes a line, and a little more); two worker processes should be this much faster.
DATASET_RSS_BYTES_PER_LINE = 20.0
DATASET_MIN_JOBS_SPEEDUP = 1.6


def dataset_generate(folder: Path, sizes: tuple[int, ...]) -> dict[int, Path]:
    """One file per size. A size that is a multiple of a smaller one is made of copies of
    it (row ids renumbered per copy: `#` becomes `#<copy>.`), which is much faster than
    generating it row by row."""
    from bench_preflight import generate

    files: dict[int, Path] = {}
    generated: list[int] = []  # (a copy of copies would repeat ids: `#1.` twice is `#1.1.`)
    for n in sorted(sizes):
        path = folder / f"train_{n}.jsonl"
        base = next((m for m in sorted(generated, reverse=True) if n % m == 0 and m >= n // 8), None)
        if path.exists():  # (--data-dir: made by an earlier run)
            pass
        elif base is None:
            generate(path, n)
            generated.append(n)
        else:
            data = files[base].read_bytes()
            with path.open("wb") as out:
                for k in range(n // base):
                    out.write(data if k == 0 else data.replace(b"#", b"#%d." % k))
            del data  # (the children's peak RSS starts from this process's size at fork)
        files[n] = path
    return files


def dataset_child(contender: str, path: str, jobs: str, out: str, cores: str) -> None:
    """In a child process: one run, one JSON line on stdout (seconds, peak RSS). `cores`:
    "one" pins the process to one core (the size table), "all" leaves it the cores it has
    (--jobs 1 against --jobs 2: a single process may then move to whichever core is free,
    as a user's would)."""
    import resource

    cpus = sorted(os.sched_getaffinity(0))
    if cores == "one":
        os.sched_setaffinity(0, {cpus[-1]})
    # Imports happen before the clock starts, for every contender.
    if contender == "trainproof-lsp":
        sys.path.insert(0, str(ROOT))
        from trainproof_lsp.core.config import Config
        from trainproof_lsp.judge.parallel import run_preflight
        from trainproof_lsp.output.render import to_json

        try:
            import numpy  # noqa: F401  (the duplicate search uses it on large files)
        except ImportError:
            pass
    else:
        from trainproof.preflight import preflight
    result: dict = {}
    before = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    if contender == "trainproof-lsp":
        outcome = run_preflight([Path(path)], Config(), jobs=int(jobs))
        seconds = time.perf_counter() - t0
        text = to_json(outcome)
        Path(out).write_text(text)
        report = outcome.reports[0]
        result = {"verdict": report.verdict.value, "findings": len(report.findings),
                  "sha256": hashlib.sha256(text.encode()).hexdigest()}
    else:
        try:
            res = preflight(path)
            result = {"verdict": res.verdict, "findings": len(res.findings)}
        except Exception as e:  # the peer's failure is reported, not fatal
            result = {"error": f"{type(e).__name__}: {e}"}
        seconds = time.perf_counter() - t0
    own = _peak_rss_mib()
    after = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = [a.ru_utime + a.ru_stime - b.ru_utime - b.ru_stime for a, b in zip(after, before)]
    print(json.dumps({"seconds": seconds, "rss_mib": own, "worker_rss_mib": after[1].ru_maxrss / 1024,
                      "cpu_main": cpu[0], "cpu_workers": cpu[1], **result}))


def _peak_rss_mib() -> float:
    """This process's peak RSS. VmHWM where there is /proc: ru_maxrss also counts what the
    parent held when it forked this child (Linux keeps the pre-exec high-water mark)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def dataset_run(contender: str, path: Path, jobs: int, out: Path, cores: str = "one") -> dict:
    proc = subprocess.run([sys.executable, __file__, "--dataset-child", contender, str(path), str(jobs), str(out),
                           cores],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()
        return {"error": tail[-1] if tail else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _best(runs: list[dict]) -> dict | None:
    ok = [r for r in runs if "seconds" in r]
    if not ok:
        return None
    best = min(ok, key=lambda r: r["seconds"])
    return {**best, "median": statistics.median(r["seconds"] for r in ok),
            "rss_mib": max(r["rss_mib"] for r in ok), "worker_rss_mib": max(r["worker_rss_mib"] for r in ok),
            **{k: statistics.median(r.get(k, 0.0) for r in ok) for k in ("cpu_main", "cpu_workers")}}


def _autogroup() -> str:
    """Linux's autogroup scheduling shares the CPU between sessions, not processes: on a
    machine busy with other sessions, more worker processes get no more CPU."""
    try:
        on = Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() == "1"
    except OSError:
        return ""
    return "; sched autogroup on (CPU shared per session, not per process)" if on else ""


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min) on {len(os.sched_getaffinity(0))} core(s)"


def dataset_main(args: argparse.Namespace) -> int:
    sizes = DATASET_QUICK_SIZES if args.quick else DATASET_SIZES
    try:
        import trainproof  # noqa: F401
        peer = True
    except ImportError:
        peer = False
    tmp = Path(tempfile.mkdtemp(prefix="tp-bench-scale-"))
    try:
        t = time.perf_counter()
        data_dir = Path(args.data_dir) if args.data_dir else tmp
        data_dir.mkdir(parents=True, exist_ok=True)
        # Generated in a child process, so that this one stays small (see _peak_rss_mib).
        subprocess.run([sys.executable, __file__, "--dataset-generate", str(data_dir),
                        *[str(n) for n in sizes]], check=True)
        files = {n: data_dir / f"train_{n}.jsonl" for n in sizes}
        print(f"## datasets (preflight): {', '.join(f'{n:,}' for n in sizes)} lines; "
              f"generated in {time.perf_counter() - t:.0f} s; python {sys.version.split()[0]}; "
              f"best of {args.repeat}")
        print(_load())
        print(f"{'lines':>10} {'MB':>8} {'contender':<16} {'best s':>7} {'median s':>9} {'MB/s':>7} "
              f"{'peak RSS MiB':>13}  notes")
        rows: dict[tuple[int, str], dict] = {}
        for n, path in files.items():
            size = path.stat().st_size
            for c in ["trainproof-lsp"] + (["trainproof"] if peer else []):
                runs = [dataset_run(c, path, 1, tmp / f"out_{n}.json") for _ in range(args.repeat)]
                best = _best(runs)
                if best is None:
                    print(f"{n:>10,} {size / 1e6:>8.1f} {c:<16} {'-':>7} {'-':>9} {'-':>7} {'-':>13}  "
                          f"{runs[0].get('error')}")
                    continue
                rows[n, c] = best
                note = best.get("error") or f"{best['verdict']}, {best['findings']} findings"
                print(f"{n:>10,} {size / 1e6:>8.1f} {c:<16} {best['seconds']:>7.2f} {best['median']:>9.2f} "
                      f"{size / 1e6 / best['seconds']:>7.1f} {best['rss_mib']:>13.1f}  {note}")
        small, big = min(files), max(files)
        verdicts = []
        for c in ("trainproof-lsp", "trainproof"):
            if (small, c) in rows and (big, c) in rows:
                grow = (rows[big, c]["rss_mib"] - rows[small, c]["rss_mib"]) * 2**20 / (big - small)
                verdicts.append(f"{c}: peak RSS growth {small:,} -> {big:,} lines: {grow:.1f} bytes/line"
                                + (f" (target <= ~{DATASET_RSS_BYTES_PER_LINE:.0f}): "
                                   f"{'met' if grow <= DATASET_RSS_BYTES_PER_LINE * 1.05 else 'NOT met'}"
                                   if c == "trainproof-lsp" else ""))
        for n in files:
            if (n, "trainproof") in rows and (n, "trainproof-lsp") in rows:
                verdicts.append(f"{n:,} lines: {rows[n, 'trainproof']['seconds'] / rows[n, 'trainproof-lsp']['seconds']:.1f}x "
                                f"the speed of trainproof; trainproof's peak RSS is "
                                f"{rows[n, 'trainproof']['rss_mib'] / rows[n, 'trainproof-lsp']['rss_mib']:.1f}x ours")
        print()
        for v in verdicts:
            print(v)
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _cli_seconds(path: Path, jobs: int) -> float:
    """The whole `trainproof-lsp preflight --jobs N --json` process, interpreter start and
    imports included (the figure a user waits for)."""
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "trainproof_lsp", "preflight", str(path), "--jobs", str(jobs),
                           "--json"], cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if proc.returncode not in (0, 1):  # 1: the file's faults (FAIL), as intended
        tail = proc.stderr.strip().splitlines()
        raise SystemExit(f"preflight --jobs {jobs} exited {proc.returncode}: {tail[-1] if tail else ''}")
    return seconds


def jobs_main(args: argparse.Namespace) -> int:
    """`--jobs 2` against `--jobs 1` on the 1M-line file (`--quick`: 100k), in pairs run
    one after the other, so that a burst of other load hits both."""
    n = DATASET_QUICK_SIZES[1] if args.quick else DATASET_SIZES[1]
    tmp = Path(tempfile.mkdtemp(prefix="tp-bench-jobs-"))
    try:
        data_dir = Path(args.data_dir) if args.data_dir else tmp
        data_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, __file__, "--dataset-generate", str(data_dir), str(n)], check=True)
        path = data_dir / f"train_{n}.jsonl"
        size = path.stat().st_size
        print(f"## --jobs 2 vs --jobs 1 on {n:,} lines ({size / 1e6:.0f} MB), two cores allowed, "
              f"{args.pairs} pairs; {_load()}{_autogroup()}")
        by_jobs: dict[int, list[dict]] = {1: [], 2: []}
        ratios: list[float] = []
        for _ in range(args.pairs):
            pair = {j: dataset_run("trainproof-lsp", path, j, tmp / f"jobs{j}.json", "all") for j in (1, 2)}
            for j, r in pair.items():
                by_jobs[j].append(r)
            if "seconds" in pair[1] and "seconds" in pair[2]:
                ratios.append(pair[1]["seconds"] / pair[2]["seconds"])
        best = {j: _best(by_jobs[j]) for j in (1, 2)}
        for j in (1, 2):
            b = best[j]
            if b is None:
                print(f"--jobs {j}: {by_jobs[j][0].get('error')}")
                continue
            print(f"--jobs {j}: best {b['seconds']:.2f} s, median {b['median']:.2f} s, "
                  f"{size / 1e6 / b['seconds']:.0f} MB/s, peak RSS {b['rss_mib']:.0f} MiB"
                  + (f" (+ largest worker {b['worker_rss_mib']:.0f} MiB)" if j > 1 else "")
                  + f", CPU (median) {b['cpu_main']:.2f} s" + (f" + workers {b['cpu_workers']:.2f} s" if j > 1 else "")
                  + ", all runs: " + ", ".join(f"{r['seconds']:.2f}" for r in by_jobs[j] if "seconds" in r) + " s")
        b1, b2 = best[1], best[2]
        if b1 is None or b2 is None:
            return 1
        x = b1["seconds"] / b2["seconds"]
        same = {r.get("sha256") for j in (1, 2) for r in by_jobs[j]} - {None}
        print(f"per-pair speed-ups: {', '.join(f'{r:.2f}' for r in ratios)}")
        # The whole command, interpreter start and imports included (serial in both).
        cli: dict[int, list[float]] = {1: [], 2: []}
        for _ in range(args.pairs):
            for j in (1, 2):
                cli[j].append(_cli_seconds(path, j))
        print()
        print(f"--jobs 2 speed-up {x:.2f}x best, {b1['median'] / b2['median']:.2f}x median, "
              f"{statistics.median(ratios):.2f}x median of pairs (target >= {DATASET_MIN_JOBS_SPEEDUP}x on 2 idle "
              f"cores, best against best): {'met' if x >= DATASET_MIN_JOBS_SPEEDUP else 'NOT met'}; {_load()}")
        # What two idle cores would give, from CPU time rather than wall time: the main
        # process's own work plus half the workers' (the ranges are spread evenly). An
        # estimate, printed as one: CPU time on a shared host also swings with other load.
        print(f"--jobs 2 estimate from CPU time (median; main + workers/2): "
              f"{b1['cpu_main'] / (b2['cpu_main'] + b2['cpu_workers'] / 2):.2f}x (not a measurement)")
        print(f"whole command (`python -m trainproof_lsp preflight --jobs N`, start-up included): "
              f"{min(cli[1]):.2f} s vs {min(cli[2]):.2f} s best, {min(cli[1]) / min(cli[2]):.2f}x; medians "
              f"{statistics.median(cli[1]):.2f} s vs {statistics.median(cli[2]):.2f} s")
        print(f"JSON output of --jobs 1 and --jobs 2: {'identical' if len(same) == 1 else 'DIFFERENT'} "
              f"({len(by_jobs[1]) + len(by_jobs[2])} runs, sha256 {min(same)[:16]}...)")
        return 0 if len(same) == 1 else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# --- main --------------------------------------------------------------------------------

def logs_main(args: argparse.Namespace) -> int:
    import bench_scale_logs  # beside this file (the script's folder is on sys.path)

    argv = ["--quick"] if args.quick else []
    if args.data_dir:
        argv += ["--keep", str(Path(args.data_dir) / "logs")]
    return bench_scale_logs.main(argv)


PARTS = {"logs": logs_main, "datasets": dataset_main, "jobs": jobs_main}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=sorted(PARTS), action="append",
                    help="run only this part (repeatable; default: all)")
    ap.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke test")
    ap.add_argument("--repeat", type=int, default=2, help="runs per contender and size (best and median reported)")
    ap.add_argument("--pairs", type=int, default=5, help="--jobs 1 / --jobs 2 pairs of runs (part `jobs`)")
    ap.add_argument("--data-dir", metavar="DIR",
                    help="keep the generated datasets in DIR and reuse them next time (default: a temporary folder)")
    ap.add_argument("--dataset-child", nargs=5, help=argparse.SUPPRESS)
    ap.add_argument("--dataset-generate", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.dataset_child:
        dataset_child(*args.dataset_child)
        return 0
    if args.dataset_generate:
        dataset_generate(Path(args.dataset_generate[0]), tuple(int(n) for n in args.dataset_generate[1:]))
        return 0
    rc = 0
    for name in args.only or sorted(PARTS):
        rc |= PARTS[name](args)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
