"""The fine-tuning stacks' own log writers, run to make fixtures (fixtures/writers/stack_logs.py).

`make setup` installs them --no-deps into .venv/writers (the Makefile's `writers` target):
they pin other transformers/trl/peft versions than the suite's, so each runs in a
subprocess with that folder on PYTHONPATH and nothing of theirs is imported here.
Without them a test is skipped with the reason; TP_WRITERS=required (as .ci/run sets)
makes that a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

WRITERS_DIR = Path(sys.prefix) / "writers"
SCRIPT = Path(__file__).resolve().parents[1] / "fixtures" / "writers" / "stack_logs.py"
REQUIRED = os.environ.get("TP_WRITERS") == "required"
MISSING = 3  # stack_logs.py's exit code when a writer cannot be imported


def _missing(why: str) -> None:
    if REQUIRED:
        pytest.fail(f"TP_WRITERS=required but {why}")
    pytest.skip(f"{why} (`make writers` installs the stacks' writers; TP_WRITERS=required makes this a failure)")


def write_with(writer: str, out: Path, runs: dict[str, dict[str, Any]]) -> Path:
    """Each run of `runs` written by `writer` into out/<run name>/; returns `out`."""
    if not (WRITERS_DIR / writer).is_dir():  # each writer's package is named as the writer
        _missing(f"{writer} is not installed in {WRITERS_DIR}")
    path = os.pathsep.join([str(WRITERS_DIR)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    # A cache of its own beside `out`: a stack (or torch under it) takes locks in the user's
    # cache, and one a killed process left there must not make a later run wait on it.
    cache = out.parent / f"{out.name}-cache"
    env = {**os.environ, "PYTHONPATH": path, "DISABLE_VERSION_CHECK": "1", "OMP_NUM_THREADS": "1",
           "XDG_CACHE_HOME": str(cache), "HF_HOME": str(cache / "huggingface"),
           "TORCH_EXTENSIONS_DIR": str(cache / "torch_extensions")}
    # A safety net only: the four writers take seconds; the import of a stack is the most of it.
    proc = subprocess.run([sys.executable, str(SCRIPT), writer, str(out)], input=json.dumps(runs),
                          capture_output=True, text=True, env=env, timeout=900)
    if proc.returncode == MISSING:
        _missing(proc.stderr.strip().splitlines()[-1])
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out
