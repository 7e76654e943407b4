"""Findings -> LSP diagnostics. No judging here: the engine decided every finding; this
module only places them (UTF-16/UTF-8/UTF-32 columns via positions.py), orders them
(errors first), caps them and says what was left out.

A diagnostic carries:
  code            the rule id (TP-DIVERGE)
  codeDescription the rule's docs (when the client supports it)
  source          "trainproof"
  data            {"id", "level", "evidence", "limits"} — what hover and tools read
  relatedInformation  the other end of the evidence (best step, first duplicate), when
                      the client supports it
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable, Sequence

from lsprotocol import types as lsp

from ..core.model import LEVEL_RANK, Finding, Level, Report, Span
from ..core.positions import client_column
from .code_actions import to_fix_data
from .documents import path_to_uri

SOURCE = "trainproof"

SEVERITY = {
    Level.FAIL: lsp.DiagnosticSeverity.Error,
    Level.WARN: lsp.DiagnosticSeverity.Warning,
    Level.INFO: lsp.DiagnosticSeverity.Information,
    Level.NOT_CHECKED: lsp.DiagnosticSeverity.Information,
}

# (path, line) -> the line's text, for column units; None when the file is all ASCII and
# columns need no conversion.
LineText = Callable[[str, int], "str | None"]


@dataclass(frozen=True, kw_only=True)
class Presentation:
    """How this client wants diagnostics, decided once from its capabilities."""

    encoding: str = "utf-16"
    related_information: bool = False
    code_description: bool = False
    docs_href: Callable[[str], str | None] = lambda rule_id: None
    # The workspace folders: a path under one is written relative to it in the text the
    # editor shows (messages, related information), as the command line writes the paths
    # it is given relative to where it runs. Called per use: folders can change.
    roots: Callable[[], tuple[str, ...]] = lambda: ()

    def shown(self, text: str) -> str:
        return relative_text(text, self.roots())


def relative_text(text: str, roots: tuple[str, ...]) -> str:
    """`text` with every absolute path under one of `roots` written relative to it (the
    deepest root first). A path is only taken where one starts: `/ws/x` in `/other/ws/x`
    or in `file:///ws/x` is left alone. A root that is the file system's own is never used."""
    pattern = _roots_pattern(roots)
    return pattern.sub("", text) if pattern is not None else text


@lru_cache(maxsize=8)
def _roots_pattern(roots: tuple[str, ...]) -> "re.Pattern[str] | None":
    prefixes = sorted({r.rstrip("/" + os.sep) + os.sep for r in roots if r and r.rstrip("/" + os.sep)},
                      key=len, reverse=True)
    if not prefixes:
        return None
    return re.compile(r"(?<![\w./\\:-])(?:" + "|".join(re.escape(p) for p in prefixes) + ")")


def lsp_range(span: Span | None, path: str, line_text: LineText, encoding: str) -> lsp.Range:
    if span is None:
        return lsp.Range(start=lsp.Position(line=0, character=0), end=lsp.Position(line=0, character=0))
    sl, el = max(span.start_line, 0), max(span.end_line, 0)
    start_text = line_text(path, sl)
    start = span.start_char if start_text is None else client_column(start_text, span.start_char, encoding)
    end_text = start_text if el == sl else line_text(path, el)
    end = span.end_char if end_text is None else client_column(end_text, span.end_char, encoding)
    return lsp.Range(start=lsp.Position(line=sl, character=start), end=lsp.Position(line=el, character=end))


def to_diagnostic(f: Finding, line_text: LineText, how: Presentation) -> lsp.Diagnostic:
    loc = f.location
    data = {"id": f.id, "level": f.level.value, "evidence": {k: _json_number(v) for k, v in f.evidence.items()},
            "limits": {k: _json_number(v) for k, v in f.limits.items()}}
    if f.fix is not None:  # its quick fix, in the client's ranges (code_actions.py)
        data["fix"] = to_fix_data(f.fix, loc.path, lambda p, sp: lsp_range(sp, p, line_text, how.encoding))
    related = None
    if how.related_information and f.related:
        related = [lsp.DiagnosticRelatedInformation(
            location=lsp.Location(uri=path_to_uri(r.location.path),
                                  range=lsp_range(r.location.span, r.location.path, line_text, how.encoding)),
            message=how.shown(r.message)) for r in f.related]
    href = how.docs_href(f.id) if how.code_description else None
    return lsp.Diagnostic(
        range=lsp_range(loc.span, loc.path, line_text, how.encoding),
        message=how.shown(_message(f)),
        severity=SEVERITY[f.level],
        code=f.id,
        code_description=lsp.CodeDescription(href=href) if href else None,
        source=SOURCE,
        data=data,
        related_information=related,
    )


def _json_number(v: object) -> object:
    """JSON has no NaN/Infinity: the strings CONTRACTS.md uses (as render.py writes them)."""
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    return v


def _message(f: Finding) -> str:
    loc = f.location
    if loc.span is None and (loc.record is not None or loc.byte_offset is not None):
        where = []
        if loc.record is not None:
            where.append(f"record {loc.record}")
        if loc.byte_offset is not None:
            where.append(f"byte {loc.byte_offset}")
        return f"{f.message} ({', '.join(where)})"
    return f.message


def _sort_key(f: Finding) -> tuple[int, int, int, str]:
    span = f.location.span
    return (LEVEL_RANK[f.level], span.start_line if span else -1, span.start_char if span else -1, f.id)


def capped(findings: Sequence[Finding], path: str, line_text: LineText, how: Presentation,
           limit: int) -> list[lsp.Diagnostic]:
    """Errors first, at most `limit`, then one diagnostic that counts the rest and says
    how to see them all."""
    ordered = sorted(findings, key=_sort_key)
    shown = [to_diagnostic(f, line_text, how) for f in ordered[:limit]]
    hidden = ordered[limit:]
    if hidden:
        counts: dict[str, int] = {}
        for f in hidden:
            counts[f.level.value] = counts.get(f.level.value, 0) + 1
        breakdown = ", ".join(f"{n} {level}" for level, n in counts.items())
        shown.append(lsp.Diagnostic(
            range=lsp.Range(start=lsp.Position(line=0, character=0), end=lsp.Position(line=0, character=0)),
            message=how.shown(f"{len(hidden)} more finding(s) not shown ({breakdown}); this editor shows "
                     f"{limit} per file (setting trainproof.maxDiagnosticsPerFile). See them all with "
                     f"`trainproof-lsp doctor {path}` or the \"Run doctor\" code lens."),
            severity=lsp.DiagnosticSeverity.Information,
            source=SOURCE,
            data={"id": None, "hidden": len(hidden), "by_level": counts},
        ))
    return shown


def by_path(reports: Iterable[Report]) -> dict[str, list[Finding]]:
    """Findings grouped by the file they point at (a run's findings can point at its
    other sources; a binary file's at itself)."""
    grouped: dict[str, list[Finding]] = {}
    for report in reports:
        grouped.setdefault(report.artefact.path, [])
        for f in report.findings:
            grouped.setdefault(f.location.path, []).append(f)
    return grouped

