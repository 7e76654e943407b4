"""Verdicts on the shapes real logs have: noisy per-step curves, two views of one loss,
high starts, runs stuck at chance, logs too short to judge, resumed runs, large early
gradient norms. Every log is generated here (seeded), written to tmp_path and judged
through `judge_file` or the CLI; lines are found in the file text.
"""

from __future__ import annotations

import json
import math
import random
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import judge, judge_rows, line_with, none_of, only, ran, skip_reason, start_line
from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import Level, Verdict

REPO = Path(__file__).resolve().parent.parent


def row_line(path: Path, row: dict[str, Any]) -> int:
    return line_with(path, json.dumps(row))


def bad(report) -> list[tuple[str, str]]:
    return [(f.id, f.message) for f in report.findings if f.level in (Level.FAIL, Level.WARN)]


def config_json(folder: Path, **cfg: Any) -> Path:
    path = folder / "config.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return path


# --- 1. spikes are judged on the run's own scale ------------------------------------------

def noisy_per_step_run(n: int = 2400, seed: int = 7) -> list[dict[str, Any]]:
    """Logged every step at batch size 2: each point is one small batch, so it scatters
    about 0.5 in log space around a level falling from 2.5 to 0.8; the last batch is hard
    (6x the level)."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        level = 0.8 + 1.7 * math.exp(-5.0 * i / n)
        loss = level * math.exp(rng.gauss(0.0, 0.5))
        if i == n - 1:
            loss = 6.0 * level
        warm = min(1.0, (i + 1) / 100)
        rows.append({"step": i + 1, "loss": round(loss, 5), "learning_rate": 5e-5 * warm,
                     "grad_norm": round(3.0 * math.exp(rng.gauss(0.0, 0.3)), 4)})
    return rows


def test_long_noisy_per_step_run_with_a_hard_last_batch_passes(tmp_path):
    rows = noisy_per_step_run()
    _, report = judge_rows(tmp_path, rows)
    assert report.verdict is Verdict.PASS, bad(report)
    for rule in ("TP-LOSS-SPIKE", "TP-LOSS-SPIKE-UNRECOVERED", "TP-DIVERGE", "TP-DEAD-RUN", "TP-GRAD-SPIKE"):
        assert ran(report, rule), rule
    assert report.findings == ()


def floor_noise_rows() -> list[dict[str, Any]]:
    """A classifier whose loss falls from 0.26 to a floor of ~0.0013, noisy on the way
    (one-batch points between 0.002 and 0.19), then one hard batch at 0.042 two points
    before the end."""
    rng = random.Random(3)
    losses = [0.2579, 0.1457, 0.0975]
    for i in range(40):
        losses.append(round(0.05 * math.exp(rng.gauss(0.0, 0.9)), 4))
    losses += [round(0.0014 - 0.00002 * i, 5) for i in range(15)]
    losses += [0.042, 0.0013, 0.0033]
    return [{"step": 10 * (i + 1), "loss": v} for i, v in enumerate(losses)]


def test_a_jump_at_the_floor_that_noise_already_makes_is_not_a_spike(tmp_path):
    _, report = judge_rows(tmp_path, floor_noise_rows())
    assert ran(report, "TP-LOSS-SPIKE") and ran(report, "TP-LOSS-SPIKE-UNRECOVERED")
    none_of(report, "TP-LOSS-SPIKE")
    none_of(report, "TP-LOSS-SPIKE-UNRECOVERED")
    assert report.verdict is Verdict.PASS, bad(report)


def test_a_spike_two_points_before_the_end_is_recovery_unknown_never_a_fail(tmp_path):
    # A smooth run falling from 3.0 to ~1.0 that jumps to 5.0 with only two points after it.
    losses = [round(1.0 + 2.0 * math.exp(-i / 4) + 0.01 * ((i * 7) % 5 - 2), 4) for i in range(20)] + [5.0, 4.8, 4.9]
    rows = [{"step": 10 * (i + 1), "loss": v} for i, v in enumerate(losses)]
    path, report = judge_rows(tmp_path, rows)
    none_of(report, "TP-LOSS-SPIKE-UNRECOVERED")
    f = only(report, "TP-LOSS-SPIKE")
    assert f.level is Level.WARN and report.verdict is Verdict.WARN
    assert start_line(f) == row_line(path, rows[20]) == 20
    before = statistics.median(losses[10:20])
    assert f.evidence == {"step": 210, "value": 5.0, "level_before": before, "ratio": 5.0 / before,
                          "level_after": 4.85, "spikes": 1, "points_after": 2}
    assert "2 point(s) after it before the log ends, at 4.85: recovery unknown" in f.message
    assert "over the next 10 points" not in f.message


# --- 2. two views of one loss ----------------------------------------------------------------

def lightning_csv(path: Path, epoch_losses: list[float], *, seed: int = 11, steps_per_epoch: int = 20,
                  nan_at: int | None = None) -> list[str]:
    """A Lightning CSVLogger file: per-step rows (train_loss_step), and per epoch a row with
    train_loss_epoch and a row with val_loss. Returns the lines written."""
    rng = random.Random(seed)
    lines = ["epoch,step,train_loss_epoch,train_loss_step,val_loss"]
    step = 0
    for e, level in enumerate(epoch_losses):
        for _ in range(steps_per_epoch):
            v = level * math.exp(rng.gauss(0.0, 0.6))
            cell = "nan" if step == nan_at else f"{v:.5f}"
            lines.append(f"{e},{step},,{cell},")
            step += 1
        lines.append(f"{e},{step - 1},,,{level * 1.1:.5f}")
        lines.append(f"{e},{step - 1},{level:.5f},,")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return lines


def test_lightning_csv_with_step_and_epoch_loss_healthy_passes(tmp_path):
    path = tmp_path / "metrics.csv"
    lightning_csv(path, [2.0 * 0.8 ** e for e in range(12)])
    report = judge(path)
    assert report.verdict is Verdict.PASS, bad(report)
    assert ran(report, "TP-DIVERGE") and ran(report, "TP-DEAD-RUN") and ran(report, "TP-LOSS-SPIKE")


def test_trend_rules_judge_the_per_epoch_loss_of_a_two_view_log(tmp_path):
    # Per epoch the loss falls to 0.5 then climbs back to 1.6: divergence, judged on the
    # per-epoch series and cited at its last row.
    path = tmp_path / "metrics.csv"
    epochs = [2.0, 1.4, 1.0, 0.7, 0.5, 0.5, 0.8, 1.2, 1.5, 1.6, 1.6, 1.6]
    lines = lightning_csv(path, epochs)
    report = judge(path)
    f = only(report, "TP-DIVERGE")
    assert f.evidence["series"] == "loss_epoch"
    assert f.evidence["end_level"] == 1.6 and f.evidence["best_level"] == 0.5
    assert f.evidence["end_step"] == 239 and f.evidence["best_step"] == 99
    assert start_line(f) == lines.index("11,239,1.60000,,")
    assert f.message.startswith("per-epoch train loss level 1.6 at the end (step 239) is 3.20x")


def test_the_per_step_loss_of_a_two_view_log_serves_the_nan_check(tmp_path):
    path = tmp_path / "metrics.csv"
    lines = lightning_csv(path, [2.0 * 0.8 ** e for e in range(12)], nan_at=45)
    report = judge(path)
    f = only(report, "TP-NAN")
    assert f.evidence["first_step"] == 45
    assert start_line(f) == next(i for i, ln in enumerate(lines) if ln.endswith(",45,,nan,"))


# --- 4. at chance --------------------------------------------------------------------------------

def at_ln2_rows(n: int = 60, *, seed: int = 5) -> list[dict[str, Any]]:
    """A binary classifier whose labels carry no signal: train loss at ln 2 +- 1%, eval
    accuracy 0.5 every 20 steps."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    for i in range(n):
        rows.append({"step": 10 * (i + 1), "loss": round(math.log(2) * (1 + rng.uniform(-0.01, 0.01)), 5),
                     "learning_rate": 2e-5})
        if (i + 1) % 20 == 0:
            rows.append({"step": 10 * (i + 1), "eval_loss": 0.6932, "eval_accuracy": 0.5})
    return rows


def test_binary_classifier_at_ln2_for_the_whole_run_fails_at_chance(tmp_path):
    # A single_label_classification config that names no labels has 2 (transformers' default).
    config = config_json(tmp_path, architectures=["BertForSequenceClassification"],
                         problem_type="single_label_classification")
    rows = at_ln2_rows()
    path, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-AT-CHANCE")
    assert f.level is Level.FAIL and report.verdict is Verdict.FAIL
    losses = [r["loss"] for r in rows if "loss" in r]
    assert start_line(f) == row_line(path, rows[0])
    assert f.evidence == {"level": statistics.median(losses), "uniform_bound": math.log(2),
                          "ratio": statistics.median(losses) / math.log(2), "num_classes": 2,
                          "step": 10, "last_step": 600, "points": 60, "eval_accuracy": 0.5,
                          "chance_accuracy": 0.5, "accuracy_at_chance": True,
                          "band": 0.03 * math.log(2)}  # a quiet run: the 3% floor
    assert f"classes from {config}" in f.message and "for the whole log" in f.message
    assert "eval accuracy 0.5 at step 600 is near chance 1/2 = 0.5" in f.message
    (rel,) = f.related
    assert start_line(rel) == row_line(path, rows[-1])


def test_classes_from_num_classes_flag_and_setting(tmp_path):
    rows = at_ln2_rows()
    _, report = judge_rows(tmp_path, rows)
    assert skip_reason(report, "TP-AT-CHANCE").startswith("number of classes unknown")
    log = tmp_path / "metrics.jsonl"
    proc = subprocess.run([sys.executable, "-m", "trainproof_lsp", "epoch", str(log), "--num-classes", "2",
                           "--json"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 1, proc.stderr
    (hit,) = [f for f in json.loads(proc.stdout)["reports"][0]["findings"] if f["id"] == "TP-AT-CHANCE"]
    assert hit["evidence"]["num_classes"] == 2 and "classes from --num-classes" in hit["message"]
    (tmp_path / "pyproject.toml").write_text("[tool.trainproof]\nnum_classes = 2\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "trainproof_lsp", "epoch", str(log), "--json"],
                          cwd=tmp_path, capture_output=True, text=True)
    (hit,) = [f for f in json.loads(proc.stdout)["reports"][0]["findings"] if f["id"] == "TP-AT-CHANCE"]
    assert "classes from num_classes in" in hit["message"]


def test_a_classifier_that_learns_then_collapses_back_to_chance_fails(tmp_path):
    config_json(tmp_path, architectures=["BertForSequenceClassification"], num_labels=2)
    learn = [0.69, 0.6, 0.5, 0.42, 0.38, 0.35, 0.33, 0.31, 0.3, 0.3, 0.45, 0.6]
    stuck = [round(math.log(2) * (1 + 0.005 * ((i * 3) % 5 - 2)), 5) for i in range(18)]
    rows = [{"step": 10 * (i + 1), "loss": v} for i, v in enumerate(learn + stuck)]
    path, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-AT-CHANCE")
    assert f.evidence["step"] == 130 and f.evidence["points"] == 18
    assert f.evidence["level"] == statistics.median(stuck)
    assert start_line(f) == row_line(path, rows[12])
    assert "from step 130 to the end" in f.message


def test_a_language_model_stuck_at_ln_v_fails_at_chance(tmp_path):
    config_json(tmp_path, architectures=["GPT2LMHeadModel"], vocab_size=50257)
    ln_v = math.log(50257)
    rows = [{"step": 5 * (i + 1), "loss": round(ln_v * (1 + 0.004 * ((i * 7) % 5 - 2)), 4)} for i in range(40)]
    _, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-AT-CHANCE")
    assert f.evidence["num_classes"] == 50257 and f.evidence["points"] == 40
    assert "eval_accuracy" not in f.evidence


def test_a_healthy_classifier_is_not_at_chance(tmp_path):
    config_json(tmp_path, architectures=["BertForSequenceClassification"], num_labels=2)
    rows = [{"step": 10 * (i + 1), "loss": round(0.05 + 0.65 * math.exp(-i / 6), 4)} for i in range(40)]
    _, report = judge_rows(tmp_path, rows)
    assert ran(report, "TP-AT-CHANCE")
    assert report.verdict is Verdict.PASS, bad(report)


# --- 5. too short to judge --------------------------------------------------------------------

def test_a_five_point_log_is_not_a_bare_pass(tmp_path):
    rows = [{"step": 10 * (i + 1), "loss": v} for i, v in enumerate([3.47, 3.1, 2.8, 2.5, 2.37])]
    path, report = judge_rows(tmp_path, rows)
    reason = "5 finite loss points; the trend checks need at least 7, up to 10 as the loss's own noise requires"
    assert skip_reason(report, "TP-DEAD-RUN") == reason
    assert skip_reason(report, "TP-DIVERGE") == reason
    f = only(report, "TP-NOT-CHECKED")
    assert f.level is Level.NOT_CHECKED
    assert f.message == f"too short to judge the loss curve: {reason} (TP-DEAD-RUN, TP-DIVERGE not checked)"
    assert start_line(f) == row_line(path, rows[-1])
    assert report.verdict is Verdict.NOT_CHECKED and report.reason == f.message
    proc = subprocess.run([sys.executable, "-m", "trainproof_lsp", "epoch", str(path)], cwd=tmp_path,
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "NOT-CHECKED too short to judge the loss curve: 5 finite loss points" in proc.stdout


def test_a_short_log_with_a_fail_is_a_fail(tmp_path):
    rows = [{"step": 10 * (i + 1), "loss": v} for i, v in enumerate([3.4, 3.1, math.nan, 2.5, 2.3])]
    _, report = judge_rows(tmp_path, rows)
    assert report.verdict is Verdict.FAIL
    assert [f.id for f in report.findings if f.level is not Level.INFO] == ["TP-NAN"]


def test_few_train_points_but_many_evals_are_judged_on_the_evals(tmp_path):
    # 5 train losses; 20 evals whose best is the first and the next 19 are 1.3-1.8x worse.
    rng = random.Random(9)
    evals = [2.55] + [round(2.55 * rng.uniform(1.3, 1.8), 3) for _ in range(19)]
    rows: list[dict[str, Any]] = []
    for i, v in enumerate(evals):
        step = 132 * (i + 1)
        rows.append({"step": step, "eval_loss": v})
        if step % 500 < 132:
            rows.append({"step": step, "loss": round(1.2 + 0.15 * (i % 3), 3)})
    path, report = judge_rows(tmp_path, rows)
    assert report.verdict is Verdict.FAIL
    f = only(report, "TP-DEAD-RUN")
    assert f.evidence["series"] == "eval_loss"
    assert f.evidence["first_eval"] == 2.55 and f.evidence["best_later_eval"] == min(evals[1:])
    assert f.evidence["evals"] == 20 and f.evidence["median_later_eval"] == statistics.median(evals[1:])
    assert start_line(f) == row_line(path, {"step": 2640, "eval_loss": evals[-1]})
    assert "eval loss never improved on its first value 2.55 (step 132)" in f.message
    none_of(report, "TP-NOT-CHECKED")


def test_few_train_points_and_evals_that_plateau_from_the_first_are_not_dead(tmp_path):
    evals = [0.5] + [round(0.5 * (1 + 0.01 * ((i * 3) % 5 - 2)), 4) for i in range(19)]
    rows: list[dict[str, Any]] = []
    for i, v in enumerate(evals):
        rows.append({"step": 100 * (i + 1), "eval_loss": v})
        if i % 4 == 0:
            rows.append({"step": 100 * (i + 1), "loss": round(0.6 - 0.01 * i, 3)})
    _, report = judge_rows(tmp_path, rows)
    assert ran(report, "TP-DEAD-RUN")
    none_of(report, "TP-DEAD-RUN")
    assert report.verdict is Verdict.PASS, bad(report)


# --- 6. resumed runs -------------------------------------------------------------------------

def test_a_resumed_run_with_a_learning_rate_never_above_1e7_is_dead(tmp_path):
    rng = random.Random(4)
    lrs = [1e-8 * ((i % 10) + 1) for i in range(35)]
    rows = [{"step": 32950 + 50 * i, "loss": round(4.05 * (1 + rng.uniform(-0.05, 0.05)), 4),
             "lr": lrs[i]} for i in range(35)]
    path, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-DEAD-RUN")
    assert f.evidence["max_lr"] == 1e-7
    assert f.evidence["trend_z"] > -2.0
    assert f.message.startswith("learning rate never above 1e-07 (limit 1e-07) and the loss shows no "
                                "significant fall over steps 32950-34650")
    assert start_line(f) == row_line(path, rows[-1])


def test_a_resumed_run_that_gets_worse_is_flagged(tmp_path):
    rng = random.Random(8)
    rows = [{"step": 140000 + 50 * i, "loss": round((3.67 + 0.0001 * i) * (1 + rng.uniform(-0.01, 0.01)), 4),
             "lr": 3e-4} for i in range(600)]
    path, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-DEAD-RUN")
    losses = [r["loss"] for r in rows]
    # Windows of 20; the start level is the higher of the first 10 and first 20 points' medians.
    start = max(statistics.median(losses[:10]), statistics.median(losses[:20]))
    end = statistics.median(losses[-20:])
    assert f.evidence["start_level"] == start and f.evidence["end_level"] == end
    assert f.evidence["drop"] == (start - end) / start < -0.005
    assert f.evidence["trend_z"] >= 2.0
    assert f.message.startswith("resumed at step 140000, the loss got worse")
    assert start_line(f) == row_line(path, rows[-1])


def test_a_resumed_run_resting_at_its_floor_is_not_dead(tmp_path):
    rng = random.Random(2)
    rows = [{"step": 20000 + 10 * i, "loss": round(0.9 * (1 + rng.uniform(-0.03, 0.03)), 4),
             "lr": 1e-5} for i in range(60)]
    _, report = judge_rows(tmp_path, rows)
    none_of(report, "TP-DEAD-RUN")
    assert "a resumed run at its floor need not improve" in skip_reason(report, "TP-DEAD-RUN")


# --- 7. large gradient norms in the first steps ---------------------------------------------

def test_grad_norms_high_only_during_warm_up_are_not_spikes(tmp_path):
    rows = []
    for i in range(200):
        warm = min(1.0, (i + 1) / 20)
        grad = 40.0 + 30.0 * (i % 3) if i < 15 else 0.8 + 0.1 * (i % 4)
        rows.append({"step": i + 1, "loss": round(0.9 + 2.0 * math.exp(-i / 8), 4), "learning_rate": 2e-4 * warm,
                     "grad_norm": grad})
    _, report = judge_rows(tmp_path, rows)
    assert ran(report, "TP-GRAD-SPIKE")
    none_of(report, "TP-GRAD-SPIKE")
    assert report.verdict is Verdict.PASS, bad(report)


def test_repeated_mid_run_grad_spikes_still_fire(tmp_path):
    rows = []
    for i in range(200):
        grad = 1.0 + 0.1 * (i % 4)
        loss = 0.9 + 2.0 * math.exp(-i / 8)
        if i in (120, 150):
            grad = 40.0
            loss += 0.05  # the loss notices the batch (a peak the loss does not notice is no spike)
        rows.append({"step": i + 1, "loss": round(loss, 4), "grad_norm": grad})
    path, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-GRAD-SPIKE")
    assert f.evidence["spikes"] == 2 and f.evidence["step"] == 121 and f.evidence["quiet_peaks"] == 0
    assert start_line(f) == row_line(path, rows[120])


# --- overfitting that lasts without reaching 20% -------------------------------------------

def test_three_evals_in_a_row_ten_percent_above_the_best_while_train_falls_is_overfit(tmp_path):
    evals = [1.45, 1.38, 1.326, 1.37, 1.36, 1.43, 1.44, 1.48, 1.51, 1.49]  # last 1.12x the best
    rows: list[dict[str, Any]] = []
    for i, v in enumerate(evals):
        for j in range(5):
            rows.append({"step": 50 * i + 10 * j + 10, "loss": round(1.5 - 0.007 * (5 * i + j), 4)})
        rows.append({"step": 50 * i + 50, "eval_loss": v})
    path, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-OVERFIT")
    assert f.level is Level.WARN and report.verdict is Verdict.WARN
    assert f.evidence["best_eval"] == 1.326 and f.evidence["best_step"] == 150
    # The lowest level is median(1.326, 1.37, 1.36) = 1.36 (step 200), the end level the
    # median of the last three evals 1.49.
    assert f.evidence["best_level"] == 1.36 and f.evidence["end_level"] == 1.49
    assert f.evidence["last_eval"] == 1.49 and f.evidence["ratio"] == 1.49 / 1.36
    assert start_line(f) == row_line(path, {"step": 500, "eval_loss": 1.49})


def test_a_noisy_eval_two_points_above_its_best_is_not_overfit(tmp_path):
    evals = [0.27, 0.26, 0.239, 0.2415, 0.2389, 0.253, 0.2273, 0.2433, 0.2225, 0.2194, 0.2088, 0.2155,
             0.2494, 0.2393]
    rows: list[dict[str, Any]] = []
    for i, v in enumerate(evals):
        for j in range(5):
            rows.append({"step": 50 * i + 10 * j + 10, "loss": round(0.3 - 0.003 * (5 * i + j), 4)})
        rows.append({"step": 50 * i + 50, "eval_loss": v})
    _, report = judge_rows(tmp_path, rows)
    assert ran(report, "TP-OVERFIT")
    none_of(report, "TP-OVERFIT")
