"""Quick fixes for dataset findings: drop a duplicate row, map a dataset's own field names.

The dataset rules judge a scan, which keeps content hashes and no row text, so the two
fixes are made here, where the rows' text is at hand: the editor's buffer
(server/code_actions.py) or the file on disk (the CLI, `with_fixes`). Both front ends
build the fix with the same functions, so the editor's action and the CLI's `fix:` line
say the same thing.

- TP-PRE-DUPLICATE-TEXT / TP-PRE-NEAR-DUPLICATE on a JSON Lines file: "drop the duplicate
  of line N" deletes the repeat's whole line. Safe (source.fixAll) only when the two lines
  are the same characters: the rule calls rows exact duplicates when their training
  content is equal, and metadata keys it ignores (`id`, `source`) would go with the line.
  A JSON array is left alone: its rows are not lines, and a comma would be left behind.
- TP-PRE-MISSING-KEYS, said once for the whole file (every row lacks a training field
  the same way): when the rows' keys match one known shape (question/answer,
  instruction/response, input/target, ...) the fix writes `fields = {...}` into
  `[tool.trainproof]` of the settings file the judge reads (judge/settings.py: the file
  the settings came from, else the nearest pyproject.toml, else a new one). It changes
  how every row is read, so it is never safe; the editor applies it as an edit of that
  file, the CLI prints it (its edit is not in the dataset's text, so it carries none).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]  # tomli is installed on 3.10 only

from ..core.caps import not_regular
from ..core.config import Config
from ..core.model import Edit, Finding, Fix, Outcome, Report, Span
from ..readers.dataset_records import REQUIRED_KEYS, classify, with_fields

DUPLICATE = "TP-PRE-DUPLICATE-TEXT"
NEAR_DUPLICATE = "TP-PRE-NEAR-DUPLICATE"
MISSING_KEYS = "TP-PRE-MISSING-KEYS"

# A line: its text without the newline, None past the end of the file. 0-based.
LineText = Callable[[int], "str | None"]

# Rows looked at to call a mapping unambiguous: every one must have the same shape. The
# whole-file finding already says every row lacks its field the same way; a sample this
# size catches a file whose rows name their fields in two ways without reading it all.
SAMPLE_ROWS = 50
# A settings file is a few kilobytes; past this it is not edited (and not read whole).
MAX_SETTINGS_BYTES = 1 << 20

# Keys that say where a row came from, not what it trains: they may sit beside the shape.
METADATA_KEYS = frozenset({"id", "idx", "index", "uid", "uuid", "source", "category", "meta", "metadata", "lang",
                           "language", "split", "tags"})

# The shapes datasets use for their own field names: the row's keys (metadata aside) ->
# the mapping (training field -> the row's key) that makes it a format the trainers read.
# Only whole key sets match: a row with a key more is not guessed at.
SHAPES: tuple[tuple[frozenset[str], Mapping[str, str]], ...] = (
    (frozenset({"question", "answer"}), {"prompt": "question", "completion": "answer"}),
    (frozenset({"query", "response"}), {"prompt": "query", "completion": "response"}),
    (frozenset({"query", "answer"}), {"prompt": "query", "completion": "answer"}),
    (frozenset({"input", "target"}), {"prompt": "input", "completion": "target"}),
    (frozenset({"input", "output"}), {"prompt": "input", "completion": "output"}),
    (frozenset({"prompt", "response"}), {"completion": "response"}),
    (frozenset({"prompt", "answer"}), {"completion": "answer"}),
    (frozenset({"instruction", "response"}), {"output": "response"}),
    (frozenset({"instruction", "input", "response"}), {"output": "response"}),
    (frozenset({"content"}), {"text": "content"}),
)


# --- drop a duplicate row ---------------------------------------------------------------------

def duplicate_fix(rule_id: str, line: int, first: int, line_text: LineText) -> Fix | None:
    """The fix of a duplicate-row finding on a JSON Lines file (0-based lines): delete the
    repeat's line, newline included. None when the lines are not there (a stale finding)."""
    text, kept = line_text(line), line_text(first)
    if text is None or kept is None or line == first:
        return None
    after = line_text(line + 1)
    if after is not None:
        span = Span(line, 0, line + 1, 0)
    elif line > 0:  # the last line, without a newline after it: take the one before it
        before = line_text(line - 1) or ""
        span = Span(line - 1, len(before), line, len(text))
    else:
        return None
    same = _bare(text) == _bare(kept)
    return Fix(title=f"drop the duplicate of line {first + 1}", edits=(Edit(span=span, new_text=""),),
               safe=rule_id == DUPLICATE and same)


def _bare(line: str) -> str:
    return line.lstrip("\ufeff").rstrip("\r")


# --- map the dataset's own field names ----------------------------------------------------------

def propose_fields(rows: Iterable[str]) -> dict[str, str] | None:
    """The mapping the rows' keys call for, when every row (JSON objects, one a line;
    blank lines skipped) has the same known shape and the mapping makes each a complete
    row of its format. None when a row is not an object, the shapes differ or none fits."""
    found: dict[str, str] | None = None
    for raw in rows:
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError):
            return None
        if not isinstance(obj, dict):
            return None
        keys = frozenset(k for k in obj if k not in METADATA_KEYS)
        mapping = next((dict(m) for shape, m in SHAPES if shape == keys), None)
        if mapping is None or (found is not None and mapping != found):
            return None
        fmt = classify(with_fields(obj, mapping))
        if fmt is None or any(k not in with_fields(obj, mapping) for k in REQUIRED_KEYS[fmt]):
            return None
        found = mapping
    return found


@dataclass(frozen=True, kw_only=True)
class FieldsEdit:
    """The mapping written into a settings file: `span`/`new_text` in that file's text
    (`exists` False: the file is to be created with `new_text`)."""

    path: Path
    exists: bool
    span: Span
    new_text: str
    fields: Mapping[str, str]
    title: str


def settings_target(dataset: Path, config: Config, roots: Sequence[Path] = ()) -> Path:
    """Where the judge of `dataset` reads its settings (judge/settings.py): the file they
    came from; else the nearest pyproject.toml from the dataset's folder up (inside
    `roots` when given: the editor's workspace); else a new pyproject.toml at the first
    root holding the dataset, or beside the dataset."""
    if config.source and config.source.endswith(".toml"):
        return Path(config.source)
    folder = dataset.parent
    inside = [r for r in roots if _under(folder, r)]
    for candidate in [folder, *folder.parents]:
        if inside and not any(_under(candidate, r) for r in inside):
            break
        if (candidate / "pyproject.toml").is_file():
            return candidate / "pyproject.toml"
    return (inside[0] if inside else folder) / "pyproject.toml"


def _under(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except (ValueError, OSError):
        return False


def read_settings_text(path: Path) -> str | None:
    """The settings file's text; None when it does not exist. ValueError when it cannot
    be edited (not a regular file, too big, not UTF-8)."""
    if not path.exists():
        return None
    irregular = not_regular(path)
    if irregular:
        raise ValueError(f"{path}: {irregular}")
    with open(path, "rb") as f:
        data = f.read(MAX_SETTINGS_BYTES + 1)
    if len(data) > MAX_SETTINGS_BYTES:
        raise ValueError(f"{path}: over {MAX_SETTINGS_BYTES >> 20} MiB")
    return data.decode("utf-8")


_HEADER = re.compile(r"^\s*\[\s*tool\s*\.\s*trainproof\s*\]\s*(#.*)?$")
_FIELDS_TABLE = re.compile(r"^\s*\[\s*tool\s*\.\s*trainproof\s*\.\s*fields\s*\]")
_FIELDS_KEY = re.compile(r"^\s*fields\s*=")
_TABLE = re.compile(r"^\s*\[")


def inline_table(fields: Mapping[str, str]) -> str:
    # Training field names are bare TOML keys; a JSON string is a TOML basic string.
    return "{" + ", ".join(f"{k} = {json.dumps(v)}" for k, v in fields.items()) + "}"


def fields_edit(path: Path, text: str | None, mapping: Mapping[str, str]) -> FieldsEdit | None:
    """The edit of the settings file at `path` (its `text`, None if it does not exist)
    that makes its `fields` the mapping it has with `mapping` on top. None when the
    file's layout is not one this edits with certainty (a multi-line `fields`, a
    `[tool.trainproof.fields]` table) or the result would not read back as that mapping."""
    fields = dict(mapping)
    pyproject = path.name == "pyproject.toml"
    line = f"fields = {inline_table(fields)}"
    if text is None:
        new_text = f"[tool.trainproof]\n{line}\n" if pyproject else f"{line}\n"
        return _checked(path, False, "", Span(0, 0, 0, 0), new_text, fields, pyproject)
    lines = text.split("\n")
    if any(_FIELDS_TABLE.match(x) for x in lines):
        return None
    header = next((i for i, x in enumerate(lines) if _HEADER.match(x)), None)
    if header is None and pyproject:  # no table yet: a new one at the end
        last = len(lines) - 1
        sep = ("\n" if lines[last] else "") + ("\n" if text.strip() else "")
        span = Span(last, len(lines[last]), last, len(lines[last]))
        return _checked(path, True, text, span, f"{sep}[tool.trainproof]\n{line}\n", fields, pyproject)
    start = 0 if header is None else header + 1
    end = next((i for i in range(start, len(lines)) if _TABLE.match(lines[i])), len(lines))
    at = next((i for i in range(start, end) if _FIELDS_KEY.match(lines[i])), None)
    if at is not None:  # replace the one-line `fields = {...}`
        try:
            alone = tomllib.loads(lines[at].rstrip("\r"))
        except tomllib.TOMLDecodeError:
            return None  # it goes on over several lines
        if not isinstance(alone.get("fields"), dict):
            return None
        fields = {**alone["fields"], **mapping}  # the file's own mapping stays, the new one on top
        old = lines[at].rstrip("\r")
        return _checked(path, True, text, Span(at, 0, at, len(old)), f"fields = {inline_table(fields)}", fields,
                        pyproject)
    if start < len(lines) and (start > 0 or header is None):
        return _checked(path, True, text, Span(start, 0, start, 0), line + "\n", fields, pyproject)
    # the header is the last line, with no newline after it
    return _checked(path, True, text, Span(start - 1, len(lines[start - 1]), start - 1, len(lines[start - 1])),
                    "\n" + line, fields, pyproject)


def _checked(path: Path, exists: bool, text: str, span: Span, new_text: str, fields: dict[str, str],
             pyproject: bool) -> FieldsEdit | None:
    after = apply_edit(text, span, new_text)
    try:
        doc = tomllib.loads(after)
    except tomllib.TOMLDecodeError:
        return None
    table: Any = doc.get("tool", {}).get("trainproof") if pyproject else doc.get("tool", {}).get("trainproof", doc)
    if not isinstance(table, dict) or table.get("fields") != fields:
        return None
    title = f"map the fields in {path}: [tool.trainproof] fields = {inline_table(fields)}"
    return FieldsEdit(path=path, exists=exists, span=span, new_text=new_text, fields=fields, title=title)


def apply_edit(text: str, span: Span, new_text: str) -> str:
    """`text` with `span` (0-based lines, code-point columns; a position past the end is
    the end) replaced by `new_text`."""
    lines = text.split("\n")

    def offset(line: int, char: int) -> int:
        if line >= len(lines):
            return len(text)
        return sum(len(x) + 1 for x in lines[:line]) + min(char, len(lines[line]))

    return text[:offset(span.start_line, span.start_char)] + new_text + text[offset(span.end_line, span.end_char):]


def field_fix(rows: Iterable[str], dataset: Path, config: Config, roots: Sequence[Path] = ()) -> FieldsEdit | None:
    """The mapping fix of a whole-file missing-keys finding, from its rows' text."""
    mapping = propose_fields(rows)
    if mapping is None:
        return None
    target = settings_target(dataset, config, roots)
    try:
        text = read_settings_text(target)
    except (OSError, ValueError):
        return None
    made = fields_edit(target, text, mapping)
    if made is None:
        return None
    # named from the dataset's folder, so the editor's action and the CLI's line read alike
    shown = os.path.relpath(made.path, dataset.parent) if made.path.is_absolute() == dataset.is_absolute() else str(made.path)
    return dataclasses.replace(made, title=made.title.replace(f" {made.path}:", f" {shown}:", 1))


def is_whole_file(f: Finding) -> bool:
    """TP-MISSING-KEYS said once for every row of the file (rules/dataset.py)."""
    return f.id == MISSING_KEYS and "rows" in f.evidence and f.evidence.get("rows") == f.evidence.get("records")


# --- the CLI: the same fixes, from the files on disk --------------------------------------------

def with_fixes(outcome: Outcome, config: Config) -> Outcome:
    """Every dataset report's duplicate and field-mapping findings with their fixes, the
    rows read from the file (a JSON Lines file on disk; anything else is left as it is)."""
    reports = tuple(_report_with_fixes(r, config) for r in outcome.reports)
    return dataclasses.replace(outcome, reports=reports) if reports != outcome.reports else outcome


def _wanted(f: Finding) -> bool:
    return f.fix is None and f.location.span is not None and (f.id in (DUPLICATE, NEAR_DUPLICATE) or is_whole_file(f))


def _report_with_fixes(report: Report, config: Config) -> Report:
    # preflight names the format "jsonl:<formats>", or "dataset-jsonl" when no row has one
    if report.artefact.kind != "dataset" or report.artefact.format.split(":")[0] not in ("jsonl", "dataset-jsonl"):
        return report
    wanted = [f for f in report.findings if _wanted(f)]
    if not wanted:
        return report
    need: set[int] = set()
    for f in wanted:
        line = int(f.evidence.get("line", 0) or 0) - 1
        if f.id == MISSING_KEYS:
            need.update(range(line, line + SAMPLE_ROWS))
        else:
            first = int(f.evidence.get("first_line", 0) or 0) - 1
            need.update((line - 1, line, line + 1, first))
    got = _lines_of(Path(report.artefact.path), need)
    if got is None:
        return report
    lines, count = got

    def line_text(i: int) -> str | None:
        return lines.get(i, "") if 0 <= i < count else None

    findings = []
    for f in report.findings:
        if f in wanted:
            line = int(f.evidence.get("line", 0) or 0) - 1
            if f.id == MISSING_KEYS:
                rows = [lines[i] for i in range(line, min(line + SAMPLE_ROWS, count)) if i in lines]
                made = field_fix(rows, Path(f.location.path), config)
                if made is not None:  # its edit is in the settings file: the CLI says it, the editor makes it
                    f = dataclasses.replace(f, fix=Fix(title=made.title, edits=()))
            else:
                first = int(f.evidence.get("first_line", 0) or 0) - 1
                fix = duplicate_fix(f.id, line, first, line_text)
                if fix is not None:
                    f = dataclasses.replace(f, fix=fix)
        findings.append(f)
    return dataclasses.replace(report, findings=tuple(findings))


# A row past this is not kept for a fix (the dataset reader's row cap says the same of rows).
_MAX_LINE_BYTES = 1 << 20


def _lines_of(path: Path, need: set[int]) -> tuple[dict[int, str], int] | None:
    """The lines `need` names (text without the newline) and the file's line count, read
    in one pass; None when the file cannot be read as a regular UTF-8 file."""
    if not path.is_file() or not_regular(path):
        return None
    out: dict[int, str] = {}
    count = 0
    try:
        with open(path, "rb") as f:
            for i, raw in enumerate(f):
                count = i + 1
                if i in need:
                    if len(raw) > _MAX_LINE_BYTES:
                        return None
                    out[i] = raw.decode("utf-8").rstrip("\n")
            # a file ending in a newline has an empty last line after it, as an editor has
            if count == 0 or raw.endswith(b"\n"):
                count += 1
    except (OSError, UnicodeDecodeError):
        return None
    return out, count
