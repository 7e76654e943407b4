"""The command line as users meet it (`python -m trainproof_lsp`, in a subprocess): input
it cannot judge is NOT-CHECKED with exit 2 and a one-line reason naming the file, never a
traceback; FAIL exits 1, a healthy log 0; SARIF lines agree with the JSON; output is
deterministic."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import HF_RUNS, LOGS, REPO


@dataclass
class Result:
    rc: int
    out: str
    err: str

    @property
    def json(self) -> Any:
        return json.loads(self.out)


def cli(*args: str | Path, cwd: Path) -> Result:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("TRAINPROOF_DEBUG", None)
    proc = subprocess.run([sys.executable, "-m", "trainproof_lsp", *map(str, args)], check=False,
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    result = Result(proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in result.out + result.err
    assert "internal error" not in result.err
    return result


def assert_not_checked(json_run: Result, text_run: Result, path: Path) -> str:
    """Exit 2, NOT-CHECKED in both outputs, one reason line naming the file; returns it."""
    assert json_run.rc == 2 and text_run.rc == 2
    data = json_run.json
    assert data["worst_verdict"] == "NOT-CHECKED"
    report = data["reports"][0]
    assert report["verdict"] == "NOT-CHECKED"
    reason = report["reason"]
    assert reason and "\n" not in reason
    assert str(path) in reason
    assert report["findings"][0]["id"] == "TP-NOT-CHECKED"
    # The text line is the reason with the verdict after its location:
    # "<path>[:line:col]: NOT-CHECKED <why>".
    lines = [line for line in text_run.out.splitlines() if " NOT-CHECKED " in line]
    assert [line.replace(" NOT-CHECKED", "", 1) for line in lines] == [reason]
    assert lines[0].startswith(str(path))
    assert "Worst: NOT-CHECKED" in text_run.out
    return reason


def not_checked(path: Path, cwd: Path, command: str = "epoch") -> str:
    return assert_not_checked(cli(command, path, "--json", cwd=cwd), cli(command, path, cwd=cwd), path)


# --- input that cannot be judged ------------------------------------------------------------

@pytest.mark.parametrize("name", ["metrics.jsonl", "trainer_state.json", "metrics.csv"])
def test_empty_file_is_not_checked(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"")
    assert not_checked(path, tmp_path) == f"{path}: empty file"


@pytest.mark.parametrize("name", ["trainer_state.json", "metrics.jsonl"])
def test_binary_file_is_not_checked(tmp_path, name):
    rng = random.Random(7)
    data = bytes(rng.randrange(256) for _ in range(4096)) + b"\x00\x00"
    path = tmp_path / name
    path.write_bytes(b"\x00" + data)
    reason = not_checked(path, tmp_path)
    assert reason == f"{path}: binary data (NUL bytes), not a text log"


def test_truncated_trainer_state_names_the_line_where_it_stops(tmp_path):
    text = (HF_RUNS / "healthy" / "trainer_state.json").read_text()
    cut = text[: len(text) // 2]
    assert not cut.endswith("\n")  # cut mid-line
    path = tmp_path / "trainer_state.json"
    path.write_text(cut)
    reason = not_checked(path, tmp_path)
    m = re.fullmatch(re.escape(str(path)) + r":(\d+):(\d+): invalid JSON: .+", reason)
    assert m, reason
    assert int(m.group(1)) == cut.count("\n") + 1  # the last (cut) line, 1-based


def test_malformed_trainer_state_names_line_and_column(tmp_path):
    path = tmp_path / "trainer_state.json"
    path.write_text('{\n  "global_step": 10,\n  "log_history": [\n    {"loss": 2.0, "step": 5}\n'
                    '    {"loss": 1.9, "step": 10}\n  ]\n}\n')
    reason = not_checked(path, tmp_path)
    assert reason == f"{path}:5:5: invalid JSON: Expecting ',' delimiter"
    finding = cli("epoch", path, "--json", cwd=tmp_path).json["reports"][0]["findings"][0]
    assert finding["location"]["range"]["start"]["line"] == 4  # 0-based


def test_malformed_json_array_names_line_and_column(tmp_path):
    path = tmp_path / "metrics.json"
    path.write_text('[\n  {"step": 1, "loss": 2.0},\n  {"step": 2, "loss": }\n]\n')
    reason = not_checked(path, tmp_path)
    assert reason.startswith(f"{path}:3:")
    assert "invalid JSON" in reason


def test_jsonl_with_no_readable_line_names_the_first_bad_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "loss": \n{"step": 2 "loss": 1.9}\n')
    reason = not_checked(path, tmp_path)
    assert reason.startswith(f"{path}:1: no readable JSON line")


def test_missing_file_is_not_checked(tmp_path):
    path = tmp_path / "nowhere" / "metrics.jsonl"
    assert not_checked(path, tmp_path) == f"{path}: cannot read (No such file or directory)"
    assert not_checked(path, tmp_path, "doctor") == f"{path}: no such file or folder"


def test_a_folder_with_nothing_in_it_is_not_checked(tmp_path):
    empty = tmp_path / "empty_run"
    empty.mkdir()
    not_checked(empty, tmp_path, "doctor")


def _config_error(tmp_path: Path, config: Path) -> str:
    log = LOGS / "nan_at_step_40.jsonl"
    as_json = cli("epoch", log, "--config", config, "--json", cwd=tmp_path)
    as_text = cli("epoch", log, "--config", config, cwd=tmp_path)
    assert as_json.rc == 2 and as_text.rc == 2  # not 1: the FAIL log was never judged
    data = as_json.json
    assert data["worst_verdict"] == "NOT-CHECKED"
    error = data["error"]
    assert error and "\n" not in error and str(config) in error
    assert error in as_text.out and "Worst: NOT-CHECKED" in as_text.out
    return error


def test_invalid_config_toml_is_not_checked(tmp_path):
    config = tmp_path / "trainproof.toml"
    config.write_text("[tool.trainproof]\nselect = [\"TP-NAN\"\n")
    assert "invalid TOML" in _config_error(tmp_path, config)


@pytest.mark.parametrize("body, says", [
    ('select = ["TP-NAN", "TP-NOPE"]', "select names unknown rule(s) TP-NOPE"),
    ('ignore = ["TP-NOPE"]', "ignore names unknown rule(s) TP-NOPE"),
    ('[tool.trainproof.limits.TP-NOPE]\nmax_ratio = 2.0', "limits.TP-NOPE: unknown rule"),
    ('[tool.trainproof.limits.TP-DIVERGE]\nmax_ration = 2.0', "limits.TP-DIVERGE.max_ration: unknown limit"),
])
def test_unknown_rule_or_limit_in_config_is_not_checked(tmp_path, body, says):
    config = tmp_path / "pyproject.toml"
    config.write_text("[tool.trainproof]\n" + body + "\n")
    assert says in _config_error(tmp_path, config)


# --- verdicts and exit codes ------------------------------------------------------------------

def test_a_failing_log_exits_1(tmp_path):
    result = cli("epoch", LOGS / "nan_at_step_40.jsonl", "--json", cwd=tmp_path)
    assert result.rc == 1
    assert result.json["worst_verdict"] == "FAIL"
    assert [f["id"] for f in result.json["reports"][0]["findings"]] == ["TP-NAN", "TP-NAN-GRAD"]
    text = cli("epoch", LOGS / "nan_at_step_40.jsonl", cwd=tmp_path)
    assert text.rc == 1
    assert f"{LOGS / 'nan_at_step_40.jsonl'}:4:1: FAIL TP-NAN" in text.out


def test_a_healthy_log_exits_0(tmp_path):
    result = cli("epoch", HF_RUNS / "healthy" / "trainer_state.json", "--json", cwd=tmp_path)
    assert result.rc == 0
    assert result.json["worst_verdict"] == "PASS"
    assert cli("doctor", HF_RUNS / "healthy", cwd=tmp_path).rc == 0


def test_a_warning_exits_0(tmp_path):
    result = cli("doctor", HF_RUNS / "overfit", "--json", cwd=tmp_path)
    assert result.rc == 0 and result.json["worst_verdict"] == "WARN"


def test_a_fail_beside_an_unreadable_file_exits_1(tmp_path):
    empty = tmp_path / "metrics.jsonl"
    empty.write_bytes(b"")
    result = cli("doctor", LOGS / "nan_at_step_40.jsonl", empty, "--json", cwd=tmp_path)
    assert result.rc == 1
    assert sorted(r["verdict"] for r in result.json["reports"]) == ["FAIL", "NOT-CHECKED"]


# --- SARIF and determinism --------------------------------------------------------------------

@pytest.mark.parametrize("log", [HF_RUNS / "lr_hot_diverges" / "trainer_state.json",
                                 LOGS / "nan_at_step_40.jsonl"], ids=["hf-diverges", "jsonl-nan"])
def test_sarif_regions_are_the_json_lines_plus_one(tmp_path, log):
    sarif_path = tmp_path / "out.sarif"
    result = cli("epoch", log, "--json", "--sarif", sarif_path, cwd=tmp_path)
    sarif = json.loads(sarif_path.read_text())
    assert sarif["version"] == "2.1.0"
    assert "sarif-2.1.0" in sarif["$schema"]
    (run,) = sarif["runs"]
    assert {r["id"] for r in run["tool"]["driver"]["rules"]} >= {"TP-DIVERGE", "TP-NAN"}
    findings = [f for r in result.json["reports"] for f in r["findings"]]
    results = run["results"]
    assert [r["ruleId"] for r in results] == [f["id"] for f in findings]
    for f, r in zip(findings, results):
        rng = f["location"]["range"]
        region = r["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] == rng["start"]["line"] + 1
        assert region["endLine"] == rng["end"]["line"] + 1
        assert region["startColumn"] == rng["start"]["character"] + 1
        assert region["startLine"] > 1  # anchored to the log entry, not line 1
        for rel_json, rel_sarif in zip(f["related"], r.get("relatedLocations", [])):
            assert (rel_sarif["physicalLocation"]["region"]["startLine"]
                    == rel_json["location"]["range"]["start"]["line"] + 1)
        assert len(f["related"]) == len(r.get("relatedLocations", []))


def test_json_output_is_byte_identical_across_runs(tmp_path):
    for args in (("epoch", HF_RUNS / "lr_hot_diverges" / "trainer_state.json"),
                 ("doctor", HF_RUNS / "healthy", LOGS)):
        first = cli(*args, "--json", cwd=tmp_path)
        second = cli(*args, "--json", cwd=tmp_path)
        assert first.out == second.out
        assert first.rc == second.rc


# --- rules --------------------------------------------------------------------------------------

def test_rules_prints_one_rules_doc(tmp_path):
    result = cli("rules", "TP-DIVERGE", cwd=tmp_path)
    assert result.rc == 0
    assert result.out.startswith("## TP-DIVERGE")
    assert "Loss ends well above its best level and stays there." in result.out
    assert "What it does not mean" in result.out
    assert "| `max_ratio` | 1.5 |" in result.out


def test_rules_with_an_unknown_id_exits_2(tmp_path):
    result = cli("rules", "NOPE", cwd=tmp_path)
    assert result.rc == 2
    assert result.out == ""
    assert "unknown rule 'NOPE'" in result.err
    assert len(result.err.strip().splitlines()) == 1


def test_a_not_checked_file_beside_a_warn_run_exits_2(tmp_path):
    """CONTRACTS.md §1: exit 0 only when everything was judged. The worst verdict here is
    WARN (it ranks above NOT-CHECKED), but a file that could not be judged still makes
    the exit code 2."""
    run = tmp_path / "overfit"
    run.mkdir()
    (run / "trainer_state.json").write_bytes((HF_RUNS / "overfit" / "trainer_state.json").read_bytes())
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "loss": \n')
    result = cli("doctor", tmp_path, "--json", cwd=tmp_path)
    verdicts = sorted(r["verdict"] for r in result.json["reports"])
    assert verdicts == ["NOT-CHECKED", "WARN"]
    assert result.json["worst_verdict"] == "WARN"
    assert result.rc == 2


@pytest.mark.parametrize(("command", "rc", "verdict"), [("doctor", 2, "NOT-CHECKED"), ("epoch", 2, "NOT-CHECKED"),
                                                         ("preflight", 1, "FAIL")])  # a CSV is no JSONL
def test_after_a_double_dash_a_name_like_an_option_is_a_path_and_nothing_is_written(command, rc, verdict, tmp_path):
    victim = tmp_path / "train_metrics.csv"
    victim.write_text("step,loss\n1,2.0\n", encoding="utf-8")
    (tmp_path / "--html=train_metrics.csv").write_text("step,loss\n1,2.0\n", encoding="utf-8")
    before = sorted(p.name for p in tmp_path.iterdir())
    result = cli(command, "--", "--html=train_metrics.csv", cwd=tmp_path)
    assert victim.read_text(encoding="utf-8") == "step,loss\n1,2.0\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert result.rc == rc
    first = result.out.splitlines()[0]
    assert first.startswith("--html=train_metrics.csv") and f" {verdict} " in first, result.out
