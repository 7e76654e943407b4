"""What every judge shares: rules run over one subject, the order of findings, the
verdict they add up to, and the NOT-CHECKED report of what could not be judged.

engine (logs, checkpoints, scripts, doctor), preflight (datasets, tokenizers) and compare
(run against baseline) all build their reports from these, so the three agree on order,
verdict and coverage; none of them imports another to get them.
"""

from __future__ import annotations

from typing import Callable, Iterable, TypeVar

from ..core.config import Config
from ..core.model import LEVEL_RANK, Artefact, Check, Finding, Level, Location, ReadError, Report, Span, Verdict
from ..rules import NOT_CHECKED, Rule, Skip

def verdict_of(findings: Iterable[Finding]) -> Verdict:
    """The most severe level among the findings, as a verdict (INFO: PASS)."""
    level = min((f.level for f in findings), key=LEVEL_RANK.__getitem__, default=Level.INFO)
    return Verdict.PASS if level is Level.INFO else Verdict(level.value)


def finding_order(f: Finding) -> tuple[int, str, int, int, str, str]:
    """The one order of findings in reports: level, path, line, column, id, message."""
    span = f.location.span
    return (LEVEL_RANK[f.level], f.location.path, span.start_line if span else -1,
            span.start_char if span else -1, f.id, f.message)


S = TypeVar("S")
C = TypeVar("C")


def run_rules(rules: Iterable[Rule[S, C]], subject: S, ctx: C, config: Config, *,
              precheck: Callable[[Rule[S, C]], str | None] | None = None) -> tuple[list[Finding], list[Check]]:
    """Every enabled rule over one subject (a Run, a DatasetScan, checkpoint facts, a
    run/baseline pair): hits become findings, Skip becomes a skipped check with its
    reason. `precheck` may name a reason to skip a rule before calling it."""
    findings: list[Finding] = []
    checks: list[Check] = []
    for rule in rules:
        if not config.enabled(rule):
            checks.append(Check(group=rule.id, ran=False, reason="disabled by configuration"))
            continue
        reason = precheck(rule) if precheck is not None else None
        if reason:
            checks.append(Check(group=rule.id, ran=False, reason=reason))
            continue
        limits = config.limits_for(rule)
        assert rule.check is not None
        try:
            hits = list(rule.check(subject, limits, ctx))
        except Skip as s:
            checks.append(Check(group=rule.id, ran=False, reason=str(s)))
            continue
        checks.append(Check(group=rule.id, ran=True))
        used = rule.limits_dict(limits)
        findings.extend(Finding(id=rule.id, level=rule.level, message=h.message, evidence=dict(h.evidence),
                                location=h.location, related=h.related, limits=used, fix=h.fix) for h in hits)
    return findings, checks


def not_checked_finding(path: str, reason: str, span: Span | None = None) -> Finding:
    """TP-NOT-CHECKED: something about `path` could not be judged, and why."""
    return Finding(id=NOT_CHECKED.id, level=Level.NOT_CHECKED, message=reason, evidence={},
                   location=Location(path=path, span=span))


def not_checked(path: str, kind: str, fmt: str, reason: str, error: ReadError | None = None) -> Report:
    finding = not_checked_finding(path, reason, error.span if error is not None else None)
    return Report(artefact=Artefact(path=path, kind=kind, format=fmt, sources=(path,)),
                  verdict=Verdict.NOT_CHECKED, findings=(finding,), checks=(), reason=reason)


__all__ = ["verdict_of", "finding_order", "run_rules", "not_checked_finding", "not_checked"]
