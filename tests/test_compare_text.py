"""`compare` that cannot compare says why in the default output (no -v): the NOT-CHECKED
finding with its reason, and under the ranking's row of dashes the same reason."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
WHY = ("cannot compare with baseline base.csv: the logs share too little: run loss at steps 1-36, baseline at "
       "9-89; 6 points each must fall in a common span of steps or of schedule fractions")


def _compare(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    shutil.copy(FIXTURES / "logs" / "lightning_csvlogger_metrics.csv", tmp_path / "base.csv")
    shutil.copy(FIXTURES / "hf_runs" / "nan_loss" / "trainer_state.json", tmp_path / "trainer_state.json")
    return subprocess.run([sys.executable, "-m", "trainproof_lsp", "compare", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)


def test_a_run_that_fails_alone_but_cannot_be_compared_says_why_without_v(tmp_path):
    proc = _compare(tmp_path, "base.csv", "trainer_state.json")
    assert proc.returncode == 1, proc.stderr  # its own FAILs stand
    lines = proc.stdout.splitlines()
    assert f"trainer_state.json:152:5: NOT-CHECKED TP-CMP-UNCOMPARABLE {WHY}" in lines
    assert "== trainer_state.json vs baseline base.csv: FAIL — 3 finding(s); 0 check(s) ran, 9 skipped" in lines
    row = lines.index("   1  FAIL             -      -           -          -         -        -  "
                      "trainer_state.json  TP-DEAD-RUN TP-NAN TP-NAN-GRAD")
    assert lines[row + 1] == " " * 76 + f"^ not compared: {WHY}"


def test_a_run_that_cannot_be_compared_and_does_not_fail_is_not_checked_with_its_reason(tmp_path):
    proc = _compare(tmp_path, "trainer_state.json", "base.csv")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stdout.splitlines()
    why = ("cannot compare with baseline trainer_state.json: the logs share too little: run loss at steps 9-89, "
           "baseline at 1-36; 6 points each must fall in a common span of steps or of schedule fractions")
    assert lines[0] == f"base.csv: NOT-CHECKED {why}"
    assert lines[-1] == "   -  NOT-CHECKED" + " " * 59 + f"base.csv: {why}"
