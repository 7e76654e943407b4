"""Quick fixes on datasets: drop a duplicate row, map a dataset's own field names.

In the editor the fix is offered at the finding's range, and applying its edit (to the
buffer, or to the settings file it writes) makes the finding go away on the next check;
the CLI prints the same fix as a `fix:` line."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
import pytest_asyncio
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from conftest import run_cli
from lsp_support import SERVER, WAIT_S, Session, by_code
from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import Span
from trainproof_lsp.judge.dataset_fixes import apply_edit, duplicate_fix, fields_edit, propose_fields
from trainproof_lsp.server.code_actions import FIX_ALL

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DUP = "TP-PRE-DUPLICATE-TEXT"
NEAR = "TP-PRE-NEAR-DUPLICATE"
MISSING = "TP-PRE-MISSING-KEYS"
# line 3 is line 1 again, character for character; line 5 repeats line 2's text under another id
ROWS = ['{"text": "the cat sat"}', '{"id": 1, "text": "a dog ran"}', '{"text": "the cat sat"}',
        '{"text": "birds fly"}', '{"id": 2, "text": "a dog ran"}', '{"text": "fish swim"}']
DATASET = "\n".join(ROWS) + "\n"
QA = "".join(json.dumps({"question": f"what is {i}?", "answer": f"{i}"}) + "\n" for i in range(4))


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient):
    yield


@pytest_asyncio.fixture(params=["vscode", "neovim-0.11"])
async def session(request, client: LanguageClient):
    s = Session(client, request.param)
    yield s
    await s.stop()


async def _actions(s: Session, uri: str, d: lsp.Diagnostic, only: list[str] | None = None) -> list[lsp.CodeAction]:
    found = await asyncio.wait_for(s.client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), range=d.range,
        context=lsp.CodeActionContext(diagnostics=[d], only=only))), WAIT_S)
    return [a for a in found or [] if isinstance(a, lsp.CodeAction)]


def _dups(diagnostics: list[lsp.Diagnostic]) -> dict[int, lsp.Diagnostic]:
    return {d.range.start.line: d for d in diagnostics if d.code == DUP}


# --- drop a duplicate row --------------------------------------------------------------------------

@pytest.mark.asyncio
async def test_dropping_an_exact_duplicate_line_is_preferred_and_clears_its_finding(session, tmp_path):
    await session.start(root=tmp_path)
    path = tmp_path / "train.jsonl"
    path.write_text(DATASET, encoding="utf-8")
    uri = session.open(path)
    dups = _dups(await session.diagnostics(uri))
    assert sorted(dups) == [2, 4]
    (action,) = await _actions(session, uri, dups[2], [lsp.CodeActionKind.QuickFix])
    assert action.title == "trainproof: drop the duplicate of line 1"
    assert action.is_preferred is True  # the same characters as line 1: nothing but the repeat goes
    (edit,) = action.edit.changes[uri]
    assert (edit.range.start.line, edit.range.start.character, edit.range.end.line, edit.range.end.character,
            edit.new_text) == (2, 0, 3, 0, "")
    version = session.edit(uri, (2, 0), (3, 0), "")
    after = await session.diagnostics(uri, version)
    # line 3 is gone; the other repeat (now on line 4, 0-based 3) is still reported
    assert sorted(_dups(after)) == [3]
    assert _dups(after)[3].message == "line 4 repeats line 2 exactly"


@pytest.mark.asyncio
async def test_a_duplicate_that_differs_in_metadata_is_offered_not_preferred_and_left_out_of_fix_all(session,
                                                                                                    tmp_path):
    await session.start(root=tmp_path)
    path = tmp_path / "train.jsonl"
    path.write_text(DATASET, encoding="utf-8")
    uri = session.open(path)
    dups = _dups(await session.diagnostics(uri))
    (action,) = await _actions(session, uri, dups[4], [lsp.CodeActionKind.QuickFix])
    assert action.title == "trainproof: drop the duplicate of line 2" and action.is_preferred is False
    (edit,) = action.edit.changes[uri]
    assert (edit.range.start.line, edit.range.end.line, edit.new_text) == (4, 5, "")
    # the fix-all takes line 3's drop (safe) and not line 5's (its id would go with it)
    (fix_all,) = await _actions(session, uri, dups[4], [FIX_ALL])
    assert [d.range.start.line for d in fix_all.diagnostics] == [2]
    assert [(e.range.start.line, e.range.end.line) for e in fix_all.edit.changes[uri]] == [(2, 3)]
    # applied, the unsafe fix clears its own finding too
    version = session.edit(uri, (4, 0), (5, 0), "")
    assert sorted(_dups(await session.diagnostics(uri, version))) == [2]


@pytest.mark.asyncio
async def test_no_line_is_dropped_from_a_json_array(session, tmp_path):
    await session.start(root=tmp_path)
    path = tmp_path / "train.json"
    path.write_text("[\n" + ",\n".join(ROWS) + "\n]\n", encoding="utf-8")
    uri = session.open(path)
    dups = _dups(await session.diagnostics(uri))
    assert sorted(dups) == [3, 5]
    assert await _actions(session, uri, dups[3], [lsp.CodeActionKind.QuickFix]) == []


def test_the_last_line_without_a_newline_is_dropped_with_the_newline_before_it():
    lines = ['{"text": "a"}', '{"text": "a"}']
    fix = duplicate_fix(DUP, 1, 0, lambda i: lines[i] if 0 <= i < len(lines) else None)
    assert fix is not None and fix.safe is True
    (edit,) = fix.edits
    assert apply_edit("\n".join(lines), edit.span, edit.new_text) == '{"text": "a"}'
    # a near duplicate's drop is offered, never safe
    near = duplicate_fix(NEAR, 1, 0, lambda i: lines[i] if 0 <= i < len(lines) else None)
    assert near is not None and near.safe is False


def test_the_cli_prints_the_drop_of_each_duplicate_and_its_json_carries_the_edit(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text(DATASET, encoding="utf-8")
    code, out, _ = run_cli("preflight", str(path))
    assert code == 0
    assert out.count("fix: drop the duplicate of line 1") == 1 and out.count("fix: drop the duplicate of line 2") == 1
    code, out, _ = run_cli("preflight", str(path), "--json")
    fixes = {f["location"]["range"]["start"]["line"]: f["fix"]
             for r in json.loads(out)["reports"] for f in r["findings"] if f["id"] == DUP}
    assert fixes[2]["safe"] is True and fixes[4]["safe"] is False
    assert fixes[2]["edits"] == [{"new_text": "", "range": {"start": {"line": 2, "character": 0},
                                                           "end": {"line": 3, "character": 0}}}]
    # applied to the file, the CLI finds no duplicate of line 1 any more
    lines = DATASET.split("\n")
    del lines[2]
    path.write_text("\n".join(lines), encoding="utf-8")
    code, out, _ = run_cli("preflight", str(path))
    assert "repeats line 1" not in out and "line 4 repeats line 2 exactly" in out


# --- map the dataset's own field names -----------------------------------------------------------

@pytest.mark.parametrize("row,mapping", [
    ({"question": "q", "answer": "a"}, {"prompt": "question", "completion": "answer"}),
    ({"input": "q", "target": "a", "id": 3}, {"prompt": "input", "completion": "target"}),
    ({"instruction": "q", "response": "a"}, {"output": "response"}),
    ({"content": "a"}, {"text": "content"}),
    ({"question": "q", "answer": "a", "context": "c"}, None),  # which one is the prompt? not guessed
    ({"q": "q", "a": "a"}, None),
])
def test_a_mapping_is_proposed_only_for_a_known_shape(row, mapping):
    assert propose_fields([json.dumps(row)] * 3) == mapping


def test_rows_of_two_shapes_get_no_mapping():
    assert propose_fields([json.dumps({"question": "q", "answer": "a"}), json.dumps({"query": "q", "response": "a"})]
                          ) is None


@pytest.mark.parametrize("before", [
    None,
    "[project]\nname = \"x\"\n",
    "[project]\nname = \"x\"",
    "[tool.trainproof]\nignore = [\"TP-NAN\"]\n\n[tool.other]\nx = 1\n",
    "[tool.trainproof]\nfields = {text = \"body\"}\nignore = []\n",
    "[tool.trainproof]",
])
def test_the_settings_edit_reads_back_as_the_mapping_and_keeps_the_rest(tmp_path, before):
    path = tmp_path / "pyproject.toml"
    made = fields_edit(path, before, {"prompt": "question", "completion": "answer"})
    assert made is not None and made.exists is (before is not None)
    after = apply_edit(before or "", made.span, made.new_text)
    doc = tomllib.loads(after)
    assert doc["tool"]["trainproof"]["fields"]["prompt"] == "question"
    old = tomllib.loads(before or "")
    for key, value in old.items():  # nothing else changed
        if key != "tool":
            assert doc[key] == value
    for key, value in old.get("tool", {}).get("trainproof", {}).items():
        if key != "fields":
            assert doc["tool"]["trainproof"][key] == value
    if before and "body" in before:  # an existing mapping is kept beside the new one
        assert doc["tool"]["trainproof"]["fields"] == {"text": "body", "prompt": "question", "completion": "answer"}


def test_a_multi_line_fields_table_is_not_edited(tmp_path):
    text = "[tool.trainproof]\nfields = {\n}\n"
    assert fields_edit(tmp_path / "pyproject.toml", "[tool.trainproof.fields]\ntext = \"a\"\n", {"text": "b"}) is None
    assert fields_edit(tmp_path / "pyproject.toml", text, {"text": "b"}) is None


def test_the_cli_prints_the_mapping_and_writing_it_clears_the_finding(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n', encoding="utf-8")
    (tmp_path / "data").mkdir()
    path = tmp_path / "data" / "qa.jsonl"
    path.write_text(QA, encoding="utf-8")
    code, out, _ = run_cli("preflight", str(path))
    assert code == 1 and "FAIL TP-PRE-MISSING-KEYS every one of the 4 rows" in out
    title = 'map the fields in ../pyproject.toml: [tool.trainproof] fields = {prompt = "question", completion = "answer"}'
    assert f"    fix: {title}\n" in out
    code, out, _ = run_cli("preflight", str(path), "--json")
    (finding,) = [f for r in json.loads(out)["reports"] for f in r["findings"] if f["id"] == MISSING]
    assert finding["fix"] == {"title": title, "safe": False, "edits": []}
    # the settings file as the fix writes it: the rows read as prompt/completion
    made = fields_edit(tmp_path / "pyproject.toml", (tmp_path / "pyproject.toml").read_text(),
                       {"prompt": "question", "completion": "answer"})
    assert made is not None
    (tmp_path / "pyproject.toml").write_text(apply_edit((tmp_path / "pyproject.toml").read_text(), made.span,
                                                        made.new_text), encoding="utf-8")
    code, out, _ = run_cli("preflight", str(path))
    assert code == 0 and MISSING not in out


@pytest.mark.asyncio
async def test_the_mapping_action_edits_pyproject_and_the_finding_goes_on_the_next_check(client: LanguageClient,
                                                                                         tmp_path):
    session = Session(client, "vscode")  # push diagnostics and watched files: the re-check is published
    try:
        await session.start(root=tmp_path)
        settings = tmp_path / "pyproject.toml"
        settings.write_text('[project]\nname = "demo"\n', encoding="utf-8")
        path = tmp_path / "qa.jsonl"
        path.write_text(QA, encoding="utf-8")
        uri = session.open(path)
        found = by_code(await session.diagnostics(uri))
        d = found[MISSING]
        assert d.range.start.line == 0
        (action,) = await _actions(session, uri, d, [lsp.CodeActionKind.QuickFix])
        assert action.title == ('trainproof: map the fields in pyproject.toml: [tool.trainproof] fields = '
                                '{prompt = "question", completion = "answer"}')
        assert action.is_preferred is False
        assert list(action.edit.changes) == [settings.as_uri()]
        (edit,) = action.edit.changes[settings.as_uri()]
        r = edit.range
        text = apply_edit(settings.read_text(), Span(r.start.line, r.start.character, r.end.line, r.end.character),
                          edit.new_text)
        assert text == '[project]\nname = "demo"\n\n[tool.trainproof]\nfields = {prompt = "question", completion = "answer"}\n'
        # not in the fix-all: it changes how every row is read
        assert await _actions(session, uri, d, [FIX_ALL]) == []
        settings.write_text(text, encoding="utf-8")
        session.client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(changes=[
            lsp.FileEvent(uri=settings.as_uri(), type=lsp.FileChangeType.Changed)]))
        after = await session.published(uri, lambda p: MISSING not in {str(x.code) for x in p.diagnostics})
        assert MISSING not in by_code(list(after.diagnostics))
    finally:
        await session.stop()


@pytest.mark.asyncio
async def test_without_a_settings_file_the_mapping_creates_pyproject_at_the_workspace_root(client: LanguageClient,
                                                                                         tmp_path):
    session = Session(client, "vscode")
    try:
        await session.start(root=tmp_path)
        (tmp_path / "data").mkdir()
        path = tmp_path / "data" / "qa.jsonl"
        path.write_text(QA, encoding="utf-8")
        uri = session.open(path)
        d = by_code(await session.diagnostics(uri))[MISSING]
        (action,) = await _actions(session, uri, d, [lsp.CodeActionKind.QuickFix])
        create, change = action.edit.document_changes
        target = (tmp_path / "pyproject.toml").as_uri()
        assert isinstance(create, lsp.CreateFile) and create.uri == target
        assert change.text_document.uri == target
        assert change.edits[0].new_text == '[tool.trainproof]\nfields = {prompt = "question", completion = "answer"}\n'
        assert Config().fields == {}  # nothing written by the server itself
        assert not (tmp_path / "pyproject.toml").exists()
    finally:
        await session.stop()
