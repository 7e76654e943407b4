"""A client that answers workspace/configuration after the server stopped waiting (a busy
Neovim opening a big dataset): the server went on with the settings it had, and the late
answer is dropped quietly — no "Error in server: CANCELLED" message, and the server keeps
answering."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsp_support import WAIT_S, Session
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

pytestmark = pytest.mark.asyncio

SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "trainproof_lsp", "serve"])


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient):
    yield


async def test_a_late_answer_to_workspace_configuration_is_ignored_quietly(client: LanguageClient, tmp_path: Path):
    asked = asyncio.Event()
    answer_now = asyncio.Event()

    async def late_configuration(params: lsp.ConfigurationParams) -> list:
        asked.set()
        await answer_now.wait()  # answered only once the server has gone on without it
        return [{"debounceMs": 0, "maxDiagnosticsPerFile": 7} for _ in params.items]

    client.protocol.fm._features[lsp.WORKSPACE_CONFIGURATION] = late_configuration
    session = Session(client, "neovim-0.11")
    try:
        await asyncio.wait_for(client.initialize_session(lsp.InitializeParams(
            capabilities=session.capabilities, root_uri=tmp_path.as_uri(),
            initialization_options={"configurationTimeoutMs": 100, "debounceMs": 0})), WAIT_S)
        session.started = True
        await asyncio.wait_for(asked.wait(), WAIT_S)
        dataset = tmp_path / "train.jsonl"
        dataset.write_text('{"text": "a"}\n{"text": broken\n')
        uri = session.open(dataset, language_id="jsonl")
        # The first check waits for the settings at most configurationTimeoutMs, then runs.
        first = await session.published(uri, lambda p: len(p.diagnostics) > 0)
        assert [d.code for d in first.diagnostics] == ["TP-PRE-MALFORMED-JSONL"]
        answer_now.set()  # now the late answer goes out; the server notes it in its log
        async def noted() -> str:
            while True:
                for m in client.log_messages:
                    if "late answer" in m.message:
                        return m.message
                await client.wait_for_notification(lsp.WINDOW_LOG_MESSAGE)

        note = await asyncio.wait_for(noted(), WAIT_S)
        assert note.endswith("ignored: no longer waited for")
        info = await session.command("trainproof.showServerInfo")  # answered after the late reply
        assert info["name"] == "trainproof-lsp"
        assert info["settings"]["maxDiagnosticsPerFile"] == 500  # the late answer was not taken
        errors = [m.message for m in client.messages if m.type in (lsp.MessageType.Error, lsp.MessageType.Warning)]
        assert errors == []
        logged = [m.message for m in client.log_messages if m.type in (lsp.MessageType.Error, lsp.MessageType.Warning)]
        assert logged == []
    finally:
        answer_now.set()  # never leave the client's handler waiting
    await session.stop()
