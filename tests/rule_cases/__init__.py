"""Cases that prove each rule of the registry, generated from it (tests/test_rule_cases.py).

Every rule with a check has, in the module of its family:
- a firing case: a subject built in code (a Run from value lists, the family's record) and
  the WHOLE list of hits the rule returns on it (message, evidence, line of each), and the
  ids of every finding the rule's whole family reports on that subject;
- a quiet case: a subject on which the rule says nothing (or is skipped, with the reason);
- for each field of its default limits, a straddle: two subjects built by one function at
  two values just on either side of the default, firing on one and quiet on the other. The
  default the pair was written for is stated beside it, so a changed threshold fails here
  by name instead of moving the cases along with it.

Every rule is called directly, `rule.check(subject, default limits, context)`: what is
proven is the rule, not the reader in front of it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import Finding, Hit, Level
from trainproof_lsp.judge.base import run_rules
from trainproof_lsp.rules import BY_ID, Rule, Skip, rules_of

Subject = Any
# The context a subject's family gives its rules, from the subject (a metrics Run carries
# its number of classes in its meta, as a reader's config.json would).
ContextOf = Callable[[Subject], Any]


@dataclass(frozen=True, kw_only=True)
class Expect:
    """One hit: its message exactly, its evidence (floats to 1e-6 relative), its line
    (0-based start line of its location; None for a location without a span)."""

    message: str
    evidence: Mapping[str, Any]
    line: int | None = None


@dataclass(frozen=True, kw_only=True)
class Fires:
    subject: Callable[[], Subject]
    hits: tuple[Expect, ...]
    # Every finding the rule's family reports on the same subject, by id, in order.
    family: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class Quiet:
    subject: Callable[[], Subject]
    # None: the rule runs and returns no hit. A text: the rule is skipped with a reason
    # that contains it (a skip is never a pass, but it is not a finding either).
    skip: str | None = None


@dataclass(frozen=True, kw_only=True)
class Straddle:
    """`at(value)` builds a subject; at `fire` the rule fires, at `quiet` it does not. The
    two values sit just on either side of `default`, the limit's default value."""

    limit: str
    default: float
    at: Callable[[float], Subject]
    fire: float
    quiet: float
    skip: str | None = None  # the quiet side is a skip whose reason contains this


def straddle(limit: str, default: float, at: Callable[[float], Subject], *, fire: float, quiet: float,
             skip: str | None = None) -> Straddle:
    return Straddle(limit=limit, default=default, at=at, fire=fire, quiet=quiet, skip=skip)


@dataclass(frozen=True, kw_only=True)
class RuleCases:
    # One firing case, or several where one shape cannot reach every branch of the rule
    # (a series other than the train loss, a best level at the very start).
    fires: Fires | tuple[Fires, ...]
    quiet: Quiet | tuple[Quiet, ...]
    straddles: tuple[Straddle, ...] = ()
    # The family's context of a subject; None: the family module's default.
    context: ContextOf | None = None

    def firings(self) -> tuple[Fires, ...]:
        return self.fires if isinstance(self.fires, tuple) else (self.fires,)

    def quiets(self) -> tuple[Quiet, ...]:
        return self.quiet if isinstance(self.quiet, tuple) else (self.quiet,)


@dataclass(frozen=True, kw_only=True)
class FamilyCases:
    """One family's cases and how it is judged."""

    cases: Mapping[str, RuleCases]
    context: ContextOf
    # Every finding of the family on a subject, where the engine has its own path for it
    # (a metrics Run: judge_run); None: every rule of the rule's family, as run_rules runs them.
    report: Callable[[Subject], list[Finding]] | None = None
    # What a message or an evidence text says once the places a case wrote its files to
    # (a temporary folder) are written as "<tmp>".
    normalize: Callable[[str], str] = str
    notes: Mapping[str, str] = field(default_factory=dict)


def default_limits(rule: Rule[Any, Any]) -> Any:
    return rule.default_limits if rule.default_limits is not None else rule.limits()


def limit_fields(rule: Rule[Any, Any]) -> tuple[str, ...]:
    limits = default_limits(rule)
    return tuple(f.name for f in dataclasses.fields(limits)) if dataclasses.is_dataclass(limits) else ()


def check(rule_id: str, subject: Subject, context: Any) -> list[Hit] | Skip:
    """The rule's hits with its default limits, or the Skip it raised."""
    rule = BY_ID[rule_id]
    assert rule.check is not None
    # As the engine calls it: a Run without a series the rule needs is skipped before it.
    get = getattr(subject, "get", None)
    missing = [name for name in rule.needs if callable(get) and get(name) is None]
    if missing:
        return Skip(f"no {' or '.join(missing)} series in the log")
    try:
        return list(rule.check(subject, default_limits(rule), context))
    except Skip as s:
        return s


def family_report(rule_id: str, context: ContextOf) -> Callable[[Subject], list[Finding]]:
    """Every rule of `rule_id`'s family over a subject, as the engine runs them."""
    family = BY_ID[rule_id].family

    def report(subject: Subject) -> list[Finding]:
        findings, _ = run_rules(rules_of(family), subject, context(subject), Config())
        return findings
    return report


def line_of(hit: Hit) -> int | None:
    span = hit.location.span
    return span.start_line if span is not None else None


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, (float, int)) and not isinstance(b, bool):
        if math.isnan(a):
            return isinstance(b, float) and math.isnan(b)
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)
    return type(a) is type(b) and a == b


def evidence_matches(actual: Mapping[str, Any], expected: Mapping[str, Any]) -> bool:
    return actual.keys() == expected.keys() and all(_close(actual[k], expected[k]) for k in expected)


def describe(result: list[Hit] | Skip) -> str:
    """What a check returned, for failure messages (and to write an Expect from)."""
    if isinstance(result, Skip):
        return f"Skip({str(result)!r})"
    return "\n".join(f"Expect(message={h.message!r},\n       evidence={dict(h.evidence)!r}, line={line_of(h)})"
                     for h in result) or "no hits"


def levels_of(ids: Sequence[str]) -> list[Level]:
    return [BY_ID[i].level for i in ids]
