"""Verdicts on real training logs, side by side with the published trainproof.

    python benchmarks/bench_verdicts.py [--corpus DIR] [--no-peer] [--verbose]

Reads the calibration corpus `../shared/corpus/wild/` (54 real logs from public
repositories, labelled by a reviewer before any linter ran: `labels.json`) and judges every
run folder with `doctor`, in this process (trainproof-lsp) and with the published
`trainproof doctor --json` (the peer, when its command is installed), in the same run. Skips
with a message when the corpus is absent.

A run's verdict is the worst verdict of the reports for its folder (what `doctor FOLDER`
shows the user). Per label group it prints how many runs got FAIL / WARN / NOT-CHECKED / PASS,
for both tools, and checks these targets (trainproof-lsp only):

  healthy       never FAIL (0/30) and at most 2/30 WARN
  faulty        found (FAIL or WARN) by a rule that names the fault: >= 12/14 (the mapping
                below says which rule IDs name which label)
  too short     the 8 logs too short to judge are never a bare PASS
  appended      the file holding several appended runs is judged per segment (its report lists
                at least two segments)

Which rules name which fault (label -> acceptable rule IDs). A finding of another rule on a
faulty run is printed but does not count as found: a run flagged for the wrong reason teaches
the wrong fix.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainproof_lsp.core.config import Config  # noqa: E402
from trainproof_lsp.judge.engine import doctor  # noqa: E402
from trainproof_lsp.rules import BY_ID  # noqa: E402

DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus" / "wild"

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
    "no-learning": frozenset({"TP-DEAD-RUN", "TP-FLAT", "TP-ZERO-LR", "TP-AT-CHANCE"}),
    "other:zero-loss": frozenset({"TP-ZERO-LOSS", "TP-ZERO-LOSS-ONSET"}),
    "other:train-loss-creeping-up": frozenset({"TP-DIVERGE", "TP-DEAD-RUN"}),
    "other:degrading-after-resume": frozenset({"TP-DEAD-RUN", "TP-DIVERGE"}),
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--no-peer", action="store_true", help="do not run the published trainproof")
    ap.add_argument("--verbose", action="store_true", help="one line per run")
    args = ap.parse_args()
    unknown = sorted(set().union(*NAMES_THE_FAULT.values()) - set(BY_ID))
    if unknown:
        print(f"error: the label mapping names rules this build does not have: {', '.join(unknown)}")
        return 2
    labels_file = args.corpus / "labels.json"
    if not labels_file.is_file():
        print(f"skipped: no calibration corpus at {args.corpus} (labels.json missing)")
        return 0
    labels = json.loads(labels_file.read_text(encoding="utf-8"))
    exe = None if args.no_peer else shutil.which("trainproof", path=str(Path(sys.executable).parent)) \
        or shutil.which("trainproof")

    rows = []
    for entry in labels:
        folder = args.corpus / entry["id"]
        mine = ours(folder)
        theirs = peer(folder, exe) if exe else None
        rows.append((entry, group_of(entry), mine, theirs))

    tools = ["trainproof-lsp"] + (["trainproof (published)"] if exe else [])
    print(f"{len(rows)} real logs from {args.corpus.name}/; verdict = worst report of the run folder")
    if not exe:
        print("(published trainproof not installed or --no-peer: its column is left out)")
    print()
    header = f"{'group':16s} {'tool':24s} " + " ".join(f"{v:>11s}" for v in LEVELS) + "   n"
    print(header)
    print("-" * len(header))
    for group in ("healthy", "faulty", "too-short", "appended", "excluded-other"):
        members = [r for r in rows if r[1] == group]
        for t, tool in enumerate(tools):
            counts = Counter((m if t == 0 else p)["verdict"] for _, _, m, p in members)
            print(f"{group if t == 0 else '':16s} {tool:24s} " +
                  " ".join(f"{counts.get(v, 0):>11d}" for v in LEVELS) + f" {len(members):3d}")
    print()

    print("faulty runs, by label (found = FAIL or WARN by a rule that names the fault):")
    found = {tool: 0 for tool in tools}
    faulty = [r for r in rows if r[1] == "faulty"]
    for entry, _, mine, theirs in faulty:
        accept = NAMES_THE_FAULT.get(entry["label"], frozenset())
        cells = []
        for t, res in enumerate([mine, theirs][: len(tools)]):
            hit = sorted(accept & set(res["ids"]))
            ok = res["verdict"] in ("FAIL", "WARN") and bool(hit)
            found[tools[t]] += ok
            cells.append(f"{'found' if ok else 'MISSED':6s} {res['verdict']:11s} {','.join(res['ids']) or '-'}")
        print(f"  {entry['id']:36s} {entry['label'][:28]:28s} " + " | ".join(cells))
    for tool in tools:
        print(f"  {tool}: {found[tool]}/{len(faulty)} found by the rule that names the fault")
    print()
    print("faulty runs found, per label:")
    for label in sorted({e["label"] for e, _, _, _ in faulty}):
        runs = [(m, p) for e, _, m, p in faulty if e["label"] == label]
        accept = NAMES_THE_FAULT.get(label, frozenset())
        cells = []
        for t, tool in enumerate(tools):
            ok = sum((m if t == 0 else p)["verdict"] in ("FAIL", "WARN") and bool(accept & set((m if t == 0 else p)["ids"]))
                     for m, p in runs)
            cells.append(f"{tool} {ok}/{len(runs)}")
        print(f"  {label:30s} " + "   ".join(cells) + f"   (rules: {', '.join(sorted(accept))})")
    print()

    if args.verbose:
        print("every run (trainproof-lsp | published):")
        for entry, group, mine, theirs in rows:
            peer_cell = f" | {theirs['verdict']:11s} {','.join(theirs['ids'])}" if theirs else ""
            print(f"  {entry['id']:36s} {group:14s} {mine['verdict']:11s} {','.join(mine['ids']) or '-'}{peer_cell}")
        print()

    healthy = [r for r in rows if r[1] == "healthy"]
    short = [r for r in rows if r[1] == "too-short"]
    appended = [r for r in rows if r[1] == "appended"]
    h_fail = sum(m["verdict"] == "FAIL" for _, _, m, _ in healthy)
    h_warn = sum(m["verdict"] == "WARN" for _, _, m, _ in healthy)
    bare_pass = [e["id"] for e, _, m, _ in short if m["verdict"] == "PASS"]
    checks = [
        (f"healthy never FAIL: {h_fail}/{len(healthy)} FAIL", h_fail == 0),
        (f"healthy rarely WARN: {h_warn}/{len(healthy)} WARN (target <= 2)", h_warn <= 2),
        (f"faulty found by the rule that names the fault: {found['trainproof-lsp']}/{len(faulty)} (target >= 12)",
         found["trainproof-lsp"] >= 12),
        (f"too short never a bare PASS: {len(bare_pass)}/{len(short)} PASS" +
         (f" ({', '.join(bare_pass)})" if bare_pass else ""), not bare_pass),
    ]
    print("targets (trainproof-lsp):")
    for text, ok in checks:
        print(f"  [{'ok' if ok else 'MISS'}] {text}")
    for entry, _, mine, _ in appended:
        ok = mine["segments"] >= 2
        checks.append(("", ok))
        print(f"  [{'ok' if ok else 'MISS'}] appended runs judged per segment: {entry['id']}: "
              f"{mine['segments']} segment(s) in {mine['reports']} report(s), verdict {mine['verdict']}")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
