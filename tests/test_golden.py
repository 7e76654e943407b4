"""Golden JSON snapshots: `doctor --json` over each committed HF Trainer run must stay
byte-identical. After an intended change, regenerate with

    python tests/test_golden.py --update

and review the diff like code.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden"
RUNS = sorted(p.name for p in (ROOT / "fixtures" / "hf_runs").iterdir() if p.is_dir())


def doctor_json(name: str) -> str:
    import os

    from trainproof_lsp.judge import engine
    from trainproof_lsp.output import render
    from trainproof_lsp.core.config import Config

    cwd = os.getcwd()
    os.chdir(ROOT)  # paths in the snapshot are relative to the repository root
    try:
        return render.to_json(engine.doctor([Path("fixtures/hf_runs") / name], Config()))
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize("name", RUNS)
def test_doctor_json_matches_golden_snapshot(name):
    expected = (GOLDEN / f"hf_runs_{name}.json").read_text(encoding="utf-8")
    assert doctor_json(name) == expected


def test_every_fixture_run_has_a_snapshot():
    assert sorted(p.stem.removeprefix("hf_runs_") for p in GOLDEN.glob("hf_runs_*.json")) == RUNS


if __name__ == "__main__" and "--update" in sys.argv:
    sys.path.insert(0, str(ROOT))
    for name in RUNS:
        (GOLDEN / f"hf_runs_{name}.json").write_text(doctor_json(name), encoding="utf-8")
        print("wrote", GOLDEN / f"hf_runs_{name}.json")
