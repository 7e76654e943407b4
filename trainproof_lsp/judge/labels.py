"""The objective's labels judged: the model's config.json, the datasets' label columns, the
script's loss settings and one saved batch read (readers/labels.py), the label rules run
(rules/labels.py), coverage kept honest.

    judge_labels(datasets, config, ...)          -> Report | None   preflight's datasets
    judge_labels_in(dataset_files, files, config) -> [Report]       doctor: per folder

No rule logic and no file formats here. A run with no label column, no --batch and
nothing that says what the output layer is gets no labels report (nothing to judge; the
dataset's own report stands). A batch asked for and unreadable is NOT-CHECKED.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

from ..core.config import Config
from ..core.model import Artefact, Finding, ReadError, Report
from ..readers.labels import (LabelColumn, LabelFacts, LossSettings, ModelLabels, find_model_config, read_batch,
                              read_label_column, read_loss_settings, read_model_labels)
from ..rules.labels import RULES
from .base import finding_order, not_checked_finding, run_rules, verdict_of

KIND = "labels"
_LABEL_SUFFIXES = (".jsonl", ".json", ".ndjson", ".csv")
_EVAL_WORDS = ("eval", "valid", "val", "test", "dev")


def _split_of(path: Path) -> str:
    stem = path.stem.lower().replace("-", "_").replace(".", "_")
    return "eval" if any(w in stem.split("_") for w in _EVAL_WORDS) else "train"


def _column(path: Path, split: str, notes: list[str]) -> LabelColumn | None:
    try:
        col = read_label_column(path, split=split)
    except (ReadError, OSError, ValueError, RecursionError) as e:
        notes.append(f"{path}: labels not read ({getattr(e, 'strerror', None) or e})")
        return None
    return col if col.rows or col.not_integer or col.sequences else None


def judge_labels(datasets: Sequence[Path | str], config: Config, *, eval_paths: Sequence[Path | str] = (),
                 model_config: Path | str | None = None, script: Path | str | None = None,
                 batch: Path | str | None = None, search: Sequence[Path | str] = ()) -> Report | None:
    """The label rules over a run's datasets (train, and `eval_paths`), its model config
    (given, named on disk by the script's from_pretrained, or a config.json beside the data
    or in `search`), its script's loss settings and `batch`. None when there is nothing to
    judge (see the module doc)."""
    notes: list[str] = []
    findings: list[Finding] = []
    settings: LossSettings | None = None
    if script is not None and Path(script).suffix == ".py":
        try:
            settings = read_loss_settings(Path(script))
        except (ReadError, OSError) as e:
            notes.append(f"{script}: loss settings not read ({getattr(e, 'strerror', None) or e})")
    got_batch: LabelColumn | None = None
    if batch is not None:
        try:
            got_batch = read_batch(Path(batch))
        except ReadError as e:
            findings.append(not_checked_finding(str(batch), f"--batch not read: {e}"))
        except OSError as e:
            findings.append(not_checked_finding(str(batch), f"--batch not read: {batch}: {e.strerror or e}"))
    config_path = Path(model_config) if model_config is not None else None
    if config_path is None and settings is not None and settings.model_configs:
        config_path = Path(settings.model_configs[0])
    if config_path is None:
        folders = [Path(p).parent for p in [*datasets, *eval_paths] if "://" not in str(p)]
        folders += [Path(s) for s in search] + [f.parent for f in folders]
        config_path = find_model_config(list(dict.fromkeys(folders)))
    model: ModelLabels | None = None
    if config_path is not None:
        try:
            model = read_model_labels(config_path)
        except (ReadError, OSError) as e:
            notes.append(f"{config_path}: not read ({getattr(e, 'strerror', None) or e})")
    if model is None and got_batch is None and not findings and not notes and \
            (settings is None or settings.causal_lm is None):
        return None  # nothing says what the output layer is: the datasets are not read again
    cols = [c for p in datasets if "://" not in str(p) and Path(p).suffix.lower() in _LABEL_SUFFIXES
            and (c := _column(Path(p), "train", notes)) is not None]
    cols += [c for p in eval_paths if "://" not in str(p) and Path(p).suffix.lower() in _LABEL_SUFFIXES
             and (c := _column(Path(p), "eval", notes)) is not None]
    if not cols and got_batch is None and not findings:
        return None  # no label column, no batch: nothing of the objective to judge
    facts = LabelFacts(model=model, data=tuple(cols), script=settings, batch=got_batch)
    found, checks = run_rules(RULES, facts, None, config)
    findings.extend(found)
    # What was there but could not be read is said, never passed over.
    findings.extend(not_checked_finding(n.split(": ", 1)[0], n) for n in notes)
    findings.sort(key=finding_order)
    first = cols[0].path if cols else str(batch)
    sources = tuple(dict.fromkeys([*(c.path for c in cols), *([model.path] if model else []),
                                   *([settings.path] if settings else []), *([str(batch)] if batch else [])]))
    return Report(artefact=Artefact(path=first, kind=KIND, format="objective", sources=sources),
                  verdict=verdict_of(findings), findings=tuple(findings), checks=tuple(checks))


def judge_labels_in(dataset_files: Iterable[Path], files: Iterable[Path], config: Config) -> list[Report]:
    """doctor: the datasets of each folder judged with the folder's model config.json (or
    its parent's) and the training script beside them."""
    by_folder: dict[Path, list[Path]] = {}
    for f in dataset_files:
        by_folder.setdefault(f.parent, []).append(f)
    scripts = [f for f in files if f.suffix == ".py"]
    reports = []
    for folder, data in sorted(by_folder.items()):
        script = next((s for s in scripts if s.parent in (folder, folder.parent)), None)
        train = [d for d in data if _split_of(d) == "train"]
        evals = [d for d in data if _split_of(d) == "eval"]
        got = judge_labels(train, config, eval_paths=evals, script=script)
        if got is not None:
            reports.append(got)
    return reports


def preflight_labels(paths: Sequence[Path | str], config: Config, *, eval_path: Path | str | None = None,
                     tokenizer_dir: Path | str | None = None, train_config: Path | str | None = None,
                     batch: Path | str | None = None) -> Report | None:
    """preflight's datasets with the run's model config (beside them, or in --tokenizer's
    folder), --train-config's loss settings and --batch."""
    search = [tokenizer_dir] if tokenizer_dir is not None and Path(tokenizer_dir).is_dir() else []
    return judge_labels(paths, config, eval_paths=[eval_path] if eval_path is not None else [],
                        script=train_config, batch=batch, search=search)


__all__ = ["judge_labels", "judge_labels_in", "preflight_labels", "KIND"]
