"""Helpers for the language-server end-to-end tests (pytest-lsp).

Each test drives the real server (`python -m trainproof_lsp serve`) over stdio while
impersonating a real client through its captured capabilities. Tests wait for the
server's notifications (publishDiagnostics, showMessage, $/progress) — never sleep.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any, Callable

from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

REPO = Path(__file__).resolve().parent.parent
LSP_FIXTURES = Path(__file__).resolve().parent / "lsp_fixtures"
HF_RUNS = REPO / "fixtures" / "hf_runs"

SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "trainproof_lsp", "serve"],
                            server_env=None)

# Client capability snapshots (pytest-lsp ships them): what each editor really sends.
CLIENTS = {
    "neovim-0.7": "neovim@v0.7.0",      # Debian 12's Neovim: push only, no code lens
    "neovim-0.11": "neovim@v0.11.0",    # pull diagnostics, utf-8 positions, code lens
    "vscode": "visual-studio-code@v1.65.2",  # push, codeDescription, watched files, utf-16
    "emacs": "emacs@v29.1",             # eglot: push, no related information, utf-32
}
# A ceiling so a broken server fails the test instead of hanging it; never a wait. Generous:
# under CPU burners a server start (lsprotocol.types alone is ~1 s of CPU) took 13 s of wall time.
WAIT_S = 120.0


class Session:
    """One client talking to one server."""

    def __init__(self, client: LanguageClient, name: str) -> None:
        self.client = client
        self.name = name
        self.capabilities = client_capabilities(CLIENTS[name])
        self.started = False
        self.result: lsp.InitializeResult | None = None
        self.versions: dict[str, int] = {}
        self.publishes: list[lsp.PublishDiagnosticsParams] = []
        # Keep every publishDiagnostics (pytest-lsp keeps only the last per URI), so a
        # test can wait for "the publish of version 3" even if it arrived already.
        features = client.protocol.fm._features
        keep = features[lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]

        def record(params: lsp.PublishDiagnosticsParams) -> None:
            keep(params)
            self.publishes.append(params)

        features[lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = record
        # Requests real editors answer that pytest-lsp's client does not.
        self.registrations: list[lsp.Registration] = []

        def register_capability(params: lsp.RegistrationParams) -> None:
            self.registrations.extend(params.registrations)

        features.setdefault(lsp.CLIENT_REGISTER_CAPABILITY, register_capability)
        features.setdefault(lsp.WORKSPACE_CODE_LENS_REFRESH, lambda params: None)

    @property
    def pull(self) -> bool:
        return self.capabilities.text_document is not None and self.capabilities.text_document.diagnostic is not None

    @property
    def code_lens(self) -> bool:
        return self.capabilities.text_document is not None and self.capabilities.text_document.code_lens is not None

    async def start(self, *, settings: dict[str, Any] | None = None, root: Path | None = None,
                    init_options: Any = None) -> lsp.InitializeResult:
        self.client.set_configuration({"trainproof": {"debounceMs": 0, **(settings or {})}})
        root = root or REPO
        self.result = await asyncio.wait_for(self.client.initialize_session(lsp.InitializeParams(
            capabilities=self.capabilities, root_uri=root.as_uri(), initialization_options=init_options,
            workspace_folders=[lsp.WorkspaceFolder(uri=root.as_uri(), name=root.name)])), WAIT_S)
        self.started = True
        return self.result

    async def stop(self) -> None:
        if not self.started:  # an uninitialized server is not stopped cleanly by pytest-lsp
            await self.start()
        await asyncio.wait_for(self.client.shutdown_session(), WAIT_S)

    # --- documents ------------------------------------------------------------------------

    def open(self, path: Path, text: str | None = None, language_id: str = "json") -> str:
        uri = path.as_uri()
        self.versions[uri] = 1
        self.client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=lsp.TextDocumentItem(
            uri=uri, language_id=language_id, version=1,
            text=path.read_text(encoding="utf-8") if text is None else text)))
        return uri

    def edit(self, uri: str, start: tuple[int, int], end: tuple[int, int], text: str) -> int:
        self.versions[uri] += 1
        self.client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
            content_changes=[lsp.TextDocumentContentChangePartial(
                range=lsp.Range(start=lsp.Position(line=start[0], character=start[1]),
                                end=lsp.Position(line=end[0], character=end[1])), text=text)]))
        return self.versions[uri]

    def close(self, uri: str) -> None:
        self.client.text_document_did_close(lsp.DidCloseTextDocumentParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri)))

    # --- diagnostics, the way this client gets them ---------------------------------------

    async def diagnostics(self, uri: str, version: int | None = None) -> list[lsp.Diagnostic]:
        """Push clients: wait for the publish of this version. Pull clients: ask."""
        version = self.versions.get(uri) if version is None else version
        if self.pull:
            report = await asyncio.wait_for(self.client.text_document_diagnostic_async(
                lsp.DocumentDiagnosticParams(text_document=lsp.TextDocumentIdentifier(uri=uri))), WAIT_S)
            return list(report.items)
        params = await self.published(uri, lambda p: p.version == version)
        return list(params.diagnostics)

    async def published(self, uri: str, accept: Callable[[lsp.PublishDiagnosticsParams], bool] = lambda p: True
                        ) -> lsp.PublishDiagnosticsParams:
        """The next publishDiagnostics for `uri` that `accept`s (waits for notifications)."""
        return await asyncio.wait_for(self._published(uri, accept), WAIT_S)

    async def _published(self, uri, accept):
        while True:
            for params in reversed(self.publishes):
                if params.uri == uri and accept(params):
                    return params
            await self.client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)

    async def message(self, accept: Callable[[lsp.ShowMessageParams], bool] = lambda m: True
                      ) -> lsp.ShowMessageParams:
        async def wait():
            while True:
                for m in self.client.messages:
                    if accept(m):
                        return m
                await self.client.wait_for_notification(lsp.WINDOW_SHOW_MESSAGE)
        return await asyncio.wait_for(wait(), WAIT_S)

    async def command(self, name: str, *args: Any) -> Any:
        return await asyncio.wait_for(self.client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command=name, arguments=list(args))), 120)

    async def hover(self, uri: str, line: int, character: int = 4) -> lsp.Hover | None:
        return await asyncio.wait_for(self.client.text_document_hover_async(lsp.HoverParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            position=lsp.Position(line=line, character=character))), WAIT_S)

    async def lenses(self, uri: str) -> list[lsp.CodeLens]:
        return list(await asyncio.wait_for(self.client.text_document_code_lens_async(lsp.CodeLensParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri))), WAIT_S) or [])


def by_code(diagnostics: list[lsp.Diagnostic]) -> dict[str, lsp.Diagnostic]:
    return {str(d.code): d for d in diagnostics if d.code is not None}
