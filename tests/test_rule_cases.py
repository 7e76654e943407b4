"""Every rule of the registry is proven by cases generated from it (tests/rule_cases/).

For each rule with a check: a firing case asserting the whole list of hits it returns and
every finding of its family on that subject, a quiet case, and a pair of cases straddling
each of its default limits. A rule added to the registry without them fails
`test_every_rule_is_proven` — unless it is in NOT_COVERED below, with a reason. That list
may only shrink: `test_allowlists_hold_only_what_is_missing` fails while a listed rule has
cases, so covering a rule forces its removal, and its length is held under a ceiling.
"""

from __future__ import annotations

from typing import Any

import pytest

from rule_cases import (FamilyCases, RuleCases, Straddle, check, default_limits, describe, evidence_matches,
                        family_report, limit_fields, line_of)
from rule_cases import (bundle, checkpoint, comparison, dataset, env, labels, metrics, script, speech, token_map,
                        tokenizer, tokens)
from trainproof_lsp.core.model import Hit
from trainproof_lsp.rules import BY_ID, REGISTRY, Skip

FAMILIES: tuple[FamilyCases, ...] = (metrics.FAMILY, dataset.FAMILY, checkpoint.FAMILY, script.FAMILY,
                                       comparison.FAMILY, env.FAMILY, tokenizer.FAMILY, labels.FAMILY,
                                       tokens.FAMILY, speech.FAMILY, bundle.FAMILY,
                                       token_map.FAMILY)

CASES: dict[str, tuple[RuleCases, FamilyCases]] = {}
for _family in FAMILIES:
    for _id, _cases in _family.cases.items():
        assert _id not in CASES, f"{_id} has cases in two modules"
        CASES[_id] = (_cases, _family)

# Rules the engine emits itself (check is None): nothing to call, so no case here; where
# each is proven instead.
ENGINE_EMITTED: dict[str, str] = {
    "TP-APPENDED-RUNS": "the engine's split of appended runs (judge/engine.split_runs): tests/test_log_structure.py",
    "TP-TB-TRUNCATED": "emitted from an event-file scan (judge/engine.event_file_findings): tests/test_runs.py",
    "TP-TB-CORRUPT": "emitted from an event-file scan (judge/engine.event_file_findings): tests/test_runs.py",
    "TP-CMP-UNCOMPARABLE": "emitted by judge/compare.py when two runs share no steps: tests/test_compare.py",
    "TP-CMP-ERROR": "emitted by judge/compare.py when the baseline cannot be read: tests/test_compare.py",
    "TP-ENV-ENTRYPOINT-FROM-CWD": "emitted by the env judge from the entrypoint's place: tests/test_every_door.py",
    "TP-SKIPPED-RECORDS": "emitted by the engine from a reader's notes: tests/test_rules.py",
    "TP-NOT-CHECKED": "emitted by the engine for what could not be judged: tests/test_not_checked_printed.py",
}

# Rules with a check that have no cases here yet, and why. Empty: every rule with a check has
# its cases. A rule may be listed here (with where it is proven instead) only while its cases
# are being written; the ceiling below keeps the list from growing back.
NOT_COVERED: dict[str, str] = {}

# Limits of covered rules that have no straddling pair, and why: a limit the rule does not
# read on its default path cannot be straddled on its own; a case that only looked like it
# would prove nothing.
_TREND_POINTS = ("min_points is the trend series' ceiling (rules/_views.trend_series): from 7 points a series is "
                 "judged as soon as the trend test has the power to see its own pace of change, and the shapes "
                 "this rule fires on change fast, so 9 and 10 points are judged alike; the floor of 7 is what "
                 "decides, and it is not this limit")
NOT_STRADDLED: dict[tuple[str, str], str] = {
    ("TP-LOSS-COLLAPSE", "min_points"): _TREND_POINTS,
    ("TP-DIVERGE", "min_points"): _TREND_POINTS,
    ("TP-DEAD-RUN", "min_points"): _TREND_POINTS,
    ("TP-DEAD-RUN", "max_trend_z"): ("the trend decides only for a fall between 0.5% and 2% with the level windows "
                                     "kept, and reordering the points between the windows (rule_cases.metrics."
                                     "to_trend_z) cannot bring such a series' z up to -1: the windows' own order "
                                     "outweighs it; not built another way yet"),
    ("TP-DEAD-RUN", "recent"): ("the head without the last `recent` points is judged by its own end window's median, "
                                "so a late jump decides only once it fills half that window too: the pair sits at "
                                "recent + w/2, not at `recent` alone"),
    ("TP-DEAD-RUN", "recent_fraction"): "as `recent`: the fraction only shortens it for logs under 40 points",
    ("TP-AT-CHANCE", "accuracy_margin"): ("never decides whether the rule fires: it only sets the evidence's "
                                          "accuracy_at_chance and the message's 'is'/'is not near chance'"),
    ("TP-OVERFIT", "rise_z"): ("z of the evals from the lowest level on, which must also rise 1.4 of their own "
                               "noises: a tail reordered to z 0.5 moves its centred medians and its noise with it; "
                               "not built yet"),
    ("TP-OVERFIT", "train_window"): "not yet: a train fall that 5-point medians see and 4- or 6-point ones do not",
    ("TP-PREF-MARGINS-FLAT", "min_trend_z"): ("the trend decides only for margins that rose within 2 level noises, "
                                              "so the series needs noise and a z near 1 at once; not built yet"),
    ("TP-DATA-CLIPPING", "clip_level"): ("applied by the sample pass (readers/audio.SampleOptions, built by the "
                                         "speech judge from this limit): the check reads the clipped count"),
    ("TP-DATA-SILENCE", "silence_level"): ("applied by the sample pass (readers/audio.SampleOptions, built by the "
                                           "speech judge from this limit): the check reads the longest silence"),
    ("TP-CMP-REWARD-BELOW", "min_points"): ("read where the pair is built (rules/objective_compare.align_objective, "
                                            "called by the judge): too few points is TP-CMP-UNCOMPARABLE, not this check"),
    ("TP-CMP-REWARD-BELOW", "window_fraction"): "read where the pair is built, as min_points: the check reads the windows' levels",
    ("TP-CMP-REWARD-BELOW", "min_window_points"): "read where the pair is built, as min_points",
    ("TP-ENV-IMPORT-TIMEOUT", "timeout_s"): ("the probe's timeout, read where the imports are probed (cli.py passes "
                                             "it to readers/envcheck); the check reports the timeout the facts say "
                                             "was used and never reads the limit"),
}

# NOT_COVERED's length may only go down: lower this when you cover a rule.
NOT_COVERED_CEILING = 0


def _context(rule_id: str, subject: Any) -> Any:
    cases, family = CASES[rule_id]
    return (cases.context or family.context)(subject)


def _run(rule_id: str, subject: Any) -> list[Hit] | Skip:
    return check(rule_id, subject, _context(rule_id, subject))


# --- the registry's coverage -------------------------------------------------------------

@pytest.mark.parametrize("rule_id", [r.id for r in REGISTRY])
def test_every_rule_is_proven(rule_id):
    rule = BY_ID[rule_id]
    if rule.check is None:
        assert rule_id in ENGINE_EMITTED, f"{rule_id} has no check: say in ENGINE_EMITTED where it is proven"
        return
    if rule_id in NOT_COVERED:
        assert rule_id not in CASES
        return
    assert rule_id in CASES, f"{rule_id} has no cases in tests/rule_cases/ (nor a reason in NOT_COVERED)"
    cases, _ = CASES[rule_id]
    assert cases.firings() and cases.quiets(), f"{rule_id} needs a firing and a quiet case"
    straddled = [s.limit for s in cases.straddles]
    assert len(straddled) == len(set(straddled)), f"{rule_id}: a limit straddled twice"
    fields = limit_fields(rule)
    missing = [f for f in fields if f not in straddled and (rule_id, f) not in NOT_STRADDLED]
    assert not missing, f"{rule_id}: no straddling pair for limit(s) {missing} (nor a reason in NOT_STRADDLED)"
    assert set(straddled) <= set(fields), f"{rule_id}: straddles name no limit of the rule: {set(straddled) - set(fields)}"


def test_allowlists_hold_only_what_is_missing():
    engine = {r.id for r in REGISTRY if r.check is None}
    assert set(ENGINE_EMITTED) == engine
    for rule_id in NOT_COVERED:
        assert rule_id in BY_ID and BY_ID[rule_id].check is not None, f"{rule_id}: not a rule with a check"
        assert rule_id not in CASES, f"{rule_id} has cases now: remove it from NOT_COVERED"
    for rule_id, limit in NOT_STRADDLED:
        assert rule_id in CASES, f"{rule_id}: list the rule in NOT_COVERED, not its limits"
        assert limit in limit_fields(BY_ID[rule_id]), f"{rule_id} has no limit {limit}"
        assert limit not in {s.limit for s in CASES[rule_id][0].straddles}, \
            f"{rule_id}.{limit} is straddled now: remove it from NOT_STRADDLED"
    assert set(CASES) <= set(BY_ID), f"cases for rules not in the registry: {set(CASES) - set(BY_ID)}"
    assert len(NOT_COVERED) <= NOT_COVERED_CEILING


# --- the cases ---------------------------------------------------------------------------

@pytest.mark.parametrize("rule_id,index", [(i, k) for i in sorted(CASES) for k in range(len(CASES[i][0].firings()))])
def test_fires_with_the_whole_finding_list(rule_id, index):
    cases, family = CASES[rule_id]
    fires = cases.firings()[index]
    subject = fires.subject()
    result = _run(rule_id, subject)
    assert not isinstance(result, Skip), f"{rule_id} skipped its firing case: {result}"
    expected = fires.hits
    assert expected, f"{rule_id}: a firing case must expect at least one hit"
    assert len(result) == len(expected), describe(result)
    norm = family.normalize
    for hit, want in zip(result, expected):
        assert norm(hit.message) == want.message, describe(result)
        evidence = {k: norm(v) if isinstance(v, str) else v for k, v in hit.evidence.items()}
        assert evidence_matches(evidence, want.evidence), describe(result)
        assert line_of(hit) == want.line, describe(result)
    report = family.report or family_report(rule_id, cases.context or family.context)
    findings = report(subject)
    assert tuple(f.id for f in findings) == fires.family, [(f.id, f.message) for f in findings]
    assert rule_id in fires.family


@pytest.mark.parametrize("rule_id,index", [(i, k) for i in sorted(CASES) for k in range(len(CASES[i][0].quiets()))])
def test_quiet(rule_id, index):
    quiet = CASES[rule_id][0].quiets()[index]
    result = _run(rule_id, quiet.subject())
    if quiet.skip is None:
        assert result == [], describe(result)
    else:
        assert isinstance(result, Skip) and quiet.skip in str(result), describe(result)


def _straddles() -> list[tuple[str, str]]:
    return [(i, s.limit) for i in sorted(CASES) for s in CASES[i][0].straddles]


def _straddle(rule_id: str, limit: str) -> Straddle:
    (s,) = [s for s in CASES[rule_id][0].straddles if s.limit == limit]
    return s


@pytest.mark.parametrize("rule_id,limit", _straddles())
def test_each_default_limit_is_straddled(rule_id, limit):
    s = _straddle(rule_id, limit)
    assert getattr(default_limits(BY_ID[rule_id]), limit) == s.default, \
        f"{rule_id}.{limit}'s default changed: move its straddling pair to the new value"
    # The two values lie on either side of the default, the firing one on the side that fires.
    assert min(s.fire, s.quiet) <= s.default <= max(s.fire, s.quiet) and s.fire != s.quiet
    fired = _run(rule_id, s.at(s.fire))
    assert isinstance(fired, list) and fired, f"{rule_id} does not fire at {limit}={s.fire}: {describe(fired)}"
    quiet = _run(rule_id, s.at(s.quiet))
    if s.skip is None:
        assert quiet == [], f"{rule_id} fires at {limit}={s.quiet}: {describe(quiet)}"
    else:
        assert isinstance(quiet, Skip) and s.skip in str(quiet), describe(quiet)


# --- what the cases found -----------------------------------------------------------------

def test_overfit_on_noise_free_evals_says_the_evals_have_no_noise():
    # The rounding residue (~1e-16) of a noise-free series' differences is not its noise: the
    # rise is not written as quadrillions of noise units.
    result = _run("TP-OVERFIT", metrics.overfit(metrics.OVERFIT_EVALS))
    assert isinstance(result, list)
    (hit,) = result
    assert "the evals have no eval-to-eval noise; limits 1.4 noise and 5%" in hit.message, hit.message
    assert "times its eval-to-eval noise" not in hit.message
    assert hit.evidence["eval_noise"] == 0.0


def test_a_row_cap_under_one_mib_is_written_in_bytes():
    # max_row_mb may be set below 1: the cap is then said in bytes, never as "0 MiB".
    scan = dataset.scan(dataset.text(0), {"text": "x" * 70_000}, max_row_bytes=1000)
    result = _run("TP-PRE-ROW-NOT-CHECKED", scan)
    assert isinstance(result, list)
    (hit,) = result
    assert "over the cap of 1000 bytes for one row (max_row_mb): not read" in hit.message, hit.message
