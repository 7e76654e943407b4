"""Speech datasets judged: a listing read (readers/speech.py), its audio read on all
cores (readers/audio.py), the speech rules run (rules/speech.py), coverage kept honest.

    judge_speech(path, config, ...)           -> Report   one manifest, metadata csv or folder
    judge_speech_paths(paths, config, ...)    -> [Report] several, eval listings paired with
                                                          their training listings by name

No rule logic and no file formats here. The checks that need decoded samples (clipping,
silence) or a SentencePiece model are NOT-CHECKED with the reason when their package is
missing — never a pass.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Callable, Iterable, Sequence

from ..core.config import Config
from ..core.model import Artefact, Check, Finding, ReadError, Report, Span
from ..readers.audio import SampleOptions
from ..readers.common import open_regular
from ..readers.speech import SpeechListing, SpeechScan, list_speech, listing_layout, scan_speech
from ..rules.speech import CLIPPING, EVAL_RULES, SAMPLE_RULES, SILENCE, SPEECH_RULES, TOKENIZER_RULES, \
    SpeechContext
from .base import finding_order, not_checked, not_checked_finding, run_rules, verdict_of
from .dataset_pairs import pair_datasets

KIND = "speech"
# A SentencePiece model's usual names beside the data (NeMo's tokenizer folders, ESPnet).
_SPM_NAMES = ("tokenizer.model", "spm.model", "sentencepiece.model")
# Progress on stderr starts after this long, so a small corpus prints nothing.
_PROGRESS_AFTER_S = 2.0


def is_speech_listing(path: Path, head: bytes) -> bool:
    """A file whose name and first bytes make it a speech listing (readers/speech.py)."""
    return listing_layout(path, head) is not None


def _tokenizer_model(listing: SpeechListing, given: Path | str | None) -> tuple[Path | None, bool]:
    """(the SentencePiece model to use, whether the user asked for it)."""
    if given is not None:
        p = Path(given)
        if p.is_dir():
            found = next((p / n for n in _SPM_NAMES if (p / n).is_file()), None)
            return found, False  # an HF tokenizer folder without a .model is judged by preflight's own rules
        return p, p.suffix == ".model"
    root = Path(listing.root)
    return next((root / n for n in _SPM_NAMES if (root / n).is_file()), None), False


class _Progress:
    """Files read, on stderr: silent for the first seconds, then a line every few seconds."""

    def __init__(self, label: str) -> None:
        self.label, self.start, self.last = label, time.monotonic(), 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.start < _PROGRESS_AFTER_S or now - self.last < 3.0:
            return
        self.last = now
        sys.stderr.write(f"{self.label}: {done:,}/{total:,} audio files ({now - self.start:.0f} s)\n")
        sys.stderr.flush()


def scan(path: Path, config: Config, *, data: bytes | None = None, tokenizer: Path | str | None = None,
         jobs: int | None = None, progress: Callable[[int, int], None] | None = None
         ) -> tuple[SpeechScan, bool] | Report:
    """The listing and its audio read, or a NOT-CHECKED report saying why not.
    The bool says whether a tokenizer was asked for."""
    name = str(path)
    try:
        listing = list_speech(path, data=data)
    except ReadError as e:
        return not_checked(name, KIND, "speech", str(e), e)
    except OSError as e:
        return not_checked(name, KIND, "speech", f"{name}: cannot read ({e.strerror or e})")
    if not listing.utterances and not listing.bad:
        return not_checked(name, KIND, listing.layout, f"{name}: no utterances")
    clip, silence = config.limits_for(CLIPPING), config.limits_for(SILENCE)
    options = SampleOptions(clip_level=clip.clip_level, silence_level=silence.silence_level,
                            decode=any(config.enabled(r) for r in SAMPLE_RULES))
    model, asked = _tokenizer_model(listing, tokenizer)
    if not any(config.enabled(r) for r in TOKENIZER_RULES):
        model = None
    return scan_speech(listing, options, jobs=jobs, progress=progress, tokenizer=model), asked


def speech_report(scanned: SpeechScan, config: Config, *, train: Sequence[SpeechScan] = (),
                  tokenizer_asked: bool = False) -> Report:
    """The speech rules over one scanned listing; eval rules only with its training listings."""
    rules = SPEECH_RULES if train else tuple(r for r in SPEECH_RULES if r not in EVAL_RULES)
    findings, checks = run_rules(rules, scanned, SpeechContext(train=tuple(train)), config)
    if not train:
        checks.extend(Check(group=r.id, ran=False, reason="no training listing to compare with (an eval listing "
                                                         "is paired by name, or given with preflight --eval)")
                      for r in EVAL_RULES)
    extra: list[Finding] = []
    sample_skips = [c for c in checks if c.group in {r.id for r in SAMPLE_RULES} and not c.ran
                    and c.reason == scanned.samples_note and scanned.samples_note != "samples not decoded"]
    if sample_skips:
        extra.append(not_checked_finding(scanned.path, f"{' and '.join(c.group for c in sample_skips)} not "
                                                       f"checked: {scanned.samples_note}", _top(scanned)))
    if tokenizer_asked and scanned.tokenizer is None and scanned.tokenizer_note:
        extra.append(not_checked_finding(scanned.path, f"tokenizer checks not run: {scanned.tokenizer_note}",
                                         _top(scanned)))
    findings.extend(extra)
    findings.sort(key=finding_order)
    listing = scanned.listing
    sources = (listing.path,) + ((listing.config.path,) if listing.config is not None else ())
    return Report(artefact=Artefact(path=listing.path, kind=KIND, format=listing.layout, sources=sources),
                  verdict=verdict_of(findings), findings=tuple(findings), checks=tuple(checks))


def _top(scanned: SpeechScan) -> Span | None:
    return None if Path(scanned.path).is_dir() else Span(0, 0, 0, 0)


def judge_speech(path: Path | str, config: Config, *, data: bytes | None = None,
                 tokenizer: Path | str | None = None, train: Sequence[Path] = (), jobs: int | None = None,
                 progress: Callable[[int, int], None] | None = None) -> Report:
    """One speech listing (or an editor buffer of one) judged; `train`: the training
    listings an eval listing must not share utterances with."""
    got = scan(Path(path), config, data=data, tokenizer=tokenizer, jobs=jobs, progress=progress)
    if isinstance(got, Report):
        return got
    scans = [t[0] for t in (scan(p, config, jobs=jobs) for p in train) if not isinstance(t, Report)]
    return speech_report(got[0], config, train=scans, tokenizer_asked=got[1])


def _siblings(path: Path) -> list[Path]:
    """Listings beside `path` (same folder, same suffix) that may be its other split."""
    try:
        return sorted(p for p in path.parent.iterdir() if p.suffix.lower() == path.suffix.lower() and p.is_file())
    except OSError:
        return [path]


def judge_speech_paths(paths: Iterable[Path], config: Config, *, eval_path: Path | None = None,
                       tokenizer: Path | str | None = None, jobs: int | None = None,
                       show_progress: bool = False) -> list[Report]:
    """Speech listings, each judged; an eval listing (by name, or `eval_path`) also against
    its training listings (given, or beside it by name: metadata_train.csv for
    metadata_eval.csv)."""
    listed = list(dict.fromkeys(paths))
    jobs = jobs if jobs is not None else (os.cpu_count() or 1)
    reports = []
    for p in listed:
        train: list[Path] = []
        if p.is_file():
            pairs = pair_datasets(_siblings(p))
            train = [t for t in pairs.get(p, ()) if t != p]
        progress = _Progress(f"speech {p.name}") if show_progress else None
        reports.append(judge_speech(p, config, tokenizer=tokenizer, train=train, jobs=jobs, progress=progress))
    if eval_path is not None:
        reports.append(judge_speech(eval_path, config, tokenizer=tokenizer, train=listed, jobs=jobs,
                                    progress=_Progress(f"speech {eval_path.name}") if show_progress else None))
    return reports


__all__ = ["judge_speech", "judge_speech_paths", "preflight_speech", "speech_report", "scan", "is_speech_listing", "KIND"]


def preflight_speech(paths: Sequence[Path | str], config: Config, *, eval_path: Path | str | None = None,
                     tokenizer_dir: Path | str | None = None, jobs: int | None = None
                     ) -> tuple[list[Report], list[Path | str], Path | str | None, Path | str | None]:
    """`preflight`'s speech listings judged here; (their reports, the other datasets, the
    eval file when it is not a speech listing, the tokenizer for the rest: None when it is
    a SentencePiece model the speech listings used)."""
    def speech(p: Path | str) -> bool:
        path = Path(p)
        if "://" in str(p) or not path.is_file():
            return False
        try:
            with open_regular(path) as fh:
                return is_speech_listing(path, fh.read(65536))
        except OSError:
            return False

    mine = [Path(p) for p in paths if speech(p)]
    rest = [p for p in paths if not (Path(p) in mine and "://" not in str(p))]
    speech_eval = eval_path is not None and speech(eval_path)
    if not mine and not speech_eval:
        return [], list(paths), eval_path, tokenizer_dir
    reports = judge_speech_paths(mine, config, eval_path=Path(eval_path) if speech_eval and eval_path else None,
                                 tokenizer=tokenizer_dir, jobs=jobs, show_progress=True)
    spm = tokenizer_dir is not None and Path(tokenizer_dir).suffix == ".model"
    return reports, rest, None if speech_eval else eval_path, None if spm else tokenizer_dir
