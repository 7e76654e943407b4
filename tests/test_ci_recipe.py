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


def doctor_args(runner_temp: Path) -> list[str]:
    """The workflow's doctor command as the runner would run it ($RUNNER_TEMP expanded)."""
    (job,) = workflow()["jobs"].values()
    doctor = next(s for s in job["steps"] if "trainproof-lsp doctor" in s.get("run", ""))
    return [a.replace("$RUNNER_TEMP", str(runner_temp)) for a in shlex.split(doctor["run"])]


def test_the_workflows_doctor_command_writes_sarif_anchored_to_log_lines(tmp_path):
    trusted = tmp_path / "runner" / "trusted"
    trusted.mkdir(parents=True)
    (trusted / "pyproject.toml").write_text("", encoding="utf-8")  # the base branch has no settings
    args = doctor_args(tmp_path / "runner")
    assert args[:2] == ["trainproof-lsp", "doctor"]
    work = tmp_path / "work"
    shutil.copytree(REPO / "fixtures" / "hf_runs" / "lr_hot_diverges", work / "runs" / "lr_hot_diverges")
    proc = subprocess.run([sys.executable, "-m", "trainproof_lsp", *args[1:]], cwd=work, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 1, proc.stderr  # a FAIL: the job fails, the upload still runs
    sarif = json.loads((work / args[args.index("--sarif") + 1]).read_text(encoding="utf-8"))
    assert sarif["version"] == "2.1.0"
    (run,) = sarif["runs"]
    diverge = [r for r in run["results"] if r["ruleId"] == "TP-DIVERGE"]
    (loc,) = diverge[0]["locations"]
    assert loc["physicalLocation"]["artifactLocation"]["uri"] == "runs/lr_hot_diverges/trainer_state.json"
    assert loc["physicalLocation"]["region"]["startLine"] == 292 and diverge[0]["level"] == "error"
    assert "TP-DIVERGE" in {r["id"] for r in run["tool"]["driver"]["rules"]}


def test_the_workflow_takes_its_settings_from_the_base_branch_before_doctor_runs():
    (job,) = workflow()["jobs"].values()
    steps = job["steps"]
    settings = next(i for i, s in enumerate(steps) if "git show FETCH_HEAD:pyproject.toml" in s.get("run", ""))
    doctor = next(i for i, s in enumerate(steps) if "trainproof-lsp doctor" in s.get("run", ""))
    assert settings < doctor
    assert 'git fetch --depth=1 origin "${{ github.base_ref }}"' in steps[settings]["run"]
    assert '> "$RUNNER_TEMP/trusted/pyproject.toml"' in steps[settings]["run"]
    args = shlex.split(steps[doctor]["run"])
    assert args[args.index("--config") + 1] == "$RUNNER_TEMP/trusted/pyproject.toml"


def _hostile_pull_request(work: Path) -> None:
    """A pull request that adds a diverging run, a checkpoint that runs a shell command
    when loaded, and settings that turn both rules off."""
    shutil.copytree(REPO / "fixtures" / "hf_runs" / "lr_hot_diverges", work / "runs" / "lr_hot_diverges")
    shutil.copy(REPO / "fixtures" / "checkpoints" / "malicious_os_system.pt", work / "runs" / "model.pt")
    (work / "pyproject.toml").write_text(
        '[tool.trainproof]\nignore = ["TP-CKPT-UNSAFE-PICKLE", "TP-DIVERGE"]\n', encoding="utf-8")


def _sarif_rules(proc: subprocess.CompletedProcess[str], sarif: Path) -> set[str]:
    assert "Traceback" not in proc.stderr, proc.stderr
    return {r["ruleId"] for r in json.loads(sarif.read_text(encoding="utf-8"))["runs"][0]["results"]}


def test_the_recipe_judges_a_pull_request_that_turns_the_rules_off_with_the_base_branchs_settings(tmp_path):
    trusted = tmp_path / "runner" / "trusted"
    trusted.mkdir(parents=True)
    (trusted / "pyproject.toml").write_text('[project]\nname = "base"\n', encoding="utf-8")  # no [tool.trainproof]
    work = tmp_path / "work"
    _hostile_pull_request(work)
    args = doctor_args(tmp_path / "runner")
    proc = subprocess.run([sys.executable, "-m", "trainproof_lsp", *args[1:]], cwd=work, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert {"TP-CKPT-UNSAFE-PICKLE", "TP-DIVERGE"} <= _sarif_rules(proc, work / "trainproof.sarif")
    assert proc.stderr == ""


def test_the_trees_own_settings_cannot_turn_the_pickle_rule_off_without_a_command_line_flag(tmp_path):
    work = tmp_path / "work"
    _hostile_pull_request(work)
    run = [sys.executable, "-m", "trainproof_lsp", "doctor", "runs/", "--sarif", "out.sarif"]
    proc = subprocess.run(run, cwd=work, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 1
    rules = _sarif_rules(proc, work / "out.sarif")
    assert "TP-CKPT-UNSAFE-PICKLE" in rules and "TP-DIVERGE" not in rules  # an ordinary rule: the file's to turn off
    assert proc.stderr.splitlines() == [
        f"trainproof-lsp: {work / 'pyproject.toml'} turns off security rule(s) TP-CKPT-UNSAFE-PICKLE; they run "
        "anyway (a settings file cannot turn them off: --ignore ID or --allow-config-to-disable-security on the "
        "command line can)"]
    # The command line can: with the flag the file decides, with --ignore the flag's rule is off.
    for flags in (["--allow-config-to-disable-security"], ["--ignore", "TP-CKPT-UNSAFE-PICKLE"]):
        proc = subprocess.run([*run, *flags], cwd=work, capture_output=True, text=True, timeout=300, check=False)
        assert "TP-CKPT-UNSAFE-PICKLE" not in _sarif_rules(proc, work / "out.sarif") and proc.stderr == "", flags
    # --no-config: no settings file at all, every rule at its default.
    proc = subprocess.run([*run, "--no-config"], cwd=work, capture_output=True, text=True, timeout=300, check=False)
    assert {"TP-CKPT-UNSAFE-PICKLE", "TP-DIVERGE"} <= _sarif_rules(proc, work / "out.sarif") and proc.stderr == ""
