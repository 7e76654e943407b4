"""Cases for the comparison family: a run and its baseline, each a Run built from value
lists (rule_cases.metrics.run_of), aligned as `compare` aligns them (rules/compare.align)."""

from __future__ import annotations

from typing import Sequence

from trainproof_lsp.core.config import Config
from trainproof_lsp.judge.engine import judge_run
from trainproof_lsp.rules import Context
from trainproof_lsp.rules._stats import point_noise
from trainproof_lsp.rules.compare import AlignLimits, Pair, align
from trainproof_lsp.rules.objective_compare import BelowLimits, ObjectivePair, align_objective

from . import Expect, FamilyCases, Fires, Quiet, RuleCases, straddle
from .metrics import NAN, Values, grpo, ones, run_of, steady, with_at

N = 60
BASE = steady(N, 2.5, 0.9, 6)  # falls by 64%, windows of 6 at each end
EVALS = [1.4, 1.2, 1.0, 0.9, 0.85, 0.8]  # the baseline's evals, every 10th row


def every_10th(values: Sequence[float]) -> list[float | None]:
    out: list[float | None] = [None] * N
    for k, v in enumerate(values):
        out[10 * k + 9] = v
    return out


def pair(run: Values, base: Values = BASE, *, judged: bool = False, **series: tuple[Values, Values]) -> Pair:
    """The run aligned with its baseline; `series` gives other series as (run's, baseline's);
    `judged`: the baseline's own report goes with it, as compare judges it."""
    r = run_of(loss=run, cols={k: v[0] for k, v in series.items()})
    b = run_of(loss=base, cols={k: v[1] for k, v in series.items()})
    return align(r, b, AlignLimits(), baseline_report=judge_run(b, Config()) if judged else None)


def scaled(r: float) -> Pair:
    return pair([v * r for v in BASE])


def improving(fraction: float) -> Pair:
    """A run that improves by `fraction` of the baseline's 64%."""
    return pair(steady(N, 2.0, 2.0 * (1 - 0.64 * fraction), 6))


def evals(run: Sequence[float], base: Sequence[float] = EVALS) -> Pair:
    return pair(BASE, eval_loss=(every_10th(run), every_10th(base)))


def grads(run: Values, base: Values) -> Pair:
    return pair(BASE, grad_norm=(run, base))


def rewards(run: Sequence[float], base: Sequence[float] = steady(40, 0.2, 0.8, 6)) -> ObjectivePair:
    """Two GRPO runs' rewards aligned on their common steps, as compare aligns them."""
    return align_objective(grpo(len(run), reward=run), grpo(len(base), reward=base), "reward", BelowLimits())


def short_of(fraction: float) -> ObjectivePair:
    """A run whose reward ends `fraction` of the baseline's gain (0.6) below the baseline's end."""
    return rewards(steady(40, 0.2, 0.8 - 0.6 * fraction, 6))


def short_in_noises(k: float, b: float = 0.1) -> ObjectivePair:
    """A run whose reward (+-b alternating) ends k level noises below the baseline's end."""
    def run(end: float) -> list[float]:
        return [v + b * (1 if i % 2 else -1) for i, v in enumerate(steady(40, 0.2, end, 6))]
    end = 0.5
    for _ in range(20):
        end = 0.8 - k * point_noise(run(end)) / 2.0  # a window of 4: the noise over sqrt(4)
    return rewards(run(end))


def context(_: Pair | ObjectivePair) -> Context:
    return Context()


CASES: dict[str, RuleCases] = {
    "TP-FLOOR-RATIO": RuleCases(
        fires=Fires(subject=lambda: scaled(3.0), hits=(Expect(message="loss floor 2.7 (around step 550) is 3.00x the baseline's floor 0.9 (around step 550) over steps 10-600; limit 2.0x",
                           evidence={'run_floor': 2.7, 'baseline_floor': 0.9, 'ratio': 3.0, 'run_floor_step': 550, 'baseline_floor_step': 550}, line=54),),
                    family=('TP-FLOOR-RATIO', 'TP-END-RATIO')),
        quiet=Quiet(subject=lambda: scaled(1.1)),
        straddles=(straddle("max_ratio", 2.0, scaled, fire=2.05, quiet=1.95),),
    ),
    "TP-END-RATIO": RuleCases(
        fires=Fires(subject=lambda: pair(BASE[:40] + [v * 2.5 for v in BASE[40:]]), hits=(Expect(message="loss over steps 550-600 is 2.50x the baseline's at the same steps (median of matched ratios; levels 2.25 vs 0.9); limit 2.0x",
                           evidence={'ratio': 2.5, 'run_end_level': 2.25, 'baseline_end_level': 0.9, 'points': 6, 'end_step': 600}, line=59),),
                    family=('TP-END-RATIO', 'TP-IMPROVE-DEFICIT')),
        quiet=Quiet(subject=lambda: scaled(0.5)),
        straddles=(straddle("max_ratio", 2.0, scaled, fire=2.05, quiet=1.95),),
    ),
    "TP-NEG-IMPROVE": RuleCases(
        fires=Fires(subject=lambda: pair(steady(N, 2.0, 2.4, 6)), hits=(Expect(message="loss rose 20.0% over steps 10-600 while the baseline's fell 64.0% (2.5 -> 0.9); at matched steps its loss went from 0.80x the baseline's (steps 10-30) to 2.67x (steps 550-600); limit: a rise of at most 2%",
                           evidence={'run_improvement': -0.2, 'baseline_improvement': 0.64, 'start_ratio': 0.8, 'end_ratio': 2.666667, 'baseline_start_level': 2.5, 'baseline_end_level': 0.9}, line=59),),
                    family=('TP-FLOOR-RATIO', 'TP-END-RATIO', 'TP-NEG-IMPROVE', 'TP-IMPROVE-DEFICIT')),
        quiet=Quiet(subject=lambda: improving(1.0)),
        straddles=(straddle("tolerance", 0.02, lambda x: pair(steady(N, 2.0, 2.0 * (1 + x), 6)), fire=0.021, quiet=0.019),),
    ),
    "TP-IMPROVE-DEFICIT": RuleCases(
        fires=Fires(subject=lambda: improving(0.1), hits=(Expect(message="loss fell 6.4% over steps 10-600 while the baseline's fell 64.0% (2.5 -> 0.9): 0.10x the baseline's improvement, limit 0.25x; at matched steps its loss went from 0.80x the baseline's (steps 10-30) to 2.08x (steps 550-600)",
                           evidence={'run_improvement': 0.064, 'baseline_improvement': 0.64, 'start_ratio': 0.8, 'end_ratio': 2.08, 'baseline_start_level': 2.5, 'baseline_end_level': 0.9, 'fraction': 0.1}, line=59),),
                    family=('TP-FLOOR-RATIO', 'TP-END-RATIO', 'TP-IMPROVE-DEFICIT')),
        quiet=(Quiet(subject=lambda: improving(0.9)),
               Quiet(subject=lambda: pair(ones(N, 2.0), ones(N, 1.0)), skip="the baseline improved only")),
        straddles=(straddle("min_fraction", 0.25, improving, fire=0.24, quiet=0.26),
                   straddle("min_baseline_improvement", 0.05, lambda b: pair(ones(N, 2.0), steady(N, 2.0, 2.0 * (1 - b), 6)),
                            fire=0.051, quiet=0.049, skip="the baseline improved only")),
    ),
    "TP-GRADNORM-RATIO": RuleCases(
        fires=Fires(subject=lambda: grads(ones(N, 8.0), ones(N, 1.0)), hits=(Expect(message="median gradient norm 8 over steps 10-600 is 8.00x the baseline's 1; limit 5.0x",
                           evidence={'run_median': 8.0, 'baseline_median': 1.0, 'ratio': 8.0}, line=59),),
                    family=('TP-GRADNORM-RATIO',)),
        quiet=(Quiet(subject=lambda: grads(ones(N, 1.2), ones(N, 1.0))),
               Quiet(subject=lambda: pair(BASE), skip="no grad_norm series")),
        straddles=(straddle("max_ratio", 5.0, lambda r: grads(ones(N, r), ones(N, 1.0)), fire=5.1, quiet=4.9),
                   straddle("min_points", 6, lambda k: grads(ones(int(k), 8.0) + [None] * (N - int(k)), ones(N, 1.0)),
                            fire=6, quiet=5, skip="this check needs at least 6")),
    ),
    "TP-EVAL-BEST-RATIO": RuleCases(
        fires=Fires(subject=lambda: evals([2 * v for v in EVALS]), hits=(Expect(message="best eval loss 1.6 (step 600) is 2.00x the baseline's best 0.8 (step 600) over steps 100-600; limit 1.5x",
                           evidence={'run_best_eval': 1.6, 'baseline_best_eval': 0.8, 'ratio': 2.0, 'run_best_step': 600, 'baseline_best_step': 600}, line=59),),
                    family=('TP-EVAL-BEST-RATIO', 'TP-EVAL-END-RATIO')),
        quiet=(Quiet(subject=lambda: evals([1.1 * v for v in EVALS])), Quiet(subject=lambda: pair(BASE), skip="logs no eval loss")),
        straddles=(straddle("max_ratio", 1.5, lambda r: evals([r * v for v in EVALS]), fire=1.55, quiet=1.45),
                   straddle("min_evals", 2, lambda k: evals([2.0] * int(k), [1.0] * int(k)), fire=2, quiet=1,
                            skip="this check needs at least 2")),
    ),
    "TP-EVAL-END-RATIO": RuleCases(
        fires=Fires(subject=lambda: evals(EVALS[:-1] + [1.6]), hits=(Expect(message="last eval loss 1.6 (step 600) is 2.00x the baseline's eval loss 0.8 at the same step; limit 1.5x (the run's own best was 0.85 at step 500)",
                           evidence={'run_last_eval': 1.6, 'baseline_eval': 0.8, 'ratio': 2.0, 'step': 600, 'run_best_eval': 0.85, 'run_best_step': 500}, line=59),),
                    family=('TP-EVAL-END-RATIO',)),
        quiet=Quiet(subject=lambda: evals(EVALS[:-1] + [1.0])),
        straddles=(straddle("max_ratio", 1.5, lambda r: evals(EVALS[:-1] + [0.8 * r]), fire=1.55, quiet=1.45),
                   straddle("min_evals", 2, lambda k: evals([2.0] * int(k), [1.0] * int(k)), fire=2, quiet=1,
                            skip="this check needs at least 2")),
    ),
    "TP-OVERFIT-VS-BASELINE": RuleCases(
        fires=Fires(subject=lambda: evals([1.4, 1.2, 1.0, 1.1, 1.3, 1.5]), hits=(Expect(message="eval loss rose 1.50x from its best 1 (step 300) to 1.5 (step 600) while the baseline's eval loss went 0.80x over the same steps (1 -> 0.8): 1.88x the baseline's change; limit 1.2x",
                           evidence={'run_best_eval': 1.0, 'run_best_step': 300, 'run_last_eval': 1.5, 'run_last_step': 600, 'run_rise': 1.5, 'baseline_change': 0.8, 'relative': 1.875, 'baseline_reference': 'eval_loss', 'baseline_at_best': 1.0, 'baseline_at_last': 0.8}, line=59),),
                    family=('TP-EVAL-END-RATIO', 'TP-OVERFIT-VS-BASELINE')),
        quiet=(Quiet(subject=lambda: evals(EVALS)), Quiet(subject=lambda: evals([1.4, 1.2, 1.0, 1.1, 1.3, 1.5], [1.4, 1.2, 1.0, 1.1, 1.3, 1.5]))),
        straddles=(straddle("max_ratio", 1.2, lambda r: evals([1.4, 1.2, 1.0, 1.1, r, r], [1.0] * 6), fire=1.21, quiet=1.19),
                   straddle("min_rise", 0.05, lambda m: evals([1.4, 1.2, 1.0, 1.0, 1 + m, 1 + m], [1.4, 1.2, 1.0, 0.8, 0.6, 0.5]),
                            fire=0.051, quiet=0.049),
                   straddle("min_evals", 4, lambda k: evals([1.2, 1.0, 1.3, 1.4][4 - int(k):], [1.0] * int(k)), fire=4, quiet=3,
                            skip="this check needs at least 4")),
    ),
    "TP-BAD-BASELINE": RuleCases(
        fires=Fires(subject=lambda: pair(BASE, with_at(BASE, {20: NAN, 30: NAN}), judged=True), hits=(Expect(message='the baseline metrics.jsonl fails its own checks (TP-NAN): the comparison may be meaningless',
                           evidence={'baseline_fail_count': 1, 'baseline_fail_ids': 'TP-NAN'}, line=20),),
                    family=('TP-BAD-BASELINE',)),
        quiet=(Quiet(subject=lambda: pair(BASE, judged=True)), Quiet(subject=lambda: pair(BASE), skip="not judged on its own")),
    ),
}

CASES["TP-CMP-REWARD-BELOW"] = RuleCases(
    fires=Fires(subject=lambda: short_of(0.5), hits=(Expect(message="reward ends at 0.5 against the baseline's 0.8 over steps 10-400 (medians of the last 4): 0.3 short, 50% of the baseline's gain 0.6 (limits: 25% of it, and 2 x the level noise 4.2e-18)",
                           evidence={'series': 'reward', 'run_end_level': 0.5, 'baseline_end_level': 0.8, 'shortfall': 0.3, 'baseline_gain': 0.6, 'noise': 4.199897e-18}, line=39),),
                    family=('TP-CMP-REWARD-BELOW',)),
    quiet=(Quiet(subject=lambda: short_of(0.1)),
           Quiet(subject=lambda: rewards(steady(40, 0.2, 0.3, 6), ones(40, 0.5)), skip="did not rise")),
    straddles=(straddle("max_shortfall", 0.25, short_of, fire=0.26, quiet=0.24),
               straddle("noise_sigmas", 2.0, short_in_noises, fire=2.2, quiet=1.8)),
)

FAMILY = FamilyCases(cases=CASES, context=context)
