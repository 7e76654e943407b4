"""What a rule is. The registry (rules/__init__.py) is an explicit tuple of these."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Iterator, TypeVar

from ..core.model import Hit, Level, Run, Series

# What a rule judges and what it is told besides. Contravariant: a rule that judges any
# record with, say, `path` and `template_errors` also judges a TokenLengths.
SubjectT = TypeVar("SubjectT", contravariant=True)
ContextT = TypeVar("ContextT", contravariant=True)


class Skip(Exception):
    """Raised by a check that cannot judge this input; the message says why.

    A skipped check is recorded in the report's coverage, never counted as a pass.
    """


@dataclass(frozen=True, kw_only=True)
class Context:
    """What a rule may know besides the run itself."""

    # Number of output classes (LM vocabulary or classifier labels) and where it came
    # from (a flag, the config, an adjacent config.json).
    num_classes: int | None = None
    num_classes_source: str | None = None


@dataclass(frozen=True, kw_only=True)
class NoLimits:
    """For rules without tunable numbers."""


@dataclass(frozen=True, eq=False)
class Family(Generic[SubjectT, ContextT]):
    """One kind of subject rules judge: the record type (SubjectT), what the judge tells
    the rules besides (ContextT) and the artefact kind named in the docs ("metrics",
    "checkpoint", ...). Families are compared by identity: two families may judge the
    same artefact kind from different records (a dataset's scan and its token counts)."""

    kind: str


# The families declared here; the others live beside their rules (rules/checkpoint.py
# CHECKPOINT, rules/script.py SCRIPT, rules/env.py ENV, rules/compare.py COMPARISON,
# rules/dataset.py DATASET, rules/tokens.py TOKENS, rules/tokenizer.py TOKENIZER).
METRICS: Family[Run, Context] = Family("metrics")
# Rules the engine emits itself about any artefact (TP-NOT-CHECKED); they have no check.
ANY: Family[object, object] = Family("any")


@dataclass(frozen=True, kw_only=True)
class Rule(Generic[SubjectT, ContextT]):
    id: str  # stable TP-UPPER-KEBAB; never reused for another meaning
    name: str  # short kebab name, e.g. "divergence"
    level: Level
    doc: str  # the module docstring: first line is the summary
    # What it judges: the judge calls check(subject, limits, context) with this family's
    # subject and context.
    family: Family[SubjectT, ContextT]
    limits: type = NoLimits
    # check(subject, limits, context) -> hits; None for rules the engine emits itself
    # (e.g. TP-NOT-CHECKED). Rules never open files and never compute line numbers.
    check: Callable[[SubjectT, Any, ContextT], Iterator[Hit]] | None = None
    # Canonical series the check needs; missing ones make the engine skip it with a
    # reason instead of calling it.
    needs: tuple[str, ...] = ()
    # Where the rule first appeared with the same meaning ("trainproof" = the published
    # tool's ID, reused so CI gates carry over; "new" = this project).
    origin: str = "new"
    default_limits: Any = field(default=None, compare=False)
    # A safety rule: it tells a user that opening a file runs code, or that a file that
    # could hold such code was not read. A settings file inside the tree being checked
    # (a pull request's own pyproject.toml) cannot turn it off; only the command line can
    # (`--allow-config-to-disable-security`, `--ignore ID`): core/config.keep_security.
    security: bool = False

    @property
    def applies_to(self) -> str:
        """The artefact kind it judges, as the docs name it."""
        return self.family.kind

    @property
    def summary(self) -> str:
        return self.doc.strip().splitlines()[0].strip()

    def limits_dict(self, limits: Any) -> dict[str, Any]:
        # An instance, never the class: asdict of a class would raise.
        if dataclasses.is_dataclass(limits) and not isinstance(limits, type):
            return dataclasses.asdict(limits)
        return {}


def need(run: Run, name: str, minimum: int, what: str) -> Series:
    """The named series with at least `minimum` finite points, or Skip with a reason."""
    series = run.get(name)
    if series is None:
        raise Skip(f"no {what} in the log")
    finite = series.finite()
    if len(finite) < minimum:
        raise Skip(f"{len(finite)} finite {what} point(s); this check needs at least {minimum}")
    return finite


def all_zero(series: Series) -> bool:
    """Every point is exactly 0.0 (a stuck learning rate, a loss or norm that scores nothing)."""
    return series.values.count(0.0) == len(series)


def whole_series_hit(run: Run, series: Series, message: str) -> Hit:
    """A finding about every point of `series`, located at its first point. `message` is
    formatted with the evidence: {points}, {first_step}, {last_step}."""
    evidence = {"points": len(series), "first_step": series.steps[0], "last_step": series.steps[-1]}
    return Hit(message=message.format(**evidence), evidence=evidence, location=run.location(series.records[0]))


def fmt(x: float) -> str:
    """Numbers in messages: 4 significant digits, the way people read loss curves."""
    return f"{x:.4g}"


def times(x: float) -> str:
    """A ratio in messages, the one way every rule writes it: two decimals ("1.26x",
    "22.23x"), and whole numbers with thousands separators from 1,000 ("159,969x"; never
    "3.143e+04x" beside "159968.74x")."""
    if not math.isfinite(x):
        return f"{x}x"
    if abs(x) >= 1000:
        return f"{x:,.0f}x"
    return f"{x:.2f}x".replace("-0.00x", "0.00x")  # no negative zero in prose
