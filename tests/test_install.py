"""The install paths README.md names, done as a user does them: build the sdist and the
wheel (`python -m build`), install the wheel into a fresh virtual environment with pip
(its dependencies from the package index, through pip's own cache), then start
`trainproof-lsp serve` and answer `initialize`, and run `doctor` on a shipped fixture.
The `[lsp]` extra of older docs still resolves, and a git URL installs the same package.

README.md's "Install" section is copied from the commands here (INSTALL_COMMANDS); a
test keeps the two in step.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "fixtures" / "hf_runs" / "lr_hot_diverges"
# Generous bounds for a build or an install over the network: reached only when
# something hangs, and then the test fails instead of hanging the suite.
BUILD_TIMEOUT = 900

# The commands README.md shows (from a checkout), in the order this test runs them.
INSTALL_COMMANDS = (
    "python -m pip install build",
    "python -m build --outdir dist .",
    "python -m venv .venv-tp",
    ".venv-tp/bin/pip install dist/trainproof_lsp-0.1.0-py3-none-any.whl",
    ".venv-tp/bin/trainproof-lsp doctor fixtures/hf_runs/lr_hot_diverges",
)


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT, **kw)
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> dict[str, Path]:
    """The sdist and the wheel, built as `python -m build` builds them: the sdist from
    the checkout, the wheel from the sdist (so the sdist is known to be complete)."""
    pytest.importorskip("build", reason="the `build` package is in the test extra")
    out = tmp_path_factory.mktemp("dist")
    src = tmp_path_factory.mktemp("src") / "trainproof-lsp"
    # A copy of the tracked files, so the build leaves nothing in the checkout.
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=False)
    if files.returncode != 0:
        pytest.skip("not a git checkout: cannot list the tracked files to build from")
    for name in files.stdout.decode().split("\0"):
        if name and (REPO / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, src / name)
    run([sys.executable, "-m", "build", "--outdir", str(out), str(src)])
    got = {p.suffix if p.suffix == ".whl" else ".tar.gz": p for p in out.iterdir()}
    assert set(got) == {".whl", ".tar.gz"}, sorted(out.iterdir())
    assert got[".whl"].name == "trainproof_lsp-0.1.0-py3-none-any.whl"
    return got


@pytest.fixture(scope="module")
def installed(dists, tmp_path_factory) -> Path:
    """A fresh virtual environment with the wheel installed by pip: only the base
    dependencies, exactly as `pip install trainproof-lsp` would."""
    env_dir = tmp_path_factory.mktemp("venv") / ".venv-tp"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    run([str(env_dir / "bin" / "python"), "-m", "pip", "install", "--quiet", str(dists[".whl"])])
    return env_dir


def _frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def _read_message(stream) -> dict:
    length = None
    while True:
        header = stream.readline()
        assert header, "the server closed its output"
        if header in (b"\r\n", b"\n"):
            break
        name, _, value = header.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    assert length is not None
    return json.loads(stream.read(length))


def test_the_wheel_in_a_fresh_venv_serves_initialize(installed, tmp_path):
    proc = subprocess.Popen([str(installed / "bin" / "trainproof-lsp"), "serve"], cwd=tmp_path,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdin.write(_frame({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                 "params": {"processId": os.getpid(), "rootUri": tmp_path.as_uri(),
                                            "capabilities": {}}}))
        proc.stdin.flush()
        while True:  # the server may log or notify before it answers
            reply = _read_message(proc.stdout)
            if reply.get("id") == 1:
                break
        assert reply["result"]["serverInfo"]["name"] == "trainproof-lsp", reply
        assert "textDocumentSync" in reply["result"]["capabilities"], reply
        for message in ({"jsonrpc": "2.0", "method": "initialized", "params": {}},
                        {"jsonrpc": "2.0", "id": 2, "method": "shutdown"}):
            proc.stdin.write(_frame(message))
        proc.stdin.flush()
        while _read_message(proc.stdout).get("id") != 2:
            pass
        proc.stdin.write(_frame({"jsonrpc": "2.0", "method": "exit"}))
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert b"Traceback" not in proc.stderr.read()


def test_the_wheel_in_a_fresh_venv_runs_doctor_on_a_fixture(installed, tmp_path):
    run_dir = tmp_path / "lr_hot_diverges"
    shutil.copytree(FIXTURE, run_dir)
    proc = subprocess.run([str(installed / "bin" / "trainproof-lsp"), "doctor", str(run_dir), "--json"],
                          capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False)
    assert proc.returncode == 1, proc.stderr
    (report,) = json.loads(proc.stdout)["reports"]
    assert report["verdict"] == "FAIL"
    diverge = [f for f in report["findings"] if f["id"] == "TP-DIVERGE"]
    assert [f["location"]["range"]["start"]["line"] + 1 for f in diverge] == [292]
    # The package ran from the venv, not from the checkout.
    where = subprocess.run([str(installed / "bin" / "python"), "-c",
                            "import trainproof_lsp, pathlib; print(pathlib.Path(trainproof_lsp.__file__).parent)"],
                           capture_output=True, text=True, check=True, cwd=tmp_path).stdout.strip()
    assert Path(where).is_relative_to(installed), where


def test_the_lsp_extra_of_older_docs_and_a_git_url_still_install(installed, dists, tmp_path):
    pip = [str(installed / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall"]
    run([*pip, f"trainproof-lsp[lsp] @ {dists['.whl'].as_uri()}"])
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("git URL install: not a git checkout here")
    # pip's git URL form, with the checkout as the repository (a hosted URL works the same)
    clone = tmp_path / "clone"
    run(["git", "clone", "--quiet", str(REPO), str(clone)])
    run([*pip, f"git+{clone.as_uri()}"])
    proc = run([str(installed / "bin" / "trainproof-lsp"), "--version"])
    assert proc.stdout.strip() == "trainproof-lsp 0.1.0"


def test_readme_install_section_shows_the_commands_this_test_runs():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Install"):]
    section = section[:section.index("\n## ", 1)]
    assert "not yet on PyPI" in section
    for command in INSTALL_COMMANDS:
        assert command in section, command


HEALTHY_RUN = REPO / "fixtures" / "hf_runs" / "healthy"
COUNTS = re.compile(r"\d+ check\(s\) ran, \d+ skipped")
CHATML = REPO / "fixtures" / "tokenizers" / "healthy_chatml"


def _hf_output(folder: Path, tokenizer: Path = CHATML) -> Path:
    """An HF Trainer output folder as `save_model` leaves it: the run's trainer_state.json
    and checkpoints beside the tokenizer files with their chat template."""
    shutil.copytree(HEALTHY_RUN, folder)
    for f in tokenizer.iterdir():
        shutil.copy(f, folder / f.name)
    return folder


def test_the_plain_wheel_judges_a_chat_template_and_passes_a_healthy_hf_output_folder(installed, tmp_path):
    # No extras: jinja2 came with the base dependencies, the template was rendered.
    import_jinja = subprocess.run([str(installed / "bin" / "python"), "-c", "import jinja2"], check=False,
                                  capture_output=True, text=True, cwd=tmp_path)
    assert import_jinja.returncode == 0, import_jinja.stderr
    out = _hf_output(tmp_path / "out")
    proc = subprocess.run([str(installed / "bin" / "trainproof-lsp"), "doctor", "out"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Exact lines; the numbers of checks (which grow with the registry) read as N and M.
    assert [COUNTS.sub("N check(s) ran, M skipped", x) for x in proc.stdout.splitlines()] == [
        "== out (tokenizer, 4 files): PASS — 0 finding(s); N check(s) ran, M skipped",
        # the folder's files judged against each other (no weights here: the rest skipped, -v says why)
        "== out (bundle: config.json, special_tokens_map.json, tokenizer.json, tokenizer_config.json, "
        "trainer_state.json): PASS — 0 finding(s); N check(s) ran, M skipped",
        "   across files: TP-BUNDLE-STOP-TOKEN, TP-BUNDLE-SPECIAL-ID-MISMATCH, TP-BUNDLE-VOCAB-BEYOND-EMBEDDINGS; "
        "8 skipped (-v says why)",
        "== out/checkpoint-100/training_args.bin: PASS — 0 finding(s); N check(s) ran, M skipped",
        "== out/trainer_state.json (3 sources): PASS — 0 finding(s); N check(s) ran, M skipped",
        "4 report(s): 4 PASS; 1 passed over. Worst: PASS",
        "N check(s) ran, M skipped (-v lists them and why each was skipped)",
    ]
    data = json.loads(subprocess.run([str(installed / "bin" / "trainproof-lsp"), "doctor", str(out), "--json"],
                                     capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False).stdout)
    (tok,) = [r for r in data["reports"] if r["artefact"]["kind"] == "tokenizer"]
    assert "TP-TOK-TEMPLATE-NO-EOS" in tok["checks"]["ran"]


def test_the_plain_wheel_prints_every_not_checked_it_counts_with_its_reason(installed, tmp_path):
    out = _hf_output(tmp_path / "out")
    config = json.loads((out / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["chat_template"] = "{{ raise_exception('only system prompts are supported') }}"
    (out / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    (tmp_path / "train.jsonl").write_text(json.dumps({"messages": [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}) + "\n", encoding="utf-8")
    exe = str(installed / "bin" / "trainproof-lsp")
    proc = subprocess.run([exe, "doctor", "out"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=BUILD_TIMEOUT, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "out/tokenizer_config.json:1:1: NOT-CHECKED TP-NOT-CHECKED TP-TOK-TEMPLATE-NO-EOS not checked: the chat " \
           "template could not render a user/assistant exchange: only system prompts are supported" \
           in proc.stdout.splitlines(), proc.stdout
    # --max-len without transformers (not a base dependency): the check asked for is
    # NOT-CHECKED, printed with the extra it needs.
    proc = subprocess.run([exe, "preflight", "train.jsonl", "--tokenizer", str(CHATML), "--max-len", "64"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "train.jsonl: NOT-CHECKED TP-NOT-CHECKED token lengths not checked: token-length checks need the " \
           "optional transformers package (pip install 'trainproof-lsp[tokens]')" in proc.stdout.splitlines(), \
        proc.stdout


def test_the_vscode_bundle_carries_every_base_dependency():
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")

    deps = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    names = {d.split(";")[0].split(">")[0].split("<")[0].split("=")[0].split("[")[0].strip().lower() for d in deps}
    bundled = (REPO / "editors" / "vscode" / "bundled-requirements.txt").read_text(encoding="utf-8")
    pins = {line.split("#")[0].split("==")[0].strip().lower() for line in bundled.splitlines()
            if line.split("#")[0].strip()}
    assert "jinja2" in names and {"jinja2", "markupsafe"} <= pins
    assert names <= pins, sorted(names - pins)


def test_the_wheel_ships_the_json_schema_the_help_names(dists):
    import zipfile

    from trainproof_lsp import cli

    with zipfile.ZipFile(dists[".whl"]) as wheel:
        shipped = json.loads(wheel.read(cli.JSON_SCHEMA))
    assert shipped == json.loads((REPO / cli.JSON_SCHEMA).read_text(encoding="utf-8"))
