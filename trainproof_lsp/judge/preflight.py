"""Preflight: datasets (and their tokenizer) judged before a GPU-second is spent.

    preflight(paths, config, eval_path=..., tokenizer_dir=..., max_len=...) -> Outcome
    judge_dataset(path, config, data=..., tokenizer_dir=..., max_len=...)   -> Report
    judge_tokenizer(folder, config, conversational=...)                      -> Report

No file formats here (readers/dataset.py, readers/tokenizer.py, tokens.py) and no rule
logic (rules/dataset.py, rules/tokens.py, rules/tokenizer.py): this module runs the rules
over the scans and keeps coverage honest. `judge_dataset` is also what `doctor` and the
language server call on a dataset (the server with the editor buffer as `data`), so it
stays lean: one scan, the rules, no imports of heavy packages. Token lengths are the one
optional part: counted only with a tokenizer folder and `--max-len`, with transformers
imported at that moment (tokens.py). Without them, a tokenizer folder's chat template is
still run on the rows whose turns do not alternate, in the jinja2 sandbox
(chat_template.py, TemplateRows): a row it refuses is a TP-PRE-CHAT-TEMPLATE-ERROR.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..core.caps import not_regular
from ..core.config import Config
from ..core.model import Artefact, Check, Finding, Outcome, ReadError, Report, Span
from ..readers.dataset import DatasetScan, scan_dataset
from ..readers import lfs as lfs_pointer
from ..readers import chat_template as ct
from ..readers.tokenizer import read_tokenizer_dir
from ..rules.dataset import (ACROSS_FILES, DATASET_RULES, EVAL_RULES, OVERLAP_SKIP, STANDS_DOWN, DatasetContext,
                             EarlierCopy)
from ..readers.bundle import read_run_settings
from ..rules.tokenizer import QUIET_SKIPS, TEMPLATE_NO_EOS, TOKENIZER_RULES, TokenizerContext, special_tokens
from ..readers.dataset import NOT_ALTERNATING as NOT_ALTERNATING_KIND
from .base import finding_order, not_checked, not_checked_finding, run_rules, verdict_of
from .cross_files import across_files, earlier_copies
from .labels import preflight_labels
from ..rules.tokens import TEMPLATE_ERROR, TOKEN_RULES, TokenContext
from ..rules.token_map import MAP_RULES
from ..rules.base import Rule
from .token_map import MapBuilder, MapOptions, lengths_from_map, resolve_masking
from ..readers.tokens import TemplateRendered, TokenizerUnavailable, TokenLengths, count_tokens, load_tokenizer, render_rows


@dataclass(frozen=True, kw_only=True)
class NotCounted:
    """Why the token lengths of a dataset were not counted. `asked`: the user gave
    --max-len, so a check they asked for did not run — the report says NOT-CHECKED
    (exit 2 unless something FAILs), never a pass."""

    reason: str
    asked: bool = False


# The rules over token counts and the token map, listed as skipped together when nothing was counted.
_COUNTED_RULES: tuple[Rule[Any, Any], ...] = (*TOKEN_RULES, *MAP_RULES)

# The reasons the token rules (rules/tokens.py) are listed as skipped.
NOT_ASKED = NotCounted(reason="token lengths are counted by preflight --tokenizer DIR --max-len N")
_NO_MAX_LEN = NotCounted(reason="no --max-len N to compare token counts with")
_NO_TOKENIZER = NotCounted(reason="--max-len needs --tokenizer DIR to count tokens", asked=True)


class TokenCounting:
    """Token counting for one invocation: the tokenizer is loaded once, on first use, and
    only when both the folder and --max-len (or a max length in --train-config) are given.
    With a tokenizer.json and `tokenizers`, the rows are mapped (judge/token_map.py: the
    trained-tokens map, under the run's masking); otherwise counted with transformers."""

    def __init__(self, tokenizer_dir: Path | str | None, max_len: int | None, config: Config,
                 options: MapOptions | None = None) -> None:
        self.tokenizer_dir, self.max_len, self.config = tokenizer_dir, max_len, config
        self.options = options or MapOptions()
        self._tok: Any = None
        self._refused: NotCounted | None = None
        self._builder: MapBuilder | None = None
        masking = resolve_masking(replace(self.options, max_len=max_len))
        if isinstance(masking, str):
            self._refused = NotCounted(reason=masking, asked=True)
        else:
            self.max_len = masking.max_len
            if tokenizer_dir is not None:
                self._builder = MapBuilder(tokenizer_dir, masking, self.options.sample)

    def _mapped(self, scan: DatasetScan, data: bytes | None) -> TokenLengths | NotCounted | None:
        """The map's counts; None when no map can be built here and none was asked for
        (transformers counts instead)."""
        builder = self._builder
        if builder is None:
            return None
        if not builder.usable():
            if self.options.given:  # the user asked for the map's masking: never counted without it
                return NotCounted(reason=f"no token map: {builder.tokenizer()}", asked=True)
            return None
        try:
            built = builder.build(scan, data)
        except OSError as e:
            return NotCounted(reason=f"{scan.path}: cannot read ({e.strerror or e})", asked=True)
        except ct.TemplateUnusable as e:
            return NotCounted(reason=f"{self.tokenizer_dir}: {e}", asked=True)
        except Exception as e:  # the tokenizer's own code failed: a NOT-CHECKED reason, not a traceback
            return NotCounted(reason=f"{self.tokenizer_dir}: the tokenizer failed while mapping "
                                     f"({type(e).__name__}: {' '.join(str(e).split())[:200]})", asked=True)
        if isinstance(built, str):
            return NotCounted(reason=built, asked=True)
        return lengths_from_map(built)

    def lengths(self, scan: DatasetScan, data: bytes | None = None) -> TokenLengths | NotCounted:
        if self._refused is not None:
            return self._refused
        if self.max_len is None:
            return _NO_MAX_LEN if self.tokenizer_dir is not None else NOT_ASKED
        if self.tokenizer_dir is None:
            return _NO_TOKENIZER
        if not any(self.config.enabled(r) for r in _COUNTED_RULES):
            return NotCounted(reason="disabled by configuration")
        if scan.records == 0:
            return NotCounted(reason="no records to count")  # the report is NOT-CHECKED as a whole anyway
        mapped = self._mapped(scan, data)
        if mapped is not None:
            return mapped
        if self._tok is None:
            try:
                self._tok = load_tokenizer(self.tokenizer_dir)
            except TokenizerUnavailable as e:
                self._tok = NotCounted(reason=str(e), asked=True)
        if isinstance(self._tok, NotCounted):
            return self._tok
        try:
            return count_tokens(scan.path, self._tok, lines=scan.lines, layout=scan.layout, data=data,
                                tokenizer_name=str(self.tokenizer_dir))
        except OSError as e:
            return NotCounted(reason=f"{scan.path}: cannot read ({e.strerror or e})", asked=True)
        except ct.TemplateUnusable as e:  # the render went past its bounds: the template's fault, said as such
            return NotCounted(reason=f"{self.tokenizer_dir}: {e}", asked=True)
        except Exception as e:  # the tokenizer's own code failed: a NOT-CHECKED reason, not a traceback
            return NotCounted(reason=f"{self.tokenizer_dir}: the tokenizer failed while counting "
                                     f"({type(e).__name__}: {' '.join(str(e).split())[:200]})", asked=True)


class TemplateRows:
    """Rows whose turns do not alternate, rendered with the tokenizer folder's chat
    template in the jinja2 sandbox when transformers does not render every row (no
    --max-len): the template decides whether such a row is a FAIL (it refuses it) or
    stays a WARN. The folder is read once, on first use."""

    def __init__(self, tokenizer_dir: Path | str | None, config: Config) -> None:
        self.tokenizer_dir, self.config = tokenizer_dir, config
        self._template: tuple[str, dict[str, Any]] | str | None = None

    def _load(self) -> tuple[str, dict[str, Any]] | str:
        if self._template is None:
            try:
                tok = read_tokenizer_dir(self.tokenizer_dir or "")
            except (ReadError, OSError) as e:
                self._template = f"the tokenizer folder could not be read ({e})"
                return self._template
            if tok.chat_template is None:
                self._template = "the tokenizer has no chat template"
            elif not ct.available():
                self._template = f"rows not rendered: {ct.MISSING_JINJA2}"
            else:
                self._template = (tok.chat_template.value, special_tokens(tok))
        return self._template

    def render(self, scan: DatasetScan, lengths: "TokenLengths | NotCounted",
               data: bytes | None = None) -> "TemplateRendered | str | None":
        """None when there is nothing to render (no tokenizer, no such rows, or
        transformers rendered every row); a reason when the rows could not be rendered."""
        if self.tokenizer_dir is None or isinstance(lengths, TokenLengths):
            return None
        wanted = [p.line for p in scan.problems if p.kind == NOT_ALTERNATING_KIND]
        if not wanted or not self.config.enabled(TEMPLATE_ERROR):
            return None
        loaded = self._load()
        if isinstance(loaded, str):
            return loaded
        try:
            return render_rows(scan.path, loaded[0], loaded[1], wanted, layout=scan.layout, data=data)
        except OSError as e:
            return f"{scan.path}: cannot read ({e.strerror or e})"


def _token_rules(scan: DatasetScan, config: Config, lengths: TokenLengths | NotCounted,
                 max_len: int | None, rendered: "TemplateRendered | str | None" = None
                 ) -> tuple[list[Finding], list[Check]]:
    if isinstance(lengths, TokenLengths) and max_len is not None:
        found, ran = run_rules(TOKEN_RULES, lengths, TokenContext(max_len=max_len), config)
        if lengths.token_map is not None:
            more, more_ran = run_rules(MAP_RULES, lengths.token_map, None, config)
            return found + more, ran + more_ran
        reason = "counted with transformers: the token map needs the folder's tokenizer.json and `tokenizers`"
        return found, ran + [Check(group=r.id, ran=False, reason=reason if config.enabled(r) else
                                   "disabled by configuration") for r in MAP_RULES]
    if isinstance(lengths, TokenLengths):
        lengths = _NO_MAX_LEN
    checks = [Check(group=r.id, ran=False, reason=lengths.reason if config.enabled(r) else "disabled by configuration")
              for r in _COUNTED_RULES if not (rendered is not None and r is TEMPLATE_ERROR)]
    findings = []
    if isinstance(rendered, TemplateRendered):
        found, ran = run_rules((TEMPLATE_ERROR,), rendered, None, config)
        findings.extend(found)
        checks.extend(ran)
        if rendered.note:  # some rows could not be rendered: they were not judged
            findings.append(not_checked_finding(scan.path, f"{TEMPLATE_ERROR.id} not checked on every row "
                                                           f"whose turns do not alternate: {rendered.note}"))
    elif isinstance(rendered, str):
        checks.append(Check(group=TEMPLATE_ERROR.id, ran=False, reason=rendered))
    if lengths.asked and any(c.reason == lengths.reason for c in checks):
        findings.append(not_checked_finding(scan.path, f"token lengths not checked: {lengths.reason}"))
    return findings, checks


def dataset_report(scan: DatasetScan, config: Config, *, train: Sequence[DatasetScan] = (),
                   lengths: TokenLengths | NotCounted = NOT_ASKED, max_len: int | None = None,
                   rendered: "TemplateRendered | str | None" = None,
                   earlier: Sequence[EarlierCopy] = ()) -> Report:
    """The dataset rules over a finished scan, and the token rules over its token
    lengths (or listed as skipped, with why they were not counted). `rendered`: its rows
    that do not alternate, rendered with the run's chat template (TemplateRows);
    `earlier`: its rows that repeat a row of an earlier training file (cross_files.py)."""
    artefact = Artefact(path=scan.path, kind="dataset", format=_format_name(scan), sources=(scan.path,))
    if scan.records == 0 and not scan.problems:
        reason = f"{scan.path}: no records ({scan.lines} line(s), {scan.blank_lines} blank)"
        return not_checked(scan.path, "dataset", artefact.format, reason)
    rules = DATASET_RULES if train else tuple(r for r in DATASET_RULES if r not in EVAL_RULES)
    refused = lengths.template_errors if isinstance(lengths, TokenLengths) else \
        rendered.template_errors if isinstance(rendered, TemplateRendered) else ()
    findings, checks = run_rules(rules, scan, DatasetContext(train=tuple(train),
                                                             template_rejected=frozenset(e.line for e in refused),
                                                             earlier_copies=tuple(earlier)),
                                 config)
    if not train:
        checks.extend(Check(group=r.id, ran=False, reason=OVERLAP_SKIP) for r in EVAL_RULES)
    fired = {f.id for f in findings}
    # One headline per file: a share WARN is left out where its FAIL fired.
    findings = [f for f in findings if STANDS_DOWN.get(f.id) not in fired]
    token_findings, token_checks = _token_rules(scan, config, lengths, max_len, rendered)
    findings.extend(token_findings)
    checks.extend(token_checks)
    findings.sort(key=finding_order)
    return Report(artefact=artefact, verdict=verdict_of(findings), findings=tuple(findings), checks=tuple(checks))


def _format_name(scan: DatasetScan) -> str:
    if not scan.formats:
        return f"dataset-{scan.layout}"
    return f"{scan.layout}:{'+'.join(f for f, _, _ in scan.formats)}"


def _scan(path: Path, data: bytes | None = None, config: Config | None = None) -> DatasetScan | Report:
    name = str(path)
    irregular = not_regular(path) if data is None else None
    if irregular:  # a FIFO would block the open, /dev/zero never ends
        return not_checked(name, "dataset", "dataset", f"{name}: {irregular}")
    lfs = lfs_pointer.pointer_at(path, data)  # not downloaded: its three text lines are no dataset to judge
    if lfs is not None:
        return not_checked(name, lfs_pointer.KIND, lfs_pointer.FORMAT, f"{name}: {lfs}")
    try:
        config = config or Config()
        return scan_dataset(path, data, max_row_bytes=config.caps.max_row_mb * 2**20, fields=config.fields or None)
    except ReadError as e:
        return not_checked(name, "dataset", "dataset", str(e), e)
    except (ValueError, RecursionError, MemoryError) as e:  # never a traceback, never a FAIL
        return not_checked(name, "dataset", "dataset", f"{name}: unreadable ({type(e).__name__}: {e})")


def judge_dataset(path: Path | str, config: Config, *, data: bytes | None = None,
                  tokenizer_dir: Path | str | None = None, max_len: int | None = None,
                  map_options: MapOptions | None = None) -> Report:
    """One dataset file (or editor buffer `data`) judged on its own, with its token
    lengths when a tokenizer folder and `max_len` are given. Train/eval overlap and the
    tokenizer folder itself are judged by `preflight`, each in its own report."""
    scanned = _scan(Path(path), data, config)
    if isinstance(scanned, Report):
        return scanned
    counting = TokenCounting(tokenizer_dir, max_len, config, map_options)
    lengths = counting.lengths(scanned, data)
    max_len = counting.max_len
    return dataset_report(scanned, config, lengths=lengths, max_len=max_len,
                          rendered=TemplateRows(tokenizer_dir, config).render(scanned, lengths, data))


def judge_datasets(paths: Sequence[Path], config: Config, *,
                   train_of: Mapping[Path, Sequence[Path]] | None = None) -> list[Report]:
    """Dataset files, each judged on its own as `judge_dataset` judges it; an eval file in
    `train_of` also against its training files, as `preflight --eval` judges it (doctor
    pairs them by name: dataset_pairs.py). Each file is read once; a training file's
    scan is kept only until its last use (its own report, the eval files that need it)."""
    train_of = train_of or {}
    uses: dict[Path, int] = {}
    for t in (t for ts in train_of.values() for t in ts):
        uses[t] = uses.get(t, 1 if t in paths else 0) + 1
    kept: dict[Path, DatasetScan | Report] = {}

    def use(p: Path) -> DatasetScan | Report:
        got = kept[p] if p in kept else _scan(p, config=config)
        if p in uses:
            uses[p] -= 1
            if uses[p] > 0:
                kept[p] = got
            else:
                kept.pop(p, None)
        return got

    reports: list[Report] = []
    for p in paths:
        s = use(p)
        train = [t for t in map(use, train_of.get(p, ())) if isinstance(t, DatasetScan)]
        reports.append(s if isinstance(s, Report) else dataset_report(s, config, train=train))
    return reports


def judge_tokenizer(folder: Path | str, config: Config, *, conversational: bool | None = None) -> Report:
    name = str(folder)
    try:
        tok = read_tokenizer_dir(folder)
    except ReadError as e:
        return not_checked(name, "tokenizer", "tokenizer", str(e), e)
    except OSError as e:
        return not_checked(name, "tokenizer", "tokenizer", f"{name}: cannot read ({e.strerror or e})")
    # The run beside the tokenizer (training_args.bin, scripts) decides TP-TOK-DOUBLE-BOS and
    # TP-TOK-MAX-LENGTH-UNSET (readers/bundle.py).
    ctx = TokenizerContext(conversational=conversational, run=read_run_settings(folder))
    findings, checks = run_rules(TOKENIZER_RULES, tok, ctx, config)
    for c in checks:
        if c.group == TEMPLATE_NO_EOS.id and not c.ran and c.reason not in QUIET_SKIPS:
            # The template is there but its assistant turn could not be judged: say so.
            at = tok.chat_template
            findings.append(not_checked_finding(
                at.path if at is not None else name, f"{TEMPLATE_NO_EOS.id} not checked: {c.reason}",
                Span(at.line, 0, at.line, 0) if at is not None else None))
    findings.sort(key=finding_order)
    return Report(artefact=Artefact(path=name, kind="tokenizer", format="hf-tokenizer",
                                    sources=tuple(tok.path(n) for n in tok.present)),
                  verdict=verdict_of(findings), findings=tuple(findings), checks=tuple(checks))


def preflight(paths: Sequence[Path | str], config: Config, *, eval_path: Path | str | None = None,
              tokenizer_dir: Path | str | None = None, max_len: int | None = None,
              scan: Callable[[Path | str], DatasetScan | Report] | None = None,
              across: Mapping[int, Sequence[EarlierCopy]] | None = None,
              map_options: MapOptions | None = None, batch: Path | str | None = None) -> Outcome:
    """Every dataset, the eval file (with its overlap against the training files) and the
    tokenizer folder, each in its own report. `scan`: where the scans come from when they
    were made beforehand (judge/parallel.py: on worker processes or a cluster); `across`:
    the rows repeating an earlier training file's row, by the file's position in `paths`,
    when they were found beforehand (on a cluster); otherwise found here."""
    def _read(p: Path | str) -> DatasetScan | Report:
        return scan(p) if scan is not None else _scan(Path(p), config=config)

    reports: list[Report] = []
    scans: list[DatasetScan] = []
    counting = TokenCounting(tokenizer_dir, max_len, config, map_options)
    max_len = counting.max_len  # --max-len, else the max length of --train-config
    templated = TemplateRows(tokenizer_dir, config)
    read = [_read(p) for p in paths]
    if across is None:
        across = repeats_across_files(read, config)
    for i, scanned in enumerate(read):
        if isinstance(scanned, Report):
            reports.append(scanned)
            continue
        scans.append(scanned)
        lengths = counting.lengths(scanned)
        reports.append(dataset_report(scanned, config, lengths=lengths, max_len=max_len,
                                      rendered=templated.render(scanned, lengths), earlier=across.get(i, ())))
    if eval_path is not None:
        scanned = _read(eval_path)
        if isinstance(scanned, Report):
            reports.append(scanned)
        else:
            lengths = counting.lengths(scanned)
            reports.append(dataset_report(scanned, config, train=scans, lengths=lengths, max_len=max_len,
                                          rendered=templated.render(scanned, lengths)))
            scans = [*scans, scanned]
    if tokenizer_dir is not None:
        conversational = any(s.conversational for s in scans) if scans else None
        reports.append(judge_tokenizer(tokenizer_dir, config, conversational=conversational))
    # The labels against the model's config.json, --train-config's loss and --batch (judge/labels.py).
    labelled = preflight_labels(paths, config, eval_path=eval_path, tokenizer_dir=tokenizer_dir,
                                train_config=map_options.train_config if map_options else None, batch=batch)
    if labelled is not None:
        reports.append(labelled)
    return Outcome(reports=tuple(reports))


def repeats_across_files(read: Sequence[DatasetScan | Report], config: Config) -> dict[int, tuple[EarlierCopy, ...]]:
    """Rows of each training file (by position) that repeat a row of an earlier one."""
    files = [(i, s) for i, s in enumerate(read) if isinstance(s, DatasetScan)]
    if len(files) < 2 or not config.enabled(ACROSS_FILES):
        return {}
    names = {i: s.path for i, s in files}
    return earlier_copies(names, across_files([(i, s.exact) for i, s in files]),
                          across_files([(i, s.near) for i, s in files]))


__all__ = ["preflight", "judge_dataset", "judge_datasets", "judge_tokenizer", "dataset_report", "scan_dataset",
           "NotCounted", "TokenCounting", "NOT_ASKED", "repeats_across_files"]
