"""Damage found while reading TensorBoard event files. Emitted by the engine from what the
reader reports (a rule never opens a file); documented here like every rule."""

from __future__ import annotations

from ..core.model import Level
from .base import METRICS, Rule

TRUNCATED_DOC = """An event file ends in the middle of a record.

What it flags: the last record of a TensorBoard event file is cut short; the file was
read up to the cut, and the finding gives the byte offset where the cut record starts.
Why it matters: usually the run was killed (or is still writing); the points before the
cut are judged, the cut record is not.
What it does not mean: corruption — a writer that is still running often leaves a
partial record at the end.
"""

CORRUPT_DOC = """An event file record fails its CRC check or cannot be decoded.

What it flags: a record whose length or data checksum (CRC32C) does not match, or whose
contents are not a valid Event; the finding gives the record's byte offset. Reading stops
at a bad checksum (as TensorBoard does), so later points are not judged.
Why it matters: the file was damaged on disk or in transfer; the curve you see stops
there, and so does the judgement.
What it does not mean: anything about the training itself.
"""

TRUNCATED_RULE = Rule(id="TP-TB-TRUNCATED", name="event-file-truncated", level=Level.INFO,
                      doc=TRUNCATED_DOC, family=METRICS)
CORRUPT_RULE = Rule(id="TP-TB-CORRUPT", name="event-file-corrupt", level=Level.WARN,
                    doc=CORRUPT_DOC, family=METRICS)
