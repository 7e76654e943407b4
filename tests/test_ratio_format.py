"""One number format for ratios across rules (rules/base.times): "22.23x", "159,969x",
never "3.143e+04x" beside "159968.74x"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trainproof_lsp.rules.base import times

RULES = Path(__file__).resolve().parent.parent / "trainproof_lsp" / "rules"


@pytest.mark.parametrize(("x", "shown"), [
    (1.0, "1.00x"), (22.2345, "22.23x"), (-0.001, "0.00x"), (999.994, "999.99x"),
    (1000.0, "1,000x"), (31430.2, "31,430x"), (159968.74, "159,969x"), (float("inf"), "infx"),
])
def test_times_writes_every_ratio_one_way(x, shown):
    assert times(x) == shown


def test_no_rule_formats_a_ratio_in_its_own_way():
    own = [f"{p.name}:{i}: {line.strip()}" for p in sorted(RULES.glob("*.py")) if p.name != "base.py"
           for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
           if re.search(r":[,.0-9]*[fge]\}x", line)]
    assert own == []


@pytest.mark.parametrize(("key", "message"), [
    ("throughput", "throughput 120 (median of 12 point(s))"),
    ("train_samples_per_second", "throughput 120 train_samples_per_second (median of 12 point(s))"),
])
def test_throughput_names_its_unit_once(tmp_path, key, message):
    import json

    from trainproof_lsp.core.config import Config
    from trainproof_lsp.judge.engine import judge_file

    log = tmp_path / "metrics.jsonl"
    log.write_text("".join(json.dumps({"step": 10 * i, "loss": 3 - 0.1 * i, key: 120.0}) + "\n" for i in range(1, 13)),
                   encoding="utf-8")
    (f,) = [f for f in judge_file(log, Config()).findings if f.id == "TP-THROUGHPUT"]
    assert f.message == message
