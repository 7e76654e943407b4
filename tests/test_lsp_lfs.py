"""Git LFS pointers in the language server: a pointer file opened in the editor (whatever
its name: a dataset `.jsonl`, a `trainer_state.json`) and a pointer a watched run folder
holds in a checkpoint's place (`model.safetensors`, never opened) each get the one
NOT-CHECKED diagnostic the command line gives, with its reason. A real server over stdio,
driven by pytest-lsp; every wait is on a notification."""

from __future__ import annotations

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

SIZE = 267832560
REASON = f"Git LFS pointer to a {SIZE:,}-byte file, not downloaded: run `git lfs pull`"


def pointer(size: int = SIZE) -> str:
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{'4d7a' * 16}\nsize {size}\n"


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient):
    yield


@pytest_asyncio.fixture(params=["vscode", "neovim-0.7"])
async def session(request, client: LanguageClient):
    s = Session(client, request.param)
    yield s
    await s.stop()


def cli_line(path: Path) -> tuple[str, str, str]:
    """(verdict, finding id, message) doctor gives the file."""
    (report,) = [r for r in doctor([path], Config()).reports]
    (finding,) = report.findings
    return report.verdict.value, finding.id, finding.message


@pytest.mark.parametrize("name", ["train.jsonl", "trainer_state.json", "metrics.csv"])
async def test_an_opened_pointer_is_one_not_checked_with_its_reason(session: Session, tmp_path: Path, name: str):
    path = tmp_path / name
    path.write_text(pointer(), encoding="utf-8")
    verdict, rule, message = cli_line(path)
    assert (verdict, rule, message) == ("NOT-CHECKED", "TP-NOT-CHECKED", f"{path}: {REASON}")
    await session.start(root=tmp_path)
    uri = session.open(path)
    diagnostics = await session.diagnostics(uri)
    assert [(d.code, d.range.start.line) for d in diagnostics] == [("TP-NOT-CHECKED", 0)]
    assert REASON in diagnostics[0].message and "Git LFS pointer" in diagnostics[0].message


async def test_a_pointer_edited_into_a_dataset_is_judged_as_one(session: Session, tmp_path: Path):
    path = tmp_path / "train.jsonl"
    path.write_text(pointer(), encoding="utf-8")
    await session.start(root=tmp_path)
    uri = session.open(path)
    assert [d.code for d in await session.diagnostics(uri)] == ["TP-NOT-CHECKED"]
    # the user pulled the file: its lines replace the pointer's
    version = session.edit(uri, (0, 0), (3, 0), '{"text": "hello"}\n{"text": ""}\n')
    got = await session.diagnostics(uri, version)
    assert [(d.code, d.range.start.line) for d in got] == [("TP-PRE-EMPTY-TEXT", 1)]


async def test_a_watched_checkpoint_pointer_is_said_not_passed_over(session: Session, tmp_path: Path):
    await session.start(root=tmp_path)
    watched = session.capabilities.workspace.did_change_watched_files if session.capabilities.workspace else None
    if not (watched and watched.dynamic_registration):
        pytest.skip(f"{session.name} cannot watch files for a server")
    folder = tmp_path / "out"
    folder.mkdir()
    weights = folder / "model.safetensors"
    weights.write_text(pointer(1234), encoding="utf-8")
    reason = "Git LFS pointer to a 1,234-byte file, not downloaded: run `git lfs pull`"
    assert cli_line(weights) == ("NOT-CHECKED", "TP-NOT-CHECKED", f"{weights}: {reason}")
    uri = weights.as_uri()
    session.client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(
        changes=[lsp.FileEvent(uri=uri, type=lsp.FileChangeType.Created)]))
    got = await session.published(uri, lambda p: bool(p.diagnostics))
    assert [(d.code, d.range.start.line) for d in got.diagnostics] == [("TP-NOT-CHECKED", 0)]
    assert reason in got.diagnostics[0].message
