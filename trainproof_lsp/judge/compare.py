"""Compare runs against a known-good baseline: `compare BASELINE RUN...` and
`doctor PATH --baseline B`.

Runs are found the way doctor finds them (any log format, a run folder, checkpoint
copies merged), so a baseline or a run can be a log file or a run folder. Each run gets
one comparison report: its artefact is the run, `baseline` names the baseline, and
`comparison` carries the aligned levels a ranking table shows. The rules are in
rules/compare.py; this module only wires runs to them and keeps coverage honest.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from . import engine
from .base import finding_order, run_rules, verdict_of
from ..core.config import Config
from ..core.model import Artefact, Check, Finding, Level, Location, Number, Outcome, Report, Run, Verdict
from ..readers.checkpoint import CheckpointFacts
from ..rules import NOT_CHECKED, Rule, rules_of
from ..rules.base import Context
from ..rules.compare import CMP_ERROR_RULE, COMPARISON, UNCOMPARABLE_RULE, Pair, Uncomparable, align
from .compare_objective import compare_objective, loss_not_comparable


@dataclass(frozen=True, kw_only=True)
class Baseline:
    """A baseline ready to compare with: its run and its own single-run report, or why it
    cannot be used (`reason`, one line, with where the reader stopped)."""

    path: str
    run: Run | None = None
    report: Report | None = None
    reason: str = ""
    location: Location | None = None

    @property
    def artefact(self) -> Artefact:
        if self.run is not None:
            return Artefact(path=self.run.path, kind="metrics", format=self.run.format, sources=self.run.sources)
        return Artefact(path=self.path, kind="unknown", format="unknown", sources=(self.path,))


def comparison_rules() -> tuple[Rule[Pair, Context], ...]:
    return rules_of(COMPARISON)


def _runs_at(path: Path, config: Config) -> tuple[list[tuple[Run, Report]], Outcome]:
    """Every run doctor finds at `path`, with its single-run report."""
    found: list[tuple[Run, Report]] = []

    def keep(run: Run, report: Report) -> None:
        found.append((run, report))

    return found, engine.doctor([path], config, also=keep)


def _why_nothing(path: Path, outcome: Outcome) -> tuple[str, Location | None]:
    for r in outcome.reports:
        if r.verdict is Verdict.NOT_CHECKED and r.reason:
            span = r.findings[0].location if r.findings else None
            return r.reason, span
    for n in outcome.not_judged:
        return f"{n.path}: {n.reason}", None
    return f"{path}: no training log to compare", None


def load_baseline(path: Path, config: Config) -> Baseline:
    """The one run at `path`, judged on its own (for TP-BAD-BASELINE)."""
    name = str(path)
    if not path.exists():
        return Baseline(path=name, reason=f"{name}: no such file or folder")
    found, outcome = _runs_at(path, config)
    if not found:
        reason, where = _why_nothing(path, outcome)
        return Baseline(path=name, reason=reason, location=where)
    if len(found) > 1:
        return Baseline(path=name, reason=f"{name}: holds {len(found)} runs ("
                        + ", ".join(r.path for r, _ in found[:3]) + ("..." if len(found) > 3 else "")
                        + "); name one run's log or folder as the baseline")
    run, report = found[0]
    return Baseline(path=name, run=run, report=report)


def _finding(rule_id: str, level: Level, message: str, location: Location) -> Finding:
    return Finding(id=rule_id, level=level, message=message, evidence={}, location=location)


def _not_compared(run_artefact: Artefact, baseline: Baseline, finding: Finding, reason: str,
                  own_fails: tuple[Finding, ...] = ()) -> Report:
    """A comparison that could not be made: NOT-CHECKED with its reason, unless the run
    fails on its own — a FAIL the comparison cannot hide."""
    skipped = tuple(Check(group=r.id, ran=False, reason=reason) for r in comparison_rules())
    findings = sorted((finding, *own_fails), key=finding_order)
    return Report(artefact=run_artefact, verdict=verdict_of(findings), findings=tuple(findings),
                  checks=skipped, reason=reason, baseline=baseline.artefact)


def _own_fails(own: Report | None) -> tuple[Finding, ...]:
    """The run's single-run FAIL findings (NaN, zero learning rate, divergence...): a run
    judged against a baseline keeps every one of them, whatever the ratios say."""
    return tuple(f for f in own.findings if f.level is Level.FAIL) if own is not None else ()


def compare_run(run: Run, baseline: Baseline, config: Config, own: Report | None = None) -> Report:
    """One run against the baseline: every enabled comparison rule, or NOT-CHECKED with a
    one-line reason when the baseline is unusable or the two cannot be aligned. `own` is
    the run's single-run report: its FAIL findings are kept in the comparison report."""
    artefact = Artefact(path=run.path, kind="comparison", format=run.format, sources=run.sources)
    kept = _own_fails(own)
    if baseline.run is None:
        reason = f"cannot compare with baseline {baseline.reason}"
        where = baseline.location or Location(path=baseline.path)
        return _not_compared(artefact, baseline, _finding(CMP_ERROR_RULE.id, CMP_ERROR_RULE.level, reason, where),
                             reason, kept)
    parts = engine.split_runs(run, config)
    latest = parts[-1]  # a log of appended runs: its latest run is the one compared
    objective = compare_objective(latest, baseline.run, config)  # a DPO/GRPO run: its reward or margins
    no_loss = loss_not_comparable(latest)
    if objective is not None and no_loss is not None:
        return _objective_report(artefact, baseline, objective, no_loss, kept, own)
    try:
        pair = align(latest, baseline.run, config.limits_for(UNCOMPARABLE_RULE), baseline_report=baseline.report)
    except Uncomparable as e:
        reason = f"cannot compare with baseline {baseline.run.path}: {e}"
        side = run if e.side == "run" else baseline.run
        loss = side.get("loss")
        where = side.location(loss.records[-1] if loss is not None else None)
        return _not_compared(artefact, baseline,
                             _finding(UNCOMPARABLE_RULE.id, UNCOMPARABLE_RULE.level, reason, where), reason, kept)
    findings, checks = run_rules(comparison_rules(), pair, Context(), config)
    if objective is not None:  # a preference run: its margins compared beside its loss
        findings.extend(objective[0])
        checks.extend(objective[1])
    findings.extend(kept)
    findings.sort(key=finding_order)
    summary: dict[str, Number] = dict(pair.summary())
    if objective is not None:
        summary.update({f"margins_{k}": v for k, v in objective[2].items()})
    summary["baseline_verdict"] = baseline.report.verdict.value if baseline.report else None
    summary["run_verdict"] = own.verdict.value if own is not None else None
    if len(parts) > 1:
        loss = latest.get("loss") or latest.get("eval_loss")
        span = latest.record_spans.span(loss.records[0]) if loss is not None else None
        from_line = f" (from line {span.start_line + 1})" if span is not None else ""
        summary["compared_segment"] = len(parts)
        summary["common_note"] = "; ".join(x for x in (
            f"this log holds {len(parts)} appended runs: the latest, run {len(parts)}{from_line}, is compared",
            summary.get("common_note")) if isinstance(x, str))
    return Report(artefact=artefact, verdict=verdict_of(findings), findings=tuple(findings),
                            checks=tuple(checks), baseline=baseline.artefact, comparison=summary)


def _objective_report(artefact: Artefact, baseline: Baseline,
                      objective: tuple[list[Finding], list[Check], dict[str, Number]], no_loss: str,
                      kept: tuple[Finding, ...], own: Report | None) -> Report:
    """An RL run against its baseline: the reward comparison (judge/compare_objective.py),
    the loss comparison rules skipped with the reason, the run's own FAILs kept."""
    found, ran, summary = objective
    checks = [Check(group=r.id, ran=False, reason=no_loss) for r in comparison_rules()] + ran
    findings = sorted([*found, *kept], key=finding_order)
    summary = {**summary, "baseline_verdict": baseline.report.verdict.value if baseline.report else None,
               "run_verdict": own.verdict.value if own is not None else None}
    verdict = verdict_of(findings)
    reason = ""
    if verdict is Verdict.PASS and not any(c.ran for c in ran):
        verdict, reason = Verdict.NOT_CHECKED, ran[0].reason if ran else no_loss
    return Report(artefact=artefact, verdict=verdict, findings=tuple(findings), checks=tuple(checks),
                  reason=reason, baseline=baseline.artefact, comparison=summary)


def _same(a: str, b: str) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return a == b


def compare(baseline_path: Path, run_paths: Iterable[Path], config: Config) -> Outcome:
    """Every run found at each of `run_paths` against the baseline at `baseline_path`."""
    return _compare(baseline_path, run_paths, config, None)


def compare_with_runs(baseline_path: Path, run_paths: Iterable[Path],
                      config: Config) -> tuple[Outcome, dict[str, Run]]:
    """`compare`, and the runs it compared (the baseline's too) by path: what
    `compare --html` draws."""
    runs: dict[str, Run] = {}
    return _compare(baseline_path, run_paths, config, runs), runs


def _compare(baseline_path: Path, run_paths: Iterable[Path], config: Config,
             runs: dict[str, Run] | None) -> Outcome:
    """`compare`; `runs`, when given, collects the runs by path (kept only when asked for:
    a tree of long runs would otherwise stay in memory)."""
    baseline = load_baseline(baseline_path, config)
    if runs is not None and baseline.run is not None:
        runs[baseline.run.path] = baseline.run
    reports: list[Report] = []
    for path in run_paths:
        if not path.exists():
            reason = f"{path}: no such file or folder"
            art = Artefact(path=str(path), kind="comparison", format="unknown", sources=(str(path),))
            reports.append(_not_compared(art, baseline, _finding(NOT_CHECKED.id, NOT_CHECKED.level, reason,
                                                                  Location(path=str(path))), reason))
            continue
        # Other files at `path` (datasets, checkpoints) are doctor's business, not compared.
        found, outcome = _runs_at(path, config)
        if not found:
            reason, where = _why_nothing(path, outcome)
            art = Artefact(path=str(path), kind="comparison", format="unknown", sources=(str(path),))
            reports.append(_not_compared(art, baseline, _finding(NOT_CHECKED.id, NOT_CHECKED.level, reason,
                                                                  where or Location(path=str(path))), reason))
            continue
        for run, own in found:
            if baseline.run is not None and _same(run.path, baseline.run.path) and len(found) > 1:
                continue  # a folder of runs that holds the baseline: not compared with itself
            if runs is not None:
                runs.setdefault(run.path, run)
            reports.append(compare_run(run, baseline, config, own))
    return Outcome(reports=tuple(reports))


def doctor(paths: Iterable[Path], config: Config, baseline_path: Path) -> Outcome:
    """doctor, with each run it judges also compared with the baseline (the baseline's
    own log, if doctor meets it, is judged but not compared with itself)."""
    return _doctor(paths, config, baseline_path, None)


def doctor_with_runs(paths: Iterable[Path], config: Config, baseline_path: Path | None = None, *,
                     reference: CheckpointFacts | None = None) -> tuple[Outcome, dict[str, Run]]:
    """What `doctor` judges (compared with the baseline when one is given, as `doctor
    --baseline B`), and each metric run it judged by path, the baseline's too: the curves
    `--html` draws. `reference` is doctor's --reference checkpoint (without a baseline)."""
    runs: dict[str, Run] = {}
    if baseline_path is not None:
        return _doctor(paths, config, baseline_path, runs), runs

    def keep(run: Run, report: Report) -> None:
        runs.setdefault(run.path, run)

    return engine.doctor(paths, config, also=keep, reference=reference), runs


def _doctor(paths: Iterable[Path], config: Config, baseline_path: Path, runs: dict[str, Run] | None) -> Outcome:
    baseline = load_baseline(baseline_path, config)
    if runs is not None and baseline.run is not None:
        runs[baseline.run.path] = baseline.run

    def against(run: Run, report: Report) -> Report | None:
        if runs is not None:
            runs.setdefault(run.path, run)
        if baseline.run is not None and _same(run.path, baseline.run.path):
            return None
        return compare_run(run, baseline, config, report)

    return engine.doctor(paths, config, also=against)


__all__ = ["Baseline", "load_baseline", "compare_run", "compare", "compare_with_runs",
           "doctor", "doctor_with_runs", "comparison_rules"]
