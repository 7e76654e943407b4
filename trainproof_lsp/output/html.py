"""Run reports as one self-contained HTML page: each run's curves drawn as inline SVG,
with its findings marked at the steps they cite (`doctor --html PATH`, `compare --html
PATH`, the language server's "Show run", and `trainproof_lsp.api.render_run_report_html`).

The page makes no request of any kind: no scripts, fonts, images, links or URLs, and a
Content-Security-Policy that forbids them, so it opens the same from a CI artefact, a mail
attachment or a VS Code webview. Rendering (`to_html`) is a pure function of an Outcome
and the runs its reports judged, and byte-identical for the same input: numbers in fixed
formats, ids from positions, no timestamps. This module never reads or judges: the
caller judges (judge/compare.doctor_with_runs, compare_with_runs) and hands it the
outcome with the runs. docs/html-report.md describes the page and the API.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from html import escape
from typing import Callable, Iterator, Mapping, Sequence

from .. import TOOL_NAME, __version__
from ..core import objectives as ob
from . import token_map_html
from ..core.model import (EVAL_LOSS, GRAD_NORM, LOSS, LR, Finding, Level, Location, Outcome, Report, Run, Series,
                    Verdict)
from ..rules import BY_ID
from ..rules.compare import AlignLimits, in_step_order, schedule_length
from .levels import PAIR_PLACERS, PLACERS, LevelSpan, Side as LevelSide, judged_series, level_spans, pair_level_spans
from .render import _RANK_ORDER, _negated, _pct, _ratio, _where as where

# The curves a page draws, in this order, with the name a reader knows them by.
CHARTED = (LOSS, EVAL_LOSS, LR, GRAD_NORM)
SERIES_TITLES = {LOSS: "training loss", EVAL_LOSS: "eval loss", LR: "learning rate", GRAD_NORM: "gradient norm"}
# A preference or RL run's own curves (docs/preference-rl.md), drawn after those when the
# run logs them (and never listed as missing when it does not): the reward, its share of
# groups without signal, the KL, entropy and length of a GRPO run; the margins and ranking
# accuracy of a DPO run.
OBJECTIVE_CHARTED = (ob.REWARD, ob.FRAC_REWARD_ZERO_STD, ob.KL, ob.ENTROPY, ob.COMPLETION_MEAN_LENGTH,
                     ob.REWARDS_MARGINS, ob.REWARDS_ACCURACIES)
SERIES_TITLES.update({ob.REWARD: "reward", ob.FRAC_REWARD_ZERO_STD: "groups without reward signal",
                      ob.KL: "KL from the reference", ob.ENTROPY: "policy entropy",
                      ob.COMPLETION_MEAN_LENGTH: "mean completion length", ob.REWARDS_MARGINS: "reward margins",
                      ob.REWARDS_ACCURACIES: "reward accuracy"})

# A y axis turns logarithmic when the largest finite value is at least this many times the
# smallest (and all are positive): over two decades a linear axis flattens everything
# below the top into its bottom pixel row (a loss spike of 1e5 over a loss of 4).
LOG_SCALE_SPAN = 100.0
# Points drawn per curve before it is thinned to the first/min/max/last point of each
# pixel column: a 200k-step log would otherwise make a 10 MB page of invisible detail,
# and min/max per column keeps every spike the eye could see.
MAX_DRAWN_POINTS = 2000

# Comparison rules judge a pair of runs, not one run, so they declare no `needs`; these
# read a series other than the loss (tests/test_html.py keeps the IDs in the registry).
PAIR_SERIES = {"TP-GRADNORM-RATIO": GRAD_NORM, "TP-EVAL-BEST-RATIO": EVAL_LOSS,
               "TP-EVAL-END-RATIO": EVAL_LOSS, "TP-OVERFIT-VS-BASELINE": EVAL_LOSS}

# Chart geometry, in SVG user units (the chart scales to its column's width).
WIDTH = 560
PLOT_LEFT, PLOT_RIGHT = 64.0, WIDTH - 16.0
PLOT_HEIGHT = 170.0
LANE = 13.0  # one row of marker labels above the plot
RAIL = 16.0  # the strip above the plot where NaN/Inf points are marked
AXIS_BELOW = 34.0
CHAR_WIDTH = 6.0  # 10px monospace (0.6 em a glyph); a label's textLength is its length times this
LABEL_GAP = 8.0  # the least space between two labels in one row

# The comparison's default alignment limits (where its start and end windows fall).
ALIGN = AlignLimits()

# Overlaid runs in a comparison overview: fixed order, none of them a level colour.
PALETTE = ("#1f77b4", "#2ca02c", "#ff7f0e", "#17becf", "#8c564b", "#bcbd22", "#e377c2", "#7f7f7f")


# --- numbers --------------------------------------------------------------------------

def _num(v: object) -> str:
    """A value as the page prints it: 4 significant digits, like the messages."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return str(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        if v.is_integer() and abs(v) < 1e15:
            return str(int(v))
        return f"{v:.4g}"
    return str(v)


def _c(v: float) -> str:
    """A coordinate: two decimals, always."""
    return f"{v:.2f}"


def _tick(v: float) -> str:
    return f"{v:.6g}"


def _y_tick(v: float, log: bool) -> str:
    """Decades as 1e5 beyond four digits (a log axis); other ticks as the page's numbers."""
    k = round(math.log10(v)) if log else 0
    return f"1e{k}" if log and not -3 <= k <= 4 else _num(v)


def _exact(v: float) -> str:
    """An axis end in a data attribute, precise enough to recompute positions from."""
    return f"{v:.12g}"


# --- axes -----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Axis:
    lo: float
    hi: float
    log: bool
    ticks: tuple[float, ...]

    def frac(self, v: float) -> float:
        if self.log:
            a, b = math.log10(self.lo), math.log10(self.hi)
            return (math.log10(v) - a) / (b - a)
        return (v - self.lo) / (self.hi - self.lo)


def _nice_step(span: float, target: int = 5) -> float:
    raw = span / target
    mag = 10.0 ** math.floor(math.log10(raw))
    for m in (1.0, 2.0, 5.0, 10.0):
        if m * mag >= raw:
            return m * mag
    return 10.0 * mag


def _linear_axis(lo: float, hi: float, *, integer: bool = False, margin: float = 0.0) -> _Axis:
    """The data range (widened by `margin` of it on each side), ticks at round values
    inside it."""
    if hi == lo:
        pad = 1.0 if lo == 0 or integer else abs(lo) * 0.1
        lo, hi = lo - pad, hi + pad
    lo, hi = lo - margin * (hi - lo), hi + margin * (hi - lo)
    step = _nice_step(hi - lo)
    if integer:
        step = max(1.0, math.ceil(step))
    first, last = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
    ticks = tuple(float(_tick(k * step)) for k in range(first, last + 1))
    return _Axis(lo, hi, False, ticks)


def _log_axis(lo: float, hi: float) -> _Axis:
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if b == a:
        b += 1
    stride = max(1, math.ceil((b - a) / 6))
    return _Axis(10.0 ** a, 10.0 ** b, True, tuple(10.0 ** k for k in range(a, b + 1, stride)))


def _y_axis(values: Sequence[float]) -> _Axis:
    if not values:
        return _linear_axis(0.0, 1.0)
    lo, hi = min(values), max(values)
    if lo > 0 and hi / lo >= LOG_SCALE_SPAN:
        return _log_axis(lo, hi)
    return _linear_axis(lo, hi, margin=0.05)


# --- what a chart holds ---------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Line:
    """One run's series on a chart. `scale` maps its steps onto the chart's step axis (a
    run compared on the fraction-of-schedule axis is drawn on the other's schedule)."""

    label: str
    series: Series
    css: str  # "run", "base", or "c<N>" for an overview's N-th run
    color: str = ""
    scale: float = 1.0


@dataclass(frozen=True, slots=True)
class _Mark:
    """A finding cited at one step of one line."""

    rule: str
    level: Level
    step: int
    role: str  # what the step is to the finding: "best", "end", "related", "" (where it fired)
    on_baseline: bool
    message: str

    @property
    def label(self) -> str:
        who = "baseline " if self.on_baseline else ""
        return " ".join(p for p in (self.rule, who + self.role, f"@{self.step}") if p.strip())


@dataclass(frozen=True, slots=True)
class _Level:
    """A level one or more findings judged (a window median), drawn as a horizontal line
    over the steps of its window."""

    judged: tuple[tuple[str, str], ...]  # (rule ID, what the level is to it: "end level", ...)
    level: Level  # the worst level among the findings that judged it
    value: float
    first_step: int
    last_step: int
    points: int
    on_baseline: bool = False  # on the baseline's curve (its steps), not the run's

    @property
    def label(self) -> str:
        span = f"step {self.first_step}" if self.first_step == self.last_step else \
            f"steps {self.first_step}-{self.last_step}"
        who = " and ".join(f"{rule} {name}" for rule, name in self.judged)
        return f"{who} {_num(self.value)}: median of {span} ({self.points} point{'s' if self.points != 1 else ''})"


class _StepIndex:
    """Where a finding's locations fall on a run's steps: location -> record -> step.
    Built on first use: only pages with findings pay for it."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self._records: dict[tuple[str, int | None, int | None], int] | None = None
        self._steps: dict[int, int] | None = None

    def owns(self, path: str) -> bool:
        # Only a run read from several files (Run.location) puts records in its other
        # sources; an HF run's checkpoint-*/ copies are sources whose records it never cites
        # (and may be another run's: a baseline that is a checkpoint copy of the run).
        return path == self.run.path or (bool(self.run.record_spans.files) and path in self.run.sources)

    def step_at(self, loc: Location) -> int | None:
        record = loc.record
        if record is None:
            record = self._record_index().get(
                (loc.path, loc.span.start_line if loc.span else None, loc.byte_offset))
        if record is None:
            return None
        if self._steps is None:
            self._steps = {}
            for name in (*CHARTED, *sorted(self.run.series)):
                s = self.run.series.get(name)
                if s is not None:
                    for rec, step in zip(s.records, s.steps):
                        self._steps.setdefault(rec, step)
        return self._steps.get(record)

    def _record_index(self) -> dict[tuple[str, int | None, int | None], int]:
        if self._records is None:
            rs, run = self.run.record_spans, self.run
            if not rs.files and not rs.byte_offsets:  # one text file: every record is in run.path
                self._records = {(run.path, line, None): i for i, line in enumerate(rs.start_lines)}
            else:
                self._records = {}
                for i in range(max(len(rs.start_lines), len(rs.byte_offsets))):
                    loc = run.location(i)
                    key = (loc.path, loc.span.start_line if loc.span else None, loc.byte_offset)
                    self._records.setdefault(key, i)
        return self._records


def _chart_series(f: Finding) -> str | None:
    """The curve a finding is marked on: the series its rule reads."""
    rule = BY_ID.get(f.id)
    if rule is None:
        return None
    if rule.applies_to == "comparison":
        judged = f.evidence.get("series")  # TP-CMP-REWARD-BELOW: the reward or margins it compared
        if isinstance(judged, str) and judged in OBJECTIVE_CHARTED:
            return judged
        return PAIR_SERIES.get(f.id, LOSS)
    return next((n for n in rule.needs if n in CHARTED or n in OBJECTIVE_CHARTED), None)


def _evidence_steps(f: Finding) -> Iterator[tuple[str, bool, int]]:
    """(role, on the baseline?, step) for each step the evidence names (`step`,
    `best_step`, `baseline_floor_step`, ...)."""
    for key in sorted(f.evidence):
        if key != "step" and not key.endswith("_step"):
            continue
        v = f.evidence[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v != int(v):
            continue
        role = key.removesuffix("step").removesuffix("_")
        on_baseline = role.startswith("baseline")
        role = role.removeprefix("baseline").removeprefix("run").strip("_")
        yield role, on_baseline, int(v)


def finding_marks(f: Finding, run: _StepIndex | None, baseline: _StepIndex | None = None) -> list[_Mark]:
    """Every step a finding cites, once each: from its evidence, its location and its
    related locations. A step named by evidence keeps the evidence's name for its role."""
    cited: dict[tuple[bool, int], list[str]] = {}

    def at(loc: Location, role: str) -> None:
        for on_baseline, index in ((False, run), (True, baseline)):
            if index is not None and index.owns(loc.path):
                step = index.step_at(loc)
                if step is not None:
                    cited.setdefault((on_baseline, step), []).append(role)
                return

    for role, on_baseline, step in _evidence_steps(f):
        if (baseline if on_baseline else run) is not None:
            cited.setdefault((on_baseline, step), []).append(role or "step")
    at(f.location, "")
    for rel in f.related:
        at(rel.location, "related")
    marks = []
    for (on_baseline, step), roles in sorted(cited.items()):
        named = sorted({r for r in roles if r not in ("", "related", "step")})
        role = "/".join(named) if named else ("related" if all(r == "related" for r in roles) else "")
        marks.append(_Mark(rule=f.id, level=f.level, step=step, role=role, on_baseline=on_baseline,
                           message=f.message))
    return marks


# --- one chart ------------------------------------------------------------------------

def _thin(xs: list[float], ys: list[float], px: float) -> tuple[list[float], list[float]]:
    """At most first/min/max/last of each pixel column, in order (px: pixels per x unit)."""
    if len(xs) <= MAX_DRAWN_POINTS:
        return xs, ys
    keep: list[int] = []
    i, n = 0, len(xs)
    while i < n:
        col = math.floor(xs[i] * px)
        j = i
        while j + 1 < n and math.floor(xs[j + 1] * px) == col:
            j += 1
        lo = min(range(i, j + 1), key=ys.__getitem__)
        hi = max(range(i, j + 1), key=ys.__getitem__)
        keep.extend(sorted({i, lo, hi, j}))
        i = j + 1
    return [xs[k] for k in keep], [ys[k] for k in keep]


def _lanes(items: list[tuple[float, float]]) -> list[int]:
    """A label row for each (left, right) extent so that labels in a row are at least
    LABEL_GAP apart; items are placed in the order given, each in the first row it fits."""
    rights: list[float] = []
    out = []
    for left, right in items:
        for lane, end in enumerate(rights):
            if end + LABEL_GAP <= left:
                rights[lane] = right
                out.append(lane)
                break
        else:
            rights.append(right)
            out.append(len(rights) - 1)
    return out


def _label_left(mx: float, width: float) -> float:
    """Where a mark's label starts: right of its line when it fits before the plot's right
    edge, else ending left of it; kept inside the chart either way."""
    left = mx + 3 if mx + 3 + width <= PLOT_RIGHT else mx - 3 - width
    return min(max(2.0, left), WIDTH - 2.0 - width)


def _value_at(line: _Line, step: int) -> float | None:
    try:
        i = line.series.steps.index(step)
    except ValueError:
        return None
    return line.series.values[i]


def chart_svg(cid: str, series_name: str, lines: Sequence[_Line], marks: Sequence[_Mark], *,
              band: tuple[float, float] | None = None, x_label: str = "step",
              levels: Sequence[_Level] = ()) -> str:
    """One curve (or overlaid curves) as an <svg>: log y when the values span orders of
    magnitude, NaN/Inf points as marks on a rail above the plot (never joined by lines),
    each level a rule judged a thick line over its window (on the run's steps), each
    mark a labelled vertical line at its step with a dot on the curve."""
    title = SERIES_TITLES.get(series_name, series_name)
    main = lines[-1]  # the run; a baseline is drawn first, under it
    base = lines[0] if len(lines) > 1 and lines[0].css == "base" else None
    finite = [v for ln in lines for v in ln.series.values if math.isfinite(v)]
    y = _y_axis(finite)
    xs_all = [s * ln.scale for ln in lines for s in ln.series.steps]
    xs_all += [m.step * (base.scale if m.on_baseline and base else main.scale) for m in marks]
    if band:
        xs_all += list(band)
    x = _linear_axis(min(xs_all), max(xs_all), integer=all(ln.scale == 1.0 for ln in lines))
    nonfinite = [(ln, s, v) for ln in lines for s, v in zip(ln.series.steps, ln.series.values)
                 if not math.isfinite(v)]

    def px(xv: float) -> float:
        return PLOT_LEFT + x.frac(xv) * (PLOT_RIGHT - PLOT_LEFT)

    # Marker labels: rows above the plot, each label's box fixed by textLength so the
    # rows computed here are the boxes a browser draws, whatever monospace font it has.
    placed = []
    for m in sorted(marks, key=lambda m: (m.step, m.on_baseline, m.rule, m.role)):
        line = base if m.on_baseline and base else main
        mx = px(m.step * line.scale)
        w = len(m.label) * CHAR_WIDTH
        left = _label_left(mx, w)
        placed.append((m, line, mx, left, left + w))
    lanes = _lanes([(p[3], p[4]) for p in placed])
    n_lanes = max(lanes) + 1 if lanes else 0
    top = 8.0 + n_lanes * LANE
    rail_y = top + RAIL / 2
    plot_top = top + (RAIL if nonfinite else 0.0) + 6.0
    plot_bottom = plot_top + PLOT_HEIGHT
    height = plot_bottom + AXIS_BELOW

    def py(v: float) -> float:
        return plot_bottom - y.frac(v) * PLOT_HEIGHT

    scale_word = "log" if y.log else "linear"
    out = [f'<svg class="chart" viewBox="0 0 {WIDTH} {_c(height)}" width="{WIDTH}" height="{_c(height)}" '
           f'role="img" aria-labelledby="{cid}-t {cid}-d" data-series="{escape(series_name)}" '
           f'data-x-domain="{_exact(x.lo)} {_exact(x.hi)}" data-x-range="{_c(PLOT_LEFT)} {_c(PLOT_RIGHT)}" '
           f'data-y-scale="{scale_word}" data-y-domain="{_exact(y.lo)} {_exact(y.hi)}" '
           f'data-y-range="{_c(plot_bottom)} {_c(plot_top)}">']
    out.append(f'<title id="{cid}-t">{escape(title)} ({scale_word} scale) over {escape(x_label)}s</title>')
    out.append(f'<desc id="{cid}-d">{escape(_describe(title, lines, marks, y, nonfinite, levels))}</desc>')
    out.append(f'<rect class="plot" x="{_c(PLOT_LEFT)}" y="{_c(plot_top)}" width="{_c(PLOT_RIGHT - PLOT_LEFT)}" '
               f'height="{_c(PLOT_HEIGHT)}"/>')
    if band:
        a, b = px(band[0]), px(band[1])
        out.append(f'<rect class="band" x="{_c(a)}" y="{_c(plot_top)}" width="{_c(b - a)}" '
                   f'height="{_c(PLOT_HEIGHT)}"><title>common span of run and baseline</title></rect>')
    out.append('<g class="axis">')
    for t in y.ticks:
        ty = py(t)
        out.append(f'<line class="grid" x1="{_c(PLOT_LEFT)}" y1="{_c(ty)}" x2="{_c(PLOT_RIGHT)}" y2="{_c(ty)}"/>'
                   f'<text x="{_c(PLOT_LEFT - 6)}" y="{_c(ty + 3.5)}" text-anchor="end">{escape(_y_tick(t, y.log))}</text>')
    for t in x.ticks:
        tx = px(t)
        out.append(f'<line class="grid" x1="{_c(tx)}" y1="{_c(plot_top)}" x2="{_c(tx)}" y2="{_c(plot_bottom)}"/>'
                   f'<text x="{_c(tx)}" y="{_c(plot_bottom + 14)}" text-anchor="middle">{escape(_num(t))}</text>')
    out.append(f'<text class="label" x="{_c((PLOT_LEFT + PLOT_RIGHT) / 2)}" y="{_c(plot_bottom + 29)}" '
               f'text-anchor="middle">{escape(x_label)}</text>')
    out.append(f'<text class="label scale" x="4" y="{_c(plot_bottom + 29)}">{scale_word} y</text>')
    out.append('</g>')

    out.append('<g class="curves">')
    span_px = (PLOT_RIGHT - PLOT_LEFT) / (x.hi - x.lo)
    for ln in lines:
        style = f' style="stroke:{ln.color}"' if ln.color else ""
        dot_style = f' style="fill:{ln.color}"' if ln.color else ""
        out.append(f'<g class="curve {ln.css}" data-label="{escape(ln.label)}"><title>{escape(ln.label)}</title>')
        for seg_x, seg_y in _segments(ln):
            drawn_x, drawn_y = _thin(seg_x, seg_y, span_px)
            if len(drawn_x) == 1:
                out.append(f'<circle class="lone" cx="{_c(px(drawn_x[0]))}" cy="{_c(py(drawn_y[0]))}" r="2"{dot_style}/>')
            else:
                pts = " ".join(f"{_c(px(a))},{_c(py(b))}" for a, b in zip(drawn_x, drawn_y))
                out.append(f'<polyline class="line" points="{pts}"{style}/>')
        out.append('</g>')
    out.append('</g>')

    if levels:
        out.append('<g class="levels">')
        for lv in levels:
            if y.log and lv.value <= 0:  # (a median of positive points never is)
                continue
            k = base.scale if lv.on_baseline and base else main.scale
            a, b = px(lv.first_step * k), px(lv.last_step * k)
            if b - a < 8:  # a window of one or two points: still a visible bar
                a, b = (a + b) / 2 - 4, (a + b) / 2 + 4
            at = _c(py(lv.value))
            out.append(f'<g class="level {lv.level.name.lower()}" '
                       f'data-rules="{escape(" ".join(rule for rule, _ in lv.judged))}" '
                       f'data-names="{escape("/".join(name for _, name in lv.judged))}" data-value="{_exact(lv.value)}" '
                       f'data-steps="{lv.first_step} {lv.last_step}" data-line="{"base" if lv.on_baseline else "run"}">'
                       f'<title>{escape(lv.label)}</title>'
                       f'<line class="halo" x1="{_c(a)}" y1="{at}" x2="{_c(b)}" y2="{at}"/>'
                       f'<line x1="{_c(a)}" y1="{at}" x2="{_c(b)}" y2="{at}"/></g>')
        out.append('</g>')

    if nonfinite:
        out.append(f'<g class="rail"><text class="label" x="{_c(PLOT_LEFT - 6)}" y="{_c(rail_y + 3.5)}" '
                   f'text-anchor="end">NaN/Inf</text>')
        # One glyph per pixel column and kind: a long NaN tail is a row of crosses, not a
        # smear of thousands.
        seen: dict[tuple[int, str], list[float]] = {}
        for ln, step, v in nonfinite:
            kind = "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
            seen.setdefault((round(px(step * ln.scale)), kind), []).append(step * ln.scale)
        for (_col, kind), steps in sorted(seen.items()):
            first = _num(steps[0])
            what = f"at step {first}" if len(steps) == 1 else f"at {len(steps)} steps from {first}"
            cx = px(steps[0])
            out.append(f'<g class="nonfinite" data-step="{first}" data-value="{kind}">'
                       f'<title>{escape(title)} is {kind} {what}</title>{_glyph(kind, cx, rail_y)}</g>')
        out.append('</g>')

    out.append('<g class="markers">')
    for (m, line, mx, left, right), lane in zip(placed, lanes):
        ly = 8.0 + lane * LANE + 9.0
        value = _value_at(line, m.step)
        dot = ""
        if value is not None and math.isfinite(value):
            dot = f'<circle cx="{_c(mx)}" cy="{_c(py(value))}" r="3.5"/>'
        elif value is not None:
            dot = f'<circle cx="{_c(mx)}" cy="{_c(rail_y)}" r="3.5"/>'
        out.append(
            f'<g class="marker {m.level.name.lower()}" data-rule="{escape(m.rule)}" data-step="{m.step}" '
            f'data-role="{escape(m.role)}" data-line="{line.css}">'
            f'<title>{escape(m.label)} ({m.level.value}): {escape(m.message)}</title>'
            f'<line x1="{_c(mx)}" y1="{_c(ly + 2)}" x2="{_c(mx)}" y2="{_c(plot_bottom)}"/>{dot}'
            f'<text x="{_c(left)}" y="{_c(ly)}" textLength="{_c(right - left)}" lengthAdjust="spacingAndGlyphs">'
            f'{escape(m.label)}</text></g>')
    out.append('</g></svg>')
    return "\n".join(out)  # an element a line: a golden page's diff reads like code


def _glyph(kind: str, cx: float, cy: float) -> str:
    if kind == "NaN":  # a cross
        return (f'<path d="M{_c(cx - 4)} {_c(cy - 4)}L{_c(cx + 4)} {_c(cy + 4)}'
                f'M{_c(cx - 4)} {_c(cy + 4)}L{_c(cx + 4)} {_c(cy - 4)}"/>')
    tip = -5 if kind == "Infinity" else 5  # a triangle pointing the way the value went
    return f'<path class="fill" d="M{_c(cx)} {_c(cy + tip)}L{_c(cx - 4)} {_c(cy - tip)}L{_c(cx + 4)} {_c(cy - tip)}Z"/>'


def _segments(line: _Line) -> Iterator[tuple[list[float], list[float]]]:
    """Runs of consecutive finite points: a NaN or Inf breaks the curve."""
    xs: list[float] = []
    ys: list[float] = []
    for s, v in zip(line.series.steps, line.series.values):
        if math.isfinite(v):
            xs.append(s * line.scale)
            ys.append(v)
        elif xs:
            yield xs, ys
            xs, ys = [], []
    if xs:
        yield xs, ys


def _describe(title: str, lines: Sequence[_Line], marks: Sequence[_Mark], y: _Axis,
              nonfinite: list[tuple[_Line, int, float]], levels: Sequence[_Level] = ()) -> str:
    parts = []
    for ln in lines:
        s = ln.series
        fin = [(st, v) for st, v in zip(s.steps, s.values) if math.isfinite(v)]
        text = f"{ln.label}: {len(s)} point(s) at steps {s.steps[0]}-{s.steps[-1]}"
        if fin:
            lo = min(fin, key=lambda p: p[1])
            hi = max(fin, key=lambda p: p[1])
            text += (f", from {_num(fin[0][1])} to {_num(fin[-1][1])}, lowest {_num(lo[1])} at step {lo[0]},"
                     f" highest {_num(hi[1])} at step {hi[0]}")
        parts.append(text)
    parts.append(f"{'logarithmic' if y.log else 'linear'} {title} axis")
    if nonfinite:
        parts.append(f"{len(nonfinite)} non-finite (NaN/Inf) point(s), first at step {nonfinite[0][1]}, "
                     "marked above the plot and not joined by lines")
    if levels:
        parts.append("levels judged: " + ", ".join(lv.label for lv in levels))
    if marks:
        parts.append("marked: " + ", ".join(f"{m.label} ({m.level.value})" for m in marks))
    return "; ".join(parts) + "."


# --- the page -------------------------------------------------------------------------

CSS = """
:root{color-scheme:light dark}
body{font:14px/1.45 system-ui,sans-serif;margin:0;padding:16px 24px;
 color:var(--vscode-editor-foreground,#1d1d1f);background:var(--vscode-editor-background,#f6f7f9)}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:0;word-break:break-all}h3{font-size:14px;margin:16px 0 6px}
code,.mono,td.loc{font-family:ui-monospace,monospace;font-size:12px}
.summary{margin:0 0 16px}
section.report{border:1px solid #c9ccd1;border-left-width:6px;border-radius:4px;padding:12px 16px;margin:0 0 20px;
 background:var(--vscode-editor-background,#fff)}
section.v-fail{border-left-color:#c62828}section.v-warn{border-left-color:#b26a00}
section.v-pass{border-left-color:#2e7d32}section.v-not-checked{border-left-color:#6b7280}
.badge{display:inline-block;padding:1px 8px;border-radius:3px;color:#fff;font-weight:600;font-size:13px;margin-right:8px}
.badge.fail{background:#c62828}.badge.warn{background:#b26a00}.badge.pass{background:#2e7d32}
.badge.not-checked,.badge.info{background:#6b7280}
.meta{margin:4px 0;color:var(--vscode-descriptionForeground,#555);font-size:12px;word-break:break-all}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(460px,100%),1fr));gap:12px;margin-top:10px}
.scroll{overflow-x:auto;max-width:100%}
section.overview{margin:0 0 24px}
caption{text-align:left;font-size:12px;padding:4px 0;color:var(--vscode-descriptionForeground,#555)}
table.comparison{width:auto;min-width:50%}table.comparison td{text-align:right}
table.ranking td,table.ranking th{white-space:nowrap}table.ranking td.loc{white-space:normal;min-width:16em}
table.ranking td.ids{white-space:normal;min-width:14em}p.ranking{font-size:12px;margin:10px 0 0}
figure{margin:0;background:#fff;border:1px solid #dde0e4;border-radius:4px;padding:6px 6px 0;color:#1d1d1f}
figcaption{font-size:13px;font-weight:600;padding:0 4px}
.key{display:inline-block;width:18px;height:0;border-top:2px solid #1f77b4;vertical-align:middle;margin:0 4px 0 10px}
.key.base{border-top:2px dashed #555}
ul.legend{list-style:none;margin:0;padding:0 4px 6px;font-size:12px;overflow-wrap:anywhere}
ul.legend .key{margin-left:0}
ul.legend.levels li{margin:1px 0}
.key.level{height:3px;border-top:0;background:#1565c0;width:14px}
li.fail .key.level{background:#c62828}li.warn .key.level{background:#b26a00}
svg.chart{width:100%;height:auto;display:block}
svg.chart text{font:10px ui-monospace,monospace;fill:#333}
svg.chart .plot{fill:#fff;stroke:#c9ccd1}
svg.chart .band{fill:#eef3fb}
svg.chart .grid{stroke:#eceef1;stroke-width:1}
svg.chart .label{fill:#666}
svg.chart .line{fill:none;stroke:#1f77b4;stroke-width:1.6;stroke-linejoin:round}
svg.chart .lone{fill:#1f77b4}
svg.chart .base .line{stroke:#555;stroke-dasharray:5 3;stroke-width:1.4}
svg.chart .base .lone{fill:#555}
svg.chart .nonfinite path{stroke:#8e24aa;stroke-width:2;fill:none}
svg.chart .nonfinite path.fill{fill:#8e24aa;stroke:none}
svg.chart .level line{stroke-width:3;stroke-linecap:butt;vector-effect:non-scaling-stroke}
svg.chart .level line.halo{stroke:#fff;stroke-width:6}
svg.chart .level.fail line:not(.halo){stroke:#c62828}svg.chart .level.warn line:not(.halo){stroke:#b26a00}
svg.chart .marker line{stroke-width:1.2;stroke-dasharray:3 2}
svg.chart .marker circle{stroke:#fff;stroke-width:1.2}
svg.chart .marker text{font-weight:700;paint-order:stroke;stroke:#fff;stroke-width:3px;stroke-linejoin:round}
svg.chart .fail line{stroke:#c62828}svg.chart .fail circle,svg.chart .fail text{fill:#c62828}
svg.chart .warn line{stroke:#b26a00}svg.chart .warn circle,svg.chart .warn text{fill:#b26a00}
svg.chart .info line,svg.chart .not_checked line{stroke:#1565c0}
svg.chart .info circle,svg.chart .info text,svg.chart .not_checked circle,svg.chart .not_checked text{fill:#1565c0}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;vertical-align:top;padding:4px 8px;border-bottom:1px solid #e1e4e8}
th{font-weight:600}
table.findings{table-layout:fixed}
table.findings th:nth-child(1){width:92px}table.findings th:nth-child(2){width:210px}
table.findings th:nth-child(3){width:150px}table.findings th:nth-child(5){width:22%}
td.loc{word-break:break-all}
td.lvl{white-space:nowrap}td.steps{font-family:ui-monospace,monospace;font-size:12px}
.ev{font-family:ui-monospace,monospace;font-size:11px;color:var(--vscode-descriptionForeground,#555);margin-top:2px}
ul.related{margin:2px 0 0;padding-left:18px;font-size:12px;overflow-wrap:anywhere}
td.steps span{display:block}
.nocurves{color:var(--vscode-descriptionForeground,#555);font-style:italic}
@media (max-width:700px){
 body{padding:8px}section.report{padding:8px}
 table.findings,table.findings tbody,table.findings tr,table.findings td{display:block;width:auto}
 table.findings thead{display:none}
 table.findings tr{border-bottom:1px solid #e1e4e8;padding:6px 0}
 table.findings td{border:0;padding:2px 4px}
 table.findings td.lvl,table.findings td:nth-child(2),table.findings td.steps{display:inline-block;vertical-align:middle}
 table.findings td.steps span{display:inline;margin-right:.6em}
 table.ranking,table.ranking tbody,table.ranking tr{display:block}table.ranking thead{display:none}
 table.ranking tr{border-bottom:1px solid #e1e4e8;padding:6px 0}
 table.ranking td{display:inline-block;border:0;padding:1px 4px;white-space:normal}
 table.ranking td.loc,table.ranking td.ids{display:block;min-width:0}
 table.ranking td[data-label]::before{content:attr(data-label) " ";font-family:system-ui,sans-serif;color:#555}
}
pre{font-size:12px;overflow-x:auto;background:#fff;color:#1d1d1f;border:1px solid #dde0e4;padding:8px}
"""


def _badge(v: str) -> str:
    return f'<span class="badge {v.lower()}">{escape(v)}</span>'


def _where(loc: Location) -> str:
    return where(loc)  # the text output's file:line:col (1-based)


def _page_title(o: Outcome) -> str:
    if len(o.reports) == 1:
        return f"{TOOL_NAME}: {o.worst_verdict.value} — {o.reports[0].artefact.path}"
    return f"{TOOL_NAME}: {o.worst_verdict.value} — {len(o.reports)} report(s)"


def to_html(outcome: Outcome, runs: Mapping[str, Run] | None = None) -> str:
    """The page for an outcome; `runs` (run path -> Run) gives the curves of its reports
    (a report's artefact path; a comparison report's baseline path). Pure and
    deterministic."""
    runs = runs or {}
    indexes: dict[str, _StepIndex] = {}

    def index(run: Run) -> _StepIndex:
        if run.path not in indexes:
            indexes[run.path] = _StepIndex(run)
        return indexes[run.path]

    counts = {v: sum(1 for r in outcome.reports if r.verdict is v) for v in Verdict}
    summary = ", ".join(f"{counts[v]} {v.value}" for v in Verdict if counts[v]) or "none"
    extra = f"; {len(outcome.not_judged)} not judged" if outcome.not_judged else ""
    extra += f"; {len(outcome.passed_over)} passed over" if outcome.passed_over else ""
    body = [f'<header><h1>{_badge(outcome.worst_verdict.value)}{escape(TOOL_NAME)} run report</h1>',
            f'<p class="summary">{len(outcome.reports)} report(s): {escape(summary)}{escape(extra)}. '
            f'Worst: <strong>{escape(outcome.worst_verdict.value)}</strong>. '
            f'{escape(TOOL_NAME)} {escape(__version__)}; every verdict is a rule that fired or did not.</p></header>']
    if outcome.error:
        body.append(f'<p class="error"><strong>error:</strong> {escape(outcome.error)}</p>')
    body.extend(_overviews(outcome.reports, runs))
    # Curves first: the reports with a run to draw (its loss, learning rate and gradient
    # norm), then those without (tokenizers, datasets, checkpoints, unreadable logs), each
    # group in the outcome's order.
    drawn = [r for r in outcome.reports if r.artefact.path in runs]
    for n, report in enumerate(drawn + [r for r in outcome.reports if r.artefact.path not in runs], 1):
        body.append(_report_section(f"r{n}", report, runs, index))
    if outcome.not_judged:
        body.append("<section><h3>Not judged</h3><ul>" + "".join(
            f"<li><code>{escape(x.path)}</code>: {escape(x.reason)}</li>" for x in outcome.not_judged) + "</ul></section>")
    if outcome.passed_over:
        body.append(f"<details><summary>{len(outcome.passed_over)} file(s) passed over</summary><ul>" + "".join(
            f"<li><code>{escape(x.path)}</code>: {escape(x.reason)}</li>" for x in outcome.passed_over)
            + "</ul></details>")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<meta name=\"generator\" content=\"{escape(TOOL_NAME)} {escape(__version__)}\">\n"
            f"<title>{escape(_page_title(outcome))}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")


def _report_section(rid: str, r: Report, runs: Mapping[str, Run], index: Callable[[Run], _StepIndex]) -> str:
    baseline_art = r.baseline  # set on a comparison report
    comparison: Mapping[str, object] = r.comparison or {}
    run = runs.get(r.artefact.path)
    base_run = runs.get(baseline_art.path) if baseline_art is not None else None
    v = r.verdict.value
    out = [f'<section class="report v-{v.lower()}" id="{rid}" data-verdict="{escape(v)}" '
           f'data-path="{escape(r.artefact.path)}">',
           f"<h2>{_badge(v)}{escape(r.artefact.path)}</h2>"]
    meta = f"{escape(r.artefact.kind)} · {escape(r.artefact.format)}"
    if len(r.artefact.sources) > 1:
        meta += f" · {len(r.artefact.sources)} sources"
    out.append(f'<p class="meta">{meta}</p>')
    if baseline_art is not None:
        alone = comparison.get("baseline_verdict")
        out.append(f'<p class="meta">against baseline <code>{escape(baseline_art.path)}</code>'
                   + (f" (judged alone: {escape(str(alone))})" if alone else "")
                   + (f"; aligned on the {escape(str(comparison.get('axis')))} axis" if comparison.get("axis") else "")
                   + "</p>")
    if comparison.get("common_note"):  # the common span ends before a run does
        out.append(f'<p class="reason common-span">{escape(str(comparison["common_note"]))}</p>')
    if r.reason:
        out.append(f'<p class="reason"><strong>{escape(v)}:</strong> {escape(r.reason)}</p>')

    out.append(_charts(rid, r, run, base_run, comparison, index))
    if r.segments:  # a log of appended runs: each run judged on its own
        out.append(f'<table class="segments"><caption>{len(r.segments)} runs appended in this log, each judged '
                   "on its own</caption><thead><tr><th>run</th><th>lines</th><th>steps</th><th>points</th>"
                   "<th>verdict</th><th>findings</th></tr></thead><tbody>" + "".join(
                       f'<tr data-segment="{g.index}"><td>{g.index}</td><td class="mono">'
                       + (f"{g.first_line + 1}-{g.last_line + 1}" if g.first_line is not None
                          and g.last_line is not None else "–")
                       + f'</td><td class="mono">{g.first_step}-{g.last_step}</td><td>{g.points}</td>'
                       f"<td>{_badge(g.verdict.value)}</td><td>{escape(', '.join(g.findings)) or '–'}</td></tr>"
                       for g in r.segments) + "</tbody></table>")

    marks_of = {}
    if run is not None:
        base_index = index(base_run) if base_run is not None else None
        for i, f in enumerate(r.findings):
            marks_of[i] = finding_marks(f, index(run), base_index)
    out.append(f"<h3>Findings ({len(r.findings)})</h3>")
    if r.findings:
        out.append('<div class="scroll"><table class="findings"><thead><tr><th>level</th><th>rule</th><th>step(s)</th>'
                   "<th>what it found</th><th>where</th></tr></thead><tbody>")
        for i, f in enumerate(r.findings):
            steps = "".join(f"<span>{escape(m.label.removeprefix(f.id).strip())}</span>" for m in marks_of.get(i, []))
            ev = ", ".join(f"{k}={_num(f.evidence[k])}" for k in sorted(f.evidence))
            rel = "".join(f"<li><code>{escape(_where(x.location))}</code>: {escape(x.message)}</li>" for x in f.related)
            out.append(
                f'<tr class="finding" data-rule="{escape(f.id)}" data-level="{escape(f.level.value)}">'
                f'<td class="lvl">{_badge(f.level.value)}</td><td><code>{escape(f.id)}</code></td>'
                f'<td class="steps">{steps or "–"}</td>'
                f"<td>{escape(f.message)}" + (f'<div class="ev">{escape(ev)}</div>' if ev else "")
                + (f'<ul class="related">{rel}</ul>' if rel else "")
                + f'</td><td class="loc">{escape(_where(f.location))}</td></tr>')
        out.append("</tbody></table></div>")
    else:
        out.append("<p>No findings.</p>")

    out.extend(token_map_html.sections(r))  # the token map's length histogram (TP-MAP-LENGTHS)
    if comparison:
        out.append(_comparison_html(comparison))

    ran = [c.group for c in r.checks if c.ran]
    skipped = [c for c in r.checks if not c.ran]
    out.append(f'<h3>Checks: {len(ran)} ran, {len(skipped)} skipped</h3>')
    out.append(f'<p class="ran mono">{escape(", ".join(ran)) if ran else "none ran"}</p>')
    if skipped:
        out.append('<table class="skipped"><thead><tr><th>skipped</th><th>why</th></tr></thead><tbody>' + "".join(
            f'<tr><td><code>{escape(c.group)}</code></td><td>{escape(c.reason)}</td></tr>' for c in skipped)
            + "</tbody></table>")
    out.append("</section>")
    return "\n".join(out)


# The comparison's numbers as table rows: (label, the run's key, the baseline's key, the
# ratio's key, how a value is printed). Keys a row does not name are listed after them.
_COMPARISON_ROWS: tuple[tuple[str, str | None, str | None, str | None, str], ...] = (
    ("loss level at the start of the span", "run_start_level", "baseline_start_level", "start_ratio", "num"),
    ("loss level at the end of the span", "run_end_level", "baseline_end_level", "end_ratio", "num"),
    ("lowest loss level (floor)", "run_floor", "baseline_floor", "floor_ratio", "num"),
    ("loss change over the span", "run_improvement", "baseline_improvement", None, "change"),
    ("best eval loss", None, None, "eval_best_ratio", "num"),
    ("last eval loss", None, None, "eval_end_ratio", "num"),
    ("last logged step", "run_last_step", "baseline_last_step", None, "num"),
    ("verdict judged alone", "run_verdict", "baseline_verdict", None, "verdict"),
)
# Keys the sentence above the table says.
_COMPARISON_PROSE = ("axis", "common_from", "common_to", "common_note")


def _span_words(comparison: Mapping[str, object]) -> str:
    lo, hi = comparison.get("common_from"), comparison.get("common_to")
    if not isinstance(lo, (int, float)) or not isinstance(hi, (int, float)):
        return "over the span both logs cover"
    if comparison.get("axis") == "fraction":
        return f"over {lo:.0%}-{hi:.0%} of each run's schedule (their schedules differ)"
    return f"over steps {_num(lo)}-{_num(hi)}, the steps both logs cover"


def _comparison_html(comparison: Mapping[str, object]) -> str:
    """The comparison's numbers as a sentence and a run | baseline | ratio table, not a
    dump of keys."""
    def cell(key: str | None, how: str) -> str:
        if key is None or comparison.get(key) is None:
            return '<td class="mono">–</td>'
        v = comparison[key]
        if how == "change":
            return f'<td class="mono">{escape(_pct(_negated(v)))}</td>'
        if how == "verdict":
            return f"<td>{_badge(str(v))}</td>"
        return f'<td class="mono">{escape(_num(v))}</td>'

    def ratio(key: str | None) -> str:
        return f'<td class="mono">{escape(_ratio(comparison.get(key)))}</td>' if key else '<td class="mono">–</td>'

    rows, named = [], set(_COMPARISON_PROSE)
    for label, run_key, base_key, ratio_key, how in _COMPARISON_ROWS:
        keys = [k for k in (run_key, base_key, ratio_key) if k is not None]
        named.update(keys)
        if all(comparison.get(k) is None for k in keys):
            continue  # no eval loss on both sides: no eval rows
        rows.append(f'<tr data-row="{escape(label)}"><th scope="row">{escape(label)}</th>'
                    f"{cell(run_key, how)}{cell(base_key, how)}{ratio(ratio_key)}</tr>")
    for key in sorted(set(comparison) - named):  # a number added later is shown, not lost
        rows.append(f'<tr data-row="{escape(key)}"><th scope="row">{escape(key.replace("_", " "))}</th>'
                    f'<td class="mono" colspan="3">{escape(_num(comparison[key]))}</td></tr>')
    prose = f"The run was compared with the baseline {escape(_span_words(comparison))}."
    if comparison.get("common_note"):
        note = str(comparison["common_note"])
        prose += f" {escape(note[:1].upper() + note[1:])}."  # (str.capitalize would lower the rest)
    return ('<h3>Comparison</h3><div class="comparison">'
            f'<p class="comparison-summary">{prose}</p>'
            '<table class="comparison"><thead><tr><th></th><th scope="col">run</th><th scope="col">baseline</th>'
            '<th scope="col">run / baseline</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table></div>")


# The ranking's numeric columns, in order.
_RANKED = ("end ratio", "floor ratio", "loss change", "baseline's loss change", "eval best ratio", "eval end ratio")


def _ranking_html(group: Sequence[Report]) -> str:
    """The runs compared with one baseline, ranked as the text output ranks them: PASS,
    WARN, FAIL, then by end ratio (lower is better); NOT-CHECKED last, unranked."""
    def key(r: Report) -> tuple[int, float, str]:
        end = (r.comparison or {}).get("end_ratio")
        return (_RANK_ORDER[r.verdict], end if isinstance(end, (int, float)) else math.inf, r.artefact.path)

    ordered = sorted(group, key=key)
    alone = {(r.comparison or {}).get("baseline_verdict") for r in ordered} - {None}
    axes = {(r.comparison or {}).get("axis") for r in ordered} - {None}
    at = "fractions of each run's schedule" if axes == {"fraction"} else "steps" if axes == {"step"} else \
        "steps (or fractions of the schedule, where the schedules differ)"
    caption = (f"Ranking. Ratios are run / baseline at the same {at}; a loss change is the fall (-) or "
               "rise (+) over the span both cover" + (f"; the baseline judged alone: {alone.pop()}" if len(alone) == 1
                                                     else ""))
    rows, rank = [], 0
    for r in ordered:
        c: Mapping[str, object] = r.comparison or {}
        path = escape(r.artefact.path)
        if r.verdict is Verdict.NOT_CHECKED:
            rows.append(f'<tr data-rank="" data-path="{path}"><td>–</td><td>{_badge(r.verdict.value)}</td>'
                        f'<td class="loc">{path}</td><td colspan="7">{escape(r.reason)}</td></tr>')
            continue
        rank += 1
        ids = sorted({f.id for f in r.findings if f.level in (Level.FAIL, Level.WARN)})
        note = f'<div class="ev">{escape(str(c["common_note"]))}</div>' if c.get("common_note") else ""
        rows.append(
            f'<tr data-rank="{rank}" data-path="{path}"><td>{rank}</td><td>{_badge(r.verdict.value)}</td>'
            f'<td class="loc">{path}{note}</td>'
            + "".join(f'<td class="mono" data-label="{h}">{escape(x)}</td>' for h, x in zip(_RANKED, (
                _ratio(c.get("end_ratio")), _ratio(c.get("floor_ratio")), _pct(_negated(c.get("run_improvement"))),
                _pct(_negated(c.get("baseline_improvement"))), _ratio(c.get("eval_best_ratio")),
                _ratio(c.get("eval_end_ratio")))))
            + f'<td class="mono ids">{escape(" ".join(ids)) or "–"}</td></tr>')
    return (f'<p class="ranking">{escape(caption)}</p><div class="scroll"><table class="ranking"><thead><tr>'
            + "".join(f'<th scope="col">{h}</th>' for h in ("#", "verdict", "run", *_RANKED, "FAIL/WARN findings"))
            + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>")


def _baseline_scale(run: Run, base: Run, comparison: Mapping[str, object]) -> float:
    """How baseline steps map onto the run's: 1 on the step axis; on the fraction axis, the
    run's schedule length over the baseline's (as the comparison aligned them)."""
    if comparison.get("axis") != "fraction":
        return 1.0
    return schedule_length(run) / schedule_length(base)


def _charts(rid: str, r: Report, run: Run | None, base_run: Run | None, comparison: Mapping[str, object],
            index: Callable[[Run], _StepIndex]) -> str:
    if run is None:
        why = "no curves: not a metric run" if r.artefact.kind not in ("metrics", "comparison") else \
            "no curves: the run could not be read"
        return f'<p class="nocurves">{escape(why)}</p>'
    scale = _baseline_scale(run, base_run, comparison) if base_run is not None else 1.0
    band = None
    lo, hi = comparison.get("common_from"), comparison.get("common_to")
    if base_run is not None and isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
        k = schedule_length(run) if comparison.get("axis") == "fraction" else 1.0
        band = (float(lo) * k, float(hi) * k)
    by_series: dict[str, list[_Mark]] = {}
    base_index = index(base_run) if base_run is not None else None
    for f in r.findings:
        if f.level not in (Level.FAIL, Level.WARN):  # INFO and NOT-CHECKED: in the table only
            continue
        name = _chart_series(f)
        if name is not None:
            by_series.setdefault(name, []).extend(finding_marks(f, index(run), base_index))
    levels_of = _levels(r.findings, run, base_run, comparison)
    figures, missing = [], []
    for name in (*CHARTED, *OBJECTIVE_CHARTED):
        series = run.get(name)
        base_series = base_run.get(name) if base_run is not None else None
        if series is None and base_series is None:
            if name in CHARTED:
                missing.append(SERIES_TITLES[name])
            continue
        lines = []
        if base_series is not None:
            lines.append(_Line(label=f"baseline {base_run.path}", series=base_series, css="base",  # type: ignore[union-attr]
                               scale=scale))
        if series is not None:
            lines.append(_Line(label=f"run {run.path}", series=series, css="run"))
        marks = [m for m in by_series.get(name, []) if series is not None or m.on_baseline]
        caption = f"{SERIES_TITLES[name]} <code>{escape((series or base_series).source_name)}</code>"  # type: ignore[union-attr]
        if base_series is not None:
            caption += ('<span class="key"></span>run' if series is not None else " (the run logs none)")
            caption += '<span class="key base"></span>baseline'
        x_label = "step" if scale == 1.0 else "step (baseline rescaled to the run's schedule)"
        levels = [lv for lv in levels_of.get(name, []) if (base_series if lv.on_baseline else series) is not None]
        legend = "".join(f'<li class="{lv.level.name.lower()}"><span class="key level"></span>{escape(lv.label)}</li>'
                         for lv in levels)
        figures.append(f'<figure data-series="{name}"><figcaption>{caption}</figcaption>'
                       + chart_svg(f"{rid}-{name}", name, lines, marks, band=band, x_label=x_label, levels=levels)
                       + (f'<ul class="legend levels">{legend}</ul>' if legend else "") + "</figure>")
    out = "<div class=\"charts\">\n" + "\n".join(figures) + "\n</div>"
    if missing:
        out += f'<p class="nocurves">not in the log: {escape(", ".join(missing))}</p>'
    return out


def _compared_side(run: Run, comparison: Mapping[str, object]) -> LevelSide | None:
    """A compared run's finite loss in step order and the points of it in the common span,
    as the comparison aligned them (rules/compare.align)."""
    loss = run.get(LOSS)
    lo, hi = comparison.get("common_from"), comparison.get("common_to")
    if loss is None or not isinstance(lo, (int, float)) or not isinstance(hi, (int, float)):
        return None
    s = in_step_order(loss.finite())
    length = schedule_length(run) if comparison.get("axis") == "fraction" else 1.0
    pos = [step / length for step in s.steps]
    a, b = bisect.bisect_left(pos, lo), bisect.bisect_right(pos, hi) - 1
    if a > b:
        return None
    # The start and end windows as the default limits cut them (levels.py tries these
    # sizes first, and others if the configuration changed them).
    k, n = ALIGN.min_window_points, b - a + 1
    head = max(bisect.bisect_right(pos, lo + ALIGN.start_fraction * (hi - lo)) - a, min(k, n))
    tail = n - min(bisect.bisect_left(pos, hi - ALIGN.end_fraction * (hi - lo)) - a, max(0, n - k))
    return LevelSide(series=s, lo=a, hi=b, head=head, tail=tail)


def _levels(findings: Sequence[Finding], run: Run, base_run: Run | None = None,
            comparison: Mapping[str, object] | None = None) -> dict[str, list[_Level]]:
    """The levels the FAIL/WARN findings judged, by the charted series they were judged
    on; one level that several findings judged (TP-DIVERGE's and TP-DEAD-RUN's end
    level) is one line naming them all."""
    merged: dict[tuple[str, bool, float, int, int], tuple[list[tuple[str, str]], Level, int]] = {}

    def add(name: str, on_baseline: bool, f: Finding, sp: LevelSpan) -> None:
        key = (name, on_baseline, sp.value, sp.first_step, sp.last_step)
        judged, worst, points = merged.get(key, ([], f.level, sp.hi - sp.lo + 1))
        judged.append((f.id, ("baseline " if on_baseline else "") + sp.name))
        merged[key] = (judged, Level.FAIL if Level.FAIL in (worst, f.level) else worst, points)

    sides = None
    if base_run is not None and comparison:
        run_side, base_side = _compared_side(run, comparison), _compared_side(base_run, comparison)
        sides = (run_side, base_side) if run_side is not None and base_side is not None else None
    for f in findings:
        if f.level not in (Level.FAIL, Level.WARN):
            continue
        if f.id in PAIR_PLACERS and sides is not None:
            for on_baseline, sp in pair_level_spans(f, *sides):
                add(LOSS, on_baseline, f, sp)
        elif f.id in PLACERS and judged_series(f) in CHARTED:
            for sp in level_spans(f, run.get(judged_series(f))):
                add(judged_series(f), False, f, sp)
    out: dict[str, list[_Level]] = {}
    for (name, on_baseline, value, first, last), (judged, level, points) in merged.items():
        out.setdefault(name, []).append(_Level(judged=tuple(judged), level=level, value=value, first_step=first,
                                               last_step=last, points=points, on_baseline=on_baseline))
    return out


def _overview_scale(run: Run, by_fraction: bool) -> float:
    return 100.0 / schedule_length(run) if by_fraction else 1.0


def _steps_of(s: Series) -> str:
    return f" (steps {min(s.steps)}-{max(s.steps)})" if len(s) else ""


def _overviews(reports: Sequence[Report], runs: Mapping[str, Run]) -> list[str]:
    """For a baseline with several runs compared against it: their losses overlaid on its
    own, and the ranking table of the text output."""
    groups: dict[str, list[Report]] = {}
    for r in reports:
        b = r.baseline
        if b is not None:
            groups.setdefault(b.path, []).append(r)
    out = []
    for g, (base_path, group) in enumerate(groups.items(), 1):
        base = runs.get(base_path)
        members = [(r, runs[r.artefact.path]) for r in group if r.artefact.path in runs]
        if base is None or len(members) < 2:
            continue
        # One axis for all: the step when every run was compared step for step (the axis
        # spans the first to the last step any of them logged); when any was aligned on the
        # fraction of its schedule, the percent of each one's schedule (0-100 for all).
        by_fraction = any((r.comparison or {}).get("axis") == "fraction" for r, _ in members)
        x_label = "% of each run's schedule" if by_fraction else "step"
        figures = []
        for name in (LOSS, EVAL_LOSS):
            base_series = base.get(name)
            lines = [_Line(label=f"baseline {base.path}{_steps_of(base_series)}", series=base_series, css="base",
                           scale=_overview_scale(base, by_fraction))] if base_series else []
            for i, (r, run) in enumerate(members):
                s = run.get(name)
                if s is None:
                    continue
                lines.append(_Line(label=f"{r.verdict.value} {run.path}{_steps_of(s)}", series=s, css=f"c{i}",
                                   color=PALETTE[i % len(PALETTE)], scale=_overview_scale(run, by_fraction)))
            if len(lines) < 2:
                continue
            keys = "".join(f'<li><span class="key{" base" if ln.css == "base" else ""}"'
                           + (f' style="border-top-color:{ln.color}"' if ln.color else "")
                           + f'></span>{escape(ln.label)}</li>' for ln in lines)
            figures.append(f'<figure data-series="{name}"><figcaption>{SERIES_TITLES[name]}: runs over the '
                           'baseline</figcaption>'
                           + chart_svg(f"o{g}-{name}", name, lines, [], x_label=x_label)
                           + f'<ul class="legend">{keys}</ul></figure>')
        out.append(f'<section class="overview" id="o{g}"><h2>Runs against baseline <code>{escape(base_path)}</code></h2>'
                   f'<div class="charts">{"".join(figures)}</div>{_ranking_html(group)}</section>')
    return out


__all__ = ["CHARTED", "OBJECTIVE_CHARTED", "LOG_SCALE_SPAN", "PAIR_SERIES", "chart_svg", "finding_marks", "to_html"]
