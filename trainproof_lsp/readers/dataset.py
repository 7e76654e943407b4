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

This module is the reader's public face; the work is done in

    dataset_records.py     formats, facts (LineProblem, LineFacts, DatasetScan) and the
                           reference checks of one record: every problem is decided there
    dataset_fast.py        the chunk path: msgspec decodes 64 KiB of lines at a time into
                           typed Structs; rows the quick checks clear are hashed in C-level
                           passes, every other row (and each line that stops the decoder)
                           goes through the reference `scan_line`
    dataset_sources.py     file and buffer sources in whole-line chunks, the row cap,
                           `iter_records`
    dataset_duplicates.py  exact and near duplicates from the hash arrays
    dataset_scan.py        the whole-file scan (layout, chunks, duplicates)
    dataset_session.py     the incremental form: `DatasetFeed` keeps a scan up to date as
                           line ranges of a buffer change (the editor uses it)

The two paths must agree on every fact (tests/test_preflight_scan.py checks they do).
Hashes live in two `array('Q')` indexed by line (0 = no record on that line): 16 bytes
a line, and no Python object per row is kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO, Iterator

from . import dataset_scan
from .dataset_duplicates import (
    _duplicates_dict, _duplicates_numpy, _duplicates_sorted, duplicates_from_groups, find_duplicates)
from .dataset_fast import Scanner
from .dataset_records import (
    ALPACA, ASSISTANT_FIRST, BAD_MESSAGES, BOM, CHAT, CHAT_ROLES, CHOSEN_EQUALS_REJECTED, CONTENT_PARTS,
    CONVERSATIONAL, EMPTY_ASSISTANT, EMPTY_TEXT, EMPTY_TURN, EXTRA_KEYS, FORMAT_KEYS, FORMATS,
    LAST_NOT_ASSISTANT, MALFORMED, MISSING_KEYS, NO_ASSISTANT, NON_STRING, NOT_ALTERNATING, PRECEDENCE,
    PREFERENCE, PROMPT_COMPLETION, REQUIRED_KEYS, SHAREGPT, SHAREGPT_ROLES, SYSTEM_NOT_FIRST, TEXT,
    MAPPABLE_FIELDS, UNKNOWN_ROLE, UNREADABLE_ROW, VOCABULARY, DatasetScan, Duplicate, FieldMap, LineFacts,
    LineProblem, Number, with_fields,
    check_record, classify, counts_as_record, is_filled_text, role_issues, scan_line, scan_lines,
    sorted_problems, text_hashes, value_hashes)
from .dataset_session import DatasetFeed
from .dataset_sources import CHUNK_BYTES, DEFAULT_MAX_ROW, OverCap, iter_records
from .dataset_sources import file_chunks as _file_chunks
from .dataset_sources import memory_chunks as _memory_chunks_at
from .dataset_sources import newline_counter as _newline_counter

__all__ = [
    "ALPACA", "ASSISTANT_FIRST", "BAD_MESSAGES", "BOM", "CHAT", "CHAT_ROLES", "CHOSEN_EQUALS_REJECTED",
    "CHUNK_BYTES", "CONTENT_PARTS", "CONVERSATIONAL", "DEFAULT_MAX_ROW", "EMPTY_ASSISTANT", "EMPTY_TEXT",
    "EMPTY_TURN", "EXTRA_KEYS", "FORMAT_KEYS", "FORMATS", "LAST_NOT_ASSISTANT", "MALFORMED", "MISSING_KEYS",
    "NO_ASSISTANT", "NON_STRING", "NOT_ALTERNATING", "PRECEDENCE", "PREFERENCE", "PROMPT_COMPLETION",
    "REQUIRED_KEYS", "SHAREGPT", "SHAREGPT_ROLES", "SYSTEM_NOT_FIRST", "TEXT", "UNKNOWN_ROLE",
    "UNREADABLE_ROW", "VOCABULARY", "DatasetFeed", "DatasetScan", "Duplicate", "LineFacts", "LineProblem",
    "Number", "check_record", "classify", "counts_as_record", "duplicates_from_groups", "find_duplicates",
    "is_filled_text", "iter_records", "role_issues", "scan_dataset", "scan_line", "scan_lines",
    "sorted_problems", "text_hashes", "value_hashes",
]

# The names the reader's own tests reach for (monkeypatching the scanner, feeding the
# chunkers directly, comparing the duplicate searches).
_Scanner = Scanner
_OverCap = OverCap


def scan_dataset(path: Path | str, data: bytes | None = None, *, max_row_bytes: int = 0, start: int = 0,
                 end: int | None = None, duplicates: bool = True, fields: FieldMap | None = None) -> DatasetScan:
    """Stream a JSONL dataset (or read a JSON array of records) into a DatasetScan.
    `data`: the file's bytes, when they are in memory already (an editor buffer, or a
    byte range fetched from remote storage). `start`/`end`: a byte range of the file, cut
    at line boundaries, streamed and scanned as if it were the whole file. A row longer
    than `max_row_bytes` (default: caps.py max_row_mb) is not read. Without `duplicates`
    the duplicate search is left to the caller (who merges ranges' hashes first).
    `fields` maps the user's keys onto the training fields (`--field text=content`).

    Raises ReadError (one line) when the file cannot be read at all."""
    return dataset_scan.scan_dataset(path, data, max_row_bytes=max_row_bytes, block_bytes=CHUNK_BYTES,
                                     start=start, end=end, duplicates=duplicates, fields=fields)


def _chunks(fh: BinaryIO, first: bytes, max_row: int = 0) -> Iterator[bytes]:
    return _file_chunks(fh, first, max_row, block_bytes=CHUNK_BYTES)


def _memory_chunks(data: bytes, start: int, max_row: int = 0) -> Iterator[bytes]:
    return _memory_chunks_at(data, start, max_row, block_bytes=CHUNK_BYTES)
