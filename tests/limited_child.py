"""Run the command line in a child process the way a hostile file would meet it: under a
memory limit (RLIMIT_AS), a CPU-time limit (RLIMIT_CPU: the answer-within-10-s budget, in
CPU seconds so a busy machine cannot make it flaky) and a wall-clock timeout, from a
working folder that holds nothing importable."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

from conftest import REPO

GIB = 1 << 30
CPU_SECONDS = 10  # the budget: every hostile input answers within 10 s
# Only a net for a child that hangs without using CPU; CPU_SECONDS is the real bound. Beside
# CPU burners and other suites (a load of 12 on 2 cores) a 7-CPU-second walk took over 90 s
# of wall time, so the net is wide.
WALL_TIMEOUT = 600


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (GIB, GIB))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS + 1))


def run_limited(*args: str | Path, cwd: Path, json_out: bool = True) -> tuple[int, dict | str, str]:
    """(exit code, parsed --json output or raw stdout, stderr). Asserts the child was not
    killed by a limit and printed no traceback."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "trainproof_lsp", *map(str, args)] + (["--json"] if json_out else [])
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=WALL_TIMEOUT,
                          preexec_fn=_limits, stdin=subprocess.DEVNULL)
    assert proc.returncode >= 0, f"killed by signal {-proc.returncode} (a limit): {proc.stderr[-500:]}"
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr[-2000:]
    assert "MemoryError" not in proc.stdout + proc.stderr
    out: dict | str = json.loads(proc.stdout) if json_out else proc.stdout
    return proc.returncode, out, proc.stderr


def findings(data: dict, rule_id: str | None = None) -> list[dict]:
    return [f for r in data["reports"] for f in r["findings"] if rule_id is None or f["id"] == rule_id]
