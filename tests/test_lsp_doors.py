"""The language server gives the same findings as the command line on a tokenizer's files
(tokenizer_config.json, chat_template.jinja: at the template's line) and on a training
script (foot-guns at their argument; import failures at the import line once the
environment check runs). A real server over stdio, driven by pytest-lsp; every wait is
on a notification."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import pytest_asyncio
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from lsp_support import SERVER, Session
from trainproof_lsp.core.config import Config
from trainproof_lsp.judge.engine import doctor

pytestmark = pytest.mark.asyncio

TOK = Path(__file__).resolve().parent.parent / "fixtures" / "tokenizers"

SCRIPT = """\
import json
import not_a_real_module_tp

args = TrainingArguments(output_dir="out", learning_rate=0.0)
"""


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient):
    yield


@pytest_asyncio.fixture(params=["neovim-0.7", "vscode"])
async def session(request, client: LanguageClient):
    s = Session(client, request.param)
    yield s
    await s.stop()


def cli_findings(path: Path, target: Path) -> list[tuple[str, int, int, int, int]]:
    """What `doctor` says about `path` (id and 0-based range), judged from `target`."""
    out = []
    for report in doctor([target], Config()).reports:
        for f in report.findings:
            if f.location.path == str(path) and f.location.span is not None:
                s = f.location.span
                out.append((f.id, s.start_line, s.start_char, s.end_line, s.end_char))
    return sorted(out)


def lsp_findings(diagnostics: list[lsp.Diagnostic]) -> list[tuple[str, int, int, int, int]]:
    return sorted((str(d.code), d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character)
                  for d in diagnostics if str(d.code).startswith("TP-"))


async def test_tokenizer_config_gets_the_template_finding_at_its_line(session: Session, tmp_path: Path):
    folder = tmp_path / "tok"
    shutil.copytree(TOK / "assistant_turn_no_eos", folder)
    config = folder / "tokenizer_config.json"
    await session.start(root=tmp_path)
    uri = session.open(config)
    got = lsp_findings(await session.diagnostics(uri))
    assert got == cli_findings(config, folder)
    assert [(code, line) for code, line, *_ in got] == [("TP-TOK-TEMPLATE-NO-EOS", 18)]


async def test_chat_template_jinja_gets_the_template_finding(session: Session, tmp_path: Path):
    folder = tmp_path / "tok"
    shutil.copytree(TOK / "healthy_template_in_jinja_file", folder)
    template = json.loads((TOK / "assistant_turn_no_eos" / "tokenizer_config.json").read_text())["chat_template"]
    jinja = folder / "chat_template.jinja"
    jinja.write_text(template + "\n")
    await session.start(root=tmp_path)
    uri = session.open(jinja, language_id="jinja")
    got = lsp_findings(await session.diagnostics(uri))
    assert got == cli_findings(jinja, folder)
    assert [(code, line) for code, line, *_ in got] == [("TP-TOK-TEMPLATE-NO-EOS", 0)]
    (d,) = [d for d in await session.diagnostics(uri) if d.code == "TP-TOK-TEMPLATE-NO-EOS"]
    assert d.severity == lsp.DiagnosticSeverity.Error and "ends the assistant's turn with '\\n'" in d.message


async def test_a_training_script_gets_its_foot_guns_at_the_argument(session: Session, tmp_path: Path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    await session.start(root=tmp_path)
    uri = session.open(script, language_id="python")
    got = lsp_findings(await session.diagnostics(uri))
    column = SCRIPT.splitlines()[3].index("0.0")
    assert got == cli_findings(script, script) == [("TP-SCRIPT-ZERO-LR", 3, column, 3, column + 3)]


async def shown_after_the_environment_check(session: Session, script: Path) -> list[lsp.Diagnostic]:
    """What the editor shows on the script once "Check environment" answered: the buffer's
    own diagnostics (pulled, for a client that pulls) and what the server pushed."""
    await session.start(root=script.parent, settings={"checkEnvironment": True, "envTimeoutS": 30},
                        init_options={"checkEnvironment": True, "envTimeoutS": 30})
    uri = session.open(script, language_id="python")
    own = await session.diagnostics(uri)
    result = await session.command("trainproof.checkEnvironment", str(script))
    assert result["status"] == "done" and result["worst_verdict"] == "FAIL"
    published = await session.published(uri, lambda p: any(d.code == "TP-ENV-IMPORT-FAIL" for d in p.diagnostics))
    return (list(own) if session.pull else []) + list(published.diagnostics)


async def test_the_environment_check_adds_import_failures_at_the_import_line(session: Session, tmp_path: Path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    codes = {(code, line, col) for code, line, col, *_ in lsp_findings(await shown_after_the_environment_check(
        session, script))}
    column = SCRIPT.splitlines()[3].index("0.0")
    assert ("TP-ENV-IMPORT-FAIL", 1, 0) in codes and ("TP-SCRIPT-ZERO-LR", 3, column) in codes


async def test_the_environment_check_shows_each_foot_gun_once(session: Session, tmp_path: Path):
    # env repeats the script's foot-guns (one report for the whole script); the editor
    # already shows them from the buffer, so they are not published twice.
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    shown = [d.code for d in await shown_after_the_environment_check(session, script)]
    assert shown.count("TP-SCRIPT-ZERO-LR") == 1 and shown.count("TP-ENV-IMPORT-FAIL") == 1
