"""Training datasets as JSONL (or a JSON array of records), scanned line by line.

What people feed to SFT/DPO trainers, one JSON object per line:

    text                 {"text": "..."}
    prompt-completion    {"prompt": "...", "completion": "..."}
    chat                 {"messages": [{"role": "user", "content": "..."}, {"role": "assistant", ...}]}
    sharegpt             {"conversations": [{"from": "human", "value": "..."}, {"from": "gpt", ...}]}
    alpaca               {"instruction": "...", "input": "...", "output": "..."}
    preference           {"prompt": "...", "chosen": "...", "rejected": "..."}  (strings or message lists)

The scan produces facts, never verdicts: per line, the format it holds, the problems it
has (kind, columns, evidence) and two 8-byte hashes of its content — exact, and
"near" (letter case ignored; for single-text rows leading/trailing whitespace too). The
rules in rules/dataset.py turn those facts into findings.

Speed is the point (CONTRACTS.md §8), so there are two paths that must agree on every fact
(tests/test_preflight_scan.py checks they do):

- `scan_lines` / `scan_line`: the reference. One line at a time, generic JSON decoding,
  every check spelled out. Used for any line the fast path is not sure about, for JSON
  arrays, and by the language server for incremental re-checks of changed lines.
- the chunk path in `scan_dataset`: 128 KiB binary chunks decoded by msgspec in C into
  typed Structs built for the keys the file uses (roles are a Literal, content a
  non-empty string, unknown keys rejected). A fault stops the decoder, which names the
  line: that line goes through `scan_line` and typed decoding resumes after it. Runs of
  text and chat rows are then checked and hashed a column at a time with C-level passes;
  other formats row by row; any row the quick checks do not clear is explained by
  `scan_line`.

Hashes live in two `array('Q')` indexed by line (0 = no record on that line), so memory
is 16 bytes per line; duplicates are found at the end by sorting hashes (numpy when
installed, a pure-Python fallback otherwise), never with a dict of lines.
"""

from __future__ import annotations

import gc
import os
import re
import sys
from array import array
from dataclasses import dataclass, field
from functools import lru_cache
from io import BytesIO
from itertools import chain, compress, repeat
from operator import attrgetter, is_not, methodcaller, ne
from pathlib import Path
from typing import Annotated, Any, Callable, Iterable, Iterator, Literal, Mapping, Sequence

import msgspec
import xxhash

from ..core.caps import DEFAULT_CAPS, MIB
from ..core.model import ReadError, Span

_hash = xxhash.xxh3_64_intdigest

# Bytes per read and decode. Large enough that per-chunk overhead stays small, small
# enough that the decoded rows of one chunk stay in cache, memory stays flat, and a broken
# line (which makes the typed decoder read the lines before it again) costs little. On the
# benchmark files (benchmarks/bench_preflight.py, bench_lsp.py's 10k-line chat buffer)
# 128 KiB was best or within noise of it: 2 MiB chunks cost +12% on the 1M-line file and
# 512 KiB chunks +15% on the 10k-line buffer with its 10 broken rows.
CHUNK_BYTES = 1 << 17
# A longer row is streamed past unread (caps.py max_row_mb holds the why).
DEFAULT_MAX_ROW = DEFAULT_CAPS.max_row_mb * MIB
# After a broken line, the rest of its chunk is decoded in pieces this big: a dataset with
# a broken line every few hundred rows then costs ~1.1x one clean pass, not ~2x.
_PIECE_BYTES = 1 << 15

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
# Roles that can sit between a user turn and the answer (tool calls and their results).
_TOOLISH = frozenset({"tool", "function", "ipython"})


def classify(keys: Iterable[str]) -> str | None:
    """The format a row's keys say it is in; None when it has no training field."""
    ks = set(keys)
    if "messages" in ks:
        return CHAT
    if "conversations" in ks:
        return SHAREGPT
    if "chosen" in ks or "rejected" in ks:
        return PREFERENCE
    if "instruction" in ks or "output" in ks or "input" in ks:
        return ALPACA
    if "prompt" in ks or "completion" in ks:
        return PROMPT_COMPLETION
    if "text" in ks:
        return TEXT
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
    exact: array = field(default_factory=lambda: array("Q"), repr=False, compare=False)
    near: array = field(default_factory=lambda: array("Q"), repr=False, compare=False)
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


def _nth_record_line(chunk: bytes, k: int) -> int:
    """Line offset of the k-th non-blank line of a chunk (decode_lines skips blank ones)."""
    seen = -1
    for i, raw in enumerate(chunk.split(b"\n")):
        if raw.strip():
            seen += 1
            if seen == k:
                return i
    return -1


def _blame(chunk: bytes, pos: int) -> int:
    """The 0-based line of a chunk holding the value the decoder failed in at byte `pos`,
    or -1. Newlines are whitespace to a JSON decoder, so a line cut short makes it read on
    into the next lines and fail there (or at the end of the chunk): the culprit is the
    last line at or before `pos` that does not decode on its own."""
    end = chunk.rfind(b"\n", 0, pos) if pos == len(chunk) and chunk.endswith(b"\n") else chunk.find(b"\n", pos)
    end = len(chunk) if end < 0 else end
    k = chunk.count(b"\n", 0, end)
    while k >= 0:
        start = chunk.rfind(b"\n", 0, end) + 1
        raw = chunk[start:end]
        if raw.strip():
            try:
                _dec_any.decode(raw)
            except (ValueError, RecursionError):  # msgspec.DecodeError, UnicodeDecodeError
                return k
        end = start - 1
        k -= 1
    return -1


def _col(raw: bytes, byte: int) -> int:
    return len(raw[:byte].decode("utf-8", "replace"))


def _problem(line: int, kind: str, message: str, start: int = 0, end: int = 0, **evidence: Number) -> LineProblem:
    return LineProblem(line=line, kind=kind, message=message, start=start, end=end,
                       evidence=tuple(evidence.items()))


def _is_blank_text(v: Any) -> bool:
    return v is None or (isinstance(v, str) and (not v or v.isspace()))


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
              sequence: bool = True) -> list[dict] | None:
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


def check_record(line: int, obj: Any, width: int = 0) -> LineFacts:
    """Schema checks and hashes of one decoded record (the reference implementation)."""
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
                                                "instruction/output, chosen/rejected", 0, width, keys=len(obj)))
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
        elif t is None or not t or t.isspace():
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


def scan_line(line: int, raw: bytes) -> LineFacts:
    """One JSONL line (without its newline; a trailing CR is ignored)."""
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
    return check_record(line, obj, width)


def scan_lines(lines: Iterable[tuple[int, bytes]]) -> list[LineFacts]:
    """Per-line facts and hashes for (line number, line bytes) pairs — the entry point
    for re-checking only the lines an editor changed; duplicates across the whole file
    are then found from the hashes (see `find_duplicates`)."""
    return [scan_line(n, raw) for n, raw in lines]


# --- rows for other checks ----------------------------------------------------------------

def iter_records(path: Path | str, *, layout: str = "jsonl", data: bytes | None = None) -> Iterator[tuple[int, dict]]:
    """(0-based line, record) for every JSON object of a dataset file, streamed.

    `layout` is the scan's ("jsonl" or "json-array", `DatasetScan.layout`).
    JSONL lines that are not JSON objects are passed over (the dataset rules report them);
    the records of a JSON array are placed at the line their `{` is on."""
    if layout == "json-array":
        yield from _array_records(Path(path).read_bytes() if data is None else data)
        return
    with (BytesIO(data) if data is not None else open(path, "rb")) as fh:
        for line, raw in enumerate(fh):
            if line == 0 and raw.startswith(BOM):
                raw = raw[len(BOM):]
            if not raw.strip():
                continue
            try:
                obj = _dec_any.decode(raw)  # trailing "\r\n" is JSON whitespace
            except (msgspec.DecodeError, RecursionError):
                continue
            if isinstance(obj, dict):
                yield line, obj


def _array_records(data: bytes) -> Iterator[tuple[int, dict]]:
    from ..core.positions import ByteIndex
    from .jsonpos import element_ranges

    skip = len(BOM) if data.startswith(BOM) else 0
    try:
        elements = msgspec.json.decode(data[skip:], type=list[msgspec.Raw])
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return  # a broken array is TP-PRE-MALFORMED-JSONL; nothing to count
    records = []
    for raw in elements:
        try:
            obj = _dec_any.decode(bytes(raw))
        except (msgspec.DecodeError, RecursionError):
            continue
        if isinstance(obj, dict):
            records.append(obj)
    # The scanner finds the `{` of object elements only, in order, so asking for as many
    # ranges as there are objects pairs each object with its own start.
    ranges = element_ranges(data, data.find(b"[", skip), len(records))
    if ranges is None:
        return
    index = ByteIndex(data)
    for start, obj in zip(ranges[0], records):
        yield index.line_of(start), obj


# --- the fast path: typed Structs over whole chunks -----------------------------------------

Role = Literal["system", "user", "assistant", "tool", "function", "developer", "ipython"]
ShareRole = Literal["system", "human", "user", "gpt", "assistant", "tool", "function_call", "observation",
                    "function"]
# Empty content fails validation on purpose: the chunk then goes through the reference
# path, which names the turn.
NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
UNSET = msgspec.UNSET


class _Msg(msgspec.Struct, gc=False):
    role: Role
    content: NonEmpty


class _ShareMsg(msgspec.Struct, gc=False, rename={"from_": "from"}):
    from_: ShareRole
    value: NonEmpty


_Pair = str | list[_Msg] | None | msgspec.UnsetType
_Str = str | None | msgspec.UnsetType
# Field types of the fast Row. UNSET = key absent, None = null: the two are different
# findings (missing key vs empty text), so the fast path must tell them apart.
_FIELD_TYPES: Mapping[str, Any] = {
    "text": _Str,
    "messages": list[_Msg] | None | msgspec.UnsetType,
    "conversations": list[_ShareMsg] | None | msgspec.UnsetType,
    "prompt": _Pair,
    "completion": _Pair,
    "instruction": _Str,
    "input": _Str,
    "output": _Str,
    "chosen": _Pair,
    "rejected": _Pair,
}


@lru_cache(maxsize=64)
def _row_type(keys: frozenset[str]) -> tuple[msgspec.json.Decoder, frozenset[str]]:
    """A decoder for rows whose keys are all in `keys`, and the vocabulary keys it has.
    Any other key fails the chunk, which then teaches the scan its keys through the
    reference path; keys outside the vocabulary (ids, sources) are skipped as Raw."""
    fields: list[tuple[str, Any, Any]] = []
    rename: dict[str, str] = {}
    for i, k in enumerate(sorted(keys)):
        if k in _FIELD_TYPES:
            fields.append((k, _FIELD_TYPES[k], UNSET))
        else:
            name = f"x{i}_"
            fields.append((name, msgspec.Raw, msgspec.Raw()))
            rename[name] = k
    row = msgspec.defstruct("Row", fields, gc=False, forbid_unknown_fields=True, rename=rename or None)
    return msgspec.json.Decoder(row), frozenset(keys & VOCABULARY)


_get_role = attrgetter("role")
_get_messages = attrgetter("messages")
_get_text = attrgetter("text")
# Formats the column path handles; a chunk with other formats' keys uses the row loop.
_COLUMN_VOCAB = frozenset({"text", "messages"})
# Beyond this many runs of one format in a chunk, rows alternate formats and the row
# loop is as fast as slicing into runs.
_MAX_RUNS = 64
_get_from = attrgetter("from_")
_get_content = attrgetter("content")
_get_value = attrgetter("value")


def _foreign_check(vocab: frozenset[str], fmt: str) -> Any:
    """A function telling whether a row of `fmt` also sets another format's key (or None
    when the decoder has no such key)."""
    foreign = sorted(vocab - set(FORMAT_KEYS[fmt]))
    if not foreign:
        return None
    if len(foreign) == 1:
        get1 = attrgetter(foreign[0])
        return lambda r: get1(r) is not UNSET
    get = attrgetter(*foreign)
    n = len(foreign)
    return lambda r: get(r).count(UNSET) != n


def _clean_turns(ms: list) -> bool:
    """No whitespace-only turn and no role-sequence issue in any of these conversations,
    in C-level passes over all their turns at once. The distinct role sequences are
    judged once each; when every conversation has the same number of turns they are cut
    from one flat list by zip, otherwise built row by row."""
    turns = list(chain.from_iterable(ms))
    if any(map(str.isspace, map(_get_content, turns))):
        return False
    lens = list(map(len, ms))
    if lens and lens.count(lens[0]) == len(lens) and lens[0]:
        shapes = set(zip(*[iter(list(map(_get_role, turns)))] * lens[0]))
    else:
        shapes = set(map(tuple, map(map, repeat(_get_role), ms)))
    return not any(map(role_issues, shapes))


class _Scanner:
    """The growing key set, counters and hash arrays while one file streams through."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.keys: set[str] = set()
        self.exact = array("Q")
        self.near = array("Q")
        self.problems: list[LineProblem] = []
        self.format_rows: dict[str, int] = {}
        self.format_first: dict[str, int] = {}
        self.records = 0
        self.blank = 0
        self.pairs_conversational = False

    def take(self, f: LineFacts) -> None:
        if f.blank:
            self.blank += 1
            return
        if f.problems:
            self.problems.extend(f.problems)
        if f.format is not None or not f.problems or f.problems[0].kind != MALFORMED:
            self.records += 1
        if f.conversational:
            self.pairs_conversational = True
        if f.format is not None:
            self.format_rows[f.format] = self.format_rows.get(f.format, 0) + 1
            if f.format not in self.format_first or self.format_first[f.format] > f.line:
                self.format_first[f.format] = f.line

    def unread(self, line: int, size: int, cap: int) -> None:
        """A row over the row cap: streamed past, never decoded or hashed."""
        f = LineFacts(line=line, format=None, problems=(_problem(
            line, UNREADABLE_ROW, f"the row is {size} bytes ({size / 2**20:.1f} MiB), over the cap of "
            f"{cap // 2**20} MiB for one row (max_row_mb): not read", 0, 0, bytes=size, cap=cap),))
        self.take(f)
        self.exact.append(f.exact)
        self.near.append(f.near)

    def learn(self, lines: Iterable[bytes]) -> None:
        for raw in lines:
            try:
                obj = _dec_any.decode(raw)
            except (ValueError, RecursionError):  # msgspec.DecodeError, UnicodeDecodeError
                continue
            if isinstance(obj, dict) and classify(obj) is not None:
                self.keys.update(obj)

    def slow(self, base: int, lines: Sequence[bytes]) -> None:
        """The reference path over a chunk's lines; also learns the keys rows use."""
        ex, nr = self.exact, self.near
        keys = self.keys
        for i, raw in enumerate(lines):
            f = scan_line(base + i, raw)
            self.take(f)
            ex.append(f.exact)
            nr.append(f.near)
            if f.format is not None:
                try:
                    obj = _dec_any.decode(raw)
                except (ValueError, RecursionError):
                    continue
                keys.update(obj)

    def run(self, base: int, seg: bytes, lines: int | None = None) -> None:
        """Scan whole lines: typed decoding where it goes through, the reference path for
        the line that stops it. The lines before that one are decoded again (the decoder
        gives nothing back from a failed chunk); the lines after it go in pieces of
        _PIECE_BYTES, so that a file with many broken lines does not re-read whole chunks.
        `lines`: the segment's line count when the caller has it."""
        stop = self.fast(base, seg, lines)
        if stop is None:
            return
        if stop < 0:  # no single line to blame (blank lines, two values on a line)
            parts = seg.split(b"\n")
            if seg.endswith(b"\n"):
                parts.pop()
            self.slow(base, parts)
            return
        start = 0
        for _ in range(stop):
            start = seg.index(b"\n", start) + 1
        end = seg.find(b"\n", start)
        end = len(seg) if end < 0 else end + 1
        if stop:
            self.run(base, seg[:start], stop)
        self.slow(base + stop, [seg[start:end].rstrip(b"\n")])
        base += stop + 1
        size = len(seg)
        while end < size:
            cut = seg.find(b"\n", end + _PIECE_BYTES)
            cut = size if cut < 0 else cut + 1
            piece = seg[end:cut]
            n = piece.count(b"\n") + (0 if piece.endswith(b"\n") else 1)
            self.run(base, piece, n)
            base += n
            end = cut

    def fast(self, base: int, chunk: bytes, lines: int | None = None) -> int | None:
        """Scan a chunk of whole lines with typed decoding. None: done. Otherwise the
        (0-based, chunk-relative) line that stops the typed decoder, or -1 when the chunk
        breaks the one-record-per-line shape somewhere."""
        if not self.keys:
            # Learn the keys from the first lines; a key first seen later stops the
            # decoder at its line, which the reference path then learns from.
            self.learn(chunk[: 1 << 16].split(b"\n")[:64])
            if not self.keys:
                return 0
        try:
            decoder, vocab = _row_type(frozenset(self.keys))
            if len(vocab) != len(self.keys):
                chunk.decode("utf-8")  # strings skipped as Raw are not validated by msgspec
            rows = decoder.decode_lines(chunk)
        except UnicodeDecodeError:
            try:
                chunk.decode("utf-8")
            except UnicodeDecodeError as e:
                return chunk.count(b"\n", 0, e.start)
            return -1
        except msgspec.ValidationError as e:
            m = _ROW_AT.search(str(e))
            return _nth_record_line(chunk, int(m.group(1))) if m else -1
        except msgspec.DecodeError as e:
            m = _BYTE_AT.search(str(e))  # no byte: the input ended inside a value
            return _blame(chunk, int(m.group(1)) if m else len(chunk))
        except RecursionError:
            return -1
        n = lines if lines is not None else chunk.count(b"\n") + (0 if chunk.endswith(b"\n") else 1)
        if len(rows) != n:  # blank lines, or two values on one line
            return -1
        if vocab <= _COLUMN_VOCAB and self._columns(base, rows, vocab, chunk):
            return None
        self._loop(base, rows, 0, n, vocab, chunk)
        return None

    def _count(self, fmt: str, rows: int, first_line: int) -> None:
        self.format_rows[fmt] = self.format_rows.get(fmt, 0) + rows
        if fmt not in self.format_first or self.format_first[fmt] > first_line:
            self.format_first[fmt] = first_line

    def _columns(self, base: int, rows: list, vocab: frozenset[str], chunk: bytes) -> bool:
        """Text and chat rows, a column at a time: every step below is one C-level pass
        over a run of rows of one format (map/any/extend), so Python does no per-row work
        on the common path; only the rows a check fails on go through the reference path.
        False when the chunk is too fragmented into runs for this to pay."""
        n = len(rows)
        msgs = list(map(_get_messages, rows)) if "messages" in vocab else None
        texts = list(map(_get_text, rows)) if "text" in vocab else None
        unset = msgs.count(UNSET) if msgs is not None and texts is not None else -1
        if unset in (0, n):  # the usual chunk: one format throughout
            runs = [(0, n, unset == 0)]
        elif unset > 0:
            flags = list(map(is_not, msgs, repeat(UNSET)))  # True: a chat row
            runs = []
            i = 0
            while i < n:
                v = flags[i]
                try:
                    j = flags.index(not v, i)
                except ValueError:
                    j = n
                runs.append((i, j, v))
                if len(runs) > _MAX_RUNS:
                    return False
                i = j
        else:
            runs = [(0, n, msgs is not None)]
        whole = len(runs) == 1
        for lo, hi, chat in runs:
            if chat and msgs is not None:
                self._chat_run(base, lo, msgs if whole else msgs[lo:hi],
                               None if texts is None else texts if whole else texts[lo:hi], chunk)
            elif not chat and texts is not None:
                self._text_run(base, lo, texts if whole else texts[lo:hi], chunk)
            else:
                self._loop(base, rows, lo, hi, vocab, chunk)
        return True

    def _chat_run(self, base: int, lo: int, ms: list, ts: list | None, chunk: bytes) -> None:
        """A run of chat rows: one C-level pass per check over the run; only when one
        fails are the rows looked at one by one, and only the failing rows go through the
        reference path."""
        clean = (ts is None or ts.count(UNSET) == len(ms)) and None not in ms and _clean_turns(ms)
        bad = [] if clean else [
            i for i, m in enumerate(ms)
            if m is None or (ts is not None and ts[i] is not UNSET) or role_issues(tuple(map(_get_role, m)))
            or any(map(str.isspace, map(_get_content, m)))]
        keys = list(map(_enc, ms))
        self.exact.extend(map(_hash, keys))
        self.near.extend(map(_hash, map(bytes.lower, keys)))
        self._settle(CHAT, base, lo, len(ms), bad, chunk)

    def _text_run(self, base: int, lo: int, ts: list, chunk: bytes) -> None:
        """A run of text rows, checked and hashed a column at a time (see _chat_run)."""
        clean = UNSET not in ts and None not in ts and "" not in ts and not any(map(str.isspace, ts))
        bad = [] if clean else [i for i, t in enumerate(ts) if type(t) is not str or not t or t.isspace()]
        if bad:
            ts = ts.copy()
            for i in bad:
                ts[i] = ""
        keys = list(map(str.encode, ts))
        self.exact.extend(map(_hash, keys))
        self.near.extend(map(_hash, map(bytes.lower, map(bytes.strip, keys))))
        self._settle(TEXT, base, lo, len(ts), bad, chunk)

    def _settle(self, fmt: str, base: int, lo: int, n: int, bad: list[int], chunk: bytes) -> None:
        """Count a run's clean rows and replace the facts of its `bad` rows (indices in
        the run) with the reference path's."""
        good = n - len(bad)
        self.records += good
        if good:
            skip = set(bad)
            first = next(i for i in range(n) if i not in skip)
            self._count(fmt, good, base + lo + first)
        if bad:
            lines = chunk.split(b"\n")
            ex, nr = self.exact, self.near
            for i in bad:
                line = base + lo + i
                f = scan_line(line, lines[lo + i])
                self.take(f)
                ex[line] = f.exact
                nr[line] = f.near

    def _loop(self, base: int, rows: list, lo: int, hi: int, vocab: frozenset[str], chunk: bytes) -> None:
        """Rows lo..hi of a decoded chunk, one at a time (every format); rows that the
        quick checks do not clear go through the reference path."""
        has = vocab.__contains__
        has_text, has_msgs, has_conv = has("text"), has("messages"), has("conversations")
        has_pref = has("chosen") or has("rejected")
        has_alp = has("instruction") or has("output") or has("input")
        has_pc = has("prompt") or has("completion")
        foreign = {f: _foreign_check(vocab, f) for f in FORMATS}
        f_text, f_chat, f_conv = foreign[TEXT], foreign[CHAT], foreign[SHAREGPT]
        f_pref, f_alp, f_pc = foreign[PREFERENCE], foreign[ALPACA], foreign[PROMPT_COMPLETION]
        ex, nr = self.exact, self.near
        exa, nra = ex.append, nr.append
        h, enc = _hash, _enc
        issues = role_issues
        get_role, get_from, get_content, get_value = _get_role, _get_from, _get_content, _get_value
        share_map = SHAREGPT_ROLES.__getitem__
        isspace = str.isspace
        redo: list[int] = []
        counts = dict.fromkeys(FORMATS, 0)
        first: dict[str, int] = {}
        i = lo - 1
        for r in (rows if lo == 0 and hi == len(rows) else rows[lo:hi]):
            i += 1
            if has_msgs:
                m = r.messages
                if m is not UNSET:
                    if m is None or (f_chat and f_chat(r)) or issues(tuple(map(get_role, m))) \
                            or any(map(isspace, map(get_content, m))):
                        redo.append(i)
                        exa(0)
                        nra(0)
                        continue
                    key = enc(m)
                    exa(h(key))
                    nra(h(key.lower()))
                    counts[CHAT] += 1
                    if CHAT not in first:
                        first[CHAT] = i
                    continue
            if has_conv:
                m = r.conversations
                if m is not UNSET:
                    if m is None or (f_conv and f_conv(r)) \
                            or issues(tuple(map(share_map, map(get_from, m)))) \
                            or any(map(isspace, map(get_value, m))):
                        redo.append(i)
                        exa(0)
                        nra(0)
                        continue
                    key = enc(m)
                    exa(h(key))
                    nra(h(key.lower()))
                    counts[SHAREGPT] += 1
                    if SHAREGPT not in first:
                        first[SHAREGPT] = i
                    continue
            if has_pref:
                ch = r.chosen if has("chosen") else UNSET
                rj = r.rejected if has("rejected") else UNSET
                if ch is not UNSET or rj is not UNSET:
                    p = r.prompt if has("prompt") else UNSET
                    if type(ch) is not str or type(rj) is not str or ch == rj or not ch.strip() \
                            or not rj.strip() or not (p is UNSET or type(p) is str) or (f_pref and f_pref(r)):
                        redo.append(i)
                        exa(0)
                        nra(0)
                        continue
                    key = enc([None if p is UNSET else p, ch, rj])
                    exa(h(key))
                    nra(h(key.lower()))
                    counts[PREFERENCE] += 1
                    if PREFERENCE not in first:
                        first[PREFERENCE] = i
                    continue
            if has_alp:
                ins = r.instruction if has("instruction") else UNSET
                out = r.output if has("output") else UNSET
                inp = r.input if has("input") else UNSET
                if ins is not UNSET or out is not UNSET or inp is not UNSET:
                    if type(ins) is not str or type(out) is not str or not ins.strip() or not out.strip() \
                            or not (inp is UNSET or type(inp) is str) or (f_alp and f_alp(r)):
                        redo.append(i)
                        exa(0)
                        nra(0)
                        continue
                    key = enc([ins, "" if inp is UNSET else inp, out])
                    exa(h(key))
                    nra(h(key.lower()))
                    counts[ALPACA] += 1
                    if ALPACA not in first:
                        first[ALPACA] = i
                    continue
            if has_pc:
                p = r.prompt if has("prompt") else UNSET
                c = r.completion if has("completion") else UNSET
                if p is not UNSET or c is not UNSET:
                    if type(p) is not str or type(c) is not str or not c.strip() or (f_pc and f_pc(r)):
                        redo.append(i)
                        exa(0)
                        nra(0)
                        continue
                    key = enc([p, c])
                    exa(h(key))
                    nra(h(key.lower()))
                    counts[PROMPT_COMPLETION] += 1
                    if PROMPT_COMPLETION not in first:
                        first[PROMPT_COMPLETION] = i
                    continue
            if has_text:
                t = r.text
                if type(t) is str and t and not isspace(t) and not (f_text and f_text(r)):
                    key = t.encode()
                    exa(h(key))
                    nra(h(key.strip().lower()))
                    counts[TEXT] += 1
                    if TEXT not in first:
                        first[TEXT] = i
                    continue
            redo.append(i)  # no training field, an empty text, or something to explain
            exa(0)
            nra(0)
        self.records += hi - lo - len(redo)
        for fmt, c in counts.items():
            if c:
                self._count(fmt, c, base + first[fmt])
        if redo:
            lines = chunk.split(b"\n")
            for i in redo:
                f = scan_line(base + i, lines[i])
                self.take(f)
                ex[base + i] = f.exact
                nr[base + i] = f.near


def _problem_lines(problems: list[LineProblem]) -> list[LineProblem]:
    return sorted(problems, key=lambda p: (p.line, p.start, p.kind))


class _OverCap(bytes):
    """Stands in for one line longer than the row cap, which was streamed past unread:
    `size` is its length in bytes (with its newline, when it has one)."""

    size: int


def _over_cap(size: int) -> _OverCap:
    marker = _OverCap(b"\n")
    marker.size = size
    return marker


def _chunks(fh: Any, first: bytes, max_row: int = 0) -> Iterator[bytes]:
    """Whole-line chunks: each ends with a newline except possibly the last. A line
    longer than `max_row` bytes is not kept: it is streamed past and yielded as one
    _OverCap (parts of a long line are collected in a list, never re-concatenated)."""
    max_row = max_row or DEFAULT_MAX_ROW
    cut = first.rfind(b"\n")
    if cut >= 0:  # the whole lines of the head go out as they are
        yield first[:cut + 1]
        first = first[cut + 1:]
    parts = [first] if first else []  # the pending (unfinished) line
    held = len(first)
    if held > max_row:
        parts, held, skipping = [], 0, held
    else:
        skipping = 0  # bytes of an over-cap line streamed past so far (0: not skipping)
    while True:
        block = fh.read(CHUNK_BYTES)
        if not block:
            if skipping:
                yield _over_cap(skipping)
            elif parts:
                yield b"".join(parts)
            return
        if skipping:
            nl = block.find(b"\n")
            if nl < 0:
                skipping += len(block)
                continue
            yield _over_cap(skipping + nl + 1)
            skipping, block = 0, block[nl + 1:]
            if not block:
                continue
        cut = block.rfind(b"\n")
        if cut < 0:
            parts.append(block)
            held += len(block)
            if held > max_row:  # the pending line is already longer than the cap
                skipping, parts, held = held, [], 0
            continue
        nl = block.find(b"\n")
        if parts and held + nl > max_row:
            # The pending line ends in this block, over the cap. (Lines that start and end
            # inside one block are shorter than CHUNK_BYTES, itself below any cap.)
            yield _over_cap(held + nl + 1)
            parts, held = [], 0
            block, cut = block[nl + 1:], cut - nl - 1
            if cut < 0:
                parts, held = ([block], len(block)) if block else ([], 0)
                continue
        yield b"".join(parts + [block[: cut + 1]]) if parts else block[: cut + 1]
        parts = [block[cut + 1:]] if cut + 1 < len(block) else []
        held = len(block) - cut - 1


def _memory_chunks(data: bytes, start: int, max_row: int = 0) -> Iterator[bytes]:
    max_row = max_row or DEFAULT_MAX_ROW
    pos, n = start, len(data)
    while pos < n:
        nl = data.find(b"\n", pos, pos + max_row + 1)
        if nl < 0 and n - pos > max_row:  # one line longer than the row cap
            nl = data.find(b"\n", pos)
            end = n if nl < 0 else nl + 1
            yield _over_cap(end - pos)
            pos = end
            continue
        end = data.rfind(b"\n", pos, pos + CHUNK_BYTES)
        if pos + CHUNK_BYTES >= n:
            end = n
        elif end < 0:  # a line longer than a chunk but within the cap: that line alone
            end = n if nl < 0 else nl + 1
        else:
            end += 1
        yield data[pos:end]
        pos = end


class _Source:
    """A file or an in-memory buffer, read from the start."""

    def __init__(self, path: Path, data: bytes | None, max_row: int = 0) -> None:
        self.path, self.data = path, data
        self.fh: Any = None
        self.max_row = max_row

    def __enter__(self) -> "_Source":
        if self.data is None:
            self.fh = open(self.path, "rb", buffering=0)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fh is not None:
            self.fh.close()

    def head(self, n: int) -> bytes:
        return self.data[:n] if self.data is not None else self.fh.read(n)

    def all(self, head: bytes) -> bytes:
        if self.data is not None:
            return self.data
        return head + self.fh.read()

    def chunks(self, head: bytes, skip: int) -> Iterator[bytes]:
        if self.data is not None:
            return _memory_chunks(self.data, skip, self.max_row)
        return _chunks(self.fh, head[skip:], self.max_row)

    def size(self) -> int:
        return len(self.data) if self.data is not None else os.fstat(self.fh.fileno()).st_size


def _newline_counter(size: int) -> Callable[[bytes], int]:
    """Newlines in a chunk: numpy's compare-and-count (4-5x bytes.count) when numpy is
    loaded, or the input is big enough that the duplicate search will load it anyway."""
    np = None
    if "numpy" in sys.modules or size >= _NUMPY_FROM_BYTES:
        try:  # (an import, not a sys.modules lookup: another thread may be importing it now)
            import numpy as np
        except ImportError:
            np = None
    if np is None:
        return methodcaller("count", b"\n")
    newline, u8, frombuffer, count_nonzero = np.uint8(10), np.uint8, np.frombuffer, np.count_nonzero
    return lambda chunk: int(count_nonzero(frombuffer(chunk, u8) == newline))


def scan_dataset(path: Path | str, data: bytes | None = None, *, max_row_bytes: int = 0) -> DatasetScan:
    """Stream a JSONL dataset (or read a JSON array of records) into a DatasetScan.
    A row longer than `max_row_bytes` (default: caps.py max_row_mb) is not read.

    Raises ReadError (one line) when the file cannot be read at all."""
    path = Path(path)
    name = str(path)
    try:
        with _Source(path, data, max_row_bytes) as src:
            head = src.head(CHUNK_BYTES)
            bom = head.startswith(BOM)
            skip = 3 if bom else 0
            if b"\x00" in head[:4096]:
                raise ReadError(f"{name}: binary data (NUL bytes), not a JSONL dataset")
            first = head[skip:].lstrip(b" \t\r\n")
            crlf = b"\r\n" in head
            if first.startswith(b"["):
                data = src.all(head)
                jsonl = path.suffix.lower() in (".jsonl", ".ndjson")
                # A .jsonl file whose first row happens to be an array is JSONL with a
                # bad first line, not a JSON array: read it line by line.
                if not jsonl or _is_json_array(data[skip:]):
                    return _scan_json_array(name, data, skip, bom, crlf)
                with _Source(path, data) as mem:
                    return _scan_jsonl(name, mem, mem.head(CHUNK_BYTES), skip, bom, crlf)
            return _scan_jsonl(name, src, head, skip, bom, crlf)
    except OSError as e:
        raise ReadError(f"{name}: cannot read ({e.strerror or e})") from None


def _scan_jsonl(name: str, src: _Source, head: bytes, skip: int, bom: bool, crlf: bool) -> DatasetScan:
    sc = _Scanner(name)
    base = 0
    size = skip
    newlines = _newline_counter(src.size())
    enabled = gc.isenabled()
    gc.disable()  # the chunk path allocates only acyclic objects; GC passes are pure cost
    try:
        for chunk in src.chunks(head, skip):
            if isinstance(chunk, _OverCap):
                size += chunk.size
                sc.unread(base, chunk.size, src.max_row or DEFAULT_MAX_ROW)
                base += 1
                continue
            size += len(chunk)
            n = newlines(chunk) + (0 if chunk.endswith(b"\n") else 1)
            sc.run(base, chunk, n)
            base += n
    finally:
        if enabled:
            gc.enable()
    return _finish(sc, name, "jsonl", size, base, bom, crlf)


def _is_json_array(data: bytes) -> bool:
    try:
        msgspec.json.decode(data, type=list[msgspec.Raw])
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, RecursionError):
        return False
    return True


def _scan_json_array(name: str, data: bytes, skip: int, bom: bool, crlf: bool) -> DatasetScan:
    """A pretty-printed (or compact) JSON array of records: each element is checked by
    the reference path and located at its first line."""
    from ..core.positions import ByteIndex
    from .jsonpos import element_ranges

    sc = _Scanner(name)
    index = ByteIndex(data)
    lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    try:
        elements = msgspec.json.decode(data[skip:], type=list[msgspec.Raw])
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        m = _BYTE_AT.search(str(e))
        at = skip + int(m.group(1)) if m else len(data.rstrip())
        ln, col = index.position(min(at, len(data)))
        sc.problems.append(_problem(ln, MALFORMED, f"invalid JSON array at line {ln + 1}, column {col + 1}: "
                                                   f"{str(e).split(' (byte')[0]}", col, col + 1, column=col + 1))
        return _finish(sc, name, "json-array", len(data), lines, bom, crlf, zero_hashes=lines)
    open_pos = data.find(b"[", skip)
    ranges = element_ranges(data, open_pos, len(elements))
    sc.exact = array("Q", bytes(8 * lines))
    sc.near = array("Q", bytes(8 * lines))
    for k, raw in enumerate(elements):
        if ranges is not None:
            start, end = ranges[0][k], ranges[1][k]
        else:  # a non-object element: no range from the object scanner
            start = end = open_pos
        span = index.span(start, end)
        try:
            obj = _dec_any.decode(bytes(raw))
        except msgspec.DecodeError:  # cannot happen after the typed decode; be safe
            continue
        f = check_record(span.start_line, obj, span.start_char + 1)
        f = LineFacts(line=f.line, format=f.format, exact=f.exact, near=f.near, conversational=f.conversational,
                      problems=tuple(
            LineProblem(line=p.line, kind=p.kind, message=p.message, start=span.start_char,
                        end=span.end_char, end_line=span.end_line, evidence=p.evidence) for p in f.problems))
        sc.take(f)
        if f.exact:
            sc.exact[span.start_line] = f.exact
            sc.near[span.start_line] = f.near
    return _finish(sc, name, "json-array", len(data), lines, bom, crlf)


def _finish(sc: _Scanner, name: str, layout: str, size: int, lines: int, bom: bool, crlf: bool,
            zero_hashes: int = 0) -> DatasetScan:
    if zero_hashes:
        sc.exact = array("Q", bytes(8 * zero_hashes))
        sc.near = array("Q", bytes(8 * zero_hashes))
    dups, near = find_duplicates(sc.exact, sc.near)
    formats = tuple(sorted(((f, n, sc.format_first[f]) for f, n in sc.format_rows.items()),
                           key=lambda t: (-t[1], t[2])))
    return DatasetScan(path=name, layout=layout, size=size, lines=lines, records=sc.records,
                       blank_lines=sc.blank, bom=bom, crlf=crlf, formats=formats,
                       problems=tuple(_problem_lines(sc.problems)), duplicates=dups, near_duplicates=near,
                       exact=sc.exact, near=sc.near, conversational_pairs=sc.pairs_conversational)


# --- duplicates --------------------------------------------------------------------------

# Below this many lines a dict is faster than importing numpy; once numpy is imported (the
# language server loads it at start when installed) it is ~3x faster than the dict from a
# few thousand lines on (10k lines: 0.7 ms vs 2.3 ms).
_NUMPY_FROM = 200_000
_NUMPY_FROM_BYTES = 40 << 20  # ~200k lines of a typical SFT dataset
_NUMPY_LOADED_FROM = 4_000


def find_duplicates(exact: array, near: array) -> tuple[tuple[Duplicate, ...], tuple[Duplicate, ...]]:
    """Exact duplicates (same content hash as an earlier line) and near duplicates (same
    near hash as an earlier line, but no exact copy of any earlier line). Index = line;
    hash 0 = no record. Each names the first line it repeats."""
    n = len(exact)
    if n >= _NUMPY_FROM or (n >= _NUMPY_LOADED_FROM and "numpy" in sys.modules):
        try:
            return _duplicates_numpy(exact, near)
        except ImportError:
            pass
    return _duplicates_dict(exact, near) if n < 2 * _NUMPY_FROM else _duplicates_sorted(exact, near)


def _later_copies(values: array) -> tuple[list[int], list[int]]:
    """Lines whose hash an earlier line has (hash 0, no record, excluded), and for each
    the first line with that hash; in C-level passes (one dict built backwards, so that
    each hash keeps its first line)."""
    hashes = values.tolist()
    n = len(hashes)
    first = dict(zip(hashes[::-1], range(n - 1, -1, -1)))
    firsts = list(map(first.__getitem__, hashes))
    lines = [line for line in compress(range(n), map(ne, firsts, range(n))) if hashes[line]]
    return lines, [firsts[line] for line in lines]


def _duplicates_dict(exact: array, near: array) -> tuple[tuple[Duplicate, ...], tuple[Duplicate, ...]]:
    lines, firsts = _later_copies(exact)
    dups = tuple(Duplicate(line=l, first=f) for l, f in zip(lines, firsts))
    is_dup = set(lines)
    lines, firsts = _later_copies(near)
    # An exact copy of a near-duplicate is an exact duplicate, reported as such.
    nears = tuple(Duplicate(line=l, first=f) for l, f in zip(lines, firsts) if l not in is_dup)
    return dups, nears


def _groups_sorted(values: array) -> dict[int, list[int]]:
    """hash -> lines, for hashes that occur more than once (pure Python, no numpy)."""
    order = sorted(range(len(values)), key=values.__getitem__)
    groups: dict[int, list[int]] = {}
    prev = None
    run: list[int] = []
    for i in order:
        v = values[i]
        if v != prev:
            if prev and len(run) > 1:
                groups[prev] = run
            run = [i]
            prev = v
        else:
            run.append(i)
    if prev and len(run) > 1:
        groups[prev] = run
    return groups


def duplicates_from_groups(exact_groups: Iterable[Sequence[int]], near_groups: Iterable[Sequence[int]],
                           exact: array) -> tuple[tuple[Duplicate, ...], tuple[Duplicate, ...]]:
    """Duplicates from groups of lines sharing an exact / a near hash (each group in line
    order): what `find_duplicates` finds, for callers that keep the groups themselves
    (the language server updates them edit by edit)."""
    dups = [Duplicate(line=l, first=g[0]) for g in exact_groups for l in g[1:]]
    is_dup = {d.line for d in dups}
    nears: list[Duplicate] = []
    for g in near_groups:
        seen: set[int] = set()
        first = g[0]
        for l in g:
            e = exact[l]
            if l != first and l not in is_dup and e not in seen:
                nears.append(Duplicate(line=l, first=first))
            seen.add(e)
    dups.sort(key=lambda d: d.line)
    nears.sort(key=lambda d: d.line)
    return tuple(dups), tuple(nears)


def _duplicates_sorted(exact: array, near: array) -> tuple[tuple[Duplicate, ...], tuple[Duplicate, ...]]:
    eg = [sorted(g) for g in _groups_sorted(exact).values()]
    ng = [sorted(g) for g in _groups_sorted(near).values()]
    return duplicates_from_groups(eg, ng, exact)


def _groups_numpy(values: array) -> list[list[int]]:
    """Lines of every hash that occurs more than once, each group in line order.

    Memory stays flat (CONTRACTS.md §8: <= 64 MiB for 1M lines): the hashes are sorted in 16
    slices by their top 4 bits rather than as one 8-byte-per-line copy, and membership is
    tested a slice of lines at a time."""
    import numpy as np

    h = np.frombuffer(values, dtype=np.uint64)
    step = 1 << 16
    tops = np.empty(len(h), dtype=np.uint8)
    for lo in range(0, len(h), step):  # top 4 bits, without an 8-byte-per-line temporary
        tops[lo:lo + step] = h[lo:lo + step] >> np.uint64(60)
    repeated = []
    for part in range(16):
        sub = np.sort(h[tops == part])
        if len(sub) > 1:
            same = sub[1:] == sub[:-1]
            if same.any():
                repeated.append(sub[1:][same])
        del sub
    if not repeated:
        return []
    rep = np.unique(np.concatenate(repeated))
    rep = rep[rep != 0]
    if not len(rep):
        return []
    del tops
    groups: dict[int, list[int]] = {}
    for lo in range(0, len(h), step):
        block = h[lo:lo + step]
        hit = np.flatnonzero(np.isin(block, rep))
        for line, v in zip((hit + lo).tolist(), block[hit].tolist()):
            groups.setdefault(v, []).append(line)
    return list(groups.values())


def _duplicates_numpy(exact: array, near: array) -> tuple[tuple[Duplicate, ...], tuple[Duplicate, ...]]:
    eg = _groups_numpy(exact)
    ng = _groups_numpy(near)
    return duplicates_from_groups(eg, ng, exact)
