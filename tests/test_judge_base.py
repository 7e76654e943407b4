"""judge/base.py, the part every judge shares, case by case: run_rules over rules that are
disabled, stood down by a precheck, fire, and skip (each check and finding whole, in the
rules' order, with the limits used and a configured override), the verdict of each mix of
levels, the one order of findings, and the NOT-CHECKED report of an artefact that could not
be judged."""

from __future__ import annotations

from rule_cases.metrics import spike_at
from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import Artefact, Check, Finding, Level, Location, ReadError, Report, Span, Verdict
from trainproof_lsp.judge.base import finding_order, not_checked, not_checked_finding, run_rules, verdict_of
from trainproof_lsp.rules.base import Context
from trainproof_lsp.rules.nonfinite import NAN_GRAD_RULE
from trainproof_lsp.rules.spikes import GRAD_SPIKE_RULE, LOSS_SPIKE_RULE, LOSS_SPIKE_UNRECOVERED_RULE

SPIKE = ("loss jumps to 3 at step 210, 3.00x the level 1 before it (limit 2.0x); recovered; judged on the train "
         "loss per logged point, points 1-50 of 50 (steps 10-500); the level before a jump is the median of the 10 "
         "points before it, recovery within 10")
LIMITS = {"before": 10, "min_before": 3, "spike_ratio": 2.0, "above_max": 1.5, "noise_sigmas": 6.0,
          "recover_within": 10, "recover_ratio": 1.2}
RULES = (LOSS_SPIKE_UNRECOVERED_RULE, GRAD_SPIKE_RULE, LOSS_SPIKE_RULE, NAN_GRAD_RULE)


def _precheck(rule):
    return "no norms here" if rule is GRAD_SPIKE_RULE else None


def test_each_rule_is_disabled_stood_down_run_or_skipped_in_order():
    findings, checks = run_rules(RULES, spike_at(3.0, at=20), Context(),
                                 Config(ignore=frozenset({LOSS_SPIKE_UNRECOVERED_RULE.id})), precheck=_precheck)
    assert findings == [Finding(
        id="TP-LOSS-SPIKE", level=Level.WARN, message=SPIKE,
        evidence={"step": 210, "value": 3.0, "level_before": 1.0, "ratio": 3.0, "level_after": 1.0, "spikes": 1,
                  "points_after": 10},
        location=Location(path="metrics.jsonl", span=Span(20, 0, 20, 1)), related=(), limits=LIMITS, fix=None)]
    assert checks == [Check(group="TP-LOSS-SPIKE-UNRECOVERED", ran=False, reason="disabled by configuration"),
                      Check(group="TP-GRAD-SPIKE", ran=False, reason="no norms here"),
                      Check(group="TP-LOSS-SPIKE", ran=True, reason=""),
                      Check(group="TP-NAN-GRAD", ran=False, reason="no gradient norm in the log")]


def test_without_a_precheck_every_enabled_rule_is_called_with_its_configured_limits():
    config = Config(select=frozenset({"TP-LOSS-SPIKE", "TP-GRAD-SPIKE"}),
                    limits={"TP-LOSS-SPIKE": {"spike_ratio": 4.0}})
    findings, checks = run_rules(RULES, spike_at(3.0, at=20), Context(), config)
    assert findings == []  # a jump of 3x is under the configured 4x
    assert checks == [Check(group="TP-LOSS-SPIKE-UNRECOVERED", ran=False, reason="disabled by configuration"),
                      Check(group="TP-GRAD-SPIKE", ran=False, reason="no gradient norm in the log"),
                      Check(group="TP-LOSS-SPIKE", ran=True, reason=""),
                      Check(group="TP-NAN-GRAD", ran=False, reason="disabled by configuration")]


def _finding(level: Level, path: str = "a.jsonl", line: int | None = 0, char: int = 0, rule: str = "TP-X",
             message: str = "m") -> Finding:
    span = Span(line, char, line, char + 1) if line is not None else None
    return Finding(id=rule, level=level, message=message, evidence={}, location=Location(path=path, span=span))


def test_the_verdict_is_the_most_severe_level():
    assert verdict_of([]) is Verdict.PASS
    assert verdict_of([_finding(Level.INFO)]) is Verdict.PASS
    assert verdict_of([_finding(Level.INFO), _finding(Level.WARN)]) is Verdict.WARN
    assert verdict_of([_finding(Level.WARN), _finding(Level.NOT_CHECKED)]) is Verdict.WARN
    assert verdict_of([_finding(Level.NOT_CHECKED), _finding(Level.INFO)]) is Verdict.NOT_CHECKED
    assert verdict_of([_finding(Level.WARN), _finding(Level.FAIL), _finding(Level.INFO)]) is Verdict.FAIL


def test_findings_are_ordered_by_level_path_line_column_id_and_message():
    given = [_finding(Level.INFO, "a"), _finding(Level.WARN, "b"), _finding(Level.WARN, "a", 2),
             _finding(Level.WARN, "a", 0), _finding(Level.WARN, "a", None), _finding(Level.WARN, "a", 1, 5),
             _finding(Level.WARN, "a", 1, 3),
             _finding(Level.WARN, "a", 1, 3, "TP-B"), _finding(Level.WARN, "a", 1, 3, "TP-A", "z"),
             _finding(Level.WARN, "a", 1, 3, "TP-A", "y"), _finding(Level.FAIL, "z")]
    ordered = sorted(given, key=finding_order)
    assert [(f.level, f.location.path, f.location.span and (f.location.span.start_line, f.location.span.start_char),
             f.id, f.message) for f in ordered] == [
        (Level.FAIL, "z", (0, 0), "TP-X", "m"),
        (Level.WARN, "a", None, "TP-X", "m"),  # a finding without a place comes before line 1 (0 here)
        (Level.WARN, "a", (0, 0), "TP-X", "m"),
        (Level.WARN, "a", (1, 3), "TP-A", "y"),
        (Level.WARN, "a", (1, 3), "TP-A", "z"),
        (Level.WARN, "a", (1, 3), "TP-B", "m"),
        (Level.WARN, "a", (1, 3), "TP-X", "m"),
        (Level.WARN, "a", (1, 5), "TP-X", "m"),
        (Level.WARN, "a", (2, 0), "TP-X", "m"),
        (Level.WARN, "b", (0, 0), "TP-X", "m"),
        (Level.INFO, "a", (0, 0), "TP-X", "m"),
    ]


def test_an_artefact_that_could_not_be_judged_is_one_not_checked_report():
    error = ReadError("line 3: not JSON", span=Span(2, 0, 2, 9))
    finding = Finding(id="TP-NOT-CHECKED", level=Level.NOT_CHECKED, message="line 3: not JSON", evidence={},
                      location=Location(path="x.jsonl", span=Span(2, 0, 2, 9)))
    assert not_checked_finding("x.jsonl", "line 3: not JSON", Span(2, 0, 2, 9)) == finding
    assert not_checked("x.jsonl", "metrics", "jsonl", "line 3: not JSON", error) == Report(
        artefact=Artefact(path="x.jsonl", kind="metrics", format="jsonl", sources=("x.jsonl",)),
        verdict=Verdict.NOT_CHECKED, findings=(finding,), checks=(), reason="line 3: not JSON")
    without = not_checked("x.jsonl", "metrics", "jsonl", "empty")
    assert (without.findings[0].location, without.findings[0].message) == (Location(path="x.jsonl"), "empty")
