"""Preflight: datasets (and their tokenizer) judged before a GPU-second is spent.

    preflight(paths, config, eval_path=..., tokenizer_dir=..., max_len=...) -> Outcome
    judge_dataset(path, config, data=...)                                   -> Report
    judge_tokenizer(folder, config, conversational=...)                      -> Report

No file formats here (readers/dataset.py, readers/tokenizer.py) and no rule logic
(rules/dataset.py, rules/tokenizer.py): this module runs the rules over the scans and
keeps coverage honest. `judge_dataset` is also what `doctor` and the language server call
on a dataset (the server with the editor buffer as `data`), so it stays lean: one scan,
the rules, no imports of heavy packages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from .config import Config
from .engine import finding_order, not_checked, run_rules, verdict_of
from .model import Artefact, Check, Outcome, ReadError, Report
from .readers.dataset import DatasetScan, scan_dataset
from .readers.tokenizer import read_tokenizer_dir
from .rules.dataset import DATASET_RULES, OVERLAP, OVERLAP_SKIP, DatasetContext
from .rules.tokenizer import TOKENIZER_RULES, TokenizerContext

# Token-length checks (TP-PRE-CONTEXT-OVERFLOW in the published tool) need a real
# tokenizer (transformers); they are not shipped until they can be tested here.
_LENGTH_GROUP = "token-lengths"
_LENGTH_REASON = ("token-length checks (--max-len) are not available in this version: they need the "
                  "optional transformers package and are not shipped untested")

def dataset_report(scan: DatasetScan, config: Config, *, train: Sequence[DatasetScan] = (),
                   max_len: int | None = None) -> Report:
    """The dataset rules over a finished scan."""
    artefact = Artefact(path=scan.path, kind="dataset", format=_format_name(scan), sources=(scan.path,))
    if scan.records == 0 and not scan.problems:
        reason = f"{scan.path}: no records ({scan.lines} line(s), {scan.blank_lines} blank)"
        return not_checked(scan.path, "dataset", artefact.format, reason)
    rules = DATASET_RULES if train else tuple(r for r in DATASET_RULES if r is not OVERLAP)
    findings, checks = run_rules(rules, scan, DatasetContext(train=tuple(train)), config)
    if not train:
        checks.append(Check(group=OVERLAP.id, ran=False, reason=OVERLAP_SKIP))
    if max_len is not None:
        checks.append(Check(group=_LENGTH_GROUP, ran=False, reason=_LENGTH_REASON))
    findings.sort(key=finding_order)
    return Report(artefact=artefact, verdict=verdict_of(findings), findings=tuple(findings), checks=tuple(checks))


def _format_name(scan: DatasetScan) -> str:
    if not scan.formats:
        return f"dataset-{scan.layout}"
    return f"{scan.layout}:{'+'.join(f for f, _, _ in scan.formats)}"


def _scan(path: Path, data: bytes | None = None) -> DatasetScan | Report:
    name = str(path)
    try:
        return scan_dataset(path, data)
    except ReadError as e:
        return not_checked(name, "dataset", "dataset", str(e), e)
    except (ValueError, RecursionError, MemoryError) as e:  # never a traceback, never a FAIL
        return not_checked(name, "dataset", "dataset", f"{name}: unreadable ({type(e).__name__}: {e})")


def judge_dataset(path: Path | str, config: Config, *, data: bytes | None = None,
                  max_len: int | None = None) -> Report:
    """One dataset file (or editor buffer `data`) judged on its own. Train/eval overlap
    and the tokenizer are judged by `preflight`, each in its own report."""
    scanned = _scan(Path(path), data)
    if isinstance(scanned, Report):
        return scanned
    return dataset_report(scanned, config, max_len=max_len)


def judge_tokenizer(folder: Path | str, config: Config, *, conversational: bool | None = None) -> Report:
    name = str(folder)
    try:
        tok = read_tokenizer_dir(folder)
    except ReadError as e:
        return not_checked(name, "tokenizer", "tokenizer", str(e), e)
    except OSError as e:
        return not_checked(name, "tokenizer", "tokenizer", f"{name}: cannot read ({e.strerror or e})")
    findings, checks = run_rules(TOKENIZER_RULES, tok, TokenizerContext(conversational=conversational), config)
    findings.sort(key=finding_order)
    return Report(artefact=Artefact(path=name, kind="tokenizer", format="hf-tokenizer",
                                    sources=tuple(tok.path(n) for n in tok.present)),
                  verdict=verdict_of(findings), findings=tuple(findings), checks=tuple(checks))


def preflight(paths: Sequence[Path | str], config: Config, *, eval_path: Path | str | None = None,
              tokenizer_dir: Path | str | None = None, max_len: int | None = None) -> Outcome:
    """Every dataset, the eval file (with its overlap against the training files) and the
    tokenizer folder, each in its own report."""
    reports: list[Report] = []
    scans: list[DatasetScan] = []
    for p in paths:
        scanned = _scan(Path(p))
        if isinstance(scanned, Report):
            reports.append(scanned)
            continue
        scans.append(scanned)
        reports.append(dataset_report(scanned, config, max_len=max_len))
    if eval_path is not None:
        scanned = _scan(Path(eval_path))
        if isinstance(scanned, Report):
            reports.append(scanned)
        else:
            reports.append(dataset_report(scanned, config, train=scans, max_len=max_len))
            scans = [*scans, scanned]
    if tokenizer_dir is not None:
        conversational = any(s.conversational for s in scans) if scans else None
        reports.append(judge_tokenizer(tokenizer_dir, config, conversational=conversational))
    return Outcome(reports=tuple(reports))


__all__ = ["preflight", "judge_dataset", "judge_tokenizer", "dataset_report", "scan_dataset"]
