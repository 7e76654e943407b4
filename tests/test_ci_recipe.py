"""docs/ci.md's GitHub Actions recipe: the workflow parses, may upload to code scanning
(security-events: write), uploads even when doctor fails the job, uploads the file doctor
wrote — and that file, made here by the workflow's own doctor command on a fixture run,
is SARIF 2.1.0 with each finding on its log line."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "ci.md"


def workflow() -> dict:
    yaml = pytest.importorskip("yaml", reason="PyYAML comes with pre-commit, in the test extra")
    block = re.search(r"```yaml\n(# \.github/workflows/trainproof\.yml\n.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert block, "docs/ci.md has no workflow block"
    return yaml.safe_load(block.group(1))


def test_the_workflow_uploads_the_sarif_doctor_writes_even_when_doctor_fails():
    wf = workflow()
    assert wf["permissions"]["security-events"] == "write"
    (job,) = wf["jobs"].values()
    steps = job["steps"]
    doctor = next(s for s in steps if "trainproof-lsp doctor" in s.get("run", ""))
    upload = next(s for s in steps if s.get("uses", "").startswith("github/codeql-action/upload-sarif@"))
    assert steps.index(upload) > steps.index(doctor)
    assert upload["if"] == "always()"
    args = shlex.split(doctor["run"])
    assert args[args.index("--sarif") + 1] == upload["with"]["sarif_file"]


def test_the_workflows_doctor_command_writes_sarif_anchored_to_log_lines(tmp_path):
    (job,) = workflow()["jobs"].values()
    doctor = next(s for s in job["steps"] if "trainproof-lsp doctor" in s.get("run", ""))
    args = shlex.split(doctor["run"])
    assert args[:2] == ["trainproof-lsp", "doctor"]
    shutil.copytree(REPO / "fixtures" / "hf_runs" / "lr_hot_diverges", tmp_path / "runs" / "lr_hot_diverges")
    proc = subprocess.run([sys.executable, "-m", "trainproof_lsp", *args[1:]], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 1, proc.stderr  # a FAIL: the job fails, the upload still runs
    sarif = json.loads((tmp_path / args[args.index("--sarif") + 1]).read_text(encoding="utf-8"))
    assert sarif["version"] == "2.1.0"
    (run,) = sarif["runs"]
    diverge = [r for r in run["results"] if r["ruleId"] == "TP-DIVERGE"]
    (loc,) = diverge[0]["locations"]
    assert loc["physicalLocation"]["artifactLocation"]["uri"] == "runs/lr_hot_diverges/trainer_state.json"
    assert loc["physicalLocation"]["region"]["startLine"] == 292 and diverge[0]["level"] == "error"
    assert "TP-DIVERGE" in {r["id"] for r in run["tool"]["driver"]["rules"]}
