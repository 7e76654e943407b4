"""Judge artefacts: read (via detect + readers), run the registry's rules, build reports.

No rule logic here and no file formats: this module wires readers to rules and keeps the
coverage honest (every rule either ran or is listed as skipped with its reason).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterable, Mapping, TypeVar

from ..core.caps import DEFAULT_CAPS, MIB, not_regular
from ..core.config import Config
from ..core.formats import (checkpoint_step, formats_of, is_candidate, is_run_marker, is_skipped_folder, run_root,
                            sniff_checkpoint, suffixes)
from ..core.model import (EVAL_LOSS, LEVEL_RANK, LOSS, Artefact, Check, Finding, Level, Location, NotJudged, Outcome, ReadError,
                          Related, Report, Run, Segment, Series, Span, Verdict)
from ..readers.checkpoint import CheckpointError, CheckpointFacts, LfsPointerError, Problem, read_checkpoint
from ..readers.common import open_regular, read_regular
from ..readers.coqui import read_coqui_log
from ..readers.detect import HEAD_BYTES, RESIDENTS, Detected, detect
from ..readers.envcheck import EnvRequest, collect
from ..readers.yaml_api import collect_config, is_config_entry
from ..readers.lfs import FORMAT as LFS_FORMAT, KIND as LFS_KIND, pointer_size
from ..readers.metrics import read_metrics_csv, read_metrics_json_array, read_metrics_jsonl
from ..readers.mlflow import is_mlflow_run, read_mlflow_run
from ..readers.script import read_script
from ..readers.stdout_log import read_stdout_log
from ..readers.stacks import read_llamafactory_log, read_swift_log
from ..readers.torchtune import read_torchtune_log
from ..readers.tensorboard import read_event_files, run_folder
from ..readers.tfevents import EventFileScan
from ..readers.tokenizer import TOKENIZER_FILES
from ..readers.trainer_state import check_caps, read_trainer_state
from ..rules import BY_ID, NOT_CHECKED, SKIPPED_RECORDS, Context, Family, Rule, metric_rules, rules_of
from ..rules.checkpoint import CHECKPOINT
from ..rules.entrypoint import FROM_CWD_RULE
from ..rules.env import ENV, IMPORT_FAIL_RULE
from ..rules.script import SCRIPT
from ..rules.eventfile import CORRUPT_RULE, TRUNCATED_RULE
from ..rules.nonfinite import NAN_RULE
from ..rules.objective import leads, stand_down
from ..rules.steps import APPENDED_RULE as APPENDED_RUNS, seams
# The judges' shared pieces, here too under their old names (engine.not_checked, ...).
from .base import finding_order, not_checked, not_checked_finding, run_rules, verdict_of
from .coverage import too_short
from .dataset_pairs import pair_datasets
from .bundle import judge_bundles
from .preflight import judge_dataset, judge_datasets, judge_tokenizer
from .speech import judge_speech, judge_speech_paths
from .labels import judge_labels_in
from ..readers.speech import folder_layout as speech_folder
from .wandb_run import FORMAT as WANDB_FORMAT, read_wandb_run
from ..readers.wandb_offline import CONSOLE_REASON, is_console_of_run

# Formats whose records are the file's rows in order, so a step going back is a row
# written later (event files are merged and sorted by step; MLflow numbers each metric
# file's lines apart): only these are split into appended runs.
_ROW_ORDER_FORMATS = frozenset({"hf-trainer-state", "metrics-jsonl", "metrics-json", "metrics-csv",
                                "llamafactory-log", "swift-log", "torchtune-log"})

_READERS: dict[str, Callable[..., Run]] = {
    "hf-trainer-state": read_trainer_state,
    "metrics-jsonl": read_metrics_jsonl,
    "metrics-json": read_metrics_json_array,
    "metrics-csv": read_metrics_csv,
    "coqui-log": read_coqui_log,
    "stdout-log": read_stdout_log,
    "llamafactory-log": read_llamafactory_log,
    "swift-log": read_swift_log,
    "torchtune-log": read_torchtune_log,
}

def _context(run: Run, config: Config) -> Context:
    if config.vocab_size:
        return Context(num_classes=config.vocab_size, num_classes_source=config.vocab_source)
    if run.meta.vocab_size:
        return Context(num_classes=run.meta.vocab_size, num_classes_source=run.meta.vocab_source)
    return Context()


def judge_run(run: Run, config: Config, *, kind: str = "metrics",
              extra: Iterable[Finding] = ()) -> Report:
    """All enabled metric rules over one run; `extra` findings (reader damage reports)
    join the rule findings. A log of several appended runs is split and each run judged
    on its own (`judge_segments`)."""
    bounds = _segment_bounds(run, config)
    if len(bounds) > 2:
        return judge_segments(run, bounds, config, kind=kind, extra=extra)
    return _judge_one(run, config, kind=kind, extra=extra)


def _segment_bounds(run: Run, config: Config) -> tuple[int, ...]:
    """Record bounds of the runs appended in one log: (0, seam, ..., end); (0, end) for a
    log of one run."""
    cuts = seams(run, config.limits_for(APPENDED_RUNS)) if run.format in _ROW_ORDER_FORMATS else ()
    # Rows come in file order, so each series' last record is its latest row.
    end = max((s.records[-1] for s in run.series.values() if len(s)), default=0) + 1
    return (0, *cuts, end)


def _eval_as_loss(run: Run) -> Run:
    """A log that carries only eval losses, with the eval series standing in as the loss:
    the loss rules (trend, spikes, step order) judge it; TP-NAN-EVAL and TP-OVERFIT judge
    the eval series under its own name."""
    ev = run.series[EVAL_LOSS]
    series = dict(run.series)
    series[LOSS] = Series(LOSS, ev.source_name, ev.steps, ev.values, ev.records)
    return dataclasses.replace(run, series=series, memo={})


def _judge_one(run: Run, config: Config, *, kind: str = "metrics",
               extra: Iterable[Finding] = ()) -> Report:
    ctx = _context(run, config)
    def missing_series(rule: Rule[Run, Context]) -> str | None:
        if down := stand_down(run, rule.id):  # a preference/RL run's loss (rules/objective.py)
            return down
        missing = [name for name in rule.needs if run.get(name) is None]
        return f"no {' or '.join(missing)} series in the log" if missing else None

    ev = run.get(EVAL_LOSS)
    if run.get(LOSS) is None and ev is not None:
        # Only eval losses in the log: they are what there is to judge, loss rules included.
        findings, checks = _judge_eval_only(run, ev, ctx, config, missing_series)
    else:
        findings, checks = run_rules(metric_rules(), run, ctx, config, precheck=missing_series)
    findings[:0] = [f for f in extra if config.enabled(BY_ID[f.id])]
    if run.notes:
        findings.append(_skipped_records(run))
    short = too_short(run, config)
    if short is not None and not any(f.level is Level.FAIL for f in findings):
        # A log too short for the trend checks is never a bare PASS (a FAIL says enough).
        findings.append(not_checked_finding(run.path, short[0], run.location(short[1]).span))
    findings.sort(key=finding_order)
    findings.sort(key=lambda f: (LEVEL_RANK[f.level], not leads(f.id, run)))  # a DPO/GRPO run's own rules lead
    verdict = verdict_of(findings)
    reason = short[0] if short is not None and verdict is Verdict.NOT_CHECKED else ""
    if not any(c.ran for c in checks) and verdict is Verdict.PASS:
        # Nothing ran: that is not a pass (a skipped check is never a pass).
        verdict = Verdict.NOT_CHECKED
        reason = f"{run.path}: no check could run ({checks[0].reason if checks else 'no rules enabled'})"
    return Report(
        artefact=Artefact(path=run.path, kind=kind, format=run.format, sources=run.sources),
        verdict=verdict,
        findings=tuple(findings),
        checks=tuple(checks),
        reason=reason,
    )


def _judge_eval_only(run: Run, ev: Series, ctx: Context, config: Config,
                     missing_series: Callable[[Rule[Run, Context]], str | None]) -> tuple[list[Finding], list[Check]]:
    """The rules that read the loss run on the eval series (their findings and skip
    reasons say so); the rest on the run as it is. Checks keep the registry's order."""
    derived = _eval_as_loss(run)
    what = f"eval loss ({ev.source_name}; the log has no train loss)"
    rules = metric_rules()
    on_eval = [r for r in rules if LOSS in r.needs and r.id != NAN_RULE.id]

    def precheck(rule: Rule[Run, Context]) -> str | None:
        if rule.id == NAN_RULE.id:
            return "no train loss in the log; TP-NAN-EVAL judges its eval loss"
        return missing_series(rule)

    def missing_in_derived(rule: Rule[Run, Context]) -> str | None:
        missing = [name for name in rule.needs if derived.get(name) is None]
        return f"no {' or '.join(missing)} series in the log" if missing else None

    own_f, own_c = run_rules([r for r in rules if r not in on_eval], run, ctx, config, precheck=precheck)
    ev_f, ev_c = run_rules(on_eval, derived, ctx, config, precheck=missing_in_derived)
    ev_f = [dataclasses.replace(f, message=f"{what}: {f.message}", evidence={**f.evidence, "series": EVAL_LOSS})
            for f in ev_f]
    ev_c = [c if c.ran else dataclasses.replace(c, reason=f"{what}: {c.reason}") for c in ev_c]
    by_id = {c.group: c for c in own_c + ev_c}
    return own_f + ev_f, [by_id[r.id] for r in rules if r.id in by_id]


def judge_segments(run: Run, bounds: tuple[int, ...], config: Config, *, kind: str = "metrics",
                   extra: Iterable[Finding] = ()) -> Report:
    """A log of several appended runs (record `bounds` from rules/steps.seams): every run
    judged on its own, so no finding spans a seam. One report for the file: its findings
    are the runs' (each message names its run and lines), `segments` holds each run's
    sub-report."""
    count = len(bounds) - 1
    findings: list[Finding] = [f for f in extra if config.enabled(BY_ID[f.id])]
    segments: list[Segment] = []
    per_rule: dict[str, list[tuple[int, Check]]] = {}
    primary_name = LOSS if run.get(LOSS) is not None else EVAL_LOSS
    for k, (lo, hi) in enumerate(zip(bounds, bounds[1:]), 1):
        part = _segment_run(run, lo, hi)
        primary = part.series[primary_name]
        first_span = run.record_spans.span(primary.records[0])
        last_span = run.record_spans.span(primary.records[-1])
        a = first_span.start_line if first_span else None
        b = last_span.end_line if last_span else None
        lines = f"lines {a + 1}-{b + 1}, " if a is not None and b is not None else ""
        tag = f"run {k} of {count} in this log: {lines}steps {primary.steps[0]}-{primary.steps[-1]}"
        report = _judge_one(part, config, kind=kind)
        mine = [dataclasses.replace(f, message=f"{f.message} [{tag}]", evidence={**f.evidence, "segment": k})
                for f in report.findings]
        if k > 1 and config.enabled(APPENDED_RUNS):
            whole = run.series[primary_name]
            i = whole.records.index(primary.records[0])  # the seam: whole.steps[i] < whole.steps[i - 1]
            mine.append(Finding(
                id=APPENDED_RUNS.id, level=APPENDED_RUNS.level,
                message=(f"run {k} of {count} in this log starts here ({lines}steps {primary.steps[0]}-"
                         f"{primary.steps[-1]}, {len(primary)} {primary_name} points): the step goes back from "
                         f"{whole.steps[i - 1]} to {whole.steps[i]}; judged on its own"),
                evidence={"segment": k, "segments": count, "first_step": primary.steps[0],
                          "last_step": primary.steps[-1], "previous_step": whole.steps[i - 1],
                          "points": len(primary)},
                location=run.location(primary.records[0]),
                related=(Related(location=run.location(whole.records[i - 1]),
                                 message=f"the run before ends at step {whole.steps[i - 1]}"),),
                limits=APPENDED_RUNS.limits_dict(config.limits_for(APPENDED_RUNS))))
        findings.extend(mine)
        for c in report.checks:
            per_rule.setdefault(c.group, []).append((k, c))
        segments.append(Segment(index=k, first_line=a, last_line=b, first_step=primary.steps[0],
                                last_step=primary.steps[-1], points=len(primary), verdict=report.verdict,
                                findings=tuple(f.id for f in mine), checks=report.checks))
    checks = []
    for group, results in per_rule.items():
        skipped = [(k, c) for k, c in results if not c.ran]
        if not skipped and len(results) == count:
            checks.append(Check(group=group, ran=True))
        else:
            k, c = skipped[0] if skipped else (0, Check(group=group, ran=False, reason="not run"))
            checks.append(Check(group=group, ran=False, reason=f"run {k} of {count}: {c.reason}"))
    if run.notes:
        findings.append(_skipped_records(run))
    findings.sort(key=finding_order)
    verdict = verdict_of(findings)
    reason = ""
    if verdict is Verdict.PASS and all(g.verdict is Verdict.NOT_CHECKED for g in segments):
        verdict = Verdict.NOT_CHECKED
        reason = f"{run.path}: no check could run on any of its {count} runs"
    return Report(artefact=Artefact(path=run.path, kind=kind, format=run.format, sources=run.sources),
                  verdict=verdict, findings=tuple(findings), checks=tuple(checks), reason=reason,
                  segments=tuple(segments))


def split_runs(run: Run, config: Config) -> tuple[Run, ...]:
    """The runs of a log of appended runs, in file order (the log itself when it holds one)."""
    bounds = _segment_bounds(run, config)
    if len(bounds) <= 2:
        return (run,)
    return tuple(_segment_run(run, lo, hi) for lo, hi in zip(bounds, bounds[1:]))


def _segment_run(run: Run, lo: int, hi: int) -> Run:
    """The part of a run logged in records [lo, hi): one of several appended runs."""
    series = {}
    for name, s in run.series.items():
        keep = [i for i, r in enumerate(s.records) if lo <= r < hi]
        if keep:
            series[name] = Series(s.name, s.source_name, tuple(s.steps[i] for i in keep),
                                  tuple(s.values[i] for i in keep), tuple(s.records[i] for i in keep))
    return dataclasses.replace(run, series=series, notes=(), memo={},
                               meta=dataclasses.replace(run.meta, best_step=None, best_checkpoint=None))


def _skipped_records(run: Run) -> Finding:
    record, first = run.notes[0]
    count = len(run.notes)
    return Finding(
        id=SKIPPED_RECORDS.id, level=SKIPPED_RECORDS.level,
        message=f"{count} record problem(s) read past: {first}" + ("" if count == 1 else " (and more)"),
        evidence={"count": count},
        location=run.location(record if record >= 0 else None),
    )


def _head(path: Path) -> bytes:
    """The first bytes of a regular file (a FIFO or a device raises NotRegularFile, an
    OSError, before a byte is read)."""
    with open_regular(path) as fh:
        return fh.read(HEAD_BYTES)


def read_run(path: Path, detected: Detected, data: bytes | None = None, config: Config | None = None, *,
             columns: Mapping[str, str] | None = None) -> Run:
    """A text log read into a Run, within the config's caps; `columns` (default: the
    config's) names the series the alias table misses."""
    reader = _READERS[detected.format]
    config = config or Config()
    caps = config.caps
    columns = config.columns if columns is None else columns
    if data is None:
        check_caps(path, None, caps)  # the size, before a byte is read
        data = read_regular(path, caps.max_log_mb * MIB)  # a log grown past the cap meanwhile stops there
    check_caps(path, data, caps, entries=detected.format == "hf-trainer-state")
    if b"\x00" in data[:HEAD_BYTES]:
        raise ReadError(f"{path}: binary data (NUL bytes), not a text log")
    if columns and detected.format != "coqui-log":  # the `columns` setting: names the alias table misses
        return reader(path, data, columns=columns)
    return reader(path, data)


def judge_file(path: Path, config: Config, *, data: bytes | None = None,
               reference: CheckpointFacts | None = None) -> Report:
    """One file (or editor buffer `data`) judged as whatever it is."""
    name = str(path)
    irregular = not_regular(path) if data is None else None
    if irregular:
        return not_checked(name, "unknown", "unknown", f"{name}: {irregular}")
    try:
        head = data[:HEAD_BYTES] if data is not None else _head(path)
    except OSError as e:
        reason = f"{name}: cannot read ({e.strerror or e})"
        return not_checked(name, "unknown", "unknown", reason)
    detected = detect(path, head)
    if detected.kind == "lfs-pointer":  # the file is not there: one NOT-CHECKED, whatever its name
        return not_checked(name, detected.kind, detected.format, f"{name}: {detected.reason}")
    if detected.kind == "checkpoint":
        return judge_checkpoint(path, config, reference=reference)
    if detected.kind == "script":
        return judge_script(path, config, data=data)
    if detected.kind == "dataset":
        return judge_dataset(path, config, data=data)
    if detected.kind == "speech":  # an editor buffer's audio is read on one core (judge/speech.py)
        return judge_speech(path, config, data=data, jobs=1 if data is not None else None)
    if detected.kind != "metrics":
        reason = f"{name}: {detected.reason or 'not a training log this version can read'}"
        return not_checked(name, detected.kind, detected.format, reason)
    if detected.format == "tfevents":
        return judge_event_files([path], config)
    if detected.format == WANDB_FORMAT:  # a binary record log, read up to a cut (said as NOT-CHECKED)
        got = read_wandb_run(path, config, data)
        return got if isinstance(got, Report) else judge_run(got[0], config, extra=got[1])
    try:
        run = read_run(path, detected, data, config)
    except ReadError as e:
        return not_checked(name, "metrics", detected.format, str(e), e)
    except OSError as e:
        return not_checked(name, "metrics", detected.format, f"{name}: cannot read ({e.strerror or e})")
    except (ValueError, RecursionError, MemoryError) as e:
        # A reader met input it does not handle; never a traceback, never a FAIL.
        return not_checked(name, "metrics", detected.format, f"{name}: unreadable ({type(e).__name__}: {e})")
    return judge_run(run, config)


def event_file_findings(scans: Iterable[EventFileScan]) -> list[Finding]:
    """What the event-file reader met: a cut tail (INFO) or a damaged record (WARN)."""
    out = []
    for scan in scans:
        for problem in scan.problems:
            rule = TRUNCATED_RULE if problem.kind == "truncated" else CORRUPT_RULE
            out.append(Finding(
                id=rule.id, level=rule.level,
                message=f"{problem.message} (record {problem.record}, byte {problem.offset}); "
                        f"{scan.records} record(s) before it were read",
                evidence={"kind": problem.kind, "byte_offset": problem.offset, "record": problem.record,
                          "records_read": scan.records},
                location=Location(path=scan.path, byte_offset=problem.offset, record=problem.record)))
    return out


def judge_event_files(paths: list[Path], config: Config) -> Report:
    """One run's event files (shards, Keras splits) judged as one run."""
    name = str(paths[0])
    try:
        run, scans = read_event_files(paths, verify_crc=True, columns=config.columns, caps=config.caps)
    except ReadError as e:
        return not_checked(name, "metrics", "tfevents", str(e), e)
    except OSError as e:
        return not_checked(name, "metrics", "tfevents", f"{name}: cannot read ({e.strerror or e})")
    return judge_run(run, config, extra=event_file_findings(scans))


# --- doctor: whole folders ------------------------------------------------------------

# An MLflow run folder's own bookkeeping (one file per metric/param/tag, no suffix).
_MLFLOW_DIRS = {"metrics", "params", "tags"}


def walk(root: Path) -> list[Path]:
    """Every candidate file below root, sorted (`walk_folder` without what it names)."""
    return walk_folder(root)[0]


# Folders of tool internals that hold no checkpoint of anyone's: never entered.
_NEVER_ENTERED = frozenset({".git", ".hg", ".svn", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"})
# Installed packages: entered only to name the checkpoint-like files in them (a numpy or
# torch install ships test pickles; judging them would judge the packages, not the run).
_PACKAGE_FOLDERS = frozenset({"node_modules", ".venv", "venv", "site-packages", "dist-packages", ".tox"})


def walk_folder(root: Path) -> tuple[list[Path], list[NotJudged]]:
    """(every candidate file below root, sorted; the checkpoint-like files a walk does not
    judge, each named with why). An MLflow run folder is itself a candidate (its metrics
    are files without suffix).

    A folder never searched for logs (a dot-folder such as `.models/`, `wandb-cache`) is
    still searched for checkpoints, which are judged; inside installed packages (`venv/`,
    `site-packages/`, `node_modules/`) each checkpoint-like file is named, not judged.
    In a folder holding a run marker or a checkpoint, every other file is sniffed by its
    first bytes: torch.load and pickle.load do not look at a name."""
    found: list[Path] = []
    named: list[NotJudged] = []
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        parts = here.relative_to(root).parts
        package = next((p for p in parts if p in _PACKAGE_FOLDERS), None)
        hidden = package is None and any(is_skipped_folder(p) for p in parts)
        dirs[:] = sorted(d for d in dirs if d not in _NEVER_ENTERED)
        if package is not None or hidden:
            for f in sorted(files):
                if not _checkpoint_named(f) or (f.lower().endswith(".pth") and here.name in _PACKAGE_FOLDERS):
                    continue  # a site-packages *.pth is Python's path configuration, not a checkpoint
                if hidden:
                    found.append(here / f)
                else:
                    named.append(NotJudged(path=str(here / f), reason=(
                        f"checkpoint-like file inside installed packages ({package}/): not judged in a "
                        f"folder walk; `doctor {here / f}` judges it")))
            continue
        if is_mlflow_run(here):
            found.append(here)
            dirs[:] = [d for d in dirs if d not in _MLFLOW_DIRS]
        run_like = checkpoint_step(here.name) is not None or any(
            is_run_marker(f) or _checkpoint_named(f) for f in files)
        for f in sorted(files):
            p = here / f
            if is_candidate(f) or (run_like and _sniffs_as_checkpoint(p)):
                found.append(p)
    return found, named


# Checkpoint formats are known by suffix alone (core/formats.py): one endswith a file name.
_CHECKPOINT_SUFFIXES = tuple(sorted(suffixes(formats_of("checkpoint"))))


def _checkpoint_named(file_name: str) -> bool:
    return file_name.lower().endswith(_CHECKPOINT_SUFFIXES)


def _sniffs_as_checkpoint(path: Path) -> bool:
    """A file whose first bytes are a torch archive, a pickle, a tar or an .npy array, or a
    Git LFS pointer standing for such a file, whatever its name (read only from a regular
    file: a FIFO never blocks the walk)."""
    if not_regular(path):
        return False
    try:
        head = _head(path)
        return sniff_checkpoint(head) is not None or pointer_size(head) is not None
    except OSError:
        return False


def _is_prefix(shorter: Run, longer: Run) -> bool:
    a, b = shorter.get("loss"), longer.get("loss")
    if a is None or b is None:
        return a is None and b is None
    n = len(a)
    return n <= len(b) and a.steps == b.steps[:n] and all(
        x == y or (x != x and y != y) for x, y in zip(a.values, b.values[:n]))


def doctor(paths: Iterable[Path], config: Config, *,
           also: Callable[[Run, Report], Report | None] | None = None,
           reference: CheckpointFacts | None = None) -> Outcome:
    """Judge whatever is at `paths`. `also`, when given, is called with every run judged
    and its report; a report it returns follows the run's own (doctor --baseline: the
    comparison)."""
    paths = list(paths)
    reports: list[Report] = []
    not_judged: list[NotJudged] = []
    passed_over: list[NotJudged] = []
    files: list[Path] = []
    speech_files: list[Path] = []
    for p in paths:
        if p.is_dir() and speech_folder(p) is not None:  # audio with .lab/.txt beside it, VCTK: one listing
            reports.append(judge_speech(p, config))
            continue
        if p.is_dir():
            found, named = walk_folder(p)
            passed_over.extend(named)
            if not found:
                reports.append(not_checked(str(p), "folder", "folder",
                                           f"{p}: nothing to judge (no log, dataset, checkpoint, tokenizer "
                                           "or training script below it)"))
            files.extend(found)
        elif p.exists():
            files.append(p)
        else:
            reports.append(not_checked(str(p), "unknown", "unknown", f"{p}: no such file or folder"))
    seen: set[Path] = set()
    metric_files: list[tuple[Path, Detected]] = []
    dataset_files: list[Path] = []
    tokenizer_folders: dict[Path, None] = {}
    for f in files:
        if f in seen:
            continue
        seen.add(f)
        if f.is_dir():  # an MLflow run folder (from walk)
            metric_files.append((f, Detected("metrics", "mlflow")))
            continue
        if f.name in TOKENIZER_FILES:  # a tokenizer folder: judged once, as a whole
            tokenizer_folders[f.parent] = None
            continue
        if f.name in RESIDENTS:  # known by name: never opened
            passed_over.append(NotJudged(path=str(f), reason=RESIDENTS[f.name]))
            continue
        if is_console_of_run(f):  # a W&B run's captured stdout: one run, judged from its run-<id>.wandb
            passed_over.append(NotJudged(path=str(f), reason=CONSOLE_REASON))
            continue
        irregular = not_regular(f)  # a FIFO would block the open, /dev/zero never ends
        if irregular:
            not_judged.append(NotJudged(path=str(f), reason=irregular))
            continue
        try:
            head = _head(f)
        except OSError as e:
            not_judged.append(NotJudged(path=str(f), reason=f"cannot read ({e.strerror or e})"))
            continue
        detected = detect(f, head)
        if detected.kind == "lfs-pointer":  # not downloaded: one NOT-CHECKED for the file, never read as its name says
            reports.append(not_checked(str(f), detected.kind, detected.format, f"{f}: {detected.reason}"))
            continue
        if detected.kind == "resident":
            passed_over.append(NotJudged(path=str(f), reason=detected.reason))
            continue
        if detected.kind == "dataset":  # judged below, eval files beside their training files
            dataset_files.append(f)
            continue
        if detected.kind == "speech":  # judged below, eval listings beside their training listings
            speech_files.append(f)
            continue
        if detected.kind in ("checkpoint", "script"):  # read without running: never unpickled, never imported
            reports.append(judge_file(f, config, reference=reference))
            continue
        if detected.kind == "tfevents":
            not_judged.append(NotJudged(path=str(f), reason=detected.reason))
            continue
        if detected.kind == "other":
            passed_over.append(NotJudged(path=str(f), reason=detected.reason or "not a training log"))
            continue
        metric_files.append((f, detected))
    reports.extend(judge_dataset_files(dataset_files, config, roots=[p for p in paths if p.is_dir()]))
    reports.extend(judge_speech_paths(speech_files, config))
    # The datasets' labels against the folder's model config and script (judge/labels.py).
    reports.extend(judge_labels_in(dataset_files, files, config))
    reports.extend(_judge_metric_files(metric_files, config, not_judged, also))
    reports.extend(judge_tokenizer_folders(tokenizer_folders, config, passed_over))
    # Each output folder's files checked against each other (judge/bundle.py): one report a folder.
    reports.extend(judge_bundles(files, config, roots=[p for p in paths if p.is_dir()]))
    if not reports and not not_judged:
        where = ", ".join(str(p) for p in paths) or "."
        reports.append(not_checked(where, "folder", "folder",
                                   f"{where}: nothing to judge ({len(passed_over)} file(s) passed over, "
                                   "none a log, dataset, checkpoint, tokenizer or training script)"))
    reports.sort(key=lambda r: r.artefact.path)
    return Outcome(reports=tuple(reports), not_judged=tuple(not_judged), passed_over=tuple(passed_over))


def judge_dataset_files(files: list[Path], config: Config, *, roots: Iterable[Path] = ()) -> list[Report]:
    """The dataset files doctor found, each judged on its own; an eval/valid/test file that
    pairs with training files by name (dataset_pairs.py) is also judged against them, as
    `preflight --eval` judges it (TP-PRE-EVAL-OVERLAP and its file-level shares)."""
    return judge_datasets(files, config, train_of=pair_datasets(files, list(roots)))


# What the tokenizer rules read besides tokenizer.json: equal bytes here mean the same
# tokenizer settings (HF Trainer saves a copy into every checkpoint-N/).
_TOKENIZER_SETTINGS = ("tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                       "chat_template.json", "added_tokens.json")


def _same_tokenizer_settings(a: Path, b: Path) -> bool:
    try:
        return all((a / n).is_file() == (b / n).is_file() and (not (a / n).is_file() or
                                                                 (a / n).read_bytes() == (b / n).read_bytes())
                   for n in _TOKENIZER_SETTINGS)
    except OSError:
        return False


def judge_tokenizer_folders(folders: Iterable[Path], config: Config, passed_over: list[NotJudged]) -> list[Report]:
    """One report per tokenizer folder. A checkpoint-N/ copy with the same settings as its
    run folder's tokenizer is listed as passed over (judged there), not judged again."""
    chosen = list(dict.fromkeys(folders))
    reports = []
    for folder in chosen:
        parent = folder.parent
        if not any((folder / n).is_file() for n in ("tokenizer_config.json", "special_tokens_map.json")):
            # A bare tokenizer.json (the `tokenizers` library's file) declares no special
            # tokens: judging it as a transformers tokenizer would be a false "no EOS".
            passed_over.append(NotJudged(path=str(folder / "tokenizer.json"),
                                         reason="tokenizer.json without tokenizer_config.json or "
                                                "special_tokens_map.json; not judged as a tokenizer folder"))
            continue
        if checkpoint_step(folder.name) is not None and parent in chosen and _same_tokenizer_settings(folder, parent):
            passed_over.append(NotJudged(path=str(folder), reason=f"tokenizer files: the same settings as "
                                                                  f"{parent}'s, judged there"))
            continue
        reports.append(judge_tokenizer(folder, config))
    return reports


def _group_key(path: Path, detected: Detected) -> Path:
    """The run folder a metric file belongs to. Files of one run share it: an HF
    output_dir (its trainer_state.json, checkpoint copies, runs/<name>/ event files), a
    Lightning version_N/ (metrics.csv + event file), a Keras log dir (train/ and
    validation/ event files), a Coqui run folder (text log + event file)."""
    if detected.format == "hf-trainer-state":
        return run_root(path)
    if detected.format == "tfevents":
        folder = run_folder(path)
        if folder.parent.name == "runs" and (folder.parent.parent / "trainer_state.json").is_file():
            return folder.parent.parent
        return folder
    if detected.format == "mlflow":
        return path
    return path.parent


def _read_text_run(path: Path, detected: Detected, config: Config | None = None) -> Run | Report:
    columns = config.columns if config is not None else None
    try:
        if detected.format == "mlflow":
            return read_mlflow_run(path, columns=columns, caps=config.caps if config is not None else DEFAULT_CAPS)
        return read_run(path, detected, config=config)
    except ReadError as e:
        return not_checked(str(path), "metrics", detected.format, str(e), e)
    except OSError as e:
        return not_checked(str(path), "metrics", detected.format, f"{path}: cannot read ({e.strerror or e})")
    except (ValueError, RecursionError, MemoryError) as e:
        return not_checked(str(path), "metrics", detected.format, f"{path}: unreadable ({type(e).__name__}: {e})")


def _loss_points(run: Run) -> int:
    loss = run.get("loss")
    return len(loss) if loss is not None else 0


def _with_sources(run: Run, sources: tuple[str, ...]) -> Run:
    return Run(path=run.path, format=run.format, series=run.series, record_spans=run.record_spans,
               meta=run.meta, sources=sources, unmapped=run.unmapped, notes=run.notes)


def _merge_trainer_states(states: list[tuple[Path, Run]]) -> list[Run]:
    """checkpoint-*/trainer_state.json copies are prefixes of their run: keep the
    longest log of the output_dir, listing the copies among its sources."""
    group = sorted(states, key=lambda t: (-max((len(s) for s in t[1].series.values()), default=0),
                                          len(t[0].parts), str(t[0])))
    runs = []
    while group:
        main_path, main = group.pop(0)
        copies = [t for t in group if _is_prefix(t[1], main)]
        group = [t for t in group if t not in copies]
        runs.append(_with_sources(main, (str(main_path), *sorted(str(p) for p, _ in copies))))
    return runs


def _agree(a: Run, b: Run) -> bool:
    """Two reads of one run: every loss point at a step both logged has the same value, and
    they share at least one such step."""
    la, lb = a.get(LOSS), b.get(LOSS)
    if la is None or lb is None:
        return False
    at = dict(zip(lb.steps, lb.values))
    shared = [(v, at[s]) for s, v in zip(la.steps, la.values) if s in at]
    return bool(shared) and all(x == y or (x != x and y != y) for x, y in shared)


def _stack_log_joined(states: list[Run], others: list[Run]) -> list[Run]:
    """LLaMA-Factory's trainer_log.jsonl beside its folder's trainer_state.json: one run's
    log_history, written twice. Judged once, from the one with more loss points (the log
    goes on between saves; trainer_state.json on a tie: it holds grad norms too), the
    other among its sources. Logs that disagree are judged apart."""
    logs = [r for r in others if r.format == "llamafactory-log"]
    if len(states) != 1 or len(logs) != 1 or not _agree(states[0], logs[0]):
        return states + others
    state, log = states[0], logs[0]
    primary, other = (log, state) if _loss_points(log) > _loss_points(state) else (state, log)
    joined = _with_sources(primary, primary.sources + tuple(s for s in other.sources if s not in primary.sources))
    return [joined, *(r for r in others if r is not log)]


def _judge_metric_files(files: list[tuple[Path, Detected]], config: Config, not_judged: list[NotJudged],
                        also: Callable[[Run, Report], Report | None] | None = None) -> list[Report]:
    def judged(run: Run, extra: list[Finding] | None = None) -> list[Report]:
        report = judge_run(run, config, extra=extra or ())
        more = also(run, report) if also is not None else None
        return [report] if more is None else [report, more]

    groups: dict[Path, list[tuple[Path, Detected]]] = {}
    for path, detected in files:
        groups.setdefault(_group_key(path, detected), []).append((path, detected))
    reports: list[Report] = []
    for members in groups.values():
        states: list[tuple[Path, Run]] = []
        text_runs: list[Run] = []
        events = [p for p, d in members if d.format == "tfevents"]
        for path, detected in members:
            if detected.format == "tfevents":
                continue
            if detected.format == WANDB_FORMAT:  # a W&B offline run: its own run, its cut said beside it
                read = read_wandb_run(path, config)
                reports.extend([read] if isinstance(read, Report) else judged(read[0], list(read[1])))
                continue
            got = _read_text_run(path, detected, config)
            if isinstance(got, Report):
                reports.append(got)
            elif detected.format == "hf-trainer-state":
                states.append((path, got))
            else:
                text_runs.append(got)
        text_runs = _stack_log_joined(_merge_trainer_states(states), text_runs)
        event_run: Run | None = None
        extra: list[Finding] = []
        if events:
            try:
                event_run, scans = read_event_files(events, verify_crc=True, columns=config.columns,
                                                    caps=config.caps)
                extra = event_file_findings(scans)
                for p, scan in zip(events, scans):
                    if not scan.scalars and str(p) not in event_run.sources:
                        not_judged.append(NotJudged(path=str(p), reason="event file without scalar summaries"))
            except ReadError as e:
                for p in events:
                    not_judged.append(NotJudged(path=str(p), reason=str(e).split(": ", 1)[-1]))
            except OSError as e:
                for p in events:
                    not_judged.append(NotJudged(path=str(p), reason=f"cannot read ({e.strerror or e})"))
        if event_run is not None and len(text_runs) == 1:
            # One run written twice (a text log and event files): judge it once, from the
            # source with the most loss points (the text log on a tie: it has lines).
            text = text_runs[0]
            primary, other = (event_run, text) if _loss_points(event_run) > _loss_points(text) else (text, event_run)
            merged = _with_sources(primary, primary.sources + tuple(s for s in other.sources if s not in primary.sources))
            reports.extend(judged(merged, extra))
            continue
        for run in text_runs:
            reports.extend(judged(run))
        if event_run is not None:
            reports.extend(judged(event_run, extra))
    return reports


def epoch(path: Path, config: Config) -> Outcome:
    return Outcome(reports=(judge_file(path, config),))


# --- checkpoints, scripts, environment: facts judged by their rule families ------------------

S = TypeVar("S")


def judge_facts(facts: S, *, family: Family[S, Context], path: str, fmt: str, config: Config,
                sources: tuple[str, ...] = (), extra: Iterable[Finding] = ()) -> Report:
    """Every enabled rule of one family over its reader record (CheckpointFacts,
    ScriptFacts, EnvFacts). A report whose worst finding is NOT-CHECKED carries that
    finding's message as its one-line reason."""
    kind = family.kind
    findings, checks = run_rules(rules_of(family), facts, Context(), config)
    findings.extend(extra)
    findings.sort(key=finding_order)
    verdict = verdict_of(findings)
    reason = ""
    if verdict is Verdict.NOT_CHECKED:
        first = next(f for f in findings if f.level is Level.NOT_CHECKED)
        reason = f"{path}: {first.message}"
    return Report(artefact=Artefact(path=path, kind=kind, format=fmt, sources=sources or (path,)),
                  verdict=verdict, findings=tuple(findings), checks=tuple(checks), reason=reason)


def read_reference(path: Path) -> CheckpointFacts:
    """The --reference checkpoint (names and shapes only); ReadError with one line if unusable."""
    if not path.exists():
        raise ReadError(f"--reference {path}: no such file")
    try:
        facts = read_checkpoint(path, scan=False)
    except CheckpointError as e:
        raise ReadError(f"--reference {e}") from None
    if not facts.tensors:
        why = facts.problems[0].message if facts.problems else "no tensors in it"
        raise ReadError(f"--reference {path}: not usable as a reference ({why})")
    return facts


def judge_checkpoint(path: Path, config: Config, *, reference: CheckpointFacts | None = None) -> Report:
    """A checkpoint read without executing it (readers/checkpoint.py)."""
    name = str(path)
    try:
        facts = read_checkpoint(path, caps=config.caps)
    except LfsPointerError as e:  # not downloaded: reported as doctor reports any pointer
        return not_checked(name, LFS_KIND, LFS_FORMAT, str(e))
    except CheckpointError as e:
        return not_checked(name, "checkpoint", "unknown", str(e))
    except ReadError as e:
        return not_checked(name, "checkpoint", "sharded-index", str(e), e)
    except (ValueError, OverflowError, RecursionError, MemoryError) as e:
        return not_checked(name, "checkpoint", "unknown", f"{name}: unreadable ({type(e).__name__}: {e})")
    if reference is not None:
        facts = replace(facts, reference=reference)
    # A cap met or a pickle left unwalked: said as TP-NOT-CHECKED, never passed over.
    extra = [not_checked_finding(name, note) for note in facts.not_checked]
    return judge_facts(facts, family=CHECKPOINT, path=name, fmt=facts.format, config=config, extra=extra)


# The import check is env's: doctor (and the editor) read a script, never run it.
IMPORTS_BY_ENV = ("imports are checked by `trainproof-lsp env --entrypoint FILE` (in a child process); "
                  "doctor reads the script with ast and never runs or imports it")


def judge_script(path: Path, config: Config, *, data: bytes | None = None) -> Report:
    """A training script's config, read with ast (readers/script.py); never imported."""
    name = str(path)
    try:
        facts = read_script(path, data)
    except ReadError as e:
        return not_checked(name, "script", "python", str(e), e)
    report = judge_facts(facts, family=SCRIPT, path=name, fmt="python", config=config)
    return replace(report, checks=report.checks + (Check(group=IMPORT_FAIL_RULE.id, ran=False,
                                                         reason=IMPORTS_BY_ENV),))


def _relabel(f: Finding, old: str, new: str) -> Finding:
    """The finding with `old` paths shown as `new` (the entrypoint as the user typed it)."""
    def loc(x: Location) -> Location:
        return replace(x, path=new) if x.path == old else x

    return replace(f, location=loc(f.location),
                   related=tuple(replace(r, location=loc(r.location)) for r in f.related))


def env(request: EnvRequest, config: Config, *, checkpoint: Path | None = None,
        shown: str | None = None, found_from_cwd: bool = False) -> Outcome:
    """`trainproof-lsp env`: one report for the script — the import check (envcheck.py,
    in a child process) and the static foot-guns `doctor` finds in it (rules/script.py)
    — with the machine's memory and disk; and the resume checkpoint's report if given.
    `shown` is the entrypoint as the user typed it (request.entrypoint is where it was
    found); `found_from_cwd` says it was found relative to --cwd only."""
    # a LLaMA-Factory YAML entrypoint: its keys against the installed classes, not imports
    facts = collect_config(request) if is_config_entry(request.entrypoint) else collect(request)
    # An import the probe refused because it would run the entrypoint's top level: not
    # checked (without --run-entrypoint), never a failure.
    extra = [not_checked_finding(p.location.path, f"{p.module}: {p.detail}", p.location.span)
             for p in facts.probes if p.outcome == "entrypoint-not-run"]
    if facts.api_error and Path(facts.path).suffix in (".yaml", ".yml"):  # a config whose keys nothing judged
        extra.append(not_checked_finding(facts.path, f"the config's keys were not checked: {facts.api_error}"))
    report = judge_facts(facts, family=ENV, path=facts.path, fmt="import-probe", config=config, extra=extra)
    script = request.entrypoint if request.entrypoint is not None else (
        Path(facts.path) if request.module and not facts.entry_error else None)
    findings, checks = list(report.findings), list(report.checks)
    if script is not None and script.is_file():
        static = judge_script(script, config)
        if static.checks:  # read: its foot-guns join the report (the import check ran here)
            findings += [f for f in static.findings if f.location.path == str(script)]
            checks += [c for c in static.checks if c.reason != IMPORTS_BY_ENV]
    if shown is not None and request.entrypoint is not None and shown != str(request.entrypoint):
        findings = [_relabel(f, str(request.entrypoint), shown) for f in findings]
        if found_from_cwd:
            findings.append(Finding(
                id=FROM_CWD_RULE.id, level=FROM_CWD_RULE.level,
                message=f"{shown} is not in the current folder; judged {os.path.relpath(request.entrypoint)} "
                        "(relative to --cwd)",
                evidence={}, location=Location(path=shown)))
    findings.sort(key=finding_order)
    verdict = verdict_of(findings)
    path = shown if shown is not None and report.artefact.path == str(request.entrypoint) else report.artefact.path
    reports = [replace(report, artefact=replace(report.artefact, path=path, sources=(path,)),
                       verdict=verdict, findings=tuple(findings), checks=tuple(checks),
                       reason=report.reason if verdict is Verdict.NOT_CHECKED else "")]
    if checkpoint is not None:
        if checkpoint.exists():
            reports.append(judge_checkpoint(checkpoint, config))
        else:
            missing = CheckpointFacts(path=str(checkpoint), format="missing", size=0, problems=(Problem(
                kind="missing", message=f"the checkpoint to resume from does not exist: {checkpoint}"),),
                scan_note="no such file")
            reports.append(judge_facts(missing, family=CHECKPOINT, path=str(checkpoint), fmt="missing",
                                       config=config))
    return Outcome(reports=tuple(reports))


__all__ = ["judge_run", "judge_file", "doctor", "epoch", "verdict_of", "finding_order", "run_rules", "not_checked",
           "not_checked_finding", "BY_ID", "judge_facts", "judge_checkpoint", "judge_script", "read_reference", "env"]
