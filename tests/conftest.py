"""Helpers shared by the test modules: write small logs, judge them, pick findings.

Logs are written as real files so every position a finding carries is a real line of a
real file; `line_with` finds that line from the text itself, never from the reader.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable

import pytest

from trainproof_lsp.core.config import Config
from trainproof_lsp.judge.engine import judge_file
from trainproof_lsp.core.model import Finding, Report

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
HF_RUNS = FIXTURES / "hf_runs"
LOGS = FIXTURES / "logs"


def jsonl_text(rows: Iterable[dict[str, Any]]) -> str:
    """One JSON object per line; NaN/Infinity written bare, as Python's json does."""
    return "".join(json.dumps(r) + "\n" for r in rows)


def write_jsonl(folder: Path, rows: Iterable[dict[str, Any]], name: str = "metrics.jsonl") -> Path:
    path = folder / name
    path.write_text(jsonl_text(rows), encoding="utf-8")
    return path


def judge(path: Path, config: Config | None = None) -> Report:
    return judge_file(path, config or Config())


def judge_rows(folder: Path, rows: Iterable[dict[str, Any]], config: Config | None = None,
               name: str = "metrics.jsonl") -> tuple[Path, Report]:
    path = write_jsonl(folder, rows, name)
    return path, judge(path, config)


def ids(report: Report) -> list[str]:
    return [f.id for f in report.findings]


def only(report: Report, rule_id: str) -> Finding:
    """The single finding of `rule_id` (fails if there are none or several)."""
    found = [f for f in report.findings if f.id == rule_id]
    assert len(found) == 1, f"expected one {rule_id}, got {[(f.id, f.message) for f in report.findings]}"
    return found[0]


def none_of(report: Report, rule_id: str) -> None:
    found = [f.message for f in report.findings if f.id == rule_id]
    assert not found, f"{rule_id} fired: {found}"


def ran(report: Report, rule_id: str) -> bool:
    return any(c.group == rule_id and c.ran for c in report.checks)


def skip_reason(report: Report, rule_id: str) -> str:
    """The reason a check did not run; fails if it ran or is not listed."""
    reasons = [c.reason for c in report.checks if c.group == rule_id and not c.ran]
    assert reasons, f"{rule_id} was not skipped: {report.checks}"
    return reasons[0]


def line_with(path: Path, needle: str) -> int:
    """0-based number of the one line of `path` containing `needle`."""
    hits = [i for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()) if needle in line]
    assert len(hits) == 1, f"{needle!r} is on lines {hits} of {path}"
    return hits[0]


def start_line(finding_or_related: Any) -> int:
    span = finding_or_related.location.span
    assert span is not None, f"no span: {finding_or_related}"
    return span.start_line


def falling(n: int, start: float = 3.0, end: float = 1.0) -> list[float]:
    """A smooth, clearly falling loss curve with a little deterministic wobble."""
    out = []
    for i in range(n):
        base = end + (start - end) * math.exp(-4.0 * i / max(1, n - 1))
        out.append(round(base * (1.0 + 0.01 * ((i * 7) % 5 - 2)), 6))
    return out


@pytest.fixture
def healthy_rows() -> list[dict[str, Any]]:
    """30 logged steps of a run that learns: loss falls 3 -> ~1, lr decays, grads ~1."""
    return [
        {"step": 10 * (i + 1), "loss": v, "learning_rate": 1e-3 * (1 - i / 40),
         "grad_norm": round(1.0 + 0.05 * ((i * 3) % 4), 4)}
        for i, v in enumerate(falling(30))
    ]


@pytest.fixture()
def cwd(tmp_path: Path) -> Path:
    """An empty working folder for a command run in a child: nothing of the test's files
    is importable or found relative to it."""
    empty = tmp_path / "cwd"
    empty.mkdir()
    return empty


@pytest.fixture(scope="module")
def cluster():
    """A two-worker Dask cluster on this machine, one per test module (the dask extra)."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None,
                                  scheduler_port=0) as c:
        yield c


def run_cli(*argv: str) -> tuple[int, str, str]:
    """The command line run in this process: (exit code, stdout, stderr)."""
    import io
    import sys

    from trainproof_lsp.cli import main

    out, err = io.StringIO(), io.StringIO()
    old = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        code = main(list(argv))
    finally:
        sys.stdout, sys.stderr = old
    return code, out.getvalue(), err.getvalue()
