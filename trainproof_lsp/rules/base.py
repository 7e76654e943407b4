"""What a rule is. The registry (rules/__init__.py) is an explicit tuple of these."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ..core.model import Hit, Level, Run, Series


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


@dataclass(frozen=True, kw_only=True)
class Rule:
    id: str  # stable TP-UPPER-KEBAB; never reused for another meaning
    name: str  # short kebab name, e.g. "divergence"
    level: Level
    doc: str  # the module docstring: first line is the summary
    limits: type = NoLimits
    # check(run, limits, context) -> hits; None for rules the engine emits itself
    # (e.g. TP-NOT-CHECKED). Rules never open files and never compute line numbers.
    check: Callable[[Run, Any, Context], Iterator[Hit]] | None = None
    # Canonical series the check needs; missing ones make the engine skip it with a
    # reason instead of calling it.
    needs: tuple[str, ...] = ()
    applies_to: str = "metrics"  # the artefact kind it judges
    # Where the rule first appeared with the same meaning ("trainproof" = the published
    # tool's ID, reused so CI gates carry over; "new" = this project).
    origin: str = "new"
    default_limits: Any = field(default=None, compare=False)

    @property
    def summary(self) -> str:
        return self.doc.strip().splitlines()[0].strip()

    def limits_dict(self, limits: Any) -> dict[str, Any]:
        return dataclasses.asdict(limits) if dataclasses.is_dataclass(limits) else {}


def need(run: Run, name: str, minimum: int, what: str) -> Series:
    """The named series with at least `minimum` finite points, or Skip with a reason."""
    series = run.get(name)
    if series is None:
        raise Skip(f"no {what} in the log")
    finite = series.finite()
    if len(finite) < minimum:
        raise Skip(f"{len(finite)} finite {what} point(s); this check needs at least {minimum}")
    return finite


def fmt(x: float) -> str:
    """Numbers in messages: 4 significant digits, the way people read loss curves."""
    return f"{x:.4g}"
