"""Dataset records: the formats, the facts a scan states about each line, and the
reference checks of one record (`check_record`, `scan_line`).

Every condition a dataset rule fires on is decided here, once. The fast chunk path
(dataset_fast.py) only clears rows that have nothing to report, with the predicates
defined here (`is_filled_text`, `role_issues`, `PRECEDENCE`), and sends every other row
to `scan_line`; rules/dataset.py maps each problem kind to its rule.
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable, Mapping, TypeGuard

import msgspec
import xxhash

from ..core.model import Span

_hash = xxhash.xxh3_64_intdigest

BOM = b"\xef\xbb\xbf"

# --- formats -------------------------------------------------------------------------

TEXT = "text"
PROMPT_COMPLETION = "prompt-completion"
CHAT = "chat"
SHAREGPT = "sharegpt"
ALPACA = "alpaca"
PREFERENCE = "preference"
FORMATS = (TEXT, PROMPT_COMPLETION, CHAT, SHAREGPT, ALPACA, PREFERENCE)
CONVERSATIONAL = frozenset({CHAT, SHAREGPT})

# Keys that name a training field in some format. A row holding keys of two formats is
# ambiguous: trainers pick one and silently ignore the other.
FORMAT_KEYS: Mapping[str, tuple[str, ...]] = {
    TEXT: ("text",),
    PROMPT_COMPLETION: ("prompt", "completion"),
    CHAT: ("messages",),
    SHAREGPT: ("conversations",),
    ALPACA: ("instruction", "input", "output"),
    PREFERENCE: ("prompt", "chosen", "rejected"),
}
REQUIRED_KEYS: Mapping[str, tuple[str, ...]] = {
    TEXT: ("text",),
    PROMPT_COMPLETION: ("prompt", "completion"),
    CHAT: ("messages",),
    SHAREGPT: ("conversations",),
    ALPACA: ("instruction", "output"),
    PREFERENCE: ("chosen", "rejected"),
}
VOCABULARY = frozenset(k for keys in FORMAT_KEYS.values() for k in keys)

# Roles chat templates know. OpenAI/HF "messages" and ShareGPT "conversations" (with
# the ShareGPT names mapped onto the chat ones for the sequence checks).
CHAT_ROLES = ("system", "user", "assistant", "tool", "function", "developer", "ipython")
SHAREGPT_ROLES = {"system": "system", "human": "user", "user": "user", "gpt": "assistant",
                  "assistant": "assistant", "tool": "tool", "function_call": "assistant",
                  "observation": "tool", "function": "tool"}


# Which format a row is in, by the keys it has: the first entry with any of its keys
# present wins (a row with "messages" is chat whatever else it holds). The reference
# check and the fast path both read this order.
PRECEDENCE: tuple[tuple[str, tuple[str, ...]], ...] = (
    (CHAT, ("messages",)),
    (SHAREGPT, ("conversations",)),
    (PREFERENCE, ("chosen", "rejected")),
    (ALPACA, ("instruction", "output", "input")),
    (PROMPT_COMPLETION, ("prompt", "completion")),
    (TEXT, ("text",)),
)


# A field mapping (`--field text=content`, `[tool.trainproof] fields`, the editor's
# `trainproof.fields`): a training field's name -> the key the user's rows give it under.
# Mappable: the keys the formats read.
MAPPABLE_FIELDS = tuple(sorted(VOCABULARY))
FieldMap = Mapping[str, str]


def with_fields(obj: dict[str, Any], fields: FieldMap) -> dict[str, Any]:
    """A row with the user's keys under the training fields' names they map to (a key is
    moved only when the row has no key of the training field's own name: a row that
    already says `text` keeps it). The row itself is left as it is."""
    moved = {name: key for name, key in fields.items() if key in obj and name not in obj and key != name}
    if not moved:
        return obj
    out = {k: v for k, v in obj.items() if k not in moved.values()}
    out.update((name, obj[key]) for name, key in moved.items())
    return out


def classify(keys: Iterable[str]) -> str | None:
    """The format a row's keys say it is in; None when it has no training field."""
    ks = set(keys)
    for fmt, named_by in PRECEDENCE:
        if not ks.isdisjoint(named_by):
            return fmt
    return None


# --- facts ----------------------------------------------------------------------------

# Problem kinds; rules/dataset.py maps each to one rule.
MALFORMED = "malformed"            # not JSON, not UTF-8, not an object, two values on a line
EMPTY_TEXT = "empty-text"          # the training text is empty, whitespace or null
MISSING_KEYS = "missing-keys"      # a key the format needs is absent (or no training field)
EXTRA_KEYS = "extra-keys"          # keys of another format on the same row
NON_STRING = "non-string"          # a text field or message content that is not a string
UNKNOWN_ROLE = "unknown-role"
ASSISTANT_FIRST = "assistant-first"
NO_ASSISTANT = "no-assistant"
EMPTY_ASSISTANT = "empty-assistant"
SYSTEM_NOT_FIRST = "system-not-first"
LAST_NOT_ASSISTANT = "last-not-assistant"
NOT_ALTERNATING = "not-alternating"  # two user (or two assistant) turns in a row
EMPTY_TURN = "empty-turn"          # a non-assistant turn with no content
BAD_MESSAGES = "bad-messages"      # messages is not a list of objects
CONTENT_PARTS = "content-parts"    # message content given as a list of (multimodal) parts
CHOSEN_EQUALS_REJECTED = "chosen-equals-rejected"
# Valid or not, the row could not be read: nested deeper than the decoder goes, or longer
# than the row cap (caps.py max_row_mb). NOT-CHECKED, never a malformed-row FAIL.
UNREADABLE_ROW = "unreadable-row"

Number = float | int | str | bool | None


@dataclass(frozen=True, slots=True, kw_only=True)
class LineProblem:
    """One thing wrong with one record. Columns are code points (0-based)."""

    line: int
    kind: str
    message: str
    start: int = 0
    end: int = 0
    end_line: int | None = None  # records spanning several lines (JSON arrays)
    evidence: tuple[tuple[str, Number], ...] = ()

    @property
    def span(self) -> Span:
        return Span(self.line, self.start, self.line if self.end_line is None else self.end_line, self.end)


@dataclass(frozen=True, slots=True, kw_only=True)
class LineFacts:
    """What one line holds: its format, its problems, its content hashes (0 = none)."""

    line: int
    format: str | None
    problems: tuple[LineProblem, ...] = ()
    exact: int = 0
    near: int = 0
    blank: bool = False
    # a prompt-completion or preference row whose values are message lists
    conversational: bool = False


def counts_as_record(f: LineFacts) -> bool:
    """A line is a record unless it is blank or holds nothing but a value that is not
    JSON (or not an object)."""
    return not f.blank and (f.format is not None or not f.problems or f.problems[0].kind != MALFORMED)


@dataclass(frozen=True, slots=True, kw_only=True)
class Duplicate:
    line: int
    first: int  # line of the first occurrence


@dataclass(frozen=True, kw_only=True)
class DatasetScan:
    """Everything the dataset rules may know about one file."""

    path: str
    layout: str  # "jsonl" | "json-array"
    size: int  # bytes
    lines: int
    records: int
    blank_lines: int = 0
    bom: bool = False
    crlf: bool = False
    formats: tuple[tuple[str, int, int], ...] = ()  # (format, rows, first line), by rows desc
    problems: tuple[LineProblem, ...] = ()
    duplicates: tuple[Duplicate, ...] = ()
    near_duplicates: tuple[Duplicate, ...] = ()
    # Content hashes by line (0 where a line holds no usable record); kept for the
    # train/eval overlap check and incremental re-checks.
    exact: array[int] = field(default_factory=lambda: array("Q"), repr=False, compare=False)
    near: array[int] = field(default_factory=lambda: array("Q"), repr=False, compare=False)
    conversational_pairs: bool = False  # prompt-completion/preference rows holding message lists

    @property
    def conversational(self) -> bool:
        """Rows a chat template will render (the tokenizer checks need to know)."""
        return any(f in CONVERSATIONAL for f, _, _ in self.formats) or self.conversational_pairs

    @property
    def main_format(self) -> str | None:
        return self.formats[0][0] if self.formats else None


# --- the reference path: one line ---------------------------------------------------------

_dec_any = msgspec.json.Decoder()
_enc = msgspec.json.encode
_BYTE_AT = re.compile(r"\(byte (\d+)\)")
_ROW_AT = re.compile(r"at `\$\[(\d+)\]")


def _col(raw: bytes, byte: int) -> int:
    return len(raw[:byte].decode("utf-8", "replace"))


def _problem(line: int, kind: str, message: str, start: int = 0, end: int = 0, **evidence: Number) -> LineProblem:
    return LineProblem(line=line, kind=kind, message=message, start=start, end=end,
                       evidence=tuple(evidence.items()))


def _is_blank_text(v: Any) -> bool:
    return v is None or (isinstance(v, str) and (not v or v.isspace()))


def is_filled_text(v: object) -> TypeGuard[str]:
    """A training text with something in it: a string, not empty, not whitespace only."""
    return type(v) is str and bool(v) and not v.isspace()


def text_hashes(text: str) -> tuple[int, int]:
    """(exact, near) hashes of a single-text row. Near ignores ASCII letter case and
    leading/trailing ASCII whitespace."""
    key = text.encode()
    return _hash(key), _hash(key.strip().lower())


def value_hashes(value: Any) -> tuple[int, int]:
    """(exact, near) hashes of a structured row's canonical JSON; near ignores case."""
    key = _enc(value)
    return _hash(key), _hash(key.lower())


@lru_cache(maxsize=4096)
def role_issues(roles: tuple[str, ...]) -> tuple[tuple[str, int, str], ...]:
    """Problems of a conversation's role sequence: (kind, turn index, message).

    Roles are chat names (ShareGPT names already mapped). Cached: real datasets have a
    handful of distinct role sequences, so the fast path pays one dict lookup per row.
    """
    issues: list[tuple[str, int, str]] = []
    for i, r in enumerate(roles):
        if r not in CHAT_ROLES:
            issues.append((UNKNOWN_ROLE, i, f"turn {i} has role {r!r}, which chat templates do not know "
                                            f"(known: {', '.join(CHAT_ROLES)})"))
    if issues:
        # The order checks below would judge a misread sequence (a misspelt "asistant" is
        # not also "no assistant turn"): one fault, one finding.
        return tuple(issues)
    for i, r in enumerate(roles):
        if r == "system" and i > 0:
            issues.append((SYSTEM_NOT_FIRST, i, f"system message at turn {i}, not first"))
            break
    first = next(((i, r) for i, r in enumerate(roles) if r != "system"), None)
    if first is not None and first[1] == "assistant":
        issues.append((ASSISTANT_FIRST, first[0], f"the conversation opens with the assistant (turn {first[0]}) "
                                                   "before any user turn"))
    if roles and "assistant" not in roles:
        issues.append((NO_ASSISTANT, 0, f"no assistant turn among {len(roles)} turn(s)"))
    elif roles and roles[-1] != "assistant":
        issues.append((LAST_NOT_ASSISTANT, len(roles) - 1,
                       f"the last turn ({len(roles) - 1}) is {roles[-1]!r}, not the assistant"))
    if not roles:
        issues.append((NO_ASSISTANT, 0, "the conversation has no turns"))
    # User and assistant turns alternate; tool results and system turns sit between them.
    for i in range(1, len(roles)):
        if roles[i] == roles[i - 1] and roles[i] in ("user", "assistant"):
            issues.append((NOT_ALTERNATING, i, f"turns {i - 1} and {i} are both {roles[i]!r}: "
                                               "user and assistant turns do not alternate"))
            break
    return tuple(issues)


def _messages(line: int, value: Any, key: str, sharegpt: bool, out: list[LineProblem], *,
              sequence: bool = True) -> list[dict[str, Any]] | None:
    """Check a message list; return it normalised to {"role"/"from", "content"/"value"}
    dicts for hashing, or None when it is not a list of objects. `sequence=False` for the
    parts of a pair (prompt, chosen...): their order is judged on the joined sequence."""
    rk, ck = ("from", "value") if sharegpt else ("role", "content")
    if not isinstance(value, list) or not all(isinstance(m, dict) for m in value):
        what = type(value).__name__ if not isinstance(value, list) else "a list with non-object items"
        out.append(_problem(line, BAD_MESSAGES, f"{key} is {what}, not a list of message objects", key=key))
        return None
    roles: list[str] = []
    for i, m in enumerate(value):
        role = m.get(rk)
        if not isinstance(role, str):
            out.append(_problem(line, UNKNOWN_ROLE, f"{key}[{i}] has no string {rk!r}", key=key, turn=i))
            roles.append("?")
            continue
        roles.append(SHAREGPT_ROLES.get(role, role) if sharegpt else role)
    if sharegpt:  # unknown ShareGPT names are reported by their own name
        for i, m in enumerate(value):
            role = m.get(rk)
            if isinstance(role, str) and role not in SHAREGPT_ROLES:
                roles[i] = "?" + role
    for kind, i, msg in role_issues(tuple(roles)):
        if not sequence and kind != UNKNOWN_ROLE:
            continue
        if kind == UNKNOWN_ROLE and roles[i] == "?":
            continue  # already said: no string role
        if kind == UNKNOWN_ROLE and roles[i].startswith("?"):
            msg = f"turn {i} has {rk} {roles[i][1:]!r}, which ShareGPT loaders do not map to a chat role"
        out.append(_problem(line, kind, f"{key}: {msg}", key=key, turn=i))
    for i, m in enumerate(value):
        content = m.get(ck)
        role = roles[i]
        if content is None and ck in m and role == "assistant" and m.get("tool_calls"):
            continue  # an assistant turn that only calls tools
        if isinstance(content, list):
            # Multimodal parts ([{"type": "text", "text": ...}]): fine for a processor, a
            # crash or garbage for a text-only tokenizer. Said apart from other types.
            out.append(_problem(line, CONTENT_PARTS, f"{key}[{i}].{ck} is a list of {len(content)} part(s), "
                                                     "not a string", key=key, turn=i, parts=len(content)))
            continue
        if content is not None and not isinstance(content, str):
            out.append(_problem(line, NON_STRING, f"{key}[{i}].{ck} is {type(content).__name__}, not a string",
                                key=key, turn=i))
            continue
        if _is_blank_text(content):
            what = "missing" if ck not in m else ("null" if content is None else "empty" if not content else "whitespace only")
            if role == "assistant":
                out.append(_problem(line, EMPTY_ASSISTANT, f"{key}[{i}]: assistant turn content is {what}",
                                    key=key, turn=i))
            else:
                out.append(_problem(line, EMPTY_TURN, f"{key}[{i}]: {role} turn content is {what}", key=key, turn=i))
    return [{rk: m.get(rk), ck: m.get(ck)} for m in value]


def _pair_value(line: int, key: str, v: Any, out: list[LineProblem], *, required: bool) -> Any:
    """A prompt/completion/chosen/rejected value: a string or a message list."""
    if isinstance(v, list):
        return _messages(line, v, key, False, out, sequence=False)
    if v is not None and not isinstance(v, str):
        out.append(_problem(line, NON_STRING, f"{key} is {type(v).__name__}, not a string", key=key))
        return v
    if required and _is_blank_text(v):
        what = "null" if v is None else "empty" if not v else "whitespace only"
        out.append(_problem(line, EMPTY_TEXT, f"{key} is {what}", key=key))
    return v


def _pair_sequence(line: int, pk: str, prompt: Any, ak: str, answer: Any, out: list[LineProblem]) -> None:
    """Order checks of a conversational pair, on prompt + answer joined (TRL's layout:
    the prompt's turns, then the answer's assistant turn(s))."""
    if not isinstance(answer, list) or (prompt is not None and not isinstance(prompt, (list, str))):
        return
    turns = (prompt if isinstance(prompt, list) else []) + answer
    roles = tuple(m.get("role") if isinstance(m.get("role"), str) else "?" for m in turns)
    if isinstance(prompt, str):  # a string prompt stands for one user turn
        roles = ("user", *roles)
    for kind, i, msg in role_issues(roles):
        if kind != UNKNOWN_ROLE:
            out.append(_problem(line, kind, f"{pk}+{ak}: {msg}", key=ak, turn=i))


def check_record(line: int, obj: Any, width: int = 0, fields: FieldMap | None = None) -> LineFacts:
    """Schema checks and hashes of one decoded record (the reference implementation);
    `fields` maps the user's keys onto the training fields first."""
    if fields and isinstance(obj, dict):
        obj = with_fields(obj, fields)
    if not isinstance(obj, dict):
        what = "null" if obj is None else type(obj).__name__
        return LineFacts(line=line, format=None, problems=(
            _problem(line, MALFORMED, f"valid JSON but not an object ({what}): a record needs named fields",
                     0, width, json_type=what),))
    fmt = classify(obj)
    out: list[LineProblem] = []
    if fmt is None:
        keys = ", ".join(sorted(obj)) or "none"
        out.append(_problem(line, MISSING_KEYS, f"no training field (keys: {keys}); expected one of the formats "
                                                "text, prompt/completion, messages, conversations, "
                                                "instruction/output, chosen/rejected, or a field mapping "
                                                "(--field text=KEY)", 0, width, keys=len(obj)))
        return LineFacts(line=line, format=None, problems=tuple(out))
    missing = [k for k in REQUIRED_KEYS[fmt] if k not in obj]
    if missing:
        out.append(_problem(line, MISSING_KEYS, f"{fmt} row without {', '.join(repr(k) for k in missing)}",
                            0, width, missing=len(missing)))
    own = set(FORMAT_KEYS[fmt])
    extra = sorted(k for k in obj if k in VOCABULARY and k not in own)
    if extra:
        out.append(_problem(line, EXTRA_KEYS, f"{fmt} row also has {', '.join(repr(k) for k in extra)} "
                                              "(keys of another format; trainers use one and ignore the rest)",
                            0, width, extra=len(extra)))
    exact = near = 0
    if fmt == TEXT:
        t = obj.get("text")
        if t is not None and not isinstance(t, str):
            out.append(_problem(line, NON_STRING, f"text is {type(t).__name__}, not a string", 0, width, key="text"))
        elif not is_filled_text(t):
            what = "null" if t is None else "empty" if not t else "whitespace only"
            out.append(_problem(line, EMPTY_TEXT, f"text is {what}", 0, width, key="text",
                                length=0 if t is None else len(t)))
        else:
            exact, near = text_hashes(t)
    elif fmt in (CHAT, SHAREGPT):
        key = "messages" if fmt == CHAT else "conversations"
        norm = _messages(line, obj.get(key), key, fmt == SHAREGPT, out)
        if norm is not None:
            exact, near = value_hashes(norm)
    elif fmt == PROMPT_COMPLETION:
        p = _pair_value(line, "prompt", obj.get("prompt"), out, required=False)
        c = _pair_value(line, "completion", obj.get("completion"), out, required="completion" in obj)
        _pair_sequence(line, "prompt", p, "completion", c, out)
        exact, near = value_hashes([p, c])
    elif fmt == ALPACA:
        vals = []
        for k in ("instruction", "input", "output"):
            v = obj.get(k)
            if v is not None and not isinstance(v, str):
                out.append(_problem(line, NON_STRING, f"{k} is {type(v).__name__}, not a string", 0, width, key=k))
            elif k != "input" and k in obj and _is_blank_text(v):
                what = "null" if v is None else "empty" if not v else "whitespace only"
                out.append(_problem(line, EMPTY_TEXT, f"{k} is {what}", 0, width, key=k))
            vals.append("" if v is None and k == "input" else v)
        exact, near = value_hashes(vals)
    else:  # PREFERENCE
        p = _pair_value(line, "prompt", obj.get("prompt"), out, required=False)
        ch = _pair_value(line, "chosen", obj.get("chosen"), out, required="chosen" in obj)
        rj = _pair_value(line, "rejected", obj.get("rejected"), out, required="rejected" in obj)
        _pair_sequence(line, "prompt", p, "chosen", ch, out)
        _pair_sequence(line, "prompt", p, "rejected", rj, out)
        if "chosen" in obj and "rejected" in obj and ch is not None and ch == rj and not _is_blank_text(ch):
            out.append(_problem(line, CHOSEN_EQUALS_REJECTED, "chosen and rejected are identical: the pair "
                                                              "carries no preference", 0, width))
        exact, near = value_hashes([p, ch, rj])
    problems = tuple(p if p.end or p.start else LineProblem(
        line=p.line, kind=p.kind, message=p.message, start=0, end=width, evidence=p.evidence) for p in out)
    if any(p.kind in (NON_STRING, BAD_MESSAGES, MISSING_KEYS, CONTENT_PARTS) for p in problems):
        exact = near = 0  # a row that cannot be read as its format takes no part in duplicates
    conversational = fmt in (PROMPT_COMPLETION, PREFERENCE) and any(
        isinstance(obj.get(k), list) for k in FORMAT_KEYS[fmt])
    return LineFacts(line=line, format=fmt, problems=problems, exact=exact, near=near, conversational=conversational)


def scan_line(line: int, raw: bytes, fields: FieldMap | None = None) -> LineFacts:
    """One JSONL line (without its newline; a trailing CR is ignored); `fields` maps the
    user's keys onto the training fields."""
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    if not raw.strip():
        return LineFacts(line=line, format=None, blank=True)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        col = _col(raw, e.start)
        return LineFacts(line=line, format=None, problems=(
            _problem(line, MALFORMED, f"invalid UTF-8 (byte 0x{raw[e.start]:02x} at column {col + 1})",
                     col, col + 1, byte=e.start),))
    width = len(text.rstrip())
    try:
        obj = _dec_any.decode(raw)
    except msgspec.DecodeError as e:
        msg = str(e)
        m = _BYTE_AT.search(msg)
        if m:
            col = _col(raw, int(m.group(1)))
            detail = msg.split(":", 1)[-1].strip().split(" (byte")[0] if ":" in msg else msg
        else:  # "Input data was truncated"
            col = width
            detail = "the line ends inside a value"
        if "NaN" in text or "Infinity" in text:
            detail += " (NaN/Infinity are not JSON)"
        return LineFacts(line=line, format=None, problems=(
            _problem(line, MALFORMED, f"invalid JSON at column {col + 1}: {detail}", col, min(col + 1, max(width, col + 1)),
                     column=col + 1),))
    except RecursionError:
        return LineFacts(line=line, format=None, problems=(
            _problem(line, UNREADABLE_ROW, "JSON nested too deeply to read (the decoder's depth limit); "
                     "the row was not checked", 0, width),))
    return check_record(line, obj, width, fields)


def scan_lines(lines: Iterable[tuple[int, bytes]], fields: FieldMap | None = None) -> list[LineFacts]:
    """Per-line facts and hashes for (line number, line bytes) pairs — the entry point
    for re-checking only the lines an editor changed; duplicates across the whole file
    are then found from the hashes (see `find_duplicates`)."""
    return [scan_line(n, raw, fields) for n, raw in lines]

def sorted_problems(problems: Iterable[LineProblem]) -> list[LineProblem]:
    """Problems in the order reports list them: by line, column, kind."""
    return sorted(problems, key=lambda p: (p.line, p.start, p.kind))

