"""The language server end to end: a real server process over stdio, driven by
pytest-lsp impersonating Neovim 0.7 (push only), Neovim 0.11 (pull, utf-8), VS Code and
Emacs (eglot) through their captured client capabilities."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
import pytest_asyncio
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from lsp_support import CLIENTS, HF_RUNS, SERVER, WAIT_S, Session, by_code

pytestmark = pytest.mark.asyncio

DIVERGING = HF_RUNS / "lr_hot_diverges" / "trainer_state.json"
HEALTHY = HF_RUNS / "healthy" / "trainer_state.json"


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient):
    yield


@pytest_asyncio.fixture(params=list(CLIENTS))
async def session(request, client: LanguageClient):
    # Every test runs once per client snapshot; a test about a feature only some clients
    # have narrows the list with @pytest.mark.parametrize("session", [...], indirect=True).
    s = Session(client, request.param)
    yield s
    await s.stop()


def line_of(text: str, needle: str, nth: int = 0) -> int:
    hits = [i for i, line in enumerate(text.splitlines()) if needle in line]
    return hits[nth]


@pytest.fixture
def diverging_run(tmp_path: Path) -> Path:
    """A copy of the diverging HF run (log + config.json with the vocabulary size)."""
    run = tmp_path / "lr_hot_diverges"
    shutil.copytree(HF_RUNS / "lr_hot_diverges", run)
    return run


# --- 1. what the server offers -------------------------------------------------------------

async def test_features_are_offered_only_to_clients_that_support_them(session: Session):
    result = await session.start()
    caps = result.capabilities
    assert result.server_info.name == "trainproof-lsp"
    assert caps.text_document_sync.change == lsp.TextDocumentSyncKind.Incremental
    assert (caps.diagnostic_provider is not None) == session.pull
    assert (caps.code_lens_provider is not None) == session.code_lens
    assert caps.hover_provider  # every snapshot here declares hover
    assert "trainproof.doctor" in caps.execute_command_provider.commands
    expected_encoding = {"neovim-0.11": "utf-8", "emacs": "utf-32"}.get(session.name, "utf-16")
    assert (caps.position_encoding or "utf-16") == expected_encoding


# --- 2. diagnostics -------------------------------------------------------------------------

async def test_diverging_log_gets_its_findings_at_the_log_entries(session: Session, diverging_run: Path):
    await session.start()
    log = diverging_run / "trainer_state.json"
    text = log.read_text()
    uri = session.open(log)
    diags = await session.diagnostics(uri)
    found = by_code(diags)
    diverge = found["TP-DIVERGE"]
    end_entry = line_of(text, '"step": 120') - 5  # the entry's "{" line opens 5 lines above
    assert diverge.range.start.line == end_entry
    assert diverge.severity == lsp.DiagnosticSeverity.Error
    assert diverge.source == "trainproof"
    assert diverge.data["evidence"]["ratio"] > 1.5
    assert diverge.data["limits"]["max_ratio"] == 1.5
    # Errors first.
    severities = [d.severity for d in diags]
    assert severities == sorted(severities)
    # Related information (the best step) only for clients that can show it.
    related = session.capabilities.text_document.publish_diagnostics.related_information
    if related:
        assert diverge.related_information[0].location.range.start.line == line_of(text, '"step": 3') - 5
        assert "best loss" in diverge.related_information[0].message
    else:
        assert diverge.related_information is None
    if session.capabilities.text_document.publish_diagnostics.code_description_support:
        assert diverge.code_description.href.endswith("#tp-diverge")
    else:
        assert diverge.code_description is None


async def test_closing_a_document_clears_its_diagnostics(session: Session, diverging_run: Path):
    await session.start()
    uri = session.open(diverging_run / "trainer_state.json")
    assert await session.diagnostics(uri)
    session.close(uri)
    cleared = await session.published(uri, lambda p: len(p.diagnostics) == 0)
    assert list(cleared.diagnostics) == []


async def test_unreadable_log_gets_one_information_at_the_broken_line(session: Session, tmp_path: Path):
    await session.start()
    log = tmp_path / "trainer_state.json"
    text = HEALTHY.read_text().splitlines()
    broken = "\n".join(text[:40]) + "\n    {\"loss\": 1.0, oops\n"  # cut mid-write
    log.write_text(broken)
    uri = session.open(log)
    diags = await session.diagnostics(uri)
    assert len(diags) == 1
    (d,) = diags
    assert d.code == "TP-NOT-CHECKED"
    assert d.severity == lsp.DiagnosticSeverity.Information
    assert d.range.start.line >= 39  # at the syntax error, not line 1
    assert "trainer_state.json" in d.message


async def test_diagnostics_are_capped_with_one_summary_saying_how_to_see_all(session: Session, diverging_run: Path):
    # initializationOptions reach every client, Neovim 0.7 included (no workspace/configuration)
    await session.start(settings={"maxDiagnosticsPerFile": 2}, init_options={"maxDiagnosticsPerFile": 2})
    uri = session.open(diverging_run / "trainer_state.json")
    diags = await session.diagnostics(uri)
    assert len(diags) == 3
    assert all(d.severity == lsp.DiagnosticSeverity.Error for d in diags[:2])
    summary = diags[2]
    assert "more finding(s) not shown" in summary.message and "trainproof-lsp doctor" in summary.message
    assert summary.data["hidden"] >= 2


async def test_bad_settings_fall_back_to_defaults_with_a_message(session: Session, diverging_run: Path):
    await session.start(settings={"maxDiagnosticsPerFile": "lots"},
                        init_options={"maxDiagnosticsPerFile": "lots"})
    uri = session.open(diverging_run / "trainer_state.json")
    diags = await session.diagnostics(uri)
    assert len(diags) >= 4  # the default cap, not a broken one
    warning = await session.message(lambda m: "maxDiagnosticsPerFile" in m.message)
    assert warning.type == lsp.MessageType.Warning and "using 500" in warning.message


async def test_an_edit_is_rechecked_and_stamped_with_its_version(session: Session, tmp_path: Path):
    await session.start()
    log = tmp_path / "metrics.jsonl"
    rows = [{"step": 10 * (i + 1), "loss": round(3.0 - 0.05 * i, 4)} for i in range(40)]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    uri = session.open(log, language_id="jsonl")
    assert "TP-NAN" not in by_code(await session.diagnostics(uri))
    line = 25
    old = json.dumps(rows[line])
    version = session.edit(uri, (line, 0), (line, len(old)), json.dumps({"step": rows[line]["step"], "loss": "NaN"})
                           .replace('"NaN"', "NaN"))
    diags = await session.diagnostics(uri, version)
    nan = by_code(diags)["TP-NAN"]
    assert nan.range.start.line == line


async def test_only_the_last_of_rapid_edits_is_published(session: Session, tmp_path: Path):
    await session.start(settings={"debounceMs": 300})
    log = tmp_path / "metrics.jsonl"
    log.write_text("".join(json.dumps({"step": i, "loss": 2.0 - i / 100}) + "\n" for i in range(1, 60)))
    uri = session.open(log, language_id="jsonl")
    await session.diagnostics(uri)
    for _ in range(5):
        version = session.edit(uri, (0, 0), (0, 0), " ")
    diags = await session.diagnostics(uri, version)
    assert isinstance(diags, list)
    if not session.pull:
        versions = [p.version for p in session.publishes if p.uri == uri]
        assert versions == [1, version]  # the four superseded versions were never published


async def test_settings_arrive_before_the_first_analysis(session: Session, diverging_run: Path):
    # The client answers workspace/configuration after didOpen may already be queued:
    # the first analysis waits for the settings (with a timeout).
    await session.start(settings={"maxDiagnosticsPerFile": 1})
    uri = session.open(diverging_run / "trainer_state.json")
    diags = await session.diagnostics(uri)
    if session.capabilities.workspace and session.capabilities.workspace.configuration:
        assert len(diags) == 2  # one finding + the summary
    else:
        assert len(diags) >= 4  # Neovim 0.7 declares no configuration: defaults


# --- 4. hover ----------------------------------------------------------------------------------

async def test_hover_on_a_finding_shows_the_rule_its_numbers_and_a_sparkline(session: Session, diverging_run: Path):
    await session.start()
    log = diverging_run / "trainer_state.json"
    uri = session.open(log)
    diverge = by_code(await session.diagnostics(uri))["TP-DIVERGE"]
    hover = await session.hover(uri, diverge.range.start.line + 2)
    text = hover.contents.value
    # One part per finding on the line (TP-DEAD-RUN shares it); the TP-DIVERGE part in full.
    parts = {part.split("**")[1]: part.splitlines() for part in text.split("\n\n---\n\n")}
    assert sorted(parts) == ["TP-DEAD-RUN", "TP-DIVERGE"]
    lines = parts["TP-DIVERGE"]
    assert lines[0] == "**TP-DIVERGE** · FAIL — Loss ends well above its best level and stays there."
    assert lines[2].startswith("loss level 91.31 at the end (step 120) is 22.23x its best level 4.107 (around step 3); limit 1.5x")
    assert "| `ratio` | 22.23 |" in lines and "| `best_step` | 3 |" in lines
    assert [line for line in lines if line.startswith("limits: ")] == [
        "limits: `eval_tolerance` = 0.05, `max_ratio` = 1.5, `min_points` = 10, `min_regain` = 0.1, "
        "`min_stay` = 10, `min_stay_fraction` = 0.25"]
    assert any(ch in text for ch in "▁▂▃▄▅▆▇█"), text
    assert "▲" in text
    nothing = await session.hover(uri, 1, 0)
    assert nothing is None


# --- 5. code lenses and commands ------------------------------------------------------------

@pytest.mark.parametrize("session", ['neovim-0.11', 'vscode'], indirect=True)
async def test_a_log_has_verdict_show_run_doctor_compare_and_baseline_lenses(session: Session, diverging_run: Path):
    await session.start()
    if not session.code_lens:
        pytest.skip(f"{session.name} has no code lens")
    uri = session.open(diverging_run / "trainer_state.json")
    await session.diagnostics(uri)
    titles = [lens.command.title for lens in await session.lenses(uri)]
    assert titles[0].startswith("trainproof: FAIL")
    assert titles[1:] == ["Show run", "Run doctor", "Compare with baseline", "Set as baseline"]


@pytest.mark.parametrize("session", ['neovim-0.11', 'vscode'], indirect=True)
async def test_a_training_script_has_environment_and_doctor_lenses(session: Session, tmp_path: Path):
    await session.start()
    if not session.code_lens:
        pytest.skip(f"{session.name} has no code lens")
    shutil.copytree(HF_RUNS / "healthy", tmp_path / "output")
    script = tmp_path / "train.py"
    script.write_text("from transformers import Trainer\n\nTrainer(output_dir='output').train()\n")
    uri = session.open(script, language_id="python")
    lenses = await session.lenses(uri)
    titles = [lens.command.title for lens in lenses]
    assert titles == ["Check environment (off: trainproof.checkEnvironment is false)", "Doctor: output/"]
    assert list(lenses[1].command.arguments) == [str(tmp_path / "output")]


async def test_doctor_command_publishes_findings_with_progress_and_a_message(session: Session, diverging_run: Path):
    await session.start()
    result = await session.command("trainproof.doctor", str(diverging_run))
    assert result["status"] == "done" and result["worst_verdict"] == "FAIL"
    log_uri = (diverging_run / "trainer_state.json").as_uri()
    published = await session.published(log_uri, lambda p: len(p.diagnostics) > 0)
    assert "TP-DIVERGE" in by_code(list(published.diagnostics))
    message = await session.message(lambda m: m.message.startswith("trainproof doctor"))
    assert message.type == lsp.MessageType.Error and "FAIL" in message.message
    if session.capabilities.window and session.capabilities.window.work_done_progress:
        (reports,) = session.client.progress_reports.values()
        assert reports[0].kind == "begin" and reports[0].cancellable
        assert reports[-1].kind == "end"


async def test_compare_with_a_baseline_set_by_command(session: Session, diverging_run: Path):
    await session.start()
    log = diverging_run / "trainer_state.json"
    uri = session.open(log)
    await session.diagnostics(uri)
    no_baseline = await session.command("trainproof.compare", str(log))
    assert no_baseline["status"] == "no-baseline"
    baseline = await session.command("trainproof.setBaseline", str(HF_RUNS / "healthy"))
    assert baseline["status"] == "done" and baseline["baseline"].endswith("healthy")
    result = await session.command("trainproof.compare", str(log))
    assert result["status"] == "done" and result["worst_verdict"] == "FAIL"
    # The comparison's findings are pushed beside the log's own diagnostics.
    extra = await session.published(uri, lambda p: any(str(d.code).startswith("TP-") and d.code not in
                                                         {"TP-DIVERGE", "TP-DEAD-RUN", "TP-LOSS-SPIKE-UNRECOVERED",
                                                          "TP-LOSS-ABOVE-UNIFORM", "TP-THROUGHPUT"}
                                                         for d in p.diagnostics))
    assert extra.diagnostics


@pytest.mark.parametrize("session", ['neovim-0.7', 'vscode'], indirect=True)
async def test_environment_check_is_off_until_the_setting_allows_it(session: Session, tmp_path: Path):
    script = tmp_path / "train.py"
    script.write_text("import json\nimport not_a_real_module_xyz\nimport torch\n")
    await session.start(settings={"checkEnvironment": False})
    off = await session.command("trainproof.checkEnvironment", str(script))
    assert off["status"] == "disabled"
    assert "set trainproof.checkEnvironment = true" in off["message"] and "trust" not in off["message"]


@pytest.mark.parametrize("session", ['vscode'], indirect=True)
async def test_environment_check_when_allowed(session: Session, tmp_path: Path):
    script = tmp_path / "train.py"
    script.write_text("import json\nimport not_a_real_module_xyz\n")
    await session.start(settings={"checkEnvironment": True, "envTimeoutS": 30},
                        init_options={"checkEnvironment": True, "envTimeoutS": 30})
    uri = session.open(script, language_id="python")
    result = await session.command("trainproof.checkEnvironment", str(script))
    assert result["status"] == "done" and result["worst_verdict"] == "FAIL"
    # Without a python setting: the workspace's `python` on PATH (an activated venv's), named.
    assert result["pythonSource"] in ("python on PATH", "python3 on PATH", "the server's own Python")
    assert f"with {result['python']} ({result['pythonSource']})" in result["message"]
    published = await session.published(uri, lambda p: len(p.diagnostics) > 0)
    missing = [d for d in published.diagnostics if "not_a_real_module_xyz" in d.message]
    assert missing and missing[0].range.start.line == 1


async def test_server_info_names_versions_features_and_settings(session: Session):
    await session.start()
    info = await session.command("trainproof.showServerInfo")
    assert info["name"] == "trainproof-lsp"
    assert info["diagnostics"].startswith("pull" if session.pull else "push")
    assert info["settings"]["maxDiagnosticsPerFile"] == 500
    assert "engine" not in info  # every part of the engine is always there: nothing to report


# --- 6. watched files: a live run turns red ----------------------------------------------------

@pytest.mark.parametrize("session", ['vscode', 'emacs'], indirect=True)
async def test_a_growing_log_on_disk_is_rejudged(session: Session, tmp_path: Path):
    await session.start()
    watched = session.capabilities.workspace.did_change_watched_files if session.capabilities.workspace else None
    if not (watched and watched.dynamic_registration):
        pytest.skip(f"{session.name} cannot watch files for a server")
    log = tmp_path / "run" / "trainer_state.json"
    log.parent.mkdir()
    shutil.copy(HEALTHY, log)
    uri = log.as_uri()

    def notify(kind: lsp.FileChangeType) -> None:
        session.client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(
            changes=[lsp.FileEvent(uri=uri, type=kind)]))

    notify(lsp.FileChangeType.Created)
    first = await session.published(uri)
    assert not [d for d in first.diagnostics if d.severity == lsp.DiagnosticSeverity.Error]
    shutil.copy(DIVERGING, log)  # the run went on and diverged
    notify(lsp.FileChangeType.Changed)
    red = await session.published(uri, lambda p: any(d.code == "TP-DIVERGE" for d in p.diagnostics))
    assert red.diagnostics
    log.unlink()
    notify(lsp.FileChangeType.Deleted)
    await session.published(uri, lambda p: len(p.diagnostics) == 0)


# --- 7. never crashes ----------------------------------------------------------------------------

async def test_garbage_documents_and_wild_edits_leave_the_server_answering(session: Session, tmp_path: Path):
    await session.start()
    garbage = ["\x00\x01\x02", "{", "[", "[{]", "\ud800" if False else "\U0001F600" * 3, "",
               '{"log_history": [{"step": "x", "loss": []}]}', "step,loss\n1,a\n,\n",
               '{"text": "a"}\n{bad\n', "\n" * 50]
    names = ["trainer_state.json", "m.jsonl", "m.csv", "d.jsonl", "x.json", "t.py"]
    uris = []
    for i, text in enumerate(garbage):
        uris.append(session.open(tmp_path / f"{i}-{names[i % len(names)]}", text=text))
    for uri in uris:
        session.edit(uri, (99, 99), (0, 0), "}{")     # reversed, out of range
        session.edit(uri, (0, 5), (400, 1), "\U0001F600\n\r\n")
    info = await session.command("trainproof.showServerInfo")
    assert len(info["documents"]) == len(uris)
    for uri in uris:
        await session.diagnostics(uri)


# --- datasets ------------------------------------------------------------------------------------

DATASET_ROWS = [json.dumps({"messages": [{"role": "user", "content": f"question {i}"},
                                         {"role": "assistant", "content": f"answer {i}"}]}) for i in range(30)]


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    rows = list(DATASET_ROWS)
    rows[7] = '{"messages": [{"role": "user", "content": "cut'  # a malformed line
    rows[20] = rows[3]  # an exact duplicate of line 4
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(rows) + "\n")
    return path


async def test_dataset_lines_get_their_findings_and_an_edit_fixes_them(session: Session, dataset: Path):
    await session.start()
    uri = session.open(dataset, language_id="jsonl")
    diags = await session.diagnostics(uri)
    found = by_code(diags)
    malformed = found["TP-PRE-MALFORMED-JSONL"]
    assert malformed.range.start.line == 7 and malformed.severity == lsp.DiagnosticSeverity.Error
    dup = found["TP-PRE-DUPLICATE-TEXT"]
    assert dup.range.start.line == 20
    if session.capabilities.text_document.publish_diagnostics.related_information:
        assert dup.related_information[0].location.range.start.line == 3
    # Fix the broken line: only that line is re-scanned; its finding goes away.
    version = session.edit(uri, (7, 0), (7, len(dataset.read_text().splitlines()[7])), DATASET_ROWS[7])
    after = by_code(await session.diagnostics(uri, version))
    assert "TP-PRE-MALFORMED-JSONL" not in after and "TP-PRE-DUPLICATE-TEXT" in after
    info = await session.command("trainproof.showServerInfo")
    assert info["documents"][uri]["last_check"] == "incremental: 1 line(s) re-scanned"
    # Insert a line above the duplicate: the duplicate moves down with it.
    version = session.edit(uri, (0, 0), (0, 0), '{"text": "a new first row"}\n')
    after = by_code(await session.diagnostics(uri, version))
    dup = after["TP-PRE-DUPLICATE-TEXT"]
    assert dup.range.start.line == 21 and dup.data["evidence"]["first_line"] == 5
    assert "TP-PRE-MIXED-FORMATS" in after  # a text row among chat rows


@pytest.mark.parametrize("session", ['neovim-0.11', 'vscode'], indirect=True)
async def test_a_dataset_lens_shows_its_preflight_summary(session: Session, dataset: Path):
    await session.start()
    if not session.code_lens:
        pytest.skip(f"{session.name} has no code lens")
    uri = session.open(dataset, language_id="jsonl")
    await session.diagnostics(uri)
    lenses = await session.lenses(uri)
    assert lenses[0].command.title.startswith("preflight: FAIL")
    assert lenses[1].command.command == "trainproof.checkDataset"


@pytest.mark.parametrize("session", ['neovim-0.7', 'neovim-0.11'], indirect=True)
async def test_a_dataset_too_big_for_the_editor_is_checked_from_disk(session: Session, dataset: Path):
    await session.start()
    result = await session.command("trainproof.checkDataset", str(dataset))
    assert result["status"] == "done" and result["worst_verdict"] == "FAIL"
    published = await session.published(dataset.as_uri(), lambda p: len(p.diagnostics) > 0)
    assert by_code(list(published.diagnostics))["TP-PRE-MALFORMED-JSONL"].range.start.line == 7


@pytest.mark.parametrize("session", ["vscode", "neovim-0.11"], indirect=True)
async def test_long_work_reports_progress_and_can_be_cancelled(session: Session, tmp_path: Path):
    (tmp_path / "slow_module.py").write_text("import time\ntime.sleep(8)\n")  # outlives the cancel
    script = tmp_path / "train.py"
    script.write_text("import slow_module\n")
    await session.start(settings={"checkEnvironment": True, "envTimeoutS": 60},
                        init_options={"checkEnvironment": True, "envTimeoutS": 60})
    pending = asyncio.ensure_future(session.command("trainproof.checkEnvironment", str(script)))

    async def first_report() -> str:
        while True:
            for token, values in session.client.progress_reports.items():
                if any(v.kind == "report" for v in values):
                    return token
            await session.client.wait_for_notification("$/progress")

    token = await asyncio.wait_for(first_report(), WAIT_S)
    session.client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
    result = await asyncio.wait_for(pending, WAIT_S)
    assert result["status"] == "cancelled"
    assert result["message"] == f"trainproof env {script.name} with {result['python']} ({result['pythonSource']}): cancelled"
    assert session.client.progress_reports[token][-1].kind == "end"


@pytest.mark.parametrize("session", ["vscode"], indirect=True)
async def test_changed_settings_recheck_open_documents(session: Session, diverging_run: Path):
    await session.start()
    uri = session.open(diverging_run / "trainer_state.json")
    assert len(await session.diagnostics(uri)) >= 4
    session.client.set_configuration({"trainproof": {"debounceMs": 0, "maxDiagnosticsPerFile": 1}})
    session.client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))
    capped = await session.published(uri, lambda p: len(p.diagnostics) == 2)
    assert "more finding(s) not shown" in capped.diagnostics[1].message
