"""TP-ZERO-LOSS-ONSET and TP-ZERO-GRAD at the edges tests/rule_cases/ does not reach: the
shortest logs each judges, and the skip of an all-zero gradient norm beside a loss that
clearly fell, with its levels in full (windows of 2, of n/5 and of at most 20 points)."""

from __future__ import annotations

import pytest

from rule_cases.metrics import run_of
from trainproof_lsp.rules import Context, Skip
from trainproof_lsp.rules.zero import OnsetLimits, ZeroGradLimits, check_zero_grad, check_zero_onset


def test_the_shortest_onset_is_three_zeros_after_one_loss():
    (hit,) = check_zero_onset(run_of(loss=[0.4, 0.0, 0.0, 0.0]), OnsetLimits(), Context())
    assert hit.message == "loss is exactly 0 from step 20 to the end (3 points; limit 3); it was 0.4 at step 10"
    with pytest.raises(Skip, match=r"^3 finite loss point\(s\); this check needs at least 4$"):
        list(check_zero_onset(run_of(loss=[0.4, 0.0, 0.0]), OnsetLimits(), Context()))


def test_three_zero_gradient_norms_are_judged():
    (hit,) = check_zero_grad(run_of(grad_norm=[0.0, 0.0, 0.0]), ZeroGradLimits(), Context())
    assert hit.message == "all 3 logged gradient norms are exactly 0 (steps 10-30)"


def _falling(n: int, start: float, end: float) -> list[float]:
    return [start + (end - start) * i / (n - 1) for i in range(n)]


@pytest.mark.parametrize("n,start,end,said", [
    # ten points: windows of 2 (n/5)
    (10, 3.0, 1.0, "the loss fell from 2.889 to 1.111 (trend z -3.94)"),
    # thirty points: windows of 6
    (30, 3.0, 1.0, "the loss fell from 2.828 to 1.172 (trend z -7.74)"),
    # 110 points: windows of at most 20
    (110, 3.0, 1.0, "the loss fell from 2.826 to 1.174 (trend z -15.48)"),
    # a loss that starts under 1 falls all the same
    (30, 0.8, 0.2, "the loss fell from 0.7483 to 0.2517 (trend z -7.74)"),
])
def test_zero_norms_beside_a_loss_that_clearly_fell_are_not_the_optimizers(n, start, end, said):
    run = run_of(loss=_falling(n, start, end), grad_norm=[0.0] * n)
    with pytest.raises(Skip) as skipped:
        list(check_zero_grad(run, ZeroGradLimits(), Context()))
    assert str(skipped.value) == (f"gradient norms are all 0 but {said}: the logged norm is not the gradient the "
                                  "optimizer used")
