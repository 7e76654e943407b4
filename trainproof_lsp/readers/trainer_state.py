"""HF Trainer `trainer_state.json`.

Shape (written by `TrainerState.save_to_json`, `json.dumps(indent=2, sort_keys=True)`):

    {
      "best_global_step": 30, "best_model_checkpoint": "out/checkpoint-30", ...
      "log_history": [
        {
          "epoch": 0.03, "grad_norm": 0.77, "learning_rate": 4e-05, "loss": 1.52, "step": 5
        },
        { "epoch": 0.1, "eval_loss": 1.37, "eval_runtime": 3.1, "step": 15 },
        ...
        { "step": 300, "train_loss": 1.1, "train_runtime": 340.2, "train_samples_per_second": 7.0 }
      ],
      "logging_steps": 5, "max_steps": 300, ...
    }

Every log_history entry keeps its line range, so a finding points at the exact entry of
the step it cites. Values come from msgspec (typed, fast); a file msgspec rejects (bare
NaN/Infinity, which HF writes for non-finite losses, or odd types) is decoded by the
standard library instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from itertools import accumulate, compress, islice, repeat
from operator import add, and_, attrgetter, is_not
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, NamedTuple

import msgspec

from ..core.columns import Floats, Ints
from ..core.model import EPOCH, EVAL_ACCURACY, EVAL_LOSS, GRAD_NORM, LOSS, LR, THROUGHPUT, ReadError, RecordSpans, Run, RunMeta, Series
from . import adjacent
from .common import Columns, decode_json, read_regular, to_float, to_step
from .jsonpos import array_start, indent_layout, object_spans
from .metrics import map_columns, names_objective_series

if TYPE_CHECKING:
    from ..core.caps import Caps


class _Entry(msgspec.Struct):
    step: int | None = None
    loss: float | None = None
    eval_loss: float | None = None
    learning_rate: float | None = None
    grad_norm: float | None = None
    epoch: float | None = None
    train_samples_per_second: float | None = None
    eval_accuracy: float | None = None


class _Meta(msgspec.Struct):
    # log_history is not a field: msgspec walks past it without building anything.
    max_steps: int | None = None
    logging_steps: float | None = None
    global_step: int | None = None
    best_global_step: int | None = None
    best_model_checkpoint: str | None = None


_META = msgspec.json.Decoder(_Meta)
_ENTRIES = msgspec.json.Decoder(list[_Entry])
# log_history entries decoded per batch: the typed entries of one batch exist at a time
# (~1.5 MB of text), never 1M of them; each batch is appended to the typed columns.
_BATCH = 8192
_match_start = re.Match.start

# (canonical series, trainer_state key)
SERIES_KEYS = ((LOSS, "loss"), (EVAL_LOSS, "eval_loss"), (LR, "learning_rate"),
         (GRAD_NORM, "grad_norm"), (EPOCH, "epoch"), (THROUGHPUT, "train_samples_per_second"),
         (EVAL_ACCURACY, "eval_accuracy"))

_CKPT_NAME = re.compile(r"checkpoint-(\d+)")
# Keys that name a loss under another spelling than HF's `loss`/`eval_loss`: an eval set
# named by the user (`eval_validation_loss`, `eval_test_loss`) or a custom logger's key.
# Seeing one sends the file through the mapped path (readers/metrics.map_columns).
# Found with one bytes.find pass (C speed over a 200k-entry file; HF's own `_loss` keys
# are rare: `train_loss` once, in the summary), not a regex scan.
_HF_LOSS_KEYS = (b'"eval_loss"', b'"train_loss"')
# The summary entry HF writes at the end (`train_loss` is the mean over the whole run, one
# number, not a curve): never mapped as a loss series.
_SUMMARY_KEYS = frozenset({"train_loss", "train_runtime", "total_flos", "train_steps_per_second"})
# Preference/RL trainers (TRL's DPO, GRPO...) log their reward series in every train entry,
# so the first 64 KiB (the top-level keys and the first entries) show whether there are any.
_OBJECTIVE_HEAD = 64 * 1024


def check_caps(path: str | Path, data: bytes | None, caps: "Caps", *, entries: bool = False) -> None:
    """ReadError (NOT-CHECKED, with the size and the cap) for a log over the caps: its
    size before it is read (data None), and for a trainer_state.json the number of log
    entries before they are parsed (counted by their "step" keys, in C)."""
    from ..core.caps import MIB, mib

    name = str(path)
    size = Path(path).stat().st_size if data is None else len(data)
    if size > caps.max_log_mb * MIB:
        raise ReadError(f"{name}: {size} bytes ({mib(size)}), over the cap of {caps.max_log_mb} MiB "
                        "for a log (max_log_mb): not read")
    if entries and data is not None:
        n = data.count(b'"step"')
        if n > caps.max_log_entries:
            raise ReadError(f"{name}: about {n} log entries (\"step\" keys), over the cap of "
                            f"{caps.max_log_entries} (max_log_entries): not parsed")


def _needs_mapping(data: bytes, found: Any, columns_map: Mapping[str, str] | None) -> bool:
    """The typed fast path read HF's own keys; a mapping setting, a log without them, or
    a log with another loss key (an eval set named by the user) is read by mapping names."""
    if columns_map or (LOSS not in found and EVAL_LOSS not in found):
        return True
    if data.find(b'"loss_') >= 0:  # a named part of the loss (`loss_ce`): HF has no such key
        return True
    at = data.find(b'_loss"')
    while at >= 0:
        start = data.rfind(b'"', 0, at)
        key = data[start:at + 6]
        # With HF's eval_loss read, another eval set's loss changes nothing; any other
        # `_loss` key is a custom logger's loss or a named part of it (`recon_loss`).
        if key not in _HF_LOSS_KEYS and not (EVAL_LOSS in found and key.startswith(b'"eval_')):
            return True
        at = data.find(b'_loss"', at + 6)
    return False


def read_trainer_state(path: str | Path, data: bytes | None = None, *,
                       columns: Mapping[str, str] | None = None) -> Run:
    p = Path(path)
    if data is None:
        data = read_regular(p)
    name = str(path)
    if not data.strip():
        raise ReadError(f"{name}: empty file")
    columns_map = columns
    cols = Columns()
    notes: list[tuple[int, str]] = []
    ranges = _entry_ranges(data)
    try:
        if ranges is None:
            raise msgspec.ValidationError("log_history is not a list of objects")
        state = _META.decode(data)
        n = len(ranges[0])
        if names_objective_series(data[:_OBJECTIVE_HEAD]):  # a DPO/GRPO log: its reward series too
            raise msgspec.ValidationError("read by mapping key names")
        _fast_columns(data, ranges, cols, notes)
        meta_src = {"max_steps": state.max_steps, "logging_steps": state.logging_steps,
                    "best_global_step": state.best_global_step,
                    "best_model_checkpoint": state.best_model_checkpoint}
        if _needs_mapping(data, cols.series(), columns_map):
            raise msgspec.ValidationError("read by mapping key names")
        entries: list[Any] = []
    except (msgspec.DecodeError, msgspec.ValidationError):
        # Bare NaN/Infinity (HF writes them for non-finite losses), odd types, or names
        # to map: the standard library decodes it, batch by batch when the entries were
        # found (a diverged 1M-entry run must not become 1M dicts), else whole.
        got = _plain_entries(data, ranges)
        if got is not None:
            top, batches = got
            try:
                n, seen_keys = _keys_seen(batches)
            except (ValueError, RecursionError):  # a batch that does not decode
                got = None
        if got is None:
            doc = decode_json(data, name)
            if not isinstance(doc, dict) or not isinstance(doc.get("log_history"), list):
                raise ReadError(f"{name}: no log_history list; not a trainer_state.json") from None
            whole: list[Any] = doc["log_history"]
            top, batches = doc, (lambda: iter(((0, whole),)))
            n, seen_keys = _keys_seen(batches)
        cols = Columns()
        notes = []
        keys = _series_keys(seen_keys, columns_map)
        # Typed columns per series (not lists of Python numbers): (steps, values, records).
        typed = {series: (Ints(), Floats(), Ints()) for series, _ in keys}
        for lo, entries in batches():
            for i, e in enumerate(entries, lo):
                if not isinstance(e, dict):
                    notes.append((i, "log entry is not an object; not used"))
                    continue
                step = to_step(e.get("step"))
                if step is None:
                    notes.append((i, "log entry without an integer step; not used"))
                    continue
                for series, key in keys:
                    if key in e:
                        v = to_float(e[key])
                        if v is None:
                            notes.append((i, f"{key} is {e[key]!r}, not a number; not used"))
                        else:
                            col = typed[series]
                            col[0].append(step)
                            col[1].append(v)
                            col[2].append(i)
        # In the order series first appear in the log (as rows add them), keys order on a tie.
        present = [(typed[series][2][0], k, series, key) for k, (series, key) in enumerate(keys)
                   if len(typed[series][0])]
        for _, _, series, key in sorted(present):
            cols.put(Series(series, key, *typed[series]))
        entries = [dict.fromkeys(seen_keys)]  # the keys, for the message below
        meta_src = {k: top.get(k) for k in ("max_steps", "logging_steps", "best_global_step",
                                            "best_model_checkpoint")}
    found = cols.series()
    if LOSS not in found and EVAL_LOSS not in found:
        keys_seen = sorted({k for e in entries for k in _keys_of(e)} - {"step"})
        mapped = ", ".join(keys_seen[:30]) or "none"
        example = next((k for k in keys_seen if "loss" in k.lower() and k not in _SUMMARY_KEYS), "NAME")
        raise ReadError(f"{name}: log_history has {n} entr{'y' if n == 1 else 'ies'} and no loss or "
                        f"eval_loss to judge (keys seen: {mapped}); map one with "
                        f'`[tool.trainproof] columns = {{loss = "{example}"}}` or `--column loss={example}`')
    spans = _entry_spans(data, ranges, n)
    return Run(
        path=name,
        format="hf-trainer-state",
        series=found,
        record_spans=spans,
        meta=_meta(p, meta_src),
        sources=(name,),
        notes=tuple(notes),
    )


def _keys_seen(batches: Callable[[], Iterator[tuple[int, list[Any]]]]) -> tuple[int, dict[str, None]]:
    """How many entries, and every key of the entries, in first-seen order."""
    n = 0
    seen: dict[str, None] = {}
    for _, entries in batches():
        n += len(entries)
        for e in entries:
            if isinstance(e, dict):
                seen.update(dict.fromkeys(k for k in e if isinstance(k, str)))
    return n, seen


def _plain_entries(data: bytes, ranges: _Ranges | None) -> tuple[dict[str, Any], Callable[
        [], Iterator[tuple[int, list[Any]]]]] | None:
    """The document without its log_history (decoded), and a function that yields
    (index of the first entry, entries) batch by batch, decoded by the standard library
    (NaN/Infinity accepted; a batch that fails to decode raises ValueError). None when the
    entries' places are unknown or the rest of the document does not decode: the caller
    then decodes the whole document, which also words any error."""
    if ranges is None or not len(ranges.starts):
        return None
    open_pos = array_start(data, b"log_history")
    close = ranges.ends[-1]
    while close < len(data) and data[close] in b" \t\r\n":
        close += 1
    if open_pos < 0 or data[close : close + 1] != b"]":
        return None
    try:
        top = json.loads((data[:open_pos] + b"[]" + data[close + 1 :]).decode("utf-8-sig"))
    except ValueError:  # JSONDecodeError, UnicodeDecodeError
        return None
    if not isinstance(top, dict) or top.get("log_history") != []:
        return None
    starts, ends = ranges.starts, ranges.ends
    n = len(starts)

    def each() -> Iterator[tuple[int, list[Any]]]:
        for lo in range(0, n, _BATCH):
            hi = min(n, lo + _BATCH)
            got = json.loads(_bracketed(data, starts[lo], ends[hi - 1]).decode("utf-8"))
            if len(got) != hi - lo:
                raise ValueError("log_history entries are not where they were found")
            yield lo, got

    return top, each


def _bracketed(data: bytes, start: int, end: int) -> bytearray:
    """data[start:end] in brackets (a batch of entries as one JSON array), in one copy:
    `b"[" + data[start:end] + b"]"` makes two, and a batch can be most of the file (one
    entry holding a long string)."""
    out = bytearray(end - start + 2)
    out[0], out[-1] = 0x5B, 0x5D  # '[' ']'
    with memoryview(out) as into, memoryview(data) as src:
        into[1:-1] = src[start:end]  # (a bytearray slice assignment would copy the source first)
    return out


def _keys_of(entry: Any) -> list[str]:
    if isinstance(entry, dict):
        return [k for k in entry if isinstance(k, str)]
    return [f for f in entry.__struct_fields__ if getattr(entry, f) is not None] if hasattr(
        entry, "__struct_fields__") else []


def _series_keys(keys: Mapping[str, None], columns_map: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    """(canonical series, key) for the keys a log_history holds: HF's own keys, then any
    other spelling the metric alias table knows (`eval_validation_loss`, `val_loss`...),
    then the user's mapping on top."""
    chosen, _ = map_columns(keys, columns_map, exclude=_SUMMARY_KEYS - set((columns_map or {}).values()))
    out = dict((series, key) for series, key in SERIES_KEYS if key in keys)
    for series, key in chosen.items():
        if series not in out or (columns_map and series in columns_map):
            out[series] = key
    return tuple(out.items())


class _Ranges(NamedTuple):
    """[start, end) byte offsets of every log_history entry, and the layout they came from."""

    starts: Ints
    ends: Ints
    indent: int  # the entries' indentation under json.dump(indent=N); -1 for another layout


def _entry_ranges(data: bytes) -> _Ranges | None:
    """Where each log_history entry is (None: no such array, or an element that is not an
    object). Kept as two typed columns; lines and columns come from them (`_entry_spans`)."""
    open_pos = array_start(data, b"log_history")
    if open_pos < 0:
        return None
    first = open_pos + 1
    while first < len(data) and data[first] in b" \t\r\n":
        first += 1
    if data[first : first + 1] == b"]":
        return _Ranges(Ints(), Ints(), -1)  # "log_history": []
    got = _indented_ranges(data, open_pos)
    if got is not None:
        return got
    scanned = _scanned_ranges(data, open_pos)
    if scanned is None:
        return None
    return _Ranges(Ints(scanned[0]), Ints(scanned[1]), -1)


def _indented_ranges(data: bytes, open_pos: int) -> _Ranges | None:
    """The entries of the layout `json.dump(indent=N)` writes (HF's trainer_state.json),
    found by their separators in C (bytes.find), not by a token scan.

    Shape: `[\n<ind>{\n ... \n<ind>},\n<ind>{\n ... \n<ind>}\n<outer>]`. Inside an
    indent-dumped entry a line holding only the entry's own indentation and `}` can only
    be its closing brace (nested values sit deeper, strings hold no raw newlines).
    """
    layout = indent_layout(data, open_pos)
    if layout is None:
        return None
    brace, indent, closer, sep = layout
    last = data.find(closer + b"\n", brace)  # the last entry's closing brace, then the `]`
    if last == -1 or data[last + len(closer) + 1 : last + len(closer) + 1024].lstrip()[:1] != b"]":
        return None
    # Every separator's offset, found by the regex engine and collected in C iterators.
    seps = Ints(map(_match_start, re.compile(re.escape(sep)).finditer(data, brace, last)))
    starts = Ints([brace])
    starts.extend(map(add, seps, repeat(len(sep) - 1)))
    ends = Ints(map(add, seps, repeat(len(closer))))
    ends.append(last + len(closer))
    return _Ranges(starts, ends, len(indent))


def _scanned_ranges(data: bytes, open_pos: int) -> tuple[list[int], list[int]] | None:
    """Any other layout: entries by a token scan. None when an element of the array is
    not an object."""
    starts, ends, closed = object_spans(data, open_pos)
    if not closed or len(starts) != len(ends):
        return None
    # Between entries only a comma: a number or string element would sit there.
    gaps = zip(ends, starts[1:])
    if any(data[e:s].strip() != b"," for e, s in gaps):
        return None
    return starts, ends


def _fast_columns(data: bytes, ranges: _Ranges, columns: Columns, notes: list[tuple[int, str]]) -> None:
    """Typed entries -> typed columns, one batch of entries at a time (a batch is the
    bytes from its first entry's `{` to its last entry's `}`, in brackets). Within a
    batch the work runs in C iterators (attrgetter/compress), not a Python loop per
    entry. Series present in the same entries (loss, learning_rate, grad_norm of train
    entries) share one steps column and one records column, filled once per batch."""
    starts, ends = ranges.starts, ranges.ends
    n = len(starts)
    values_of: dict[str, Floats] = {}
    # series -> its (steps, records) columns; series logged in the same entries so far
    # hold the same pair.
    pair_of: dict[str, tuple[Ints, Ints]] = {}
    decode = _ENTRIES.decode
    for lo in range(0, n, _BATCH):
        hi = min(n, lo + _BATCH)
        entries = decode(_bracketed(data, starts[lo], ends[hi - 1]))
        if len(entries) != hi - lo:
            raise msgspec.ValidationError("log_history entries are not where they were found")
        steps = list(map(attrgetter("step"), entries))
        has_step: list[bool] | None = None
        if None in steps:
            has_step = list(map(is_not, steps, repeat(None)))
            notes.extend((lo + i, "log entry without a step; not used") for i, ok in enumerate(has_step) if not ok)
        # (pair held before this batch, the batch's mask) -> the series in that class
        classes: list[tuple[tuple[Ints, Ints] | None, list[bool] | None, list[str]]] = []
        for series, key in SERIES_KEYS:
            values = list(map(attrgetter(key), entries))
            nones = values.count(None)
            if nones == hi - lo:
                if series in pair_of:
                    classes.append((pair_of[series], [False] * (hi - lo), [series]))
                continue
            mask: list[bool] | None = None
            if nones or has_step is not None:
                mask = list(map(is_not, values, repeat(None)))
                if has_step is not None:
                    mask = list(map(and_, mask, has_step))
            col = values_of.get(series)
            if col is None:
                col = values_of[series] = Floats()
            col.extend(values if mask is None else compress(values, mask))
            pair = pair_of.get(series)
            for known, kmask, members in classes:
                if known is pair and kmask == mask:
                    members.append(series)
                    break
            else:
                classes.append((pair, mask, [series]))
        records = range(lo, hi)
        for pair, mask, members in classes:
            holders = [m for m, p in pair_of.items() if p is pair] if pair is not None else []
            if pair is None or len(holders) != len(members):
                # New series, or series that shared entries so far and part here: a pair
                # of their own from now on (a copy of the history they share).
                pair = (Ints(pair[0]), Ints(pair[1])) if pair is not None else (Ints(), Ints())
                for m in members:
                    pair_of[m] = pair
            if mask is None:
                pair[0].extend(steps)
                pair[1].extend(records)
            else:
                pair[0].extend(compress(steps, mask))
                pair[1].extend(compress(records, mask))
    for series, key in SERIES_KEYS:
        if series in values_of:
            steps_col, records_col = pair_of[series]
            columns.put(Series(series, key, steps_col, values_of[series], records_col))


def _entry_spans(data: bytes, ranges: _Ranges | None, n: int) -> RecordSpans:
    """Each entry's line range, from its byte range: the typed columns of four numbers
    per entry. (A Span object is built only for an entry a finding cites.)"""
    if ranges is None or len(ranges.starts) != n:
        # Values were decoded, so the JSON is valid; elements that are not objects make
        # the positions unknowable. Findings then point at the file, not a line.
        return RecordSpans()
    starts, ends = ranges.starts, ranges.ends
    count = data.count
    newline = repeat(b"\n")
    # Newlines inside each entry, and between one entry's end and the next's start; then
    # the lines by running sums (all in C iterators: a million entries in well under a second).
    inner = Ints(map(count, newline, starts, ends))
    gaps = map(count, newline, ends, islice(starts, 1, None))
    first_line = count(b"\n", 0, starts[0]) if n else 0
    sl = Ints(accumulate(map(add, inner, gaps), initial=first_line)) if n else Ints()
    del sl[n:]
    el = Ints(map(add, sl, inner))
    if ranges.indent >= 0:
        # `{` and `}` both sit at the entry's indentation.
        return RecordSpans(start_lines=sl, start_chars=Ints(repeat(ranges.indent, n)),
                           end_lines=el, end_chars=Ints(repeat(ranges.indent + 1, n)))
    return RecordSpans(start_lines=sl, start_chars=_columns(data, starts),
                       end_lines=el, end_chars=_columns(data, ends))


def _columns(data: bytes, offsets: Ints) -> Ints:
    """The code-point column of each of `offsets` (ascending, each at a `{` or `}`), each
    counted on from the one before: a compact log on one line is walked once, not once
    per entry from the line's start (which made a long one-line log quadratic)."""
    out = Ints()
    rfind = data.rfind
    prev = col = 0  # the last offset done, and its column
    for offset in offsets:
        nl = rfind(b"\n", prev, offset)
        if nl >= 0:
            prev, col = nl + 1, 0
        piece = data[prev:offset]  # (cut at ASCII brackets: never inside a UTF-8 character)
        col += len(piece) if piece.isascii() else len(piece.decode("utf-8", "replace"))
        out.append(col)
        prev = offset
    return out


def _meta(path: Path, src: dict[str, Any]) -> RunMeta:
    best_ckpt = src.get("best_model_checkpoint")
    best_step = src.get("best_global_step")
    if best_step is None and isinstance(best_ckpt, str):
        m = _CKPT_NAME.search(best_ckpt)
        best_step = int(m.group(1)) if m else None
    logging = src.get("logging_steps")
    classes, config = adjacent.find_num_classes(path)
    return RunMeta(
        max_steps=to_step(src.get("max_steps")),
        logging_steps=int(logging) if isinstance(logging, (int, float)) and logging >= 1 else None,
        best_step=best_step if isinstance(best_step, int) else None,
        best_checkpoint=best_ckpt if isinstance(best_ckpt, str) else None,
        checkpoint_steps=adjacent.checkpoint_steps(adjacent.run_root(path)),
        vocab_size=classes,
        vocab_source=config,
    )
