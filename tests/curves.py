"""Loss curves for the tests that read one curve through each writer's format (the stacks'
logs, captured stdout): a healthy fall and three sick shapes, each with the rule that must
name it, so every format is judged by the same rules as a plain JSONL of the same curve."""

from __future__ import annotations

import math
from typing import Callable

from conftest import falling

N = 120  # logged points: enough for every trend rule


def healthy(n: int = N) -> list[float]:
    return falling(n, 2.5, 0.9)


def with_nan(n: int = N) -> list[float]:
    values = healthy(n)
    values[70] = math.nan
    return values


def diverging(n: int = N) -> list[float]:
    values = healthy(n)
    return values[:60] + [values[59] * (1 + 0.08 * i) for i in range(1, n - 59)]


def flat(n: int = N) -> list[float]:
    return [2.0 + 0.0001 * (i % 3) for i in range(n)]


# curve -> (the curve, the rule that must fire on it)
SICK: dict[str, tuple[Callable[[], list[float]], str]] = {
    "nan": (with_nan, "TP-NAN"),
    "diverging": (diverging, "TP-DIVERGE"),
    "flat": (flat, "TP-FLAT"),
}
