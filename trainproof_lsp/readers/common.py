"""Small pieces every metric reader needs: value coercion, JSON decoding with a
position on error, and building a Run from parallel columns."""

from __future__ import annotations

import json
import math
from typing import Any

from ..core.model import ReadError, Series, Span

# Strings some loggers write for non-finite numbers ("NaN" in JSONL written by hand or by
# loggers that quote them; "inf" from str(float)).
_NONFINITE = {"nan": math.nan, "+nan": math.nan, "-nan": math.nan, "inf": math.inf,
              "+inf": math.inf, "infinity": math.inf, "+infinity": math.inf,
              "-inf": -math.inf, "-infinity": -math.inf}


def to_float(value: Any) -> float | None:
    """A metric value as float; None when it is not a number (null, text, a list)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        s = value.strip()
        lowered = s.lower()
        if lowered in _NONFINITE:
            return _NONFINITE[lowered]
        try:
            return float(s)
        except ValueError:
            return None
    return None


def to_step(value: Any) -> int | None:
    f = to_float(value)
    if f is None or not math.isfinite(f) or f != int(f):
        return None
    return int(f)


def decode_json(data: bytes, path: str) -> Any:
    """Strict-enough JSON for logs: NaN/Infinity accepted (HF writes them bare).

    Raises ReadError naming the line and column of a syntax error.
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start)
        raise ReadError(f"{path}: not UTF-8 text (byte {e.start}, line {line + 1})",
                        span=Span(line, 0, line, 0)) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ReadError(f"{path}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}",
                        span=Span(e.lineno - 1, e.colno - 1, e.lineno - 1, e.colno)) from None


class Columns:
    """Accumulates (step, value, record) per canonical series while a reader walks rows."""

    def __init__(self) -> None:
        self.steps: dict[str, list[int]] = {}
        self.values: dict[str, list[float]] = {}
        self.records: dict[str, list[int]] = {}
        self.source: dict[str, str] = {}
        self.ready: dict[str, Series] = {}

    def put(self, series: Series) -> None:
        """A series built elsewhere (already columnar)."""
        self.ready[series.name] = series

    def add(self, name: str, source: str, step: int, value: float, record: int) -> None:
        if name not in self.steps:
            self.steps[name], self.values[name], self.records[name] = [], [], []
            self.source[name] = source
        self.steps[name].append(step)
        self.values[name].append(value)
        self.records[name].append(record)

    def extend(self, name: str, source: str, steps: list[int], values: list[float],
               records: list[int]) -> None:
        if name not in self.steps:
            self.steps[name], self.values[name], self.records[name] = [], [], []
            self.source[name] = source
        self.steps[name].extend(steps)
        self.values[name].extend(values)
        self.records[name].extend(records)

    def series(self) -> dict[str, Series]:
        out = {
            name: Series(name, self.source[name], tuple(self.steps[name]),
                         tuple(self.values[name]), tuple(self.records[name]))
            for name in self.steps
        }
        out.update(self.ready)
        return out
