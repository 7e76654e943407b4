"""Reports as text, JSON and SARIF 2.1.0, and the rule docs. Pure functions: data in,
strings out."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any, Iterable

from .. import TOOL_NAME, __version__
from ..core.model import Finding, Fix, Level, Location, Outcome, Report, Verdict
from ..core.positions import one_based
from ..core.text import printable
from ..rules import REGISTRY, Rule
from ..rules.base import times

SCHEMA_VERSION = 1
# Findings of one rule shown in text output before "...and N more" (JSON lists all).
TEXT_CAP_PER_RULE = 20


def _number(v: Any) -> Any:
    """JSON has no NaN/Infinity: non-finite floats become the strings Python prints."""
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    return v


def location_json(loc: Location) -> dict[str, Any]:
    out: dict[str, Any] = {"path": loc.path}
    if loc.span is not None:
        s = loc.span
        out["range"] = {"start": {"line": s.start_line, "character": s.start_char},
                        "end": {"line": s.end_line, "character": s.end_char}}
    if loc.byte_offset is not None:
        out["byte_offset"] = loc.byte_offset
    if loc.record is not None:
        out["record"] = loc.record
    return out


def finding_json(f: Finding) -> dict[str, Any]:
    return {
        "id": f.id,
        "level": f.level.value,
        "message": f.message,
        "evidence": {k: _number(v) for k, v in f.evidence.items()},
        "location": location_json(f.location),
        "related": [{"location": location_json(r.location), "message": r.message} for r in f.related],
        "limits": {k: _number(v) for k, v in f.limits.items()},
        **({"fix": fix_json(f.fix)} if f.fix is not None else {}),
    }


def fix_json(fix: Fix) -> dict[str, Any]:
    """A finding's mechanical fix: edits in the finding's file (0-based ranges, as locations)."""
    return {"title": fix.title, "safe": fix.safe,
            "edits": [{"range": location_json(Location(path="", span=e.span))["range"], "new_text": e.new_text}
                      for e in fix.edits]}


def _artefact_json(a: Any) -> dict[str, Any]:
    return {"path": a.path, "kind": a.kind, "format": a.format, "sources": list(a.sources)}


def report_json(r: Report) -> dict[str, Any]:
    out = {
        "artefact": _artefact_json(r.artefact),
        "verdict": r.verdict.value,
        "reason": r.reason,
        "findings": [finding_json(f) for f in r.findings],
        "checks": {
            "ran": [c.group for c in r.checks if c.ran],
            "skipped": [{"id": c.group, "reason": c.reason} for c in r.checks if not c.ran],
        },
    }
    baseline = r.baseline  # set on a comparison report
    if baseline is not None:
        out["baseline"] = _artefact_json(baseline)
        out["comparison"] = {k: _number(v) for k, v in r.comparison.items()}
    if r.segments:  # a log of appended runs: one sub-report per run
        out["segments"] = [{
            "index": g.index, "first_line": g.first_line, "last_line": g.last_line,
            "first_step": g.first_step, "last_step": g.last_step, "points": g.points,
            "verdict": g.verdict.value, "findings": list(g.findings),
            "checks": {"ran": [c.group for c in g.checks if c.ran],
                       "skipped": [{"id": c.group, "reason": c.reason} for c in g.checks if not c.ran]},
        } for g in r.segments]
    return out


def outcome_json(o: Outcome) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": TOOL_NAME, "version": __version__},
        "reports": [report_json(r) for r in o.reports],
        "not_judged": [{"path": n.path, "reason": n.reason} for n in o.not_judged],
        "passed_over": [{"path": n.path, "reason": n.reason} for n in o.passed_over],
        "worst_verdict": o.worst_verdict.value,
        "error": o.error,
    }


def to_json(o: Outcome) -> str:
    return json.dumps(outcome_json(o), indent=2, sort_keys=True, allow_nan=False) + "\n"


# --- text ----------------------------------------------------------------------------

def _where(loc: Location) -> str:
    if loc.span is not None:
        line, col, _, _ = one_based(loc.span)
        return f"{loc.path}:{line}:{col}"
    if loc.byte_offset is not None:
        return f"{loc.path}@{loc.byte_offset}"
    return loc.path


_LEVEL_OF = {rule.id: rule.level for rule in REGISTRY}


def to_text(o: Outcome, *, verbose: bool = False) -> str:
    """The text report. By default: every FAIL/WARN/NOT-CHECKED finding on its line, one
    verdict line per report (with how many checks ran and were skipped), and a closing
    summary, so the findings of a `doctor .` over a project stay in view. `verbose` adds
    per report the checks that ran, each skipped check with its reason, every INFO
    finding and the files passed over (JSON always has all of it)."""
    out: list[str] = []
    ran_total = skipped_total = 0
    for r in o.reports:
        shown: dict[str, int] = {}
        hidden: dict[str, int] = {}
        for f in r.findings:
            # A NOT-CHECKED finding that is the report's reason is printed once, as the reason;
            # every other one is printed with its reason, -v or not: the exit code counts it
            # (CONTRACTS.md §1), so the output says what was not judged and why.
            if (f.level is Level.NOT_CHECKED and r.verdict is Verdict.NOT_CHECKED and r.reason
                    and f.message in r.reason) or (f.level is Level.INFO and not verbose):
                continue
            shown[f.id] = shown.get(f.id, 0) + 1
            if shown[f.id] > TEXT_CAP_PER_RULE:
                hidden[f.id] = hidden.get(f.id, 0) + 1
                continue
            out.append(f"{_where(f.location)}: {f.level.value} {f.id} {f.message}")
            for rel in f.related[: 3 if not verbose else None]:
                out.append(f"    related: {_where(rel.location)}: {rel.message}")
            if f.fix is not None:
                out.append(f"    fix: {f.fix.title}")
        for rule_id, n in hidden.items():
            out.append(f"    ...and {n} more {rule_id} (use --json to see all)")
        ran = [c.group for c in r.checks if c.ran]
        skipped = [c for c in r.checks if not c.ran]
        if r.verdict is Verdict.NOT_CHECKED and r.reason:
            # Reasons start with "path[:line:col]: " — keep that as the location.
            where, sep, why = r.reason.partition(": ")
            if not (sep and where.startswith(r.artefact.path)):
                where, why = r.artefact.path, r.reason
            out.append(f"{where}: NOT-CHECKED {why}")
            continue
        ran_total += len(ran)
        skipped_total += len(skipped)
        counted = [f for f in r.findings if f.level in (Level.FAIL, Level.WARN)]
        sources = f" ({len(r.artefact.sources)} sources)" if len(r.artefact.sources) > 1 else ""
        if r.artefact.kind == "tokenizer":  # a folder: say what in it was judged
            sources = f" (tokenizer, {len(r.artefact.sources)} files)"
        if r.artefact.kind == "bundle":  # a folder's files judged together: name them (judge/bundle.py)
            sources = " (bundle: " + ", ".join(os.path.relpath(s, r.artefact.path) for s in r.artefact.sources) + ")"
        baseline = r.baseline
        sources += f" vs baseline {baseline.path}" if baseline is not None else ""
        out.append(
            f"== {r.artefact.path}{sources}: {r.verdict.value} — {len(counted)} finding(s); "
            f"{len(ran)} check(s) ran, {len(skipped)} skipped"
        )
        if r.artefact.kind == "bundle" and not verbose:  # what was checked across the files
            out.append(f"   across files: {', '.join(ran) if ran else 'nothing'}"
                       + (f"; {len(skipped)} skipped (-v says why)" if skipped else ""))
        note = r.comparison.get("common_note") if r.comparison else None
        if note:  # the common span ends before a run does: what the comparison did not see
            out.append(f"   {note}")
        for g in r.segments:  # a log of appended runs: each run's own verdict and lines
            lines = f"lines {g.first_line + 1}-{g.last_line + 1}, " if g.first_line is not None and \
                g.last_line is not None else ""
            out.append(f"   run {g.index} of {len(r.segments)}: {lines}steps {g.first_step}-{g.last_step}, "
                       f"{g.points} points: {g.verdict.value}"
                       + (f" ({', '.join(named)})" if (named := sorted(
                           {i for i in g.findings if i in _LEVEL_OF and _LEVEL_OF[i] in (Level.FAIL, Level.WARN)}))
                          else ""))
        if not verbose:
            continue
        out.append(f"   checked: {', '.join(ran) if ran else 'nothing'}")
        by_reason: dict[str, list[str]] = {}
        for c in skipped:
            by_reason.setdefault(c.reason, []).append(c.group)
        for reason, groups in by_reason.items():
            out.append(f"   skipped {', '.join(groups)}: {reason}")
    for skipped_file in o.not_judged:
        out.append(f"{skipped_file.path}: not judged: {skipped_file.reason}")
    if verbose:
        for passed in o.passed_over:
            out.append(f"{passed.path}: passed over: {passed.reason}")
    if o.error:
        out.append(f"error: {o.error}")
    counts = {v: sum(1 for r in o.reports if r.verdict is v) for v in Verdict}
    summary = ", ".join(f"{counts[v]} {v.value}" for v in Verdict if counts[v])
    extra = f"; {len(o.not_judged)} not judged" if o.not_judged else ""
    extra += f"; {len(o.passed_over)} passed over" if o.passed_over and not verbose else ""
    if o.reports or extra:
        out.append(f"{len(o.reports)} report(s): {summary}{extra}. Worst: {o.worst_verdict.value}")
    else:  # a request refused before anything was read (a usage or settings error)
        out.append(f"Nothing judged. Worst: {o.worst_verdict.value}")
    if not verbose and len(o.reports) > 1:  # (one report's own line says it already)
        out.append(f"{ran_total} check(s) ran, {skipped_total} skipped"
                   + (" (-v lists them and why each was skipped)" if skipped_total else " (-v lists them)"))
    out.extend(ranking_table(o.reports))
    # Paths and messages come from the files judged: each line stays one line, with no
    # control or bidi character reaching the terminal or a CI log (core/text.py).
    return "\n".join(printable(line) for line in out) + "\n"


_RANK_ORDER = {Verdict.PASS: 0, Verdict.WARN: 1, Verdict.FAIL: 2, Verdict.NOT_CHECKED: 3}


def _ratio(v: Any) -> str:
    return times(v) if isinstance(v, (int, float)) and math.isfinite(v) else "-"  # as the rules write ratios


def _negated(v: Any) -> Any:
    """A loss change as an improvement (a fall is positive); anything else as it is."""
    return -v if isinstance(v, (int, float)) else v


def _pct(v: Any) -> str:
    return f"{v:+.1%}" if isinstance(v, (int, float)) and math.isfinite(v) else "-"


def ranking_table(reports: Iterable[Report]) -> list[str]:
    """Comparison reports ranked against their baseline: PASS before WARN before FAIL,
    then by end ratio (lower is better); NOT-CHECKED last, unranked. One table per
    baseline."""
    by_baseline: dict[str, list[Report]] = {}
    for r in reports:
        baseline = r.baseline
        if baseline is not None:
            by_baseline.setdefault(baseline.path, []).append(r)
    out: list[str] = []
    for base, group in by_baseline.items():
        def key(r: Report) -> tuple[int, float, str]:
            end = r.comparison.get("end_ratio")
            return (_RANK_ORDER[r.verdict], end if isinstance(end, (int, float)) else math.inf, r.artefact.path)

        group = sorted(group, key=key)
        verdicts = {r.comparison.get("baseline_verdict") for r in group} - {None}
        own = f" (judged alone: {verdicts.pop()})" if len(verdicts) == 1 else ""
        out.append("")
        axes = {r.comparison.get("axis") for r in group} - {None}
        at = {"step": "steps", "fraction": "fractions of the schedule"}.get(str(axes.pop()) if axes else "step", "") \
            if len(axes) <= 1 else ""
        out.append(f"ranking against baseline {base}{own}; ratios are run/baseline at the same "
                   f"{at or 'steps (or fractions of the schedule: comparison.axis in --json)'}:")
        out.append(f"  {'#':>2}  {'verdict':<11} {'end':>6} {'floor':>6} {'loss change':>11} "
                   f"{'(baseline)':>10} {'eval best':>9} {'eval end':>8}  run")
        rank = 0
        for r in group:
            c = r.comparison
            ids = sorted({f.id for f in r.findings if f.level in (Level.FAIL, Level.WARN)})
            if r.verdict is Verdict.NOT_CHECKED:
                why = r.reason if r.reason.startswith(r.artefact.path) else f"{r.artefact.path}: {r.reason}"
                out.append(f"  {'-':>2}  {r.verdict.value:<11} {'':>56}  {why}")
                continue
            rank += 1
            change = c.get("run_improvement")
            base_change = c.get("baseline_improvement")
            out.append(
                f"  {rank:>2}  {r.verdict.value:<11} {_ratio(c.get('end_ratio')):>6} "
                f"{_ratio(c.get('floor_ratio')):>6} {_pct(_negated(change)):>11} "
                f"{_pct(_negated(base_change)):>10} "
                f"{_ratio(c.get('eval_best_ratio')):>9} {_ratio(c.get('eval_end_ratio')):>8}  "
                f"{r.artefact.path}" + (f"  {' '.join(ids)}" if ids else ""))
            if c.get("common_note"):  # ratios above are over the common span only: say so
                out.append(f"  {'':>2}  {'':<11} {'':>56}  ^ {c['common_note']}")
            if r.reason and not c:  # not compared, yet ranked by its own FAILs: say why the dashes
                out.append(f"  {'':>2}  {'':<11} {'':>56}  ^ not compared: {r.reason}")
    return out


# --- SARIF ---------------------------------------------------------------------------

_SARIF_LEVEL = {Level.FAIL: "error", Level.WARN: "warning", Level.INFO: "note", Level.NOT_CHECKED: "note"}


def _sarif_location(loc: Location) -> dict[str, Any]:
    phys: dict[str, Any] = {"artifactLocation": {"uri": loc.path}}
    if loc.span is not None:
        sl, sc, el, ec = one_based(loc.span)
        phys["region"] = {"startLine": sl, "startColumn": sc, "endLine": el, "endColumn": ec}
    elif loc.byte_offset is not None:
        phys["region"] = {"byteOffset": loc.byte_offset}
    return {"physicalLocation": phys}


def sarif_rule(rule: Rule[Any, Any]) -> dict[str, Any]:
    return {
        "id": rule.id,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": " ".join(rule.doc.split())},
        "help": {"text": rule.doc.strip(), "markdown": rule_markdown(rule)},
        "defaultConfiguration": {"level": _SARIF_LEVEL[rule.level]},
        # "security" in tags: code scanning files these under security alerts.
        "properties": {"trainproof-level": rule.level.value, "origin": rule.origin,
                       **({"tags": ["security"]} if rule.security else {})},
    }


def to_sarif(o: Outcome) -> str:
    results = []
    # A finding is one SARIF result however many reports hold it: `doctor --baseline`'s
    # comparison report keeps the run's own FAILs (a comparison cannot hide them), and a
    # code-scanning service would show each twice. The first report's copy is kept.
    seen: set[tuple[str, str, str]] = set()
    for r in o.reports:
        for f in r.findings:
            key = (f.id, f.message, json.dumps(_sarif_location(f.location), sort_keys=True))
            if key in seen:
                continue
            seen.add(key)
            res: dict[str, Any] = {
                "ruleId": f.id,
                "level": _SARIF_LEVEL[f.level],
                "message": {"text": f.message},
                "locations": [_sarif_location(f.location)],
                "properties": {"evidence": {k: _number(v) for k, v in f.evidence.items()},
                               "verdict": r.verdict.value},
            }
            baseline = r.baseline
            if baseline is not None:
                res["properties"]["baseline"] = baseline.path
            if f.related:
                res["relatedLocations"] = [
                    {"id": i, **_sarif_location(rel.location), "message": {"text": rel.message}}
                    for i, rel in enumerate(f.related)
                ]
            results.append(res)
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": TOOL_NAME, "version": __version__,
                                "rules": [sarif_rule(r) for r in REGISTRY]}},
            "results": results,
        }],
    }
    return json.dumps(doc, indent=2, sort_keys=True, allow_nan=False) + "\n"


# --- rule docs -------------------------------------------------------------------------

def rule_markdown(rule: Rule[Any, Any]) -> str:
    lines = [f"## {rule.id}", "", f"**{rule.summary}**", "",
             f"- Level: {rule.level.value}", f"- Name: `{rule.name}`",
             f"- Judges: {rule.applies_to}",
             "- ID origin: " + ("same meaning as the published trainproof tool's ID"
                                if rule.origin == "trainproof" else "new in trainproof-lsp")]
    if rule.needs:
        lines.append(f"- Needs series: {', '.join(rule.needs)}")
    if rule.security:
        lines.append("- Security rule: a settings file cannot turn it off, only the command line "
                     "(`--ignore ID`, `--allow-config-to-disable-security`; docs/ci.md)")
    body = rule.doc.strip().split("\n", 1)
    if len(body) > 1:
        lines += ["", body[1].strip()]
    fields = dataclasses.fields(rule.limits) if dataclasses.is_dataclass(rule.limits) else ()
    if fields:
        lines += ["", "| limit | default |", "|---|---|"]
        defaults = rule.limits()
        for fld in fields:
            lines.append(f"| `{fld.name}` | {getattr(defaults, fld.name)} |")
    return "\n".join(lines)


def rules_markdown(rules: Iterable[Rule[Any, Any]] = REGISTRY) -> str:
    rules = tuple(rules)
    head = [
        "<!-- Generated from the rule registry (trainproof_lsp/rules) by",
        "     `python -m trainproof_lsp rules --markdown > docs/rules.md`. Do not edit by hand:",
        "     tests/test_registry.py fails when this file and the registry drift. -->",
        "",
        "# Rules",
        "",
        "| ID | level | what it flags |",
        "|---|---|---|",
    ]
    head += [f"| [{r.id}](#{r.id.lower()}) | {r.level.value} | {r.summary} |" for r in rules]
    return "\n".join(head) + "\n\n" + "\n\n".join(rule_markdown(r) for r in rules) + "\n"


# CONTRACTS.md §2's list of rule IDs, between these markers. `make docs` writes it there
# (splice_contracts); tests/test_registry.py fails when the file and the registry drift.
CONTRACTS_NOTE = ("<!-- generated from the rule registry by `python -m trainproof_lsp rules --contracts` "
                  "(`make docs` writes it here); do not edit by hand -->")
CONTRACTS_START, CONTRACTS_END = "<!-- rule-ids:start -->", "<!-- rule-ids:end -->"


def contracts_rule_list(rules: Iterable[Rule] = REGISTRY) -> str:
    """Every rule ID with its one level, in registry order, between the markers."""
    lines = [CONTRACTS_NOTE, CONTRACTS_START, *(f"- `{r.id}` {r.level.value}" for r in rules), CONTRACTS_END]
    return "\n".join(lines) + "\n"


def splice_contracts(text: str, rules: Iterable[Rule] = REGISTRY) -> str:
    """CONTRACTS.md's text with its generated rule list replaced by the registry's."""
    start = text.index(CONTRACTS_START)
    if text[:start].endswith(CONTRACTS_NOTE + "\n"):
        start -= len(CONTRACTS_NOTE) + 1
    end = text.index(CONTRACTS_END, start) + len(CONTRACTS_END)
    if text[end:end + 1] == "\n":
        end += 1
    return text[:start] + contracts_rule_list(rules) + text[end:]
