"""The pre-commit hooks of .pre-commit-hooks.yaml, run as a user tries them: pre-commit's
`try-repo` with this checkout on a repository made here (git init, a diverging
trainer_state.json, a dataset with a broken row, a healthy copy of each). pre-commit
installs the hook's environment itself (a virtualenv with this package, dependencies
from the package index), so this also proves the package installs as a hook.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DIVERGING = REPO / "fixtures" / "hf_runs" / "lr_hot_diverges" / "trainer_state.json"
HEALTHY = REPO / "fixtures" / "hf_runs" / "healthy" / "trainer_state.json"
TIMEOUT = 900  # generous: the first run builds the hook's environment over the network


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=120)


def rows(n: int, broken_at: int | None = None) -> str:
    out = []
    for i in range(1, n + 1):
        row = json.dumps({"messages": [{"role": "user", "content": f"What is {i} + {i}?"},
                                       {"role": "assistant", "content": str(2 * i)}]})
        out.append(row[:40] if i == broken_at else row)
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def try_repo(tmp_path_factory):
    pytest.importorskip("pre_commit", reason="pre-commit is in the test extra")
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    home = tmp_path_factory.mktemp("pre-commit-home")
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}

    def run(project: Path, *hook: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pre_commit", "try-repo", str(REPO), *hook, "--all-files",
                               "--color", "never", "--verbose"], cwd=project, env=env, capture_output=True,
                              text=True, timeout=TIMEOUT)
    return run


def project(root: Path, files: dict[str, str | Path]) -> Path:
    root.mkdir()
    git(root, "init", "--quiet")
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copy(content, path)
        else:
            path.write_text(content, encoding="utf-8")
    git(root, "add", ".")
    return root


def test_the_hooks_stop_a_commit_with_a_diverging_log_and_a_broken_dataset(try_repo, tmp_path):
    repo = project(tmp_path / "bad", {"output/trainer_state.json": DIVERGING, "data/train.jsonl": rows(8, broken_at=5),
                                      "notes.txt": "not judged\n"})
    proc = try_repo(repo)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    lines = out.splitlines()
    assert any(x.startswith("trainproof doctor (training logs)") and x.endswith("Failed") for x in lines), out
    assert any(x.startswith("trainproof preflight (datasets)") and x.endswith("Failed") for x in lines), out
    assert "output/trainer_state.json:292:5: FAIL TP-DIVERGE" in out
    assert "data/train.jsonl:5:" in out and "TP-PRE-MALFORMED-JSONL" in out
    assert "notes.txt" not in out and "Traceback" not in out


def test_the_hooks_pass_a_healthy_log_and_a_clean_dataset(try_repo, tmp_path):
    repo = project(tmp_path / "good", {"output/trainer_state.json": HEALTHY, "data/train.jsonl": rows(8)})
    proc = try_repo(repo)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    lines = out.splitlines()
    assert any(x.startswith("trainproof doctor (training logs)") and x.endswith("Passed") for x in lines), out
    assert any(x.startswith("trainproof preflight (datasets)") and x.endswith("Passed") for x in lines), out


def test_every_hook_entry_ends_with_a_double_dash_so_file_names_are_never_options():
    yaml = pytest.importorskip("yaml", reason="PyYAML comes with pre-commit, in the test extra")
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert {h["id"]: h["entry"] for h in hooks} == {"trainproof-doctor": "trainproof-lsp doctor --",
                                                     "trainproof-preflight": "trainproof-lsp preflight --"}
    assert not [h for h in hooks if h.get("args")]  # args would land after the `--`, read as paths


def test_a_file_named_like_an_option_is_judged_as_a_path_and_writes_nothing(try_repo, tmp_path):
    victim = DIVERGING.read_bytes()
    repo = project(tmp_path / "hostile", {"train_metrics.csv": "step,loss\n1,2.0\n2,1.9\n",
                                          "--html=train_metrics.csv": "step,loss\n1,2.0\n",
                                          "--sarif=output/trainer_state.json": "step,loss\n1,2.0\n",
                                          "output/trainer_state.json": DIVERGING})
    before = {str(p.relative_to(repo)): p.read_bytes() for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts}
    proc = try_repo(repo, "trainproof-doctor")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out  # the diverging log still FAILs
    after = {str(p.relative_to(repo)): p.read_bytes() for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts}
    assert after == before and (repo / "output" / "trainer_state.json").read_bytes() == victim
    lines = out.splitlines()
    assert "--html=train_metrics.csv: NOT-CHECKED too short to judge the loss curve: 1 finite loss point; the " \
           "trend checks need at least 7, up to 10 as the loss's own noise requires (TP-DEAD-RUN, TP-DIVERGE not checked)" in lines, out
    assert any(x.startswith("--sarif=output/trainer_state.json:1:1: NOT-CHECKED invalid JSON") for x in lines), out
    assert "output/trainer_state.json:292:5: FAIL TP-DIVERGE" in out
