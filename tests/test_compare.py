"""Runs judged against a known-good baseline: `compare BASELINE RUN...`, `doctor --baseline`,
and `baseline` in [tool.trainproof].

The committed HF Trainer runs (fixtures/hf_runs) give exact numbers; small JSONL logs
written here show alignment (other logging intervals, other lengths, disjoint steps) and
bad input; the calibration gallery (../shared/corpus/qlora-gallery, skipped when absent)
shows every run against the same-seed healthy run.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO, write_jsonl
from trainproof_lsp.judge import compare
from trainproof_lsp.output import render
from trainproof_lsp.cli import main
from trainproof_lsp.core.config import Config, ConfigError
from trainproof_lsp.judge.settings import load_file
from trainproof_lsp.core.model import Level, Report, Verdict
from trainproof_lsp.rules import BY_ID

HF_RUNS = Path("fixtures/hf_runs")  # relative to the repository root, as users type it
HEALTHY = HF_RUNS / "healthy"
GALLERY = REPO.parent / "shared" / "corpus" / "qlora-gallery"
SEEDS = ("seed42", "seed43", "seed44")
CMP_IDS = ["TP-FLOOR-RATIO", "TP-END-RATIO", "TP-NEG-IMPROVE", "TP-IMPROVE-DEFICIT", "TP-GRADNORM-RATIO",
           "TP-EVAL-BEST-RATIO", "TP-EVAL-END-RATIO", "TP-OVERFIT-VS-BASELINE", "TP-BAD-BASELINE"]


@pytest.fixture(autouse=True)
def _in_repo_root(monkeypatch):
    monkeypatch.chdir(REPO)  # paths in reports are as given: relative to the repository root


def cli(*args: str | Path, cwd: Path = REPO) -> tuple[int, str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("TRAINPROOF_DEBUG", None)
    proc = subprocess.run([sys.executable, "-m", "trainproof_lsp", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "internal error" not in proc.stderr
    return proc.returncode, proc.stdout, proc.stderr


def compare_json(*args: str | Path, cwd: Path = REPO) -> tuple[int, dict[str, Any]]:
    code, out, _ = cli("compare", *args, "--json", cwd=cwd)
    return code, json.loads(out)


def one(baseline: Path, run: Path, config: Config | None = None) -> Report:
    outcome = compare.compare(baseline, [run], config or Config())
    assert len(outcome.reports) == 1
    report = outcome.reports[0]
    assert report.baseline is not None
    return report


def ids(report: Any) -> list[str]:
    return sorted(f.id for f in report.findings)


def finding(report: Any, rule_id: str) -> Any:
    found = [f for f in report.findings if f.id == rule_id]
    assert len(found) == 1, [(f.id, f.message) for f in report.findings]
    return found[0]


def cmp_ids(report: Any) -> list[str]:
    """The comparison rules' findings (a comparison report also keeps the run's own FAILs)."""
    return sorted(f.id for f in report.findings if BY_ID[f.id].applies_to == "comparison")


def own_ids(report: Any) -> list[str]:
    return sorted(f.id for f in report.findings if BY_ID[f.id].applies_to != "comparison")


def own_fail_ids(run: Path) -> list[str]:
    (alone,) = compare.engine.doctor([run], Config()).reports
    return sorted(f.id for f in alone.findings if f.level is Level.FAIL)


def entry_text(finding_or_related: Any) -> str:
    """The log entry a location's span covers, as text."""
    loc = finding_or_related.location
    lines = Path(loc.path).read_text(encoding="utf-8").splitlines()
    return "\n".join(lines[loc.span.start_line:loc.span.end_line + 1])


def curve(steps: list[int], start: float, end: float, *, length: int = 200) -> list[float]:
    """A falling loss with a deterministic per-step wobble (the same step always gets the
    same factor, as two runs with one data order see the same batch at a step)."""
    return [round((end + (start - end) * math.exp(-s / (0.15 * length))) * (1 + 0.02 * ((s * 7) % 5 - 2)), 6)
            for s in steps]


def rows(steps: list[int], values: list[float], **extra: list[float]) -> list[dict[str, Any]]:
    out = []
    for i, (s, v) in enumerate(zip(steps, values)):
        row: dict[str, Any] = {"step": s, "loss": v}
        for key, series in extra.items():
            row[key] = series[i]
        out.append(row)
    return out


def log(folder: Path, name: str, steps: list[int], start: float, end: float, **kw: Any) -> Path:
    (folder / name).mkdir(parents=True, exist_ok=True)
    return write_jsonl(folder / name, rows(steps, curve(steps, start, end, **kw)))


# --- the committed HF Trainer runs against the healthy one ---------------------------------

def test_shuffled_labels_fail_on_floor_end_improvement_and_eval():
    r = one(HEALTHY, HF_RUNS / "shuffled_labels")
    assert r.verdict is Verdict.FAIL
    assert r.artefact.path == "fixtures/hf_runs/shuffled_labels/trainer_state.json"
    assert r.artefact.kind == "comparison"
    assert r.baseline.path == "fixtures/hf_runs/healthy/trainer_state.json"
    assert cmp_ids(r) == ["TP-END-RATIO", "TP-EVAL-BEST-RATIO", "TP-EVAL-END-RATIO", "TP-FLOOR-RATIO",
                          "TP-IMPROVE-DEFICIT"]
    assert own_ids(r) == own_fail_ids(HF_RUNS / "shuffled_labels")  # its own FAILs are kept
    floor = finding(r, "TP-FLOOR-RATIO")
    assert floor.level is Level.FAIL
    assert floor.evidence["run_floor"] == pytest.approx(4.15859, abs=1e-5)
    assert floor.evidence["baseline_floor"] == pytest.approx(1.10998, abs=1e-5)
    assert floor.evidence["ratio"] == pytest.approx(3.74653, abs=1e-5)
    assert (floor.evidence["run_floor_step"], floor.evidence["baseline_floor_step"]) == (152, 200)
    assert '"step": 152' in entry_text(floor)
    assert floor.related[0].location.path == "fixtures/hf_runs/healthy/trainer_state.json"
    assert '"step": 200' in entry_text(floor.related[0])
    assert floor.limits == {"max_ratio": 2.0}
    end = finding(r, "TP-END-RATIO")
    assert end.evidence["ratio"] == pytest.approx(3.74796, abs=1e-5)
    assert (end.evidence["points"], end.evidence["end_step"]) == (5, 200)
    deficit = finding(r, "TP-IMPROVE-DEFICIT")
    assert deficit.evidence["run_improvement"] == pytest.approx(0.00123, abs=1e-5)
    assert deficit.evidence["baseline_improvement"] == pytest.approx(0.73315, abs=1e-5)
    assert deficit.evidence["fraction"] == pytest.approx(0.00168, abs=1e-5)
    best = finding(r, "TP-EVAL-BEST-RATIO")
    assert best.evidence["ratio"] == pytest.approx(4.03671, abs=1e-5)
    assert (best.evidence["run_best_step"], best.evidence["baseline_best_step"]) == (100, 200)
    assert finding(r, "TP-EVAL-END-RATIO").level is Level.WARN
    assert all(c.ran for c in r.checks) and [c.group for c in r.checks] == CMP_IDS


def test_zero_learning_rate_fails_on_floor_end_and_improvement_deficit():
    r = one(HEALTHY, HF_RUNS / "lr_zero")
    assert r.verdict is Verdict.FAIL
    assert cmp_ids(r) == ["TP-END-RATIO", "TP-FLOOR-RATIO", "TP-IMPROVE-DEFICIT"]
    assert own_ids(r) == ["TP-AT-CHANCE", "TP-DEAD-RUN", "TP-ZERO-LR"]  # judged alone it fails: kept here
    assert r.comparison["run_verdict"] == "FAIL"
    deficit = finding(r, "TP-IMPROVE-DEFICIT")
    assert deficit.evidence["run_improvement"] == pytest.approx(-0.00072, abs=1e-5)
    assert deficit.evidence["start_ratio"] == pytest.approx(1.00217, abs=1e-5)
    assert deficit.evidence["end_ratio"] == pytest.approx(3.07298, abs=1e-5)
    assert "0.00x the baseline's improvement" in deficit.message  # no "-0.00x"
    # lr_zero ran 100 steps, the baseline 200: compared over the steps both cover.
    assert (r.comparison["axis"], r.comparison["common_from"], r.comparison["common_to"]) == ("step", 1, 100)
    skipped = {c.group: c.reason for c in r.checks if not c.ran}
    assert skipped == {rid: "the run logs no eval loss" for rid in
                       ("TP-EVAL-BEST-RATIO", "TP-EVAL-END-RATIO", "TP-OVERFIT-VS-BASELINE")}


def test_overfit_names_the_eval_degradation_against_the_baseline():
    r = one(HEALTHY, HF_RUNS / "overfit")
    assert ids(r) == ["TP-EVAL-BEST-RATIO", "TP-EVAL-END-RATIO", "TP-OVERFIT-VS-BASELINE"]
    over = finding(r, "TP-OVERFIT-VS-BASELINE")
    assert over.level is Level.WARN
    ev = over.evidence
    assert (ev["run_best_step"], ev["run_last_step"]) == (16, 160)
    assert ev["run_best_eval"] == pytest.approx(3.57768, abs=1e-5)
    assert ev["run_last_eval"] == pytest.approx(8.33971, abs=1e-5)
    assert ev["run_rise"] == pytest.approx(2.33104, abs=1e-5)
    # The baseline's evals start at step 20, so its train loss level stands in at step 16.
    assert ev["baseline_reference"] == "loss"
    assert ev["baseline_change"] == pytest.approx(0.32158, abs=1e-5)
    assert ev["relative"] == pytest.approx(7.24879, abs=1e-5)
    assert over.message.startswith("eval loss rose 2.33x from its best 3.578 (step 16) to 8.34 (step 160)")
    assert '"eval_loss"' in entry_text(over) and '"step": 160' in entry_text(over)
    assert '"step": 16' in entry_text(over.related[0])
    best = finding(r, "TP-EVAL-BEST-RATIO")  # best over the eval steps both cover (20-160)
    assert (best.evidence["run_best_step"], best.evidence["ratio"]) == (24, pytest.approx(3.67113, abs=1e-5))


def test_a_shorter_copy_of_the_baseline_passes_with_ratios_of_one():
    r = one(HEALTHY, HEALTHY / "checkpoint-100" / "trainer_state.json")
    assert r.verdict is Verdict.PASS and r.findings == ()
    assert [c.group for c in r.checks if c.ran] == CMP_IDS
    c = r.comparison
    assert (c["common_from"], c["common_to"]) == (1, 100)
    assert c["end_ratio"] == c["floor_ratio"] == c["start_ratio"] == 1.0
    assert c["eval_best_ratio"] == c["eval_end_ratio"] == 1.0
    assert c["run_improvement"] == pytest.approx(c["baseline_improvement"])
    assert c["baseline_verdict"] == "PASS"


def test_a_failing_baseline_warns_that_the_comparison_may_be_meaningless():
    r = one(HF_RUNS / "lr_hot_diverges", HEALTHY)
    bad = finding(r, "TP-BAD-BASELINE")
    assert bad.level is Level.WARN
    assert bad.evidence["baseline_fail_ids"] == ("TP-DEAD-RUN,TP-DIVERGE,TP-LOSS-ABOVE-UNIFORM,"
                                                 "TP-LOSS-SPIKE-UNRECOVERED")
    assert bad.evidence["baseline_fail_count"] == 4
    assert bad.location.path == "fixtures/hf_runs/lr_hot_diverges/trainer_state.json"
    assert r.comparison["baseline_verdict"] == "FAIL"


def test_compare_cli_fails_with_exit_1_and_names_run_and_baseline_in_json():
    code, doc = compare_json(HEALTHY, HF_RUNS / "shuffled_labels", HF_RUNS / "lr_zero",
                             HEALTHY / "checkpoint-100")
    assert code == 1
    assert doc["worst_verdict"] == "FAIL"
    got = [(r["artefact"]["path"], r["baseline"]["path"], r["verdict"]) for r in doc["reports"]]
    assert got == [("fixtures/hf_runs/shuffled_labels/trainer_state.json",
                    "fixtures/hf_runs/healthy/trainer_state.json", "FAIL"),
                   ("fixtures/hf_runs/lr_zero/trainer_state.json",
                    "fixtures/hf_runs/healthy/trainer_state.json", "FAIL"),
                   ("fixtures/hf_runs/healthy/checkpoint-100/trainer_state.json",
                    "fixtures/hf_runs/healthy/trainer_state.json", "PASS")]
    assert doc["reports"][0]["comparison"]["floor_ratio"] == pytest.approx(3.74653, abs=1e-5)
    assert doc["reports"][1]["comparison"]["eval_best_ratio"] is None


def test_compare_of_a_healthy_copy_exits_0():
    code, doc = compare_json(HEALTHY, HEALTHY / "checkpoint-100")
    assert code == 0 and doc["worst_verdict"] == "PASS"


def test_compare_json_and_sarif_are_deterministic_and_sarif_names_the_baseline(tmp_path):
    args = (HEALTHY, HF_RUNS / "shuffled_labels", HF_RUNS / "overfit")
    first = cli("compare", *args, "--json", "--sarif", tmp_path / "a.sarif")
    second = cli("compare", *args, "--json", "--sarif", tmp_path / "b.sarif")
    assert first == second
    a = (tmp_path / "a.sarif").read_text(encoding="utf-8")
    assert a == (tmp_path / "b.sarif").read_text(encoding="utf-8")
    results = json.loads(a)["runs"][0]["results"]
    assert results and {r["properties"]["baseline"] for r in results} == {
        "fixtures/hf_runs/healthy/trainer_state.json"}
    floor = next(r for r in results if r["ruleId"] == "TP-FLOOR-RATIO")
    assert floor["locations"][0]["physicalLocation"]["region"]["startLine"] == 334  # 1-based


def test_text_output_ends_with_a_ranking_table():
    code, out, _ = cli("compare", HEALTHY, HF_RUNS / "lr_zero", HEALTHY / "checkpoint-100", HF_RUNS / "overfit")
    assert code == 1
    lines = out.splitlines()
    assert "== fixtures/hf_runs/lr_zero/trainer_state.json vs baseline fixtures/hf_runs/healthy/trainer_state.json: FAIL" in out
    start = next(i for i, line in enumerate(lines) if line.startswith("ranking against baseline"))
    assert lines[start] == ("ranking against baseline fixtures/hf_runs/healthy/trainer_state.json "
                            "(judged alone: PASS); ratios are run/baseline at the same steps:")
    table = lines[start + 2:]
    # The table is the end of the output: a row per run, and under a row whose common span
    # ends before a run does, the note saying so.
    assert len(table) == 6
    assert table[0].split()[:4] == ["1", "PASS", "1.00x", "1.00x"]
    assert table[0].split()[-1] == "fixtures/hf_runs/healthy/checkpoint-100/trainer_state.json"
    assert table[1].strip() == "^ compared over steps 1-100 only: the baseline's loss goes on to step 200"
    # Among the FAILs, the lower end ratio ranks higher.
    assert table[2].split()[:3] == ["2", "FAIL", "0.07x"] and "overfit" in table[2]
    assert table[3].strip() == "^ compared over steps 1-160 only: the baseline's loss goes on to step 200"
    assert table[4].split()[:4] == ["3", "FAIL", "3.07x", "3.07x"]
    assert table[4].endswith("TP-DEAD-RUN TP-END-RATIO TP-FLOOR-RATIO TP-IMPROVE-DEFICIT TP-ZERO-LR")
    assert table[5].strip() == "^ compared over steps 1-100 only: the baseline's loss goes on to step 200"


# --- alignment: other logging intervals, other lengths, disjoint steps ------------------------

def test_runs_logging_at_other_intervals_compare_without_error(tmp_path):
    base = log(tmp_path, "base", list(range(1, 201)), 3.0, 1.0)
    run = log(tmp_path, "run", list(range(7, 201, 7)), 3.0, 1.0)
    r = one(base, run)
    assert r.verdict is Verdict.PASS, [(f.id, f.message) for f in r.findings]
    assert (r.comparison["axis"], r.comparison["common_from"], r.comparison["common_to"]) == ("step", 7, 196)
    # The baseline is read at the run's own steps: the matched ratios are exactly 1.
    assert r.comparison["start_ratio"] == pytest.approx(1.0) and r.comparison["end_ratio"] == pytest.approx(1.0)
    # And the other way round: a sparse baseline is interpolated between its points.
    back = one(run, base)
    assert back.verdict is Verdict.PASS
    assert back.comparison["end_ratio"] == pytest.approx(1.0, abs=0.02)


def test_a_run_stopped_early_is_compared_over_the_steps_it_has(tmp_path):
    base = log(tmp_path, "base", list(range(1, 201)), 3.0, 1.0)
    run = log(tmp_path, "run", list(range(1, 61)), 3.0, 1.0)
    r = one(base, run)
    assert r.verdict is Verdict.PASS
    assert (r.comparison["common_from"], r.comparison["common_to"]) == (1, 60)
    longer = one(run, base)  # a run longer than its baseline: judged on the common steps
    assert longer.verdict is Verdict.PASS and longer.comparison["common_to"] == 60


def test_logs_without_common_steps_are_aligned_by_fraction_of_the_schedule(tmp_path):
    base = log(tmp_path, "base", list(range(1, 101)), 3.0, 1.0, length=100)
    steps = list(range(1010, 2001, 10))
    (tmp_path / "run").mkdir()
    # The same curve, stretched over 2000 steps: at each fraction of the schedule the same level.
    run = write_jsonl(tmp_path / "run", rows(steps, [1.0 + 2.0 * math.exp(-(s / 20) / 15) for s in steps]))
    r = one(base, run)
    assert r.comparison["axis"] == "fraction"
    assert (r.comparison["common_from"], r.comparison["common_to"]) == (0.505, 1)
    assert r.verdict is Verdict.PASS, [(f.id, f.message) for f in r.findings]
    assert "ratios are run/baseline at the same fractions of the schedule:" in render.to_text(
        compare.compare(base, [run], Config()))


def test_a_run_whose_floor_is_6x_the_baseline_fails_though_its_own_loss_fell_by_half(tmp_path):
    base = log(tmp_path, "base", list(range(1, 201)), 3.0, 1.0)
    run = log(tmp_path, "run", list(range(1, 201)), 15.0, 6.0)
    r = one(base, run)
    assert ids(r) == ["TP-END-RATIO", "TP-FLOOR-RATIO"]
    assert finding(r, "TP-FLOOR-RATIO").evidence["ratio"] == pytest.approx(6.0, rel=0.01)
    assert r.comparison["run_improvement"] == pytest.approx(0.5536, abs=1e-4)


def test_limits_and_rule_selection_come_from_the_config(tmp_path):
    base = log(tmp_path, "base", list(range(1, 201)), 3.0, 1.0)
    run = log(tmp_path, "run", list(range(1, 201)), 15.0, 6.0)
    cfg = tmp_path / "trainproof.toml"
    cfg.write_text('ignore = ["TP-END-RATIO"]\n[limits.TP-FLOOR-RATIO]\nmax_ratio = 10.0\n', encoding="utf-8")
    r = one(base, run, load_file(cfg))
    assert r.findings == () and r.verdict is Verdict.PASS
    assert {c.group: c.reason for c in r.checks if not c.ran}["TP-END-RATIO"] == "disabled by configuration"


def test_a_baseline_that_barely_improved_gives_no_deficit_scale(tmp_path):
    flat = log(tmp_path, "flat", list(range(1, 101)), 2.0, 1.98)
    r = one(flat, flat)
    reason = {c.group: c.reason for c in r.checks if not c.ran}["TP-IMPROVE-DEFICIT"]
    assert reason.startswith("the baseline improved only ") and "at least 5%" in reason


def test_steps_out_of_order_are_compared_in_step_order(tmp_path):
    steps = list(range(1, 101))
    values = curve(steps, 3.0, 1.0, length=100)
    (tmp_path / "base").mkdir()
    base = write_jsonl(tmp_path / "base", rows(steps, values))
    (tmp_path / "run").mkdir()
    shuffled = list(zip(steps, values))
    shuffled = shuffled[50:] + shuffled[:50]  # a resumed log appended out of order
    run = write_jsonl(tmp_path / "run", [{"step": s, "loss": v} for s, v in shuffled])
    r = one(base, run)
    assert r.verdict is Verdict.PASS
    assert r.comparison["end_ratio"] == pytest.approx(1.0)


# --- what cannot be compared: NOT-CHECKED, exit 2, one line, no traceback ---------------------

def _not_checked(code: int, doc: dict[str, Any], rule_id: str) -> dict[str, Any]:
    assert code == 2
    (report,) = doc["reports"]
    assert report["verdict"] == "NOT-CHECKED" and doc["worst_verdict"] == "NOT-CHECKED"
    assert report["reason"] and "\n" not in report["reason"]
    assert [f["id"] for f in report["findings"]] == [rule_id]
    assert report["findings"][0]["level"] == "NOT-CHECKED"
    assert [s["id"] for s in report["checks"]["skipped"]] == CMP_IDS
    return report


def test_a_missing_baseline_is_not_checked_with_exit_2(tmp_path):
    code, doc = compare_json(tmp_path / "nope", HF_RUNS / "overfit")
    report = _not_checked(code, doc, "TP-CMP-ERROR")
    assert report["reason"] == f"cannot compare with baseline {tmp_path / 'nope'}: no such file or folder"
    assert report["baseline"]["path"] == str(tmp_path / "nope")
    assert report["artefact"]["path"] == "fixtures/hf_runs/overfit/trainer_state.json"
    code, out, _ = cli("compare", tmp_path / "nope", HF_RUNS / "overfit")
    assert code == 2
    assert (f"fixtures/hf_runs/overfit/trainer_state.json: NOT-CHECKED cannot compare with baseline "
            f"{tmp_path / 'nope'}: no such file or folder") in out.splitlines()


def test_a_run_that_fails_alone_fails_even_when_the_baseline_is_missing(tmp_path):
    code, doc = compare_json(tmp_path / "nope", HF_RUNS / "lr_zero")
    assert code == 1
    (report,) = doc["reports"]
    assert report["verdict"] == "FAIL"
    assert sorted(f["id"] for f in report["findings"]) == ["TP-AT-CHANCE", "TP-CMP-ERROR", "TP-DEAD-RUN", "TP-ZERO-LR"]
    assert report["reason"] == f"cannot compare with baseline {tmp_path / 'nope'}: no such file or folder"


def test_an_unreadable_baseline_names_the_line_the_reader_stopped_at(tmp_path):
    (tmp_path / "broken").mkdir()
    text = (HEALTHY / "trainer_state.json").read_text(encoding="utf-8").splitlines()
    (tmp_path / "broken" / "trainer_state.json").write_text("\n".join(text[:40]) + "\n", encoding="utf-8")
    code, doc = compare_json(tmp_path / "broken", HF_RUNS / "overfit")
    report = _not_checked(code, doc, "TP-CMP-ERROR")
    assert report["reason"].startswith(f"cannot compare with baseline {tmp_path / 'broken' / 'trainer_state.json'}:41:")
    assert "invalid JSON" in report["reason"]
    assert report["findings"][0]["location"]["range"]["start"]["line"] == 40


def test_a_baseline_without_loss_is_uncomparable(tmp_path):
    (tmp_path / "evals").mkdir()
    state = {"log_history": [{"step": s, "eval_loss": 2.0 - s / 100} for s in range(10, 101, 10)],
             "max_steps": 100}
    (tmp_path / "evals" / "trainer_state.json").write_text(json.dumps(state, indent=2), encoding="utf-8")
    code, doc = compare_json(tmp_path / "evals", HF_RUNS / "overfit")
    report = _not_checked(code, doc, "TP-CMP-UNCOMPARABLE")
    assert report["reason"] == (f"cannot compare with baseline {tmp_path / 'evals' / 'trainer_state.json'}: "
                                "the baseline logs no loss")


def test_a_run_with_too_few_points_is_uncomparable(tmp_path):
    base = log(tmp_path, "base", list(range(1, 101)), 3.0, 1.0)
    run = log(tmp_path, "run", [1, 2, 3], 3.0, 1.0)
    code, doc = compare_json(base, run)
    report = _not_checked(code, doc, "TP-CMP-UNCOMPARABLE")
    assert report["reason"].endswith("the run has 3 finite loss point(s); a comparison needs at least 6")
    assert report["findings"][0]["location"]["path"] == str(run)


def test_non_positive_losses_are_uncomparable(tmp_path):
    base = log(tmp_path, "base", list(range(1, 101)), 3.0, 1.0)
    (tmp_path / "zero").mkdir()
    run = write_jsonl(tmp_path / "zero", [{"step": s, "loss": 0.0} for s in range(1, 101)])
    code, doc = compare_json(base, run)
    # Uncomparable, and a zero loss fails the run on its own: that FAIL is kept.
    assert code == 1
    (report,) = doc["reports"]
    assert report["verdict"] == "FAIL"
    assert report["reason"].endswith("the run logs a loss of 0 in the common span: ratios of non-positive "
                                     "losses mean nothing")
    assert [f["id"] for f in report["findings"] if f["level"] != "FAIL"] == ["TP-CMP-UNCOMPARABLE"]
    assert sorted(f["id"] for f in report["findings"] if f["level"] == "FAIL") == own_fail_ids(run)


def test_a_baseline_folder_with_several_runs_must_be_named_more_precisely():
    code, doc = compare_json(HF_RUNS, HEALTHY)
    report = _not_checked(code, doc, "TP-CMP-ERROR")
    assert "holds 6 runs" in report["reason"] and "name one run's log or folder" in report["reason"]


def test_a_missing_run_is_not_checked_beside_the_others(tmp_path):
    code, doc = compare_json(HEALTHY, HEALTHY / "checkpoint-100", tmp_path / "nope")
    assert code == 2
    assert [r["verdict"] for r in doc["reports"]] == ["PASS", "NOT-CHECKED"]
    assert doc["reports"][1]["reason"] == f"{tmp_path / 'nope'}: no such file or folder"
    assert doc["reports"][1]["findings"][0]["id"] == "TP-NOT-CHECKED"


def test_compare_without_a_run_and_without_a_configured_baseline_is_a_usage_error(tmp_path):
    code, out, _ = cli("compare", HEALTHY, cwd=tmp_path)
    assert code == 2
    assert "error: compare needs a BASELINE and at least one RUN" in out


# --- doctor --baseline ------------------------------------------------------------------------

def test_doctor_with_baseline_adds_a_comparison_report_after_each_run():
    code, out, _ = cli("doctor", HF_RUNS / "lr_zero", "--baseline", HEALTHY, "--json")
    doc = json.loads(out)
    assert code == 1
    got = [(r["artefact"]["path"], r["artefact"]["kind"], r.get("baseline", {}).get("path"), r["verdict"])
           for r in doc["reports"]]
    assert got == [("fixtures/hf_runs/lr_zero/trainer_state.json", "metrics", None, "FAIL"),
                   ("fixtures/hf_runs/lr_zero/trainer_state.json", "comparison",
                    "fixtures/hf_runs/healthy/trainer_state.json", "FAIL")]
    assert "TP-ZERO-LR" in {f["id"] for f in doc["reports"][0]["findings"]}
    # The comparison report keeps the run's own FAILs beside the comparison's.
    own = {f["id"] for f in doc["reports"][0]["findings"] if f["level"] == "FAIL"}
    assert own == {"TP-AT-CHANCE", "TP-DEAD-RUN", "TP-ZERO-LR"}
    assert {f["id"] for f in doc["reports"][1]["findings"]} == {"TP-END-RATIO", "TP-FLOOR-RATIO",
                                                                "TP-IMPROVE-DEFICIT"} | own


def test_doctor_with_baseline_sarif_holds_each_finding_once(tmp_path):
    sarif = tmp_path / "out.sarif"
    code, out, _ = cli("doctor", HF_RUNS / "lr_zero", "--baseline", HEALTHY, "--json", "--sarif", sarif)
    doc = json.loads(out)
    results = json.loads(sarif.read_text())["runs"][0]["results"]
    keys = [(r["ruleId"], r["message"]["text"], json.dumps(r["locations"], sort_keys=True)) for r in results]
    assert len(keys) == len(set(keys))
    # The run's own findings, then the comparison's own (its copies of the run's FAILs once).
    own, comparison = doc["reports"][0]["findings"], doc["reports"][1]["findings"]
    expected = [f["id"] for f in own] + [f["id"] for f in comparison if f not in own]
    assert [r["ruleId"] for r in results] == expected
    assert sorted(r["ruleId"] for r in results if "baseline" in r["properties"]) == [
        "TP-END-RATIO", "TP-FLOOR-RATIO", "TP-IMPROVE-DEFICIT"]


def test_doctor_exit_code_reflects_a_comparison_fail(tmp_path):
    base = log(tmp_path, "base", list(range(1, 201)), 3.0, 1.0)
    run = log(tmp_path, "run", list(range(1, 201)), 15.0, 6.0)
    code, out, _ = cli("doctor", run)
    assert code == 0 and "PASS" in out  # alone, a run whose loss fell 60% looks healthy
    code, out, _ = cli("doctor", run, "--baseline", base, "--json")
    assert code == 1
    verdicts = [(r["artefact"]["kind"], r["verdict"]) for r in json.loads(out)["reports"]]
    assert verdicts == [("metrics", "PASS"), ("comparison", "FAIL")]


def test_doctor_does_not_compare_the_baseline_with_itself():
    outcome = compare.doctor([HF_RUNS], Config(), HEALTHY)
    compared = [r.artefact.path for r in outcome.reports if r.baseline is not None]
    assert len(compared) == 5 and "fixtures/hf_runs/healthy/trainer_state.json" not in compared


def test_doctor_with_an_unreadable_baseline_exits_2_and_says_so(tmp_path):
    code, out, _ = cli("doctor", HEALTHY, "--baseline", tmp_path / "nope", "--json")
    doc = json.loads(out)
    assert code == 2
    # checkpoint-100/training_args.bin (walked: a clean pickle), the run, its comparison
    assert [r["verdict"] for r in doc["reports"]] == ["PASS", "PASS", "NOT-CHECKED"]
    assert doc["reports"][0]["artefact"]["path"].endswith("training_args.bin")
    assert doc["reports"][2]["findings"][0]["id"] == "TP-CMP-ERROR"


# --- the baseline from [tool.trainproof] --------------------------------------------------------

def test_config_baseline_is_relative_to_the_config_file(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.trainproof]\nbaseline = "runs/base"\n', encoding="utf-8")
    assert load_file(tmp_path / "pyproject.toml").baseline == str(tmp_path / "runs" / "base")
    base = log(tmp_path / "runs", "base", list(range(1, 201)), 3.0, 1.0)
    run = log(tmp_path / "runs", "bad", list(range(1, 201)), 15.0, 6.0)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # doctor finds the config upwards from the run and compares with its baseline...
    code, out, _ = cli("doctor", run, "--json", cwd=elsewhere)
    reports = json.loads(out)["reports"]
    assert code == 1 and reports[1]["baseline"]["path"] == str(base)
    # ...and `compare RUN` takes it as the baseline too.
    code, doc = compare_json(run, cwd=elsewhere)
    assert code == 1 and doc["reports"][0]["baseline"]["path"] == str(base)
    assert doc["reports"][0]["artefact"]["path"] == str(run)


@pytest.mark.parametrize("value", ["3", '""'])
def test_a_bad_config_baseline_is_a_configuration_error(tmp_path, value):
    (tmp_path / "pyproject.toml").write_text(f"[tool.trainproof]\nbaseline = {value}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="baseline must be the path"):
        load_file(tmp_path / "pyproject.toml")
    code, out, _ = cli("doctor", HEALTHY, "--config", tmp_path / "pyproject.toml")
    assert code == 2 and "baseline must be the path" in out


def test_in_process_compare_returns_the_exit_code(capsys):
    assert main(["compare", str(HEALTHY), str(HF_RUNS / "lr_zero"), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["reports"][0]["baseline"]["path"].endswith(
        "healthy/trainer_state.json")


# --- the calibration gallery: each run against the same-seed healthy run ---------------------

gallery = pytest.mark.skipif(not GALLERY.is_dir(), reason="calibration corpus not present")


def gallery_compare(config: str, seed: str, base_seed: str | None = None) -> tuple[int, dict[str, Any]]:
    return compare_json(GALLERY / "healthy" / (base_seed or seed), GALLERY / config / seed)


@gallery
@pytest.mark.parametrize("seed", SEEDS)
def test_gallery_shuffled_labels_fail_on_the_floor_ratio(seed):
    code, doc = gallery_compare("bad_labels", seed)
    report = doc["reports"][0]
    assert code == 1 and report["verdict"] == "FAIL"
    assert {f["id"] for f in report["findings"]} == {"TP-FLOOR-RATIO", "TP-END-RATIO"}
    floor = next(f for f in report["findings"] if f["id"] == "TP-FLOOR-RATIO")
    assert 5.0 < floor["evidence"]["ratio"] < 6.0  # "its loss floor is ~6x higher"
    assert report["comparison"]["run_improvement"] > 0.55  # ...while its own loss fell by more than half


@gallery
@pytest.mark.parametrize("seed,fraction", [("seed42", 0.1639), ("seed43", -0.0664), ("seed44", 0.0900)])
def test_gallery_zero_learning_rate_fails_on_every_seed(seed, fraction):
    code, doc = gallery_compare("lr_zero", seed)
    report = doc["reports"][0]
    assert code == 1 and report["verdict"] == "FAIL"
    cmp = [f for f in report["findings"] if BY_ID[f["id"]].applies_to == "comparison"]
    assert [f["id"] for f in cmp] == ["TP-IMPROVE-DEFICIT"]
    assert cmp[0]["evidence"]["fraction"] == pytest.approx(fraction, abs=1e-4)
    # Its own FAILs (judged alone) are kept in the comparison report.
    own = sorted(f["id"] for f in report["findings"] if BY_ID[f["id"]].applies_to != "comparison")
    assert own == own_fail_ids(GALLERY / "lr_zero" / seed)


@gallery
@pytest.mark.parametrize("seed", SEEDS)
def test_gallery_overfit_warns_naming_the_eval_degradation(seed):
    code, doc = gallery_compare("overfit", seed)
    report = doc["reports"][0]
    assert code == 0 and report["verdict"] == "WARN"
    (f,) = report["findings"]
    assert f["id"] == "TP-OVERFIT-VS-BASELINE" and f["level"] == "WARN"
    assert f["message"].startswith("eval loss rose ")
    assert f["evidence"]["run_best_step"] == 30 and f["evidence"]["run_last_step"] == 300
    assert f["evidence"]["run_rise"] > 2.9 and f["evidence"]["relative"] > 3.0
    assert f["evidence"]["baseline_reference"] == "loss"  # the healthy runs log no eval loss


@gallery
@pytest.mark.parametrize("seed,base_seed", [(a, b) for a in SEEDS for b in SEEDS if a != b])
def test_gallery_healthy_seeds_pass_against_each_other(seed, base_seed):
    code, doc = gallery_compare("healthy", seed, base_seed)
    report = doc["reports"][0]
    assert code == 0 and report["verdict"] == "PASS" and report["findings"] == []
    c = report["comparison"]
    assert 0.9 < c["floor_ratio"] < 1.1 and 0.9 < c["end_ratio"] < 1.1
    assert 0.85 < c["run_improvement"] / c["baseline_improvement"] < 1.15


@gallery
@pytest.mark.parametrize("seed", SEEDS)
def test_gallery_doctor_with_baseline_fails_shuffled_labels_that_pass_alone(seed):
    run = GALLERY / "bad_labels" / seed / "trainer_state.json"
    code, out, _ = cli("doctor", run, "--json")
    assert code == 0 and json.loads(out)["reports"][0]["verdict"] != "FAIL"
    code, out, _ = cli("doctor", run, "--baseline", GALLERY / "healthy" / seed, "--json")
    assert code == 1
    assert [r["verdict"] for r in json.loads(out)["reports"]][1] == "FAIL"
