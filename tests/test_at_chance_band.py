"""TP-AT-CHANCE's band around ln(C) is set from the run's own noise (issue 26, class 3):
the larger of 3% and 3 spreads of a window median at the point noise (1.4826 x MAD of first
differences / sqrt 2). Fixtures: numpy's seeded noise of a batch of 16 around ln 2."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from trainproof_lsp.core.config import Config

from conftest import judge_rows, none_of, only, ran

LN2 = math.log(2)


def _binary(folder: Path) -> None:
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["BertForSequenceClassification"], "id2label": {"0": "a", "1": "b"}}), encoding="utf-8")


def _rows(offset: float, sigma: float, seed: int = 16, n: int = 100) -> list[dict[str, float]]:
    rng = np.random.default_rng(seed)
    return [{"step": 10 * (i + 1), "loss": round(LN2 + offset + float(rng.normal(0, sigma)), 4)} for i in range(n)]


def test_a_loss_at_ln2_with_batch_noise_is_at_chance_beyond_a_fixed_3pct_band(tmp_path):
    # sigma 0.08 (a batch of 16): 10-point rolling medians wander ~0.03 around ln 2
    _binary(tmp_path)
    _, report = judge_rows(tmp_path, _rows(0.0, 0.08), Config())
    f = only(report, "TP-AT-CHANCE")
    assert f.evidence["band"] > 0.03 * LN2
    assert f.evidence["points"] == 100 and f.evidence["num_classes"] == 2
    assert "band the larger of 3% and 3 spreads of a 10-point median at the point noise" in f.message


def test_a_loss_that_falls_from_ln2_is_not_at_chance(tmp_path):
    _binary(tmp_path)
    rng = np.random.default_rng(16)
    rows = [{"step": 10 * (i + 1), "loss": round(LN2 * math.exp(-i / 30) + 0.05 + float(rng.normal(0, 0.08)), 4)}
            for i in range(100)]
    _, report = judge_rows(tmp_path, rows, Config())
    assert ran(report, "TP-AT-CHANCE")
    none_of(report, "TP-AT-CHANCE")


def test_the_noise_band_each_side(tmp_path):
    # a quiet loss (sigma 0.002): the band is the 3% floor, 0.0208; 2.5% above ln 2 is in it,
    # 4% above is not
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    for folder in (inside, outside):
        folder.mkdir()
        _binary(folder)
    _, report = judge_rows(inside, _rows(0.025 * LN2, 0.002), Config())
    f = only(report, "TP-AT-CHANCE")
    assert round(f.evidence["band"], 4) == round(0.03 * LN2, 4)
    _, report = judge_rows(outside, _rows(0.04 * LN2, 0.002), Config())
    none_of(report, "TP-AT-CHANCE")
