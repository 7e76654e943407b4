"""Dataset preflight speed and memory, side by side in one run (CONTRACTS.md §8).

    python benchmarks/bench_preflight.py [--lines 1000000] [--repeat 3] [--keep]

Generates a 1M-line (~260 MB) JSONL file of text and chat rows into a temporary folder
(deleted afterwards) with faults injected at known lines, then runs each contender in
its own subprocess pinned to one CPU core and reports wall time, MB/s and peak RSS
(ru_maxrss):

- trainproof-lsp: `judge_dataset` — syntax, schema (per format), exact and near
  duplicates, every finding with its line; the findings are checked against the
  injected lines;
- plain `json.loads` per line (parsing only, nothing checked, nothing kept);
- the published `trainproof` preflight (`trainproof.preflight.preflight(path)`), if
  installed (`pip install trainproof==0.22.0`).

The file holds text rows and chat rows in alternating blocks of 10,000 lines, the way
mixed files come about (datasets concatenated). A second, smaller figure is printed for
rows that alternate format line by line, the slowest layout, for transparency.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Budgets (CONTRACTS.md §8).
MIN_MB_S = 350.0
MIN_SPEEDUP = 6.0
MAX_RSS_MIB = 64.0

WORDS = ("the of and to in is was for on that with as by at from it this be are an or have had not but what all "
         "were when we there can been one do did will more no if out so said who up about into than them could "
         "time only new some these two may then first any like model loss step learning rate batch token data "
         "gradient epoch checkpoint training eval").split()


def _sentence(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi))).capitalize() + "."


def generate(path: Path, lines: int, *, block: int = 10_000, seed: int = 1) -> dict[int, str]:
    """Write the benchmark file; return {0-based line: expected rule id} of the faults."""
    rng = random.Random(seed)
    faults: dict[int, str] = {}
    fault_every = 10_007  # sparse, as in real data: one broken line every ~2.6 MB
    kinds = ["TP-PRE-MALFORMED-JSONL", "TP-PRE-EMPTY-TEXT", "TP-PRE-DUPLICATE-TEXT", "TP-PRE-NEAR-DUPLICATE",
             "TP-PRE-ASSISTANT-FIRST", "TP-PRE-EMPTY-ASSISTANT", "TP-PRE-NO-ASSISTANT", "TP-PRE-UNKNOWN-ROLE"]
    texts: list[str] = []  # early rows to copy (one original per copy)
    chats: list[str] = []
    copies = 0
    with path.open("w", encoding="utf-8") as out:
        for i in range(lines):
            chat = block and (i // block) % 2 == 1 if block else i % 2 == 1
            if chat:
                msgs = [{"role": "system", "content": "You are a helpful assistant."}] if i % 3 == 0 else []
                answer = _sentence(rng, 14, 30)
                if i % 5 == 0:  # multi-line answers, as in real chat data
                    answer += "\n\n" + _sentence(rng, 4, 10)
                msgs += [{"role": "user", "content": f"{_sentence(rng, 8, 18)} (#{i})"},
                         {"role": "assistant", "content": answer}]
                row = {"messages": msgs}
            else:
                row = {"text": f"{_sentence(rng, 40, 62)} #{i}"}
            if i and i % fault_every == 0:
                kind = kinds[(i // fault_every) % len(kinds)]
                if chat and kind in ("TP-PRE-EMPTY-TEXT",):
                    kind = "TP-PRE-EMPTY-ASSISTANT"
                if not chat and kind in ("TP-PRE-ASSISTANT-FIRST", "TP-PRE-EMPTY-ASSISTANT", "TP-PRE-NO-ASSISTANT",
                                         "TP-PRE-UNKNOWN-ROLE"):
                    kind = "TP-PRE-EMPTY-TEXT"
                if kind == "TP-PRE-MALFORMED-JSONL":
                    line = json.dumps(row)[:-7]
                elif kind == "TP-PRE-EMPTY-TEXT":
                    line = json.dumps({"text": "  "})
                elif kind == "TP-PRE-DUPLICATE-TEXT":
                    copies += 1
                    line = (chats if chat else texts)[copies]
                elif kind == "TP-PRE-NEAR-DUPLICATE":
                    copies += 1
                    base = json.loads((chats if chat else texts)[copies])
                    if chat:  # letter case only
                        base["messages"][-1]["content"] = base["messages"][-1]["content"].upper()
                    else:  # letter case and outer whitespace
                        base["text"] = "  " + base["text"].upper() + " \n"
                    line = json.dumps(base)
                elif kind == "TP-PRE-ASSISTANT-FIRST":
                    line = json.dumps({"messages": [{"role": "assistant", "content": f"Hi {i}"},
                                                    {"role": "user", "content": "Hello"},
                                                    {"role": "assistant", "content": "Bye"}]})
                elif kind == "TP-PRE-EMPTY-ASSISTANT":
                    line = json.dumps({"messages": [{"role": "user", "content": f"Q {i}"},
                                                    {"role": "assistant", "content": ""}]})
                elif kind == "TP-PRE-NO-ASSISTANT":
                    line = json.dumps({"messages": [{"role": "user", "content": f"Q {i}"}]})
                else:
                    line = json.dumps({"messages": [{"role": "user", "content": f"Q {i}"},
                                                    {"role": "asistant", "content": "A"}]})
                faults[i] = kind
            else:
                line = json.dumps(row)
                keep = chats if chat else texts
                if len(keep) < 1000:
                    keep.append(line)
            out.write(line + "\n")
    return faults


# --- contenders (each runs in a child process) -------------------------------------------

def _child(contender: str, path: str, faults_path: str) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[-1]})  # one core
    import resource

    # Imports happen before the clock starts, for every contender.
    if contender == "trainproof-lsp":
        sys.path.insert(0, str(ROOT))
        from trainproof_lsp.core.config import Config
        from trainproof_lsp.judge.preflight import judge_dataset
        from trainproof_lsp.readers import dataset as _ds  # noqa: F401  (numpy is imported lazily inside)

        try:
            import numpy  # noqa: F401  (the duplicate sort uses it on large files)
        except ImportError:
            pass
    elif contender == "trainproof":
        from trainproof.preflight import preflight
    result: dict = {}
    t0 = time.perf_counter()
    if contender == "trainproof-lsp":
        report = judge_dataset(path, Config())
        seconds = time.perf_counter() - t0
        got: dict[int, list[str]] = {}
        for f in report.findings:
            if f.location.span is not None and f.id != "TP-PRE-MIXED-FORMATS":
                got.setdefault(f.location.span.start_line, []).append(f.id)
        want = {int(k): v for k, v in json.loads(Path(faults_path).read_text()).items()}
        result = {"findings": len(report.findings), "verdict": report.verdict.value,
                  "lines_match": {k: [v] for k, v in want.items()} == got,
                  "mixed": any(f.id == "TP-PRE-MIXED-FORMATS" for f in report.findings)}
    elif contender == "json.loads":
        n = bad = 0
        with open(path, "rb") as fh:
            for line in fh:
                try:
                    json.loads(line)
                except ValueError:
                    bad += 1
                n += 1
        seconds = time.perf_counter() - t0
        result = {"lines": n, "bad": bad}
    elif contender == "trainproof":
        try:
            res = preflight(path)
            result = {"verdict": res.verdict, "findings": [f["id"] for f in res.findings]}
        except Exception as e:  # the peer's failure is reported, not fatal
            result = {"error": f"{type(e).__name__}: {e}"}
        seconds = time.perf_counter() - t0
    else:
        raise SystemExit(f"unknown contender {contender}")
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": seconds, "rss_mib": rss_kib / 1024, **result}))


def run_child(contender: str, path: Path, faults_path: Path) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--child", contender, str(path), str(faults_path)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3, help="runs per contender (best and median reported)")
    ap.add_argument("--keep", action="store_true", help="keep the generated file (prints its path)")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(*args.child)
        return 0
    try:
        import trainproof  # noqa: F401
        peer = True
    except ImportError:
        peer = False
    tmp = Path(tempfile.mkdtemp(prefix="tp-bench-preflight-"))
    try:
        data = tmp / "train_text_chat.jsonl"
        t = time.perf_counter()
        faults = generate(data, args.lines)
        (tmp / "faults.json").write_text(json.dumps(faults))
        size = data.stat().st_size
        print(f"file: {args.lines:,} lines, {size / 1e6:.1f} MB (text and chat rows in blocks of 10,000 lines), "
              f"{len(faults)} injected faults; generated in {time.perf_counter() - t:.1f}s")
        print(f"python {sys.version.split()[0]}, one core pinned per contender, {args.repeat} run(s) each\n")
        contenders = ["trainproof-lsp", "json.loads"] + (["trainproof"] if peer else [])
        results: dict[str, list[dict]] = {}
        for c in contenders:
            results[c] = [run_child(c, data, tmp / "faults.json") for _ in range(args.repeat)]
        print(f"{'contender':<22} {'best s':>8} {'median s':>9} {'best MB/s':>10} {'peak RSS MiB':>13}  notes")
        best: dict[str, float] = {}
        for c, runs in results.items():
            ok = [r for r in runs if "seconds" in r]
            if not ok:
                print(f"{c:<22} {'-':>8} {'-':>9} {'-':>10} {'-':>13}  {runs[0].get('error')}")
                continue
            secs = [r["seconds"] for r in ok]
            best[c] = min(secs)
            rss = max(r["rss_mib"] for r in ok)
            note = ""
            if c == "trainproof-lsp":
                note = (f"{ok[0]['findings']} findings, verdict {ok[0]['verdict']}, "
                        f"injected lines {'all found, nothing else' if all(r['lines_match'] for r in ok) else 'MISMATCH'}")
            elif c == "trainproof":
                note = ok[0].get("error") or f"verdict {ok[0]['verdict']}, {', '.join(ok[0]['findings'])} (no line numbers)"
            elif c == "json.loads":
                note = f"parse only ({ok[0]['bad']} lines fail to parse), nothing checked"
            print(f"{c:<22} {best[c]:>8.3f} {statistics.median(secs):>9.3f} {size / 1e6 / best[c]:>10.1f} {rss:>13.1f}  {note}")
        # The slowest layout, smaller: rows alternating format line by line.
        small = tmp / "interleaved.jsonl"
        n_small = max(1, args.lines // 5)
        generate_interleaved(small, n_small)
        inter = [run_child("trainproof-lsp", small, tmp / "faults_small.json") for _ in range(args.repeat)]
        inter_ok = [r for r in inter if "seconds" in r]
        ours = best.get("trainproof-lsp")
        print()
        if inter_ok:
            s = min(r["seconds"] for r in inter_ok)
            print(f"rows alternating text/chat line by line ({n_small:,} lines, {small.stat().st_size / 1e6:.1f} MB): "
                  f"{small.stat().st_size / 1e6 / s:.1f} MB/s, peak RSS {max(r['rss_mib'] for r in inter_ok):.1f} MiB")
        verdicts = []
        if ours:
            mbs = size / 1e6 / ours
            verdicts.append(f"throughput {mbs:.1f} MB/s (budget >= {MIN_MB_S:.0f}): {'met' if mbs >= MIN_MB_S else 'NOT met'}")
            if "trainproof" in best:
                x = best["trainproof"] / ours
                verdicts.append(f"speed-up over trainproof {x:.1f}x (budget >= {MIN_SPEEDUP:.0f}x): "
                                f"{'met' if x >= MIN_SPEEDUP else 'NOT met'}")
            rss = max(r["rss_mib"] for r in results["trainproof-lsp"] if "rss_mib" in r)
            verdicts.append(f"peak RSS {rss:.1f} MiB (budget <= {MAX_RSS_MIB:.0f}): {'met' if rss <= MAX_RSS_MIB else 'NOT met'}")
            if "json.loads" in best:
                verdicts.append(f"vs plain json.loads per line: {best['json.loads'] / ours:.1f}x")
        for v in verdicts:
            print(v)
        if args.keep:
            print(f"kept: {data}")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


def generate_interleaved(path: Path, lines: int) -> None:
    faults = generate(path, lines, block=0)
    (path.parent / "faults_small.json").write_text(json.dumps(faults))


if __name__ == "__main__":
    raise SystemExit(main())
