"""The dataset reader's fast path: whole chunks of lines decoded by msgspec in C into
typed Structs built for the keys the file uses (roles are a Literal, content a
non-empty string, unknown keys rejected).

A chunk is decoded as one JSON array with an element a line (`as_array`), so a
fault stops the decoder, which names the line: that line goes through the reference
path (`scan_line`, dataset_records.py) and typed decoding resumes right after it, so a
broken line costs its own reference check plus the re-decoding of the lines before it
in its chunk, nothing more. Runs of text and chat rows are then checked and hashed a
column at a time with C-level passes; other formats row by row, through one table of
per-format clean-row checks. Any row a quick check does not clear is explained by
`scan_line`: no problem is ever decided here, only "nothing to report".
"""

from __future__ import annotations

from array import array
from functools import lru_cache
from collections import deque
from dataclasses import dataclass
from itertools import chain, compress, repeat
from operator import attrgetter, is_not, ne, not_
from typing import Annotated, Any, Callable, Iterable, Literal, Mapping, NamedTuple, Sequence, cast

import msgspec

from .dataset_records import (
    _BYTE_AT, _ROW_AT, ALPACA, CHAT, CHAT_ROLES, FORMAT_KEYS, PRECEDENCE, PREFERENCE, PROMPT_COMPLETION, SHAREGPT,
    SHAREGPT_ROLES, TEXT, UNREADABLE_ROW, VOCABULARY, LineFacts, LineProblem, _dec_any, _enc, _hash, _problem, classify, counts_as_record,
    FieldMap, is_filled_text, role_issues, scan_line)

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


# --- the fast path: typed Structs over whole chunks -----------------------------------------

# The roles the decoder accepts are the ones the reference check knows (CHAT_ROLES,
# SHAREGPT_ROLES): any other stops the decoder, and scan_line names it.
Role: Any = cast(Any, Literal)[CHAT_ROLES]
ShareRole: Any = cast(Any, Literal)[tuple(SHAREGPT_ROLES)]
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


class _RowType(NamedTuple):
    lines: msgspec.json.Decoder[Any]  # a chunk as a stream of rows (decode_lines)
    listed: msgspec.json.Decoder[Any]  # a chunk as a JSON array of rows, one a line (as_array)
    vocab: frozenset[str]


@lru_cache(maxsize=64)
def _row_type(keys: frozenset[str]) -> _RowType:
    """Decoders for rows whose keys are all in `keys`, and the vocabulary keys they have.
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
    return _RowType(msgspec.json.Decoder(row), msgspec.json.Decoder(list[row]), frozenset(keys & VOCABULARY))  # type: ignore[valid-type]


def as_array(chunk: bytes) -> bytearray:
    """A chunk of lines as one JSON array with an element a line: each newline (the last
    one aside) gets a comma before it. The decoder of JSON Lines reads a stream of values,
    so a line holding two objects next to a blank line, or next to an object spread over
    two lines, leaves it as many rows as lines. The array decodes only when every line
    holds exactly one value: a blank line makes two commas with a newline between, two
    objects on a line lack their comma, a newline between two tokens of a value brings a
    comma where JSON allows none (one is already there, or must not be), and one inside a
    string stays a raw newline, which no JSON string holds. Costs ~3 us a 64 KiB chunk (two copies), beside the ~45 us
    of decoding it. Byte q of the array is byte `chunk_offset(array, q)` of the chunk."""
    out = bytearray(b"[")
    out += chunk.replace(b"\n", b",\n")
    if chunk.endswith(b"\n"):
        out[-2:] = b"]"  # the last newline's ",\n" becomes the closing "]"
    else:
        out += b"]"
    return out


def chunk_offset(array: bytes | bytearray, q: int) -> int:
    """The chunk byte at (or just before) byte q of `as_array(chunk)`."""
    return q - 1 - array.count(b"\n", 0, q)


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


@dataclass(frozen=True, slots=True)
class _RowCheck:
    """How the fast path clears the rows of one format (see _row_checks)."""

    format: str
    named: Callable[[Any], Any]  # the row's values of the keys naming the format ...
    unset: Any  # ... and what they are when the row sets none of them
    foreign: Callable[[Any], Any] | None  # the row's values of other formats' keys ...
    foreign_unset: Any  # ... and what they are when it sets none of them
    key_of: Callable[[Any], bytes | None]  # hash key of a clean row; None: not clean
    near_of: Callable[[bytes], bytes]  # near-hash key from the hash key


def _unset(row: object) -> Any:
    return UNSET


def _lower_stripped(key: bytes) -> bytes:
    return key.strip().lower()


def _values(vocab: frozenset[str], keys: Iterable[str]) -> tuple[Callable[[Any], Any], Any] | None:
    """A C-level getter of a row's values of these keys (those the decoder has), and what
    it returns when the row sets none of them; None when the decoder has none of them."""
    present = sorted(k for k in keys if k in vocab)
    if not present:
        return None
    return attrgetter(*present), UNSET if len(present) == 1 else (UNSET,) * len(present)


@lru_cache(maxsize=64)
def _row_checks(vocab: frozenset[str]) -> tuple[_RowCheck, ...]:
    """For each format the decoder's keys can hold, in PRECEDENCE order, the check that
    clears its rows. A row is clean when the reference check would find nothing: its
    fields are filled texts (is_filled_text), its turns pass role_issues, and it sets
    no key of another format. The typed decoder has already made every turn's content a
    non-empty string with a known role."""
    g: dict[str, Callable[[Any], Any]] = {k: attrgetter(k) if k in vocab else _unset for k in VOCABULARY}
    text, msgs, convs = g["text"], g["messages"], g["conversations"]
    prompt, completion, chosen, rejected = g["prompt"], g["completion"], g["chosen"], g["rejected"]
    instruction, inp, output = g["instruction"], g["input"], g["output"]
    share_role = SHAREGPT_ROLES.__getitem__
    isspace = str.isspace

    def chat(r: Any) -> bytes | None:
        m = msgs(r)
        return _enc(m) if _clean_chat(m) else None

    def sharegpt(r: Any) -> bytes | None:
        m = convs(r)
        if m is None or role_issues(tuple(map(share_role, map(_get_from, m)))) \
                or any(map(isspace, map(_get_value, m))):
            return None
        return _enc(m)

    def preference(r: Any) -> bytes | None:
        p, ch, rj = prompt(r), chosen(r), rejected(r)
        if not (is_filled_text(ch) and is_filled_text(rj) and ch != rj and (p is UNSET or type(p) is str)):
            return None
        return _enc([None if p is UNSET else p, ch, rj])

    def alpaca(r: Any) -> bytes | None:
        ins, i, out = instruction(r), inp(r), output(r)
        if not (is_filled_text(ins) and is_filled_text(out) and (i is UNSET or type(i) is str)):
            return None
        return _enc([ins, "" if i is UNSET else i, out])

    def prompt_completion(r: Any) -> bytes | None:
        p, c = prompt(r), completion(r)
        return _enc([p, c]) if type(p) is str and is_filled_text(c) else None

    def plain_text(r: Any) -> bytes | None:
        t = text(r)
        return t.encode() if is_filled_text(t) else None

    key_of: dict[str, Callable[[Any], bytes | None]] = {
        CHAT: chat, SHAREGPT: sharegpt, PREFERENCE: preference, ALPACA: alpaca,
        PROMPT_COMPLETION: prompt_completion, TEXT: plain_text}
    checks: list[_RowCheck] = []
    for fmt, named_by in PRECEDENCE:
        named = _values(vocab, named_by)
        if named is None:
            continue
        foreign, foreign_unset = _values(vocab, vocab - set(FORMAT_KEYS[fmt])) or (None, None)
        checks.append(_RowCheck(format=fmt, named=named[0], unset=named[1], foreign=foreign,
                                foreign_unset=foreign_unset, key_of=key_of[fmt],
                                near_of=_lower_stripped if fmt == TEXT else bytes.lower))
    return tuple(checks)


def _clean_chat(m: Any) -> bool:
    """A decoded message list the reference check has nothing to say about: its role
    sequence passes role_issues and no turn is whitespace only (the decoder has made
    every content a non-empty string)."""
    return m is not None and not role_issues(tuple(map(_get_role, m))) \
        and not any(map(str.isspace, map(_get_content, m)))


def _clean_turns(ms: list[Any]) -> bool:
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


class Scanner:
    """The growing key set, counters and hash arrays while one file streams through."""

    def __init__(self, path: str, fields: FieldMap | None = None) -> None:
        self.path = path
        # A field mapping: every row goes through the reference path, which maps the
        # user's keys (the typed decoding knows only the formats' own names).
        self.fields = dict(fields) if fields else None
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
        if counts_as_record(f):
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
            f"{f'{cap / 2**20:g} MiB' if cap >= 2**20 else f'{cap} bytes'} for one row (max_row_mb): not read",
            0, 0, bytes=size, cap=cap),))
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
            f = scan_line(base + i, raw, self.fields)
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
        each line that stops it. The decoder gives nothing back from a failed chunk, so
        the lines before a broken one are decoded again; the lines after it are decoded
        once, as one piece, from just past it (a broken line never makes the lines
        after it be read twice). `lines`: the segment's line count when the caller has it."""
        if self.fields:
            cut = seg.split(b"\n")
            self.slow(base, cut[:-1] if seg.endswith(b"\n") else cut)
            return
        size = len(seg)
        pos = 0
        while pos < size:
            piece = seg if pos == 0 else seg[pos:]
            stop = self.fast(base, piece, lines if pos == 0 else None)
            if stop is None:
                return
            if stop < 0:  # no line named: two values on a line, or a value nested too deep
                self._halves(base, piece)
                return
            start = 0
            for _ in range(stop):
                start = piece.index(b"\n", start) + 1
            end = piece.find(b"\n", start)
            end = len(piece) if end < 0 else end + 1
            if stop:
                self.run(base, piece[:start], stop)
            self.slow(base + stop, [piece[start:end].rstrip(b"\n")])
            base += stop + 1
            pos += end

    def _halves(self, base: int, seg: bytes) -> None:
        """Lines that break the one-record-per-line shape without the decoder naming
        them: the segment is scanned as two halves, each on its own, down to the line at
        fault (which the reference path explains). The halves without a fault are decoded
        once; a fault costs about two decodes of its segment, never a per-line pass."""
        mid = len(seg) // 2
        cut = seg.find(b"\n", mid)
        if cut < 0 or cut + 1 >= len(seg):
            cut = seg.rfind(b"\n", 0, mid)
        if cut < 0:  # one line
            self.slow(base, [seg.rstrip(b"\n")])
            return
        head = seg[:cut + 1]
        n = head.count(b"\n")
        self.run(base, head, n)
        self.run(base + n, seg[cut + 1:])

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
        n = lines if lines is not None else chunk.count(b"\n") + (0 if chunk.endswith(b"\n") else 1)
        decoders = _row_type(frozenset(self.keys))
        vocab = decoders.vocab
        if len(vocab) != len(self.keys):
            try:
                chunk.decode("utf-8")  # strings skipped as Raw are not validated by msgspec
            except UnicodeDecodeError as e:
                return chunk.count(b"\n", 0, e.start)
        # One object a line (see as_array): the rows are the lines'. Otherwise the line
        # the array decoder stopped in, when it names one; else the stream decoder below
        # names the line that stops it, or finds blank lines. (Any line named here is
        # right to name: run() reads it the reference way and the lines around it again
        # the fast way; a good guess only saves decoding.)
        listing = as_array(chunk)
        try:
            listed = decoders.listed.decode(listing)
        except msgspec.ValidationError as e:  # element k is line k (nothing before it broke the array)
            m = _ROW_AT.search(str(e))
            if m and int(m.group(1)) < n:
                return int(m.group(1))
            listed = None
        except msgspec.DecodeError as e:
            m = _BYTE_AT.search(str(e))
            # (a blank line is left to the stream decoder, which places rows around all of
            # a chunk's blank lines at once)
            at = chunk_offset(listing, int(m.group(1))) if m else -1
            if 0 <= at < len(chunk):
                start = chunk.rfind(b"\n", 0, at) + 1
                end = chunk.find(b"\n", at)
                if chunk[start:len(chunk) if end < 0 else end].strip():
                    k = _blame(chunk, at)
                    if k >= 0:
                        return k
            listed = None
        except (ValueError, RecursionError):  # UnicodeDecodeError; a value nested too deep
            listed = None
        if listed is not None and len(listed) == n:  # (not so when a line holds `{...}, {...}`)
            self._rows(base, listed, vocab, chunk)
            return None
        try:
            rows = decoders.lines.decode_lines(chunk)
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
        # The stream decoder passes over blank lines: when they are all that differs, its
        # rows are placed on the lines between them. Otherwise a line holds two values, or
        # a value spans lines.
        parts = chunk.split(b"\n")
        if chunk.endswith(b"\n"):
            parts.pop()
        return None if self._around_blanks(base, parts, rows, vocab) else -1

    def _rows(self, base: int, rows: list[Any], vocab: frozenset[str], chunk: bytes) -> None:
        """The decoded rows of a chunk, one per line from line `base` on."""
        if not (vocab <= _COLUMN_VOCAB and self._columns(base, rows, vocab, chunk)):
            self._loop(base, rows, 0, len(rows), vocab, chunk)

    def _around_blanks(self, base: int, lines: list[bytes], rows: list[Any], vocab: frozenset[str]) -> bool:
        """Place the rows of a chunk (given by line) with blank lines on its other lines
        and take the blank ones as such; False (nothing done) when the counts disagree or
        a line is not framed by braces. (A line break between `}` and `{` is never inside
        a JSON value, so with every other line framed each holds whole values; as many
        rows as such lines is then one a line.)"""
        stripped = [raw.strip() for raw in lines]
        blank = [i for i, raw in enumerate(stripped) if not raw]
        if len(rows) != len(lines) - len(blank) or not all(s[:1] == b"{" and s[-1:] == b"}" for s in stripped if s):
            return False
        at = 0  # first line of the current run of records
        used = 0  # rows placed so far
        for b in [*blank, len(lines)]:
            if b > at:
                self._rows(base + at, rows[used:used + b - at], vocab, b"\n".join(lines[at:b]))
                used += b - at
            if b < len(lines):
                self.slow(base + b, [lines[b]])
            at = b + 1
        return True

    def _count(self, fmt: str, rows: int, first_line: int) -> None:
        self.format_rows[fmt] = self.format_rows.get(fmt, 0) + rows
        if fmt not in self.format_first or self.format_first[fmt] > first_line:
            self.format_first[fmt] = first_line

    def _columns(self, base: int, rows: list[Any], vocab: frozenset[str], chunk: bytes) -> bool:
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
        elif unset > 0 and msgs is not None:
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

    def _chat_run(self, base: int, lo: int, ms: list[Any], ts: list[Any] | None, chunk: bytes) -> None:
        """A run of chat rows: one C-level pass per check over the run; only when one
        fails are the rows looked at one by one, and only the failing rows go through the
        reference path."""
        clean = (ts is None or ts.count(UNSET) == len(ms)) and None not in ms and _clean_turns(ms)
        bad = [] if clean else [i for i, m in enumerate(ms)
                                if (ts is not None and ts[i] is not UNSET) or not _clean_chat(m)]
        keys = list(map(_enc, ms))
        self.exact.extend(map(_hash, keys))
        self.near.extend(map(_hash, map(bytes.lower, keys)))
        self._settle(CHAT, base, lo, len(ms), bad, chunk)

    def _text_run(self, base: int, lo: int, ts: list[Any], chunk: bytes) -> None:
        """A run of text rows, checked and hashed a column at a time (see _chat_run)."""
        clean = UNSET not in ts and None not in ts and "" not in ts and not any(map(str.isspace, ts))
        bad = [] if clean else [i for i, t in enumerate(ts) if not is_filled_text(t)]
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
            self._explain(base, [lo + i for i in bad], chunk)

    def _explain(self, base: int, rows: list[int], chunk: bytes) -> None:
        """The reference path's facts for these rows (indices in the chunk) in place of
        the placeholders the quick path put down for them."""
        lines = chunk.split(b"\n")
        ex, nr = self.exact, self.near
        for i in rows:
            f = scan_line(base + i, lines[i], self.fields)
            self.take(f)
            ex[base + i] = f.exact
            nr[base + i] = f.near

    def _loop(self, base: int, rows: list[Any], lo: int, hi: int, vocab: frozenset[str], chunk: bytes) -> None:
        """Rows lo..hi of a decoded chunk, of any format, a column at a time: the rows of
        each format (by PRECEDENCE) are picked out in one pass, its clean-row check
        (_row_checks) gives each row's hash key in another; rows without a key, or
        without a training field, go through the reference path."""
        part = rows if lo == 0 and hi == len(rows) else rows[lo:hi]
        n = len(part)
        exact: list[int] = [0] * n
        near: list[int] = [0] * n
        left, left_at = part, list(range(n))
        redo: list[int] = []
        for c in _row_checks(vocab):
            if not left:
                break
            hit = list(map(ne, map(c.named, left), repeat(c.unset)))
            if all(hit):
                mine, at, left, left_at = left, left_at, [], []
            elif any(hit):
                miss = list(map(not_, hit))
                mine, at = list(compress(left, hit)), list(compress(left_at, hit))
                left, left_at = list(compress(left, miss)), list(compress(left_at, miss))
            else:
                continue
            if c.foreign is not None:
                others = list(map(c.foreign, mine))
                if others.count(c.foreign_unset) != len(others):  # rows with two formats' keys
                    mixed = list(map(ne, others, repeat(c.foreign_unset)))
                    redo.extend(compress(at, mixed))
                    keep = list(map(not_, mixed))
                    mine, at = list(compress(mine, keep)), list(compress(at, keep))
            keys = list(map(c.key_of, mine))
            if None in keys:
                redo.extend(i for i, k in zip(at, keys) if k is None)
                at = [i for i, k in zip(at, keys) if k is not None]
                keys = [k for k in keys if k is not None]
            if not at:
                continue
            clean = cast(list[bytes], keys)  # (the Nones are gone)
            if len(at) == n:
                exact, near = list(map(_hash, clean)), list(map(_hash, map(c.near_of, clean)))
            else:
                deque(map(exact.__setitem__, at, map(_hash, clean)), 0)
                deque(map(near.__setitem__, at, map(_hash, map(c.near_of, clean))), 0)
            self._count(c.format, len(at), base + lo + at[0])
        redo.extend(left_at)  # rows with no training field
        self.exact.extend(exact)
        self.near.extend(near)
        self.records += n - len(redo)
        if redo:
            self._explain(base, sorted(lo + i for i in redo), chunk)
