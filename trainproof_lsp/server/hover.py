"""Hover on a finding: the rule and its one-line doc, the numbers it fired on and the
limits it ran with (from the finding itself: nothing is recomputed here), and a
sparkline of the series around the event drawn with Unicode block characters, which
every client renders (no images, no HTML).
"""

from __future__ import annotations

import asyncio
import math
import re
from bisect import bisect_left
from typing import Any, Callable, Sequence

from lsprotocol import types as lsp

from ..core.model import LOSS, Finding, Run
from ..core.text import printable
from . import bundle
from .state import TrainproofServer

BLOCKS = "▁▂▃▄▅▆▇█"
NON_FINITE = "×"
WINDOW = 32  # points shown around the event: a hover is ~40 columns wide


def sparkline(values: Sequence[float]) -> str:
    """One block character per value, scaled between the finite min and max."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return NON_FINITE * len(values)
    lo, hi = min(finite), max(finite)
    span = hi - lo
    out = []
    for v in values:
        if not math.isfinite(v):
            out.append(NON_FINITE)
        elif span <= 0:
            out.append(BLOCKS[3])
        else:
            out.append(BLOCKS[min(len(BLOCKS) - 1, int((v - lo) / span * (len(BLOCKS) - 1) + 0.5))])
    return "".join(out)


# Characters that Markdown reads as syntax inside a line of prose: links and images
# (`messages[1]` would lose its brackets as a shortcut link), emphasis, code spans, HTML,
# table cells, strikethrough, headings. Backslash-escaped, they show as themselves in
# every CommonMark renderer (VS Code, Neovim 0.7's lsp_markdown syntax and 0.10+'s
# tree-sitter markdown both conceal the backslash).
_MARKDOWN_SYNTAX = re.compile(r"([\\`*_\[\]<>|~#!])")


def escape_markdown(text: str) -> str:
    """`text` as literal Markdown: every syntax character backslash-escaped."""
    return _MARKDOWN_SYNTAX.sub(r"\\\1", text)


def _number(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def event_window(run: Run, finding: Finding) -> tuple[str, list[float], int, list[int]] | None:
    """(series name, values, index of the event, steps) around the log entry the finding
    points at, or None when the run has no such series."""
    from ..rules import BY_ID

    rule = BY_ID.get(finding.id)
    names = [n for n in (rule.needs if rule else ())] + [LOSS]
    series = next((run.get(n) for n in names if run.get(n) is not None), None)
    span = finding.location.span
    if series is None or span is None or not series.records:
        return None
    starts = run.record_spans.start_lines
    # The record whose entry starts on the finding's line (or the last one before it).
    record = bisect_left(starts, span.start_line + 1) - 1
    index = min(bisect_left(series.records, max(record, 0)), len(series) - 1)
    lo = max(0, index - WINDOW // 2)
    hi = min(len(series), lo + WINDOW)
    lo = max(0, hi - WINDOW)
    return (series.source_name or series.name, list(series.values[lo:hi]), index - lo,
            list(series.steps[lo:hi]))


def hover_markdown(findings: Sequence[Finding], run: Run | None, *, markdown: bool = True,
                   shown: Callable[[str], str] = lambda text: text) -> str:
    """The hover text. With `markdown`, prose from findings (messages, evidence values,
    related messages) is escaped, so `messages[1]` shows as written; plain text is not.
    `shown` writes a message's paths as the editor shows them (Presentation.shown)."""
    from ..rules import BY_ID

    esc = escape_markdown if markdown else (lambda text: text)
    parts = []
    for f in findings:
        rule = BY_ID.get(f.id)
        summary = rule.summary if rule else ""
        lines = [f"**{f.id}** · {f.level.value} — {esc(summary)}", "", esc(shown(f.message))]
        if f.evidence:
            lines += ["", "| evidence | value |", "|---|---|"]
            lines += [f"| `{k}` | {esc(_number(v))} |" for k, v in sorted(f.evidence.items())]
        if f.limits:
            lines += ["", "limits: " + ", ".join(f"`{k}` = {esc(_number(v))}" for k, v in sorted(f.limits.items()))]
        window = event_window(run, f) if run is not None else None
        if window is not None:
            name, values, at, steps = window
            line = sparkline(values)
            marker = " " * at + "▲"
            finite = [v for v in values if math.isfinite(v)]
            rng = f"{min(finite):.4g}–{max(finite):.4g}" if finite else "no finite values"
            # The series' name is the log's own key: untrusted, so literal Markdown on one line.
            lines += ["", f"{esc(printable(name))}, steps {steps[0]}–{steps[-1]} ({rng}; ▲ = step {steps[at]}):",
                      "```text", line, marker, "```"]
        for r in f.related:
            lines += ["", f"related: {esc(shown(r.message))}"]
        lines += ["", f"`trainproof-lsp rules {f.id}` for the full rule doc"]
        parts.append("\n".join(lines))
    return "\n\n---\n\n".join(parts)


def to_hover(findings: Sequence[Finding], run: Run | None, markdown: bool,
             shown: Callable[[str], str] = lambda text: text) -> lsp.Hover:
    text = hover_markdown(findings, run, markdown=markdown, shown=shown)
    kind = lsp.MarkupKind.Markdown if markdown else lsp.MarkupKind.PlainText
    return lsp.Hover(contents=lsp.MarkupContent(kind=kind, value=text))


async def on_hover(ls: TrainproofServer, params: lsp.HoverParams) -> lsp.Hover | None:
    tp = ls.tp
    uri = params.text_document.uri
    doc = tp.documents.get(uri)
    result = await tp.analyzer.current(uri, timeout=5.0)
    if doc is None or result is None:
        return None
    line = params.position.line
    here = [f for f in result.findings if (f.location.span is None and line == 0) or (
        f.location.span is not None and f.location.span.start_line <= line <= f.location.span.end_line)]
    if result.kind.kind == "speech":  # the line's audio facts (server/speech.py), off the loop
        from .speech import with_audio_hover

        return await with_audio_hover(tp, doc, uri, line, to_hover(here, None, tp.features.hover_markdown,
                                                                   tp.presentation.shown) if here else None)
    if result.kind.kind == "dataset":  # the row's trained-tokens map (server/token_map.py), off the loop
        from .token_map import with_row_map

        return await with_row_map(tp, doc, line, to_hover(here, None, tp.features.hover_markdown,
                                                          tp.presentation.shown) if here else None, escape_markdown)
    if not here:  # an eos/bos/pad id line still lists what each file of its folder says
        return await bundle.with_id_hover(tp, doc, line, None, escape_markdown)
    run = None
    if result.kind.kind == "metrics":  # the log is re-read for the picture: off the loop
        run = await asyncio.get_running_loop().run_in_executor(tp.analyzer.executor, result.run, doc.path)
    return await bundle.with_id_hover(tp, doc, line, to_hover(here, run, tp.features.hover_markdown,
                                                             tp.presentation.shown), escape_markdown)
