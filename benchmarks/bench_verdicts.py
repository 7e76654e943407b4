"""Verdicts on real training logs, side by side with the published trainproof.

    python benchmarks/bench_verdicts.py [--corpus DIR ...] [--no-peer] [--verbose]

Reads the corpora of real logs beside the project (`../shared/corpus/wild/`, 54 logs, the
calibration sample, and `../shared/corpus/wild2/`, 57 logs from other repositories, the
check sample; each labelled by a reviewer before any linter ran: `labels.json`) and judges
every run folder with `doctor`, in this process (trainproof-lsp) and with the published
`trainproof doctor --json` (the peer, installed by the `peers` extra), in the same run. A
corpus that is absent is skipped with a message (`main` exits 0); tests/test_corpus.py calls
`evaluate` with TP_CORPUS=required, where an absent corpus is a failure.

A run's verdict is the worst verdict of the reports for its folder (what `doctor FOLDER`
shows the user). Per corpus and for all corpora together it prints, per label group, how
many runs got FAIL / WARN / NOT-CHECKED / PASS for both tools, and on how many healthy runs
each rule fired. Targets (trainproof-lsp, all corpora together; wild + wild2 hold 69
healthy and 26 faulty runs):

  healthy       never FAIL, and WARN on at most 3 of 69 (scaled: 3/69 of the healthy runs)
  faulty        found (FAIL or WARN) by a rule that names the fault: at least 24 of 26
                (scaled: 24/26; the mapping below says which rule IDs name which label)
  too short     the logs too short to judge are never a bare PASS
  appended      a file holding several appended runs is judged per segment (its report lists
                at least two segments)

Which rules name which fault (label -> acceptable rule IDs). A finding of another rule on a
faulty run is printed but does not count as found: a run flagged for the wrong reason teaches
the wrong fix.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainproof_lsp.core.config import Config  # noqa: E402
from trainproof_lsp.judge.engine import doctor  # noqa: E402
from trainproof_lsp.rules import BY_ID  # noqa: E402

CORPUS_ROOT = ROOT.parent / "shared" / "corpus"
DEFAULT_CORPORA = (CORPUS_ROOT / "wild", CORPUS_ROOT / "wild2")
# The targets as shares, so that they hold for the two samples together (3 of 69 healthy
# WARN, 24 of 26 faulty found) and scale when a sample is judged alone.
MAX_HEALTHY_WARN_SHARE = 3 / 69
MIN_FOUND_SHARE = 24 / 26

# label -> the rule IDs whose finding names that fault. Only IDs of this registry (checked at
# start): a rule added later that names one of these faults must be added here to count.
NAMES_THE_FAULT: dict[str, frozenset[str]] = {
    # eval loss climbs after its best while train falls
    "overfit": frozenset({"TP-OVERFIT"}),
    # loss (train or eval) got worse as the learning rate rose: the run ends above its best
    "lr-problem": frozenset({"TP-DIVERGE", "TP-LOSS-SPIKE-UNRECOVERED", "TP-DEAD-RUN"}),
    "diverged": frozenset({"TP-DIVERGE", "TP-LOSS-SPIKE-UNRECOVERED"}),
    # nothing learned (a learning rate far too small): the no-improvement family. A zero-LR
    # stretch alone (TP-ZERO-LR-PARTIAL) is not counted: it is not what stopped the learning.
    # TP-LOSS-PART-STALLED: the part of a composite loss that is the task stands still (a
    # VAE's reconstruction while its KL collapses).
    "no-learning": frozenset({"TP-DEAD-RUN", "TP-FLAT", "TP-ZERO-LR", "TP-AT-CHANCE", "TP-EVAL-ACC-AT-CHANCE",
                              "TP-LOSS-PART-STALLED"}),
    "other:zero-loss": frozenset({"TP-ZERO-LOSS", "TP-ZERO-LOSS-ONSET", "TP-LOSS-COLLAPSE"}),
    "other:train-loss-creeping-up": frozenset({"TP-DIVERGE", "TP-DEAD-RUN"}),
    "other:degrading-after-resume": frozenset({"TP-DEAD-RUN", "TP-DIVERGE"}),
    # a loss (train or eval) that is NaN/Inf
    "nan": frozenset({"TP-NAN", "TP-NAN-EVAL"}),
}

LEVELS = ("FAIL", "WARN", "NOT-CHECKED", "PASS")
SEVERITY = {v: i for i, v in enumerate(reversed(LEVELS))}


def worst(verdicts: list[str]) -> str:
    return max(verdicts, key=SEVERITY.__getitem__, default="NOT-CHECKED")


def ours(folder: Path) -> dict:
    out = doctor([folder], Config())
    reports = [r for r in out.reports if r.artefact.kind in ("metrics", "comparison")]
    verdicts = [r.verdict.value for r in reports] or ["NOT-CHECKED"]
    flagged = sorted({f.id for r in reports for f in r.findings if f.level.value in ("FAIL", "WARN")})
    # Runs appended to one file are judged one by one: each report lists them (Report.segments).
    segments = [seg for r in reports for seg in r.segments]
    return {"verdict": worst(verdicts), "ids": flagged, "reports": len(reports), "segments": len(segments),
            "verdicts": verdicts}


def peer(folder: Path, exe: str) -> dict:
    proc = subprocess.run([exe, "doctor", str(folder), "--json"], capture_output=True, text=True)
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        return {"verdict": "NOT-CHECKED", "ids": []}
    reports = doc.get("reports") or []
    verdicts = [str(r.get("verdict", "")).replace("_", "-") for r in reports]
    verdicts = [v for v in verdicts if v in SEVERITY] or ["NOT-CHECKED"]
    flagged = sorted({f["id"] for r in reports for f in r.get("findings", [])
                      if f.get("level") in ("FAIL", "WARN")})
    return {"verdict": worst(verdicts), "ids": flagged}


def group_of(entry: dict) -> str:
    if entry["scoring"] in ("healthy", "faulty"):
        return entry["scoring"]
    if entry["label"] == "too-short-to-judge":
        return "too-short"
    if entry["label"] == "other:appended-runs":
        return "appended"
    return "excluded-other"


GROUPS = ("healthy", "faulty", "too-short", "appended", "excluded-other")
Row = tuple[str, dict, str, dict, "dict | None"]  # corpus, label entry, group, ours, peer's


def found(entry: dict, res: dict) -> bool:
    """FAIL or WARN by a rule that names the labelled fault."""
    accept = NAMES_THE_FAULT.get(entry["label"], frozenset())
    return res["verdict"] in ("FAIL", "WARN") and bool(accept & set(res["ids"]))


def peer_command() -> str | None:
    return shutil.which("trainproof", path=str(Path(sys.executable).parent)) or shutil.which("trainproof")


def missing_corpora(corpora: Sequence[Path]) -> list[Path]:
    return [c for c in corpora if not (c / "labels.json").is_file()]


def evaluate(corpora: Sequence[Path], exe: str | None) -> list[Row]:
    """Every labelled run of the corpora judged by this build (and by the peer with `exe`)."""
    rows: list[Row] = []
    for corpus in corpora:
        for entry in json.loads((corpus / "labels.json").read_text(encoding="utf-8")):
            folder = corpus / entry["id"]
            rows.append((corpus.name, entry, group_of(entry), ours(folder), peer(folder, exe) if exe else None))
    return rows


def targets(rows: Sequence[Row]) -> list[tuple[str, bool]]:
    """The checks this benchmark (and CI, through tests/test_corpus.py) holds the build to."""
    healthy = [m for _, _, g, m, _ in rows if g == "healthy"]
    faulty = [(e, m) for _, e, g, m, _ in rows if g == "faulty"]
    short = [(e, m) for _, e, g, m, _ in rows if g == "too-short"]
    h_fail = [m for m in healthy if m["verdict"] == "FAIL"]
    h_warn = sum(m["verdict"] == "WARN" for m in healthy)
    max_warn = int(MAX_HEALTHY_WARN_SHARE * len(healthy) + 1e-9)
    n_found = sum(found(e, m) for e, m in faulty)
    min_found = math.ceil(MIN_FOUND_SHARE * len(faulty) - 1e-9)
    bare_pass = [e["id"] for e, m in short if m["verdict"] == "PASS"]
    checks = [
        (f"healthy never FAIL: {len(h_fail)}/{len(healthy)} FAIL", not h_fail),
        (f"healthy rarely WARN: {h_warn}/{len(healthy)} WARN (target <= {max_warn})", h_warn <= max_warn),
        (f"faulty found by the rule that names the fault: {n_found}/{len(faulty)} (target >= {min_found})",
         n_found >= min_found),
        (f"too short never a bare PASS: {len(bare_pass)}/{len(short)} PASS" +
         (f" ({', '.join(bare_pass)})" if bare_pass else ""), not bare_pass),
    ]
    for _, entry, group, mine, _ in rows:
        if group == "appended":
            checks.append((f"appended runs judged per segment: {entry['id']}: {mine['segments']} segment(s) in "
                           f"{mine['reports']} report(s), verdict {mine['verdict']}", mine["segments"] >= 2))
    return checks


def false_fails(rows: Sequence[Row]) -> list[str]:
    """Healthy runs this build FAILs, with the rules that did it."""
    return [f"{c}/{e['id']}: {','.join(m['ids'])}" for c, e, g, m, _ in rows if g == "healthy" and m["verdict"] == "FAIL"]


def print_table(rows: Sequence[Row], tools: list[str], title: str) -> None:
    print(title)
    header = f"{'group':16s} {'tool':24s} " + " ".join(f"{v:>11s}" for v in LEVELS) + "   n"
    print(header)
    print("-" * len(header))
    for group in GROUPS:
        members = [r for r in rows if r[2] == group]
        for t, tool in enumerate(tools):
            counts = Counter((m if t == 0 else p)["verdict"] for _, _, _, m, p in members)
            print(f"{group if t == 0 else '':16s} {tool:24s} " +
                  " ".join(f"{counts.get(v, 0):>11d}" for v in LEVELS) + f" {len(members):3d}")
    print()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, action="append",
                    help="a corpus folder with labels.json (repeatable; default: wild and wild2)")
    ap.add_argument("--no-peer", action="store_true", help="do not run the published trainproof")
    ap.add_argument("--verbose", action="store_true", help="one line per run")
    args = ap.parse_args()
    unknown = sorted(set().union(*NAMES_THE_FAULT.values()) - set(BY_ID))
    if unknown:
        print(f"error: the label mapping names rules this build does not have: {', '.join(unknown)}")
        return 2
    corpora = tuple(args.corpus or DEFAULT_CORPORA)
    for c in missing_corpora(corpora):
        print(f"skipped: no corpus at {c} (labels.json missing)")
    corpora = tuple(c for c in corpora if c not in missing_corpora(corpora))
    if not corpora:
        return 0
    exe = None if args.no_peer else peer_command()
    rows = evaluate(corpora, exe)
    tools = ["trainproof-lsp"] + (["trainproof (published)"] if exe else [])
    print(f"{len(rows)} real logs from {', '.join(c.name + '/' for c in corpora)}; "
          "verdict = worst report of the run folder")
    if not exe:
        print("(published trainproof not installed or --no-peer: its column is left out)")
    print()
    if len(corpora) > 1:
        for c in corpora:
            print_table([r for r in rows if r[0] == c.name], tools, f"{c.name}/:")
    print_table(rows, tools, "all:" if len(corpora) > 1 else f"{corpora[0].name}/:")

    print("healthy runs each rule fired on (FAIL or WARN):")
    for t, tool in enumerate(tools):
        fired = Counter(i for _, _, g, m, p in rows if g == "healthy" for i in (m if t == 0 else p)["ids"])
        print(f"  {tool:24s} " + (", ".join(f"{i} {n}" for i, n in sorted(fired.items())) or "none"))
    print()

    print("faulty runs, by label (found = FAIL or WARN by a rule that names the fault):")
    faulty = [r for r in rows if r[2] == "faulty"]
    for corpus, entry, _, mine, theirs in faulty:
        cells = [f"{'found' if found(entry, res) else 'MISSED':6s} {res['verdict']:11s} {','.join(res['ids']) or '-'}"
                 for res in [mine, theirs][: len(tools)] if res is not None]
        print(f"  {corpus + '/' + entry['id']:42s} {entry['label'][:28]:28s} " + " | ".join(cells))
    for t, tool in enumerate(tools):
        n = sum(found(e, m if t == 0 else p) for _, e, _, m, p in faulty)
        print(f"  {tool}: {n}/{len(faulty)} found by the rule that names the fault")
    print()
    print("faulty runs found, per label:")
    for label in sorted({e["label"] for _, e, _, _, _ in faulty}):
        runs = [(e, m, p) for _, e, _, m, p in faulty if e["label"] == label]
        cells = [f"{tool} {sum(found(e, m if t == 0 else p) for e, m, p in runs)}/{len(runs)}"
                 for t, tool in enumerate(tools)]
        print(f"  {label:30s} " + "   ".join(cells) +
              f"   (rules: {', '.join(sorted(NAMES_THE_FAULT.get(label, frozenset())))})")
    print()

    if args.verbose:
        print("every run (trainproof-lsp | published):")
        for corpus, entry, group, mine, theirs in rows:
            peer_cell = f" | {theirs['verdict']:11s} {','.join(theirs['ids'])}" if theirs else ""
            print(f"  {corpus + '/' + entry['id']:42s} {group:14s} {mine['verdict']:11s} "
                  f"{','.join(mine['ids']) or '-'}{peer_cell}")
        print()

    checks = targets(rows)
    print("targets (trainproof-lsp):")
    for text, ok in checks:
        print(f"  [{'ok' if ok else 'MISS'}] {text}")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
