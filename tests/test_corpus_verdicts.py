"""The verdict benchmark's targets on the corpora of real logs beside the project
(../shared/corpus/wild and wild2, labelled before any linter ran; never shipped).

TP_CORPUS=required (CI) makes an absent corpus a failure; elsewhere it is a skip. The checks
are benchmarks/bench_verdicts.py's own (`targets`), so the benchmark and CI cannot disagree;
a healthy run that FAILs fails this test with its name and the rules that fired.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REQUIRED = os.environ.get("TP_CORPUS") == "required"


def _bench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_verdicts", ROOT / "benchmarks" / "bench_verdicts.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_verdicts"] = module
    spec.loader.exec_module(module)
    return module


bench = _bench()


@pytest.fixture(scope="module")
def rows():  # type: ignore[no-untyped-def]
    missing = bench.missing_corpora(bench.DEFAULT_CORPORA)
    if missing:
        names = ", ".join(str(m) for m in missing)
        if REQUIRED:
            pytest.fail(f"TP_CORPUS=required but no labelled corpus at {names}")
        pytest.skip(f"corpus absent ({names}); TP_CORPUS=required makes this a failure")
    return bench.evaluate(bench.DEFAULT_CORPORA, None)


def test_corpora_hold_every_labelled_group(rows):  # type: ignore[no-untyped-def]
    groups = {g for _, _, g, _, _ in rows}
    assert {"healthy", "faulty", "too-short", "appended"} <= groups
    assert sum(g == "healthy" for _, _, g, _, _ in rows) == 69
    assert sum(g == "faulty" for _, _, g, _, _ in rows) == 26


def test_no_healthy_run_fails(rows):  # type: ignore[no-untyped-def]
    assert bench.false_fails(rows) == []


def test_verdict_targets_hold(rows):  # type: ignore[no-untyped-def]
    missed = [text for text, ok in bench.targets(rows) if not ok]
    assert missed == []
