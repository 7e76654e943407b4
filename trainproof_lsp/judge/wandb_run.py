"""A W&B offline run file (readers/wandb_offline.py) read for judging: within the caps, its
history as the run, and where the record log stopped before its end said as a NOT-CHECKED
finding beside the run's own (what was cut or damaged could not be judged; the records
before it are)."""

from __future__ import annotations

from pathlib import Path

from ..core.caps import MIB
from ..core.config import Config
from ..core.model import Finding, Level, Location, ReadError, Report, Run
from ..readers.common import read_regular
from ..readers.trainer_state import check_caps
from ..readers.wandb_offline import FORMAT, WandbProblem, scan_wandb_offline
from ..rules import NOT_CHECKED
from .base import not_checked


def stopped_finding(path: str, problem: WandbProblem, history: int) -> Finding:
    """TP-NOT-CHECKED: the record log stopped before the file's end."""
    what = "cut short" if problem.kind == "truncated" else "damaged"
    return Finding(id=NOT_CHECKED.id, level=Level.NOT_CHECKED,
                   message=f"W&B run file {what}: {problem.message}; the {history} history record(s) before it "
                           "were judged, nothing after it",
                   evidence={"kind": problem.kind, "byte_offset": problem.offset, "record": problem.record,
                             "history_records": history},
                   location=Location(path=path, byte_offset=problem.offset, record=problem.record))


def read_wandb_run(path: Path, config: Config, data: bytes | None = None) -> tuple[Run, tuple[Finding, ...]] | Report:
    """(the run, the reader's NOT-CHECKED finding if it stopped early), or the NOT-CHECKED
    report of a file that cannot be read at all."""
    name = str(path)
    caps = config.caps
    try:
        if data is None:
            check_caps(path, None, caps)  # the size, before a byte is read
            data = read_regular(path, caps.max_log_mb * MIB)
        check_caps(path, data, caps)
        scan = scan_wandb_offline(path, data, columns=config.columns or None, max_rows=caps.max_log_entries)
    except ReadError as e:
        return not_checked(name, "metrics", FORMAT, str(e), e)
    except OSError as e:
        return not_checked(name, "metrics", FORMAT, f"{name}: cannot read ({e.strerror or e})")
    except (ValueError, RecursionError, MemoryError) as e:  # never a traceback, never a FAIL
        return not_checked(name, "metrics", FORMAT, f"{name}: unreadable ({type(e).__name__}: {e})")
    extra = () if scan.problem is None else (stopped_finding(name, scan.problem, scan.history),)
    return scan.run, extra


__all__ = ["FORMAT", "read_wandb_run", "stopped_finding"]
