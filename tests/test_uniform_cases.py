"""TP-LOSS-ABOVE-UNIFORM at the edges tests/rule_cases/ does not reach: the skip reason in
full, the end window for logs of 50 and 220 points (n/10, at most 20), the best level taken
from full windows only, and the related location of the best level."""

from __future__ import annotations

import pytest

from rule_cases.metrics import run_of
from trainproof_lsp.rules import Context, Skip
from trainproof_lsp.rules.uniform import Limits, check

TEN = Context(num_classes=10, num_classes_source="config.json")


def _hit(values):
    (hit,) = check(run_of(loss=values), Limits(), TEN)
    return hit


def test_without_classes_it_says_how_to_give_them():
    with pytest.raises(Skip) as skipped:
        list(check(run_of(loss=[5.0] * 10), Limits(), Context()))
    assert str(skipped.value) == ("number of classes unknown: pass --vocab-size or --num-classes, set vocab_size or "
                                  "num_classes in the config, or keep config.json beside the log")


@pytest.mark.parametrize("n,window", [(50, 5), (220, 20)])
def test_the_end_level_is_the_median_of_the_last_tenth_up_to_20(n, window):
    hit = _hit([5.0] * n)
    first = 10 + 10 * (n - window)
    assert f"loss level 5 at the end (steps {first}-{10 * n})" in hit.message
    assert hit.evidence["step"] == first


def test_the_best_level_is_a_full_windows_median_and_is_related():
    # one low first point: a window of 3 that ends there would be that point alone
    hit = _hit([1.0] + [5.0, 4.0] * 5 + [5.0] * 9)
    assert "its best level was 4 " in hit.message
    (related,) = hit.related
    assert related.message == "best loss level 4 around step 30"
    assert related.location.span is not None and related.location.span.start_line == 2
