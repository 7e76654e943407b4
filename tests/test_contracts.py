"""Architecture contracts: the core never imports editor or ML frameworks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CORE_MODULES = [
    "trainproof_lsp.core.model", "trainproof_lsp.core.positions", "trainproof_lsp.readers.detect",
    "trainproof_lsp.readers.trainer_state", "trainproof_lsp.readers.metrics",
    "trainproof_lsp.rules", "trainproof_lsp.judge.engine", "trainproof_lsp.output.render",
    "trainproof_lsp.core.config", "trainproof_lsp.cli", "trainproof_lsp.judge.preflight",
    "trainproof_lsp.judge.compare", "trainproof_lsp.judge.settings", "trainproof_lsp.output.html",
    "trainproof_lsp.api",
]
FORBIDDEN = ("pygls", "lsprotocol", "torch", "tensorflow", "transformers", "tensorboard")


def test_core_imports_no_editor_or_ml_framework():
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in CORE_MODULES)
        + "from trainproof_lsp.cli import main\n"
        + "main(['doctor', 'fixtures/hf_runs/healthy', '--json'])\n"
        + f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        + "print('LOADED', bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip().splitlines()[-1] == "LOADED []"


def test_rules_never_open_files():
    # Rules are pure: no open(), Path reads or os calls in rules/*.py.
    for path in (ROOT / "trainproof_lsp" / "rules").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        for needle in ("open(", "read_text", "read_bytes", "import os", "pathlib"):
            assert needle not in text, f"{path.name} uses {needle}"
