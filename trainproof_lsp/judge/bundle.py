"""The bundle report: one output folder's files judged against each other.

`doctor FOLDER` gives, beside each file's own report, one report of kind "bundle" for
every folder holding two or more kinds of bundle file (model config, tokenizer, adapter,
weights): its sources list the files read together and its checks the cross-file rules
that ran (rules/bundle.py), each skipped one with its reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from ..core.config import Config
from ..core.model import Artefact, ReadError, Report
from ..readers.bundle import BundleFacts, is_bundle, read_bundle
from ..rules import rules_of
from ..rules.bundle import BUNDLE, BundleContext
from .base import finding_order, not_checked, not_checked_finding, run_rules, verdict_of


def bundle_sources(b: BundleFacts) -> tuple[str, ...]:
    """Every file the bundle read: the folder's own, then the base model's an adapter names."""
    own = [b.path(n) for n in b.files]
    base = list(b.base.files) if b.base is not None else []
    if b.base is not None and b.base.index:
        base.append(b.base.index)
    if b.base_folder is not None and b.base_config:
        base.append(str(Path(b.base_folder) / "config.json"))
    return tuple(dict.fromkeys(own + sorted(base)))


def judge_facts(b: BundleFacts, config: Config) -> Report:
    findings, checks = run_rules(rules_of(BUNDLE), b, BundleContext(), config)
    # A bundle file that could not be read leaves its comparisons unjudged: never a pass.
    findings.extend(not_checked_finding(b.folder, f"bundle: {note}") for note in b.notes)
    findings.sort(key=finding_order)
    return Report(artefact=Artefact(path=b.folder, kind="bundle", format="hf-output-folder",
                                    sources=bundle_sources(b)),
                  verdict=verdict_of(findings), findings=tuple(findings), checks=tuple(checks))


def judge_bundle(folder: Path | str, config: Config) -> Report:
    try:
        b = read_bundle(folder)
    except ReadError as e:
        return not_checked(str(folder), "bundle", "hf-output-folder", str(e), e)
    except OSError as e:
        return not_checked(str(folder), "bundle", "hf-output-folder", f"{folder}: cannot read ({e.strerror or e})")
    return judge_facts(b, config)


def judge_bundles(files: Iterable[Path], config: Config, *, roots: Iterable[Path] = ()) -> list[Report]:
    """One bundle report for every folder among the files' folders that holds a bundle and
    lies in one of `roots` (the folders doctor was given: a file given alone is judged
    alone, its folder's bundle only when the folder is asked for)."""
    tops = [r.resolve() for r in roots]
    folders = sorted({f if f.is_dir() else f.parent for f in files})
    return [judge_bundle(f, config) for f in folders
            if any(f.resolve() == t or t in f.resolve().parents for t in tops) and is_bundle(f)]


__all__ = ["judge_bundle", "judge_bundles", "judge_facts", "bundle_sources"]
