"""`make real-clients` and `make vsix` (which .ci/run calls before `make test`) need only
the lean .venv of `make demo`, never the test tools and peers of `make setup` (torch,
lightning, transformers: over a gigabyte). `make -n -B` prints every recipe the targets
would run, prerequisites included, without running any."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("target", ["real-clients", "vsix"])
def test_the_target_builds_on_the_lean_venv_only(target: str):
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    proc = subprocess.run(["make", "-n", "-B", target], cwd=ROOT, capture_output=True, text=True, check=True)
    recipes = proc.stdout
    assert "-m pip install --quiet -e ." in recipes  # the lean install, when it is missing
    assert "[test" not in recipes and "peers" not in recipes, recipes
    assert "touch .venv/.installed\n" not in recipes, recipes
