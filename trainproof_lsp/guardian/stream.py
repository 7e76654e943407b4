"""The verdict stream: one JSON object per line, one line per event of a live run.

The training callbacks write it to `trainproof-verdict.jsonl` beside the run
(`args.output_dir` for HF, `trainer.log_dir` for Lightning); `trainproof-lsp watch --json`
prints the same objects on stdout. docs/guardian.md is the reference; in short:

    {"event": "verdict", "schema_version": 1, "source": "hf-trainer", "path": "out",
     "step": 40, "records": 41, "verdict": "FAIL", "previous": "PASS", "reason": "",
     "findings": [{"id": "TP-DIVERGE", "level": "FAIL", "message": "...",
                   "evidence": {...}, "location": {...}, "related": [...], "limits": {...}}]}
    {"event": "stop", "schema_version": 1, "source": "hf-trainer", "path": "out",
     "step": 50, "verdict": "FAIL", "rule_ids": ["TP-DIVERGE"], "reason": "..."}
    {"event": "stall", ...}  {"event": "resume", ...}   (watch only)

A `verdict` line is written when the verdict or the set of FAIL/WARN rule ids changes
(the numbers in the messages move with every log; they alone are not a change). The
last `verdict` line is the run's current verdict. Keys are sorted and nothing depends on
the clock, so the same run gives the same bytes — except `wall_time` (seconds since the
epoch), present only when asked for.

Readers (the language server) should use `read_stream`, which tolerates a partial last
line (the writer may be mid-write) and lines it does not understand.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..core.model import Finding, Report
from ..output.render import finding_json

STREAM_NAME = "trainproof-verdict.jsonl"
# Adding keys is allowed within a version; renaming or removing one bumps it.
STREAM_SCHEMA_VERSION = 1


def _findings(findings: Iterable[Finding]) -> list[dict[str, Any]]:
    return [finding_json(f) for f in findings]


def verdict_event(report: Report, *, source: str, path: str, step: int | None, records: int,
                  previous: str | None) -> dict[str, Any]:
    return {
        "event": "verdict",
        "schema_version": STREAM_SCHEMA_VERSION,
        "source": source,
        "path": path,
        "step": step,
        "records": records,
        "verdict": report.verdict.value,
        "previous": previous,
        "reason": report.reason,
        "findings": _findings(report.findings),
    }


def stop_event(*, source: str, path: str, step: int | None, rule_ids: Iterable[str],
               reason: str) -> dict[str, Any]:
    return {"event": "stop", "schema_version": STREAM_SCHEMA_VERSION, "source": source, "path": path,
            "step": step, "verdict": "FAIL", "rule_ids": sorted(set(rule_ids)), "reason": reason}


def stall_event(*, path: str, step: int | None, seconds: float, stalled: bool) -> dict[str, Any]:
    """A log that stopped growing (`stall`) or grew again (`resume`)."""
    return {"event": "stall" if stalled else "resume", "schema_version": STREAM_SCHEMA_VERSION,
            "source": "watch", "path": path, "step": step, "seconds": round(seconds, 3)}


def encode(event: dict[str, Any], *, wall_time: bool = False) -> str:
    """One line, keys sorted, valid JSON (non-finite numbers are strings already)."""
    if wall_time:
        event = {**event, "wall_time": round(time.time(), 3)}
    return json.dumps(event, sort_keys=True, allow_nan=False, ensure_ascii=False) + "\n"


class StreamWriter:
    """Appends events to a stream file, one complete line per write (a reader never sees
    half a line unless it reads during that one write)."""

    def __init__(self, path: Path, *, wall_time: bool = False) -> None:
        self.path = path
        self.wall_time = wall_time

    def start(self) -> None:
        """A new run: an empty stream (a resumed run in the same folder starts over)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("", encoding="utf-8")

    def write(self, event: dict[str, Any]) -> None:
        line = encode(event, wall_time=self.wall_time).encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


def read_stream(path: Path | str) -> list[dict[str, Any]]:
    """The events of a stream file, in order. A partial last line, a line that is not a
    JSON object, or one from a newer major schema is skipped; a missing file is []."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return []
    events = []
    for line in data.split(b"\n")[:-1]:  # the part after the last newline is incomplete
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("schema_version") == STREAM_SCHEMA_VERSION:
            events.append(obj)
    return events


def current_verdict(events: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The last `verdict` event (the run's current verdict), or None."""
    last = None
    for e in events:
        if e.get("event") == "verdict":
            last = e
    return last
