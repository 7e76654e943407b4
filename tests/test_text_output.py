"""Default text output keeps findings in view: each FAIL/WARN finding on its line, one
verdict line per report with how many checks ran and were skipped, and a closing summary.
`-v` adds the checks that ran, each skipped check with its reason and INFO findings."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def doctor_text(*args: str) -> tuple[int, list[str]]:
    proc = subprocess.run([sys.executable, "-m", "trainproof_lsp", "doctor", "fixtures/hf_runs", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, proc.stdout.splitlines()


def test_default_output_is_findings_one_verdict_line_per_report_and_counts():
    code, lines = doctor_text()
    assert code == 1
    verdicts = [x for x in lines if x.startswith("== ")]
    assert len(verdicts) == 8  # six fixture runs, make_hf_runs.py and the walked training_args.bin
    assert "== fixtures/hf_runs/healthy/trainer_state.json (3 sources): PASS — 0 finding(s); " \
           "22 check(s) ran, 18 skipped" in verdicts
    assert not [x for x in lines if x.lstrip().startswith(("checked:", "skipped ", "info:"))]
    assert not [x for x in lines if " INFO " in x or "passed over:" in x]
    findings = [x for x in lines if ": FAIL TP-" in x or ": WARN TP-" in x]
    assert "fixtures/hf_runs/lr_hot_diverges/trainer_state.json:292:5: FAIL TP-DIVERGE loss level 91.31 " \
           "at the end (step 120) is 22.23x its best level 4.107 (around step 3); limit 1.5x; judged on the train loss " \
           "per step, points 1-41 of 41 (steps 1-120); levels: rolling medians of 4 points, the end level the " \
           "last 4" in findings
    assert len(findings) == 16
    assert lines[-2] == "8 report(s): 4 FAIL, 1 WARN, 3 PASS; 6 passed over. Worst: FAIL"
    assert lines[-1] == "142 check(s) ran, 127 skipped (-v lists them and why each was skipped)"


def test_verbose_output_keeps_the_checked_and_skipped_lists():
    code, lines = doctor_text("-v")
    assert code == 1
    assert sum(1 for x in lines if x.startswith("   checked: ")) == 8
    assert "   skipped TP-OVERFIT, TP-NAN-EVAL: no eval_loss series in the log" in lines
    assert any(" INFO TP-THROUGHPUT " in x for x in lines)
    assert lines[-1] == "8 report(s): 4 FAIL, 1 WARN, 3 PASS. Worst: FAIL"


def test_readmes_output_folder_example_is_what_doctor_prints_and_training_args_bin_is_walked():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme[readme.index("$ trainproof-lsp doctor fixtures/hf_runs/overfit\n"):]
    block = block[block.index("\n") + 1:block.index("```")]
    proc = subprocess.run([sys.executable, "-m", "trainproof_lsp", "doctor", "fixtures/hf_runs/overfit"], cwd=REPO,
                          capture_output=True, text=True, timeout=300, check=False)
    # The numbers of checks grow with the registry: compared as N and M.
    counts = re.compile(r"\d+ check\(s\) ran, \d+ skipped")
    assert counts.sub("N/M", proc.stdout) == counts.sub("N/M", block)
    # What the prose says: config.json passed over; training_args.bin judged, never passed over.
    code, lines = doctor_text("-v")
    assert "fixtures/hf_runs/overfit/config.json: passed over: model config; read for vocab_size/num_labels" in lines
    assert any(x.startswith("== fixtures/hf_runs/healthy/checkpoint-100/training_args.bin: PASS — 0 finding(s); ")
               for x in lines)
    assert not [x for x in lines if "training_args.bin: passed over" in x]
