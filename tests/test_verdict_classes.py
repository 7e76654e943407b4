"""The classes of verdict mistakes found on real logs nobody here had seen (issue: verdicts
that hold on unseen runs), each as fixtures made here with numpy's seeded noise: the shape
that was judged wrongly, and a quiet case beside it. Noise is that of a batch of 16 where
the issue names it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import Level, Verdict


from conftest import judge, judge_rows, none_of, only, ran

LN2 = math.log(2)


def _classifier_config(folder: Path, labels: int = 2) -> None:
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["BertForSequenceClassification"],
        "id2label": {str(i): f"L{i}" for i in range(labels)}}), encoding="utf-8")


def _shuffled_label_rows(seed: int = 16) -> list[dict[str, Any]]:
    """BERT on shuffled labels: train loss 0.67-0.72 around ln 2 at the noise of a batch of
    16, eval loss ~0.70 and eval accuracy 0.45-0.54 at each of 10 evals."""
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    for e in range(10):
        for j in range(10):
            step = 100 * e + 10 * (j + 1)
            rows.append({"step": step, "loss": round(float(np.clip(LN2 + 0.006 + rng.normal(0, 0.012), 0.67, 0.72)), 4)})
        rows.append({"step": 100 * (e + 1), "eval_loss": round(0.70 + float(rng.normal(0, 0.003)), 4),
                     "eval_accuracy": round(float(rng.uniform(0.45, 0.54)), 3)})
    return rows


def _collapsed_rows(seed: int = 17) -> list[dict[str, Any]]:
    """A learning rate that collapsed the model onto one class: eval accuracy 0.475 and 0.525
    alternating (the two classes' shares as the predicted class flips), loss 0.7-0.9."""
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    for e in range(10):
        for j in range(10):
            rows.append({"step": 100 * e + 10 * (j + 1), "loss": round(float(rng.uniform(0.7, 0.9)), 4)})
        rows.append({"step": 100 * (e + 1), "eval_loss": round(float(rng.uniform(0.7, 0.9)), 4),
                     "eval_accuracy": 0.475 if e % 2 == 0 else 0.525})
    return rows


def test_a_classifier_on_shuffled_labels_is_not_a_pass(tmp_path):
    _classifier_config(tmp_path)
    _, report = judge_rows(tmp_path, _shuffled_label_rows())
    assert report.verdict is Verdict.FAIL
    dead = only(report, "TP-DEAD-RUN")
    assert dead.message.startswith("loss crawls at a uniform guess")
    assert dead.evidence["num_classes"] == 2 and dead.evidence["uniform_bound"] == LN2
    assert abs(dead.evidence["end_level"] / LN2 - 1) <= 0.1 and dead.evidence["drop"] < 0.03
    acc = only(report, "TP-EVAL-ACC-AT-CHANCE")
    assert acc.level is Level.WARN
    assert acc.evidence["chance_accuracy"] == 0.5 and acc.evidence["evals"] == 10
    assert 0.45 <= acc.evidence["median_accuracy"] <= 0.54 and acc.evidence["best_accuracy"] < 0.6


def test_a_classifier_collapsed_onto_one_class_is_not_a_pass(tmp_path):
    _classifier_config(tmp_path)
    _, report = judge_rows(tmp_path, _collapsed_rows())
    assert report.verdict in (Verdict.WARN, Verdict.FAIL)
    acc = only(report, "TP-EVAL-ACC-AT-CHANCE")
    assert acc.evidence == {"median_accuracy": 0.5, "best_accuracy": 0.525, "chance_accuracy": 0.5,
                            "num_classes": 2, "evals": 10}
    assert "(10 evals, steps 100-1000)" in acc.message


def test_eval_accuracy_that_learns_is_not_at_chance(tmp_path):
    _classifier_config(tmp_path)
    rows = _collapsed_rows()
    for i, r in enumerate(x for x in rows if "eval_accuracy" in x):
        r["eval_accuracy"] = round(0.55 + 0.04 * i, 3)  # 0.55 -> 0.91
    _, report = judge_rows(tmp_path, rows)
    assert ran(report, "TP-EVAL-ACC-AT-CHANCE")
    none_of(report, "TP-EVAL-ACC-AT-CHANCE")


def test_eval_accuracy_constant_at_one_class_share_without_classes(tmp_path):
    rows: list[dict[str, Any]] = [{"step": 10 * (i + 1), "eval_loss": 1.6 + 0.01 * (i % 3),
                                   "eval_accuracy": 0.29 if i == 4 else 0.15} for i in range(10)]
    _, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-EVAL-ACC-AT-CHANCE")
    assert f.evidence == {"value": 0.15, "repeats": 9, "evals": 10}
    # 7 of 10 (under the 80% limit) is a model whose score moves.
    for r in rows[:3]:
        r["eval_accuracy"] = 0.2 + 0.01 * r["step"] / 10
    _, report = judge_rows(tmp_path, rows)
    none_of(report, "TP-EVAL-ACC-AT-CHANCE")


def _lightning_stuck(folder: Path, *, end: float, seed: int = 5) -> Path:
    """A Lightning CSVLogger run stuck near ln(V) for 11,000 steps, V from hparams.yaml."""
    rng = np.random.default_rng(seed)
    run = folder / "lightning_logs" / "version_0"
    run.mkdir(parents=True)
    (run / "hparams.yaml").write_text("model:\n  d_model: 256\nvocab_size: 2048\nlr: 0.0003\n", encoding="utf-8")
    lines = ["epoch,step,train_loss"]
    for i in range(220):
        level = 7.66 + (end - 7.66) * i / 219
        lines.append(f"0,{50 * (i + 1) - 1},{level + float(rng.normal(0, 0.02)):.4f}")
    (run / "metrics.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return run / "metrics.csv"


def test_a_run_stuck_near_ln_vocab_for_11000_steps_is_dead(tmp_path):
    path = _lightning_stuck(tmp_path, end=7.62)
    report = judge(path, Config())
    assert report.verdict is Verdict.FAIL
    f = only(report, "TP-DEAD-RUN")
    assert f.message.startswith("loss crawls at a uniform guess")
    assert f.evidence["num_classes"] == 2048 and f.evidence["uniform_bound"] == math.log(2048)
    assert "hparams.yaml" in f.message and "220 points" in f.message
    assert round(f.evidence["drop"], 3) == 0.005


def test_a_run_that_falls_from_ln_vocab_is_not_dead(tmp_path):
    path = _lightning_stuck(tmp_path, end=5.0)
    report = judge(path, Config())
    none_of(report, "TP-DEAD-RUN")
    none_of(report, "TP-AT-CHANCE")


def test_a_crawl_needs_a_stretch_not_a_warm_up(tmp_path):
    """An untrained model starts at ln(C): its first points near it, barely falling, are a
    warm-up, not a crawl. 19 points (under crawl_min_points) are not judged a crawl, 20 are."""
    _classifier_config(tmp_path)
    rows = [r for r in _shuffled_label_rows() if "loss" in r]
    _, report = judge_rows(tmp_path, rows[:19])
    assert [f.id for f in report.findings] == ["TP-AT-CHANCE"]  # the level at ln 2 is judged as such
    _, report = judge_rows(tmp_path, rows[:20])
    assert [f.id for f in report.findings] == ["TP-AT-CHANCE", "TP-DEAD-RUN"]
    f = only(report, "TP-DEAD-RUN")
    assert f.message.startswith("loss crawls at a uniform guess") and "(20 points;" in f.message


def test_negative_cross_entropy_fails_with_the_count(tmp_path):
    _classifier_config(tmp_path, labels=3)
    losses = [1.1 - 0.1 * i for i in range(20)]  # 1.1 ... 0.0 ... -0.8: eight points below 0 (steps 130-200)
    rows = [{"step": 10 * (i + 1), "loss": round(v, 4)} for i, v in enumerate(losses)]
    _, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-NEGATIVE-LOSS")
    assert f.level is Level.FAIL and report.verdict is Verdict.FAIL
    assert f.evidence == {"count": 8, "points": 20, "first_step": 130, "first_value": -0.1,
                          "min_value": -0.8, "num_classes": 3}


def test_a_negative_loss_without_classes_is_not_judged(tmp_path):
    rows = [{"step": 10 * (i + 1), "loss": round(1.1 - 0.1 * i, 4)} for i in range(20)]
    _, report = judge_rows(tmp_path, rows)
    none_of(report, "TP-NEGATIVE-LOSS")
    assert not ran(report, "TP-NEGATIVE-LOSS")


def _collapsing_rows() -> list[dict[str, Any]]:
    rng = np.random.default_rng(3)
    losses = [9.2 * math.exp(-i / 8) + abs(float(rng.normal(0, 3e-4))) for i in range(200)]
    return [{"step": 10 * (i + 1), "loss": v} for i, v in enumerate(losses)]


def test_a_regression_whose_error_falls_to_zero_is_not_judged_a_collapse(tmp_path):
    """Without classes the loss may be a squared error, which a regression on clean targets
    drives to ~0: the rule is skipped and says why."""
    _, report = judge_rows(tmp_path, _collapsing_rows())
    none_of(report, "TP-LOSS-COLLAPSE")
    (check,) = [c for c in report.checks if c.group == "TP-LOSS-COLLAPSE"]
    assert not check.ran and check.reason.startswith("number of classes unknown: the loss may be a regression's")


def test_a_loss_collapsing_to_1e_4_of_its_start_warns(tmp_path):
    _classifier_config(tmp_path, labels=3)
    _, report = judge_rows(tmp_path, _collapsing_rows())
    f = only(report, "TP-LOSS-COLLAPSE")
    assert f.level is Level.WARN
    assert f.evidence["ratio"] < 1e-3 and f.evidence["end_level"] < 0.01
    assert "(200 points; medians of the first and last 20)" in f.message


def test_a_loss_at_a_real_floor_does_not_collapse(tmp_path):
    _classifier_config(tmp_path, labels=3)
    losses = [2.0 + 7.2 * math.exp(-i / 8) for i in range(200)]
    _, report = judge_rows(tmp_path, [{"step": 10 * (i + 1), "loss": v} for i, v in enumerate(losses)])
    assert ran(report, "TP-LOSS-COLLAPSE")
    none_of(report, "TP-LOSS-COLLAPSE")


def _overfit_noise_rows(rise: float, seed: int = 11) -> list[dict[str, Any]]:
    """Evals on a noisy plateau (sigma 0.01) that, after eval 8, rise by `rise` per eval."""
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    for e in range(16):
        for j in range(5):
            i = 5 * e + j
            rows.append({"step": 10 * (i + 1), "loss": round(2.0 * math.exp(-i / 30) + 0.1, 4)})
        level = 0.5 + rise * max(0, e - 8)
        rows.append({"step": 50 * (e + 1), "eval_loss": round(level + float(rng.normal(0, 0.01)), 4)})
    return rows


def test_overfit_fires_on_a_sustained_rise_above_the_eval_noise(tmp_path):
    _, report = judge_rows(tmp_path, _overfit_noise_rows(0.02))
    f = only(report, "TP-OVERFIT")
    assert f.evidence["end_level"] / f.evidence["best_level"] > 1.2
    assert (f.evidence["end_level"] - f.evidence["best_level"]) > 1.4 * f.evidence["eval_noise"]


def test_overfit_is_quiet_on_a_noisy_plateau_with_one_low_eval(tmp_path):
    rows = _overfit_noise_rows(0.0)
    evals = [r for r in rows if "eval_loss" in r]
    evals[9]["eval_loss"] = 0.40  # one-off dip: 0.8x the plateau
    _, report = judge_rows(tmp_path, rows)
    assert ran(report, "TP-OVERFIT")
    none_of(report, "TP-OVERFIT")


def test_one_fp16_overflow_is_info_and_the_run_passes(tmp_path):
    grads: list[float] = [1.0] * 40
    grads[20] = math.nan
    rows = [{"step": 10 * (i + 1), "loss": round(3.0 * math.exp(-i / 10) + 0.5, 4), "grad_norm": g}
            for i, g in enumerate(grads)]
    _, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-GRAD-OVERFLOW")
    assert f.level is Level.INFO and report.verdict is Verdict.PASS
    assert f.evidence == {"count": 1, "first_step": 210, "points": 40}


def test_a_recovered_jump_against_a_noisy_five_point_start_is_not_a_spike(tmp_path):
    rng = np.random.default_rng(21)
    losses = [0.27, 0.57, 0.46, 0.57, 0.44, 0.975] + [
        round(0.55 * math.exp(-i / 40) + 0.2 + float(rng.normal(0, 0.05)), 4) for i in range(74)]
    _, report = judge_rows(tmp_path, [{"step": 25 * (i + 1), "loss": v} for i, v in enumerate(losses)])
    assert ran(report, "TP-LOSS-SPIKE")
    none_of(report, "TP-LOSS-SPIKE")


def _restart_rows(zero_run: int) -> list[dict[str, Any]]:
    """A cosine-with-restarts schedule logged 5 times a cycle, reaching 0 at each cycle's end
    (`zero_run` logged zeros there)."""
    rows: list[dict[str, Any]] = []
    step = 0
    for c in range(30):
        for k in range(5):
            step += 100
            lr = 4e-5 * (1 + math.cos(math.pi * k / 4)) / 2 if k < 5 - zero_run or zero_run == 0 else 0.0
            if k == 4 and zero_run == 1:
                lr = 0.0
            rows.append({"step": step, "loss": round(0.6 * math.exp(-step / 4000) + 0.2, 4), "learning_rate": lr})
    return rows


def test_zero_lr_at_each_restart_boundary_is_the_schedule(tmp_path):
    rows = _restart_rows(1)
    assert sum(r["learning_rate"] == 0.0 for r in rows) == 30  # 20% of the logged points
    _, report = judge_rows(tmp_path, rows)
    assert ran(report, "TP-ZERO-LR-PARTIAL")
    none_of(report, "TP-ZERO-LR-PARTIAL")


def test_zero_lr_stretches_at_each_restart_are_flagged(tmp_path):
    rows = _restart_rows(2)  # two logged zeros in a row per cycle: 60 of 150
    _, report = judge_rows(tmp_path, rows)
    f = only(report, "TP-ZERO-LR-PARTIAL")
    assert f.evidence == {"zero_points": 60, "points": 150, "fraction": 0.4, "first_step": 400}
