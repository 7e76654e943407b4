"""Run doctor / Compare answer with their findings as a list (what Neovim puts in the
quickfix list and VS Code in the Problems panel), and every text the editor shows names
paths under the workspace folder relative to it, as the command line run there does.

The real server over stdio (pytest-lsp), as Neovim 0.7 and VS Code talk to it. The list
is checked against `doctor --json` run in the workspace folder: the same findings, lines
and messages, word for word.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_asyncio
import pytest_lsp
from pytest_lsp import LanguageClient

from lsp_support import HF_RUNS, SERVER, Session

ENTRY_KEYS = {"path", "uri", "range", "id", "level", "message", "shown"}


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient):
    yield


@pytest_asyncio.fixture(params=["neovim-0.7", "vscode"])
async def session(request, client: LanguageClient):
    s = Session(client, request.param)
    yield s
    await s.stop()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """runs/hot: the diverging HF run (its config.json gives the vocabulary, which a
    finding's message cites); runs/good: the healthy one; data/train.jsonl: five broken
    lines among good ones."""
    ws = tmp_path / "ws"
    shutil.copytree(HF_RUNS / "lr_hot_diverges", ws / "runs" / "hot")
    shutil.copytree(HF_RUNS / "healthy", ws / "runs" / "good")
    (ws / "data").mkdir()
    rows = [json.dumps({"text": f"row {i} of the training set"}) if i % 4 else "{broken" for i in range(1, 21)]
    (ws / "data" / "train.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return ws


def cli(ws: Path, *args: str) -> dict:
    """The command line's JSON envelope, run in the workspace folder with relative paths."""
    proc = subprocess.run([sys.executable, "-m", "trainproof_lsp", *args, "--json"], cwd=ws,
                          capture_output=True, text=True, check=False)
    return json.loads(proc.stdout)


def cli_findings(ws: Path, envelope: dict) -> set[tuple[str, int, str, str, str]]:
    return {(str(ws / f["location"]["path"]), f["location"]["range"]["start"]["line"], f["id"], f["level"],
             f["message"]) for r in envelope["reports"] for f in r["findings"]}


def listed(result: dict) -> set[tuple[str, int, str, str, str]]:
    return {(e["path"], e["range"]["start"]["line"], e["id"], e["level"], e["message"]) for e in result["findings"]}


@pytest.mark.asyncio
async def test_doctor_answers_the_command_lines_findings_with_paths_relative_to_the_workspace(
        session: Session, workspace: Path):
    await session.start(root=workspace)
    result = await session.command("trainproof.doctor", str(workspace / "runs"))
    assert result["status"] == "done" and result["worst_verdict"] == "FAIL", result
    assert result["message"] == "trainproof doctor runs: FAIL — 3 report(s): 1 FAIL, 2 PASS", result

    envelope = cli(workspace, "doctor", "runs")
    expected = cli_findings(workspace, envelope)
    log = str(workspace / "runs" / "hot" / "trainer_state.json")
    assert {(line, rule, level) for path, line, rule, level, _ in expected if path == log} == {
        (102, "TP-LOSS-SPIKE-UNRECOVERED", "FAIL"), (270, "TP-LOSS-ABOVE-UNIFORM", "FAIL"), (291, "TP-DEAD-RUN", "FAIL"),
        (291, "TP-DIVERGE", "FAIL"), (298, "TP-THROUGHPUT", "INFO")}
    assert listed(result) == expected
    for entry in result["findings"]:
        assert set(entry) == ENTRY_KEYS, entry
        assert entry["uri"] == Path(entry["path"]).as_uri()
        assert entry["shown"] is True  # a diagnostic on the (closed) log shows it
    uniform = next(e for e in result["findings"] if e["id"] == "TP-LOSS-ABOVE-UNIFORM")
    assert "(limit 1.15x, classes from runs/hot/config.json)" in uniform["message"], uniform
    # the log entry's whole object, as the command line places it (an ASCII file: the same columns in any unit)
    assert uniform["range"] == next(f["location"]["range"] for r in envelope["reports"] for f in r["findings"]
                                    if f["id"] == "TP-LOSS-ABOVE-UNIFORM")
    assert uniform["range"] == {"start": {"line": 270, "character": 4}, "end": {"line": 276, "character": 5}}
    assert str(workspace) not in json.dumps([result["message"], *(e["message"] for e in result["findings"])])

    # The diagnostics published on the log say the same, their related information too.
    published = await session.published(Path(log).as_uri(), lambda p: len(p.diagnostics) == 5)
    messages = {str(d.code): d.message for d in published.diagnostics}
    assert messages["TP-LOSS-ABOVE-UNIFORM"] == uniform["message"]
    related = [r for d in published.diagnostics for r in d.related_information or ()]
    if session.name == "vscode":  # Neovim 0.7 takes no related information
        assert {r.message for r in related} == {"best loss level 4.532 around step 9",
                                               "best loss level 4.107 around step 3"}
    assert str(workspace) not in json.dumps([d.message for d in published.diagnostics] + [r.message for r in related])


@pytest.mark.asyncio
async def test_an_open_logs_own_diagnostics_cite_other_files_relative_to_the_workspace(
        session: Session, workspace: Path):
    await session.start(root=workspace)
    log = workspace / "runs" / "hot" / "trainer_state.json"
    uri = session.open(log)
    diagnostics = await session.diagnostics(uri)
    uniform = next(d for d in diagnostics if d.code == "TP-LOSS-ABOVE-UNIFORM")
    assert uniform.message.endswith("(limit 1.15x, classes from runs/hot/config.json)"), uniform.message
    hover = await session.hover(uri, uniform.range.start.line, uniform.range.start.character)
    assert hover is not None
    assert "classes from runs/hot/config.json" in hover.contents.value.replace("\\", ""), hover.contents.value
    assert str(workspace) not in hover.contents.value.replace("\\", "")
    shown = await session.command("trainproof.showReport", uri)
    assert shown["status"] == "done"
    message = await session.message(lambda m: "TP-LOSS-ABOVE-UNIFORM (FAIL)" in m.message)
    assert "classes from runs/hot/config.json" in message.message and str(workspace) not in message.message

    # Doctor on the folder of an open log: the log's findings are in the list, marked as
    # shown (its own check shows them).
    result = await session.command("trainproof.doctor", str(log.parent))
    assert result["message"].startswith("trainproof doctor runs/hot: FAIL"), result
    entries = [e for e in result["findings"] if e["path"] == str(log)]
    assert len(entries) == 5 and all(e["shown"] for e in entries)


@pytest.mark.asyncio
async def test_the_list_follows_the_diagnostic_cap_and_counts_the_rest(session: Session, workspace: Path):
    await session.start(root=workspace, settings={"maxDiagnosticsPerFile": 2}, init_options={"maxDiagnosticsPerFile": 2})
    result = await session.command("trainproof.doctor", str(workspace / "data" / "train.jsonl"))
    assert result["status"] == "done", result
    assert result["message"].startswith("trainproof doctor data/train.jsonl: "), result
    entries = result["findings"]
    dataset = str(workspace / "data" / "train.jsonl")
    assert [(e["path"], e["range"]["start"]["line"], e["id"]) for e in entries] == [
        (dataset, 3, "TP-PRE-MALFORMED-JSONL"), (dataset, 7, "TP-PRE-MALFORMED-JSONL"), (dataset, 0, None)]
    count = entries[-1]
    assert count["level"] == "INFO" and count["message"].startswith("3 more finding(s) not shown (3 FAIL)"), count
    # The way to see them all names the file as the command line would take it here.
    assert "`trainproof-lsp doctor data/train.jsonl`" in count["message"], count


@pytest.mark.asyncio
async def test_compare_answers_its_findings_with_the_baseline_relative_to_the_workspace(
        session: Session, workspace: Path):
    await session.start(root=workspace)
    log = workspace / "runs" / "hot" / "trainer_state.json"
    baseline = workspace / "runs" / "good"
    result = await session.command("trainproof.compare", str(log), str(baseline))
    assert result["status"] == "done" and result["worst_verdict"] == "FAIL", result
    assert result["message"].startswith("trainproof compare trainer_state.json with runs/good: FAIL"), result
    envelope = cli(workspace, "compare", "runs/good", "runs/hot/trainer_state.json")
    assert listed(result) == cli_findings(workspace, envelope)
    assert {e["id"] for e in result["findings"]} >= {"TP-DIVERGE"}
    assert str(workspace) not in json.dumps([result["message"], *(e["message"] for e in result["findings"])])


@pytest.mark.asyncio
async def test_set_baseline_names_the_run_relative_to_the_workspace(session: Session, workspace: Path):
    await session.start(root=workspace)
    result = await session.command("trainproof.setBaseline", str(workspace / "runs" / "good"))
    assert result["message"].startswith("trainproof: baseline for this session is runs/good. To keep it"), result
    assert result["baseline"] == str(workspace / "runs" / "good")


def test_relative_text_takes_only_whole_paths_under_a_root():
    from trainproof_lsp.server.diagnostics import relative_text

    roots = ("/ws", "/ws/sub/")
    assert relative_text("classes from /ws/run/config.json", roots) == "classes from run/config.json"
    assert relative_text("see /ws/sub/x.json and (/ws/y)", roots) == "see x.json and (y)"
    for untouched in ("/other/ws/x", "file:///ws/x", "/wsx/y", "/ws"):
        assert relative_text(untouched, roots) == untouched
    assert relative_text("/a/b", ("/",)) == "/a/b"  # never relative to the file system's root
    assert relative_text("/ws/a", ()) == "/ws/a"
