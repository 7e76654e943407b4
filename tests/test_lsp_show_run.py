"""The "Show run" code lens on a log, and `trainproof.showRun` answering with the run
report page (the page `doctor --html` writes): rendered from disk in a child process,
compared with the editor's baseline when one is set, and a clean answer plus a message
for anything it cannot read.

Who shows the page depends on the client: the VS Code extension in its own panel (it says
so in initializationOptions.clientFeatures); a client with window/showDocument (Neovim
0.11) in a browser the server asks it to open on a file in the user's cache; any other
gets the file named in a message, and no lens that would seem to do nothing."""

from __future__ import annotations

import shutil
from html.parser import HTMLParser
from pathlib import Path

import attrs
import pytest
import pytest_asyncio
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from lsp_support import CLIENTS, HF_RUNS, SERVER, Session
from trainproof_lsp import TOOL_NAME, __version__
from trainproof_lsp.server.documents import uri_to_path

pytestmark = pytest.mark.asyncio

SHOW_RUN = "trainproof.showRun"
# What editors/vscode adds to its initializationOptions (server.ts initializationOptions).
VSCODE_EXTENSION = {"clientFeatures": {"showRunPanel": True}}


@pytest.fixture(autouse=True)
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The server's cache (run pages, rule docs) in the test's folder, not the user's:
    set before the server starts, which inherits it."""
    home = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient, cache_home: Path):
    yield


@pytest_asyncio.fixture(params=list(CLIENTS))
async def session(request, client: LanguageClient):
    s = Session(client, request.param)
    yield s
    await s.stop()


@pytest.fixture
def diverging_run(tmp_path: Path) -> Path:
    """A copy of the diverging HF run (log + config.json with the vocabulary size)."""
    run = tmp_path / "lr_hot_diverges"
    shutil.copytree(HF_RUNS / "lr_hot_diverges", run)
    return run


class _Requests(HTMLParser):
    """Everything in a page that could make a request: tags that load, attributes that link."""

    LOADING_TAGS = {"script", "link", "img", "iframe", "object", "embed", "image", "use"}
    LINKING_ATTRS = {"src", "href", "xlink:href", "srcset", "action", "data", "poster"}

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self.csp: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.LOADING_TAGS:
            self.found.append(f"<{tag}>")
        for name, value in attrs:
            if name in self.LINKING_ATTRS:
                self.found.append(f"<{tag} {name}={value!r}>")
            if value and ("http://" in value or "https://" in value):
                self.found.append(f"<{tag} {name}={value!r}>")
        if tag == "meta" and dict(attrs).get("http-equiv") == "Content-Security-Policy":
            self.csp = dict(attrs).get("content")


def requests_in(page: str) -> _Requests:
    parser = _Requests()
    parser.feed(page)
    parser.close()
    return parser


def runs_folder(cache_home: Path) -> Path:
    return cache_home / TOOL_NAME / __version__ / "runs"


def announcing_code_lens(session: Session) -> Session:
    """Neovim 0.7 as editors/neovim's setup starts it: announcing the code lenses 0.7
    displays but does not announce (and still without window/showDocument)."""
    caps = session.capabilities
    session.capabilities = attrs.evolve(caps, text_document=attrs.evolve(
        caps.text_document, code_lens=lsp.CodeLensClientCapabilities(dynamic_registration=False)))
    return session


async def start_as_the_editor_does(session: Session) -> None:
    if session.name == "vscode":
        await session.start(init_options={"debounceMs": 0, **VSCODE_EXTENSION})
    else:
        if session.name == "neovim-0.7":
            announcing_code_lens(session)
        await session.start()


@pytest.mark.parametrize(("session", "offered"), [("neovim-0.11", True), ("vscode", True), ("neovim-0.7", False)],
                         indirect=["session"])
async def test_show_run_is_offered_on_a_log_only_where_the_page_can_be_shown(session: Session, offered: bool,
                                                                             diverging_run: Path):
    await start_as_the_editor_does(session)
    log = diverging_run / "trainer_state.json"
    uri = session.open(log)
    await session.diagnostics(uri)
    lenses = await session.lenses(uri)
    titles = [lens.command.title for lens in lenses]
    assert titles[0].startswith("trainproof: FAIL")
    assert titles[1:] == ["Show run"] * offered + ["Run doctor", "Compare with baseline", "Set as baseline"]
    if offered:
        (lens,) = [lens for lens in lenses if lens.command.title == "Show run"]
        assert lens.command.command == SHOW_RUN
        assert list(lens.command.arguments) == [str(log)]
    # The command is there either way (a user command or the palette can still call it).
    assert SHOW_RUN in session.result.capabilities.execute_command_provider.commands


@pytest.mark.parametrize("session", ["neovim-0.7", "vscode"], indirect=True)
async def test_show_run_answers_with_the_run_report_page_and_no_external_reference(session: Session,
                                                                                    diverging_run: Path):
    await start_as_the_editor_does(session)
    log = diverging_run / "trainer_state.json"
    result = await session.command(SHOW_RUN, str(log))
    assert result["status"] == "done", result
    assert result["title"] == "Run: lr_hot_diverges/trainer_state.json"
    assert result["worst_verdict"] == "FAIL" and result["baseline"] is None
    page = result["html"]
    assert page.startswith("<!DOCTYPE html>")
    assert "<svg" in page and "TP-DIVERGE" in page
    assert "TP-DIVERGE end @120" in page  # marked on the loss curve at the step it cites
    requests = requests_in(page)
    assert requests.found == []
    assert "<script" not in page.lower()
    assert requests.csp is not None and "default-src 'none'" in requests.csp
    # The lens passes a path; a file: URI is the same log.
    by_uri = await session.command(SHOW_RUN, log.as_uri())
    assert by_uri["status"] == "done" and by_uri["html"] == page
    if session.capabilities.window and session.capabilities.window.work_done_progress:
        for reports in session.client.progress_reports.values():
            assert reports[0].kind == "begin" and reports[0].title.startswith("trainproof: Show run")
            assert reports[-1].kind == "end"


@pytest.mark.parametrize("session", ["vscode"], indirect=True)
async def test_show_run_compares_with_the_baseline_set_in_the_editor(session: Session, diverging_run: Path):
    await start_as_the_editor_does(session)
    healthy = HF_RUNS / "healthy"
    baseline = await session.command("trainproof.setBaseline", str(healthy))
    assert baseline["status"] == "done"
    result = await session.command(SHOW_RUN, str(diverging_run / "trainer_state.json"))
    assert result["status"] == "done" and result["baseline"] == str(healthy)
    page = result["html"]
    assert "TP-DIVERGE" in page  # the run's own findings
    assert "TP-END-RATIO" in page  # and the comparison's, drawn over the baseline
    assert requests_in(page).found == []


@pytest.mark.parametrize("session", ["neovim-0.7", "vscode"], indirect=True)
async def test_show_run_on_garbage_answers_cleanly_with_a_message(session: Session, tmp_path: Path,
                                                                   cache_home: Path):
    await start_as_the_editor_does(session)
    broken = tmp_path / "trainer_state.json"
    broken.write_text('{"log_history": [{"loss": 1.0, oops\n')
    result = await session.command(SHOW_RUN, str(broken))
    assert result["status"] == "none" and "html" not in result
    assert "invalid JSON" in result["message"]
    message = await session.message(lambda m: m.message.startswith("trainproof show run"))
    assert message.type == lsp.MessageType.Warning and "nothing to show" in message.message

    missing = await session.command(SHOW_RUN, str(tmp_path / "no_such_run" / "metrics.jsonl"))
    assert missing["status"] == "none" and "no such file" in missing["message"]
    for args in ((), (42,), ("",), (None,)):
        bad = await session.command(SHOW_RUN, *args)
        assert bad["status"] == "error" and "expected a log's path" in bad["message"], args
    # ...and the server still answers, having written no page.
    info = await session.command("trainproof.showServerInfo")
    assert SHOW_RUN in info["commands"]
    assert not runs_folder(cache_home).exists()
    assert session.client.shown_documents == []


# --- the page in a client without a panel -------------------------------------------------------

@pytest.mark.parametrize("session", ["vscode"], indirect=True)
async def test_the_vscode_extension_shows_the_page_itself_so_nothing_is_written_or_opened(
        session: Session, diverging_run: Path, cache_home: Path):
    await start_as_the_editor_does(session)
    assert session.capabilities.window.show_document.support  # it could; it need not
    result = await session.command(SHOW_RUN, str(diverging_run / "trainer_state.json"))
    assert result["status"] == "done" and "<svg" in result["html"]
    assert "file" not in result
    assert session.client.shown_documents == []
    assert not runs_folder(cache_home).exists()
    # The client's features are not settings: no warning about them, settings intact.
    info = await session.command("trainproof.showServerInfo")
    assert info["settings"]["debounceMs"] == 0
    assert not [m for m in session.client.messages if m.type == lsp.MessageType.Warning]


@pytest.mark.parametrize("session", ["neovim-0.11", "vscode"], indirect=True)
async def test_a_client_with_show_document_gets_the_page_opened_in_a_browser(
        session: Session, diverging_run: Path, cache_home: Path):
    await session.start()  # VS Code here: a client without the extension's panel
    log = diverging_run / "trainer_state.json"
    result = await session.command(SHOW_RUN, str(log))
    assert result["status"] == "done" and result["opened"] is True, result
    # The server asked before it answered, so the request is in already.
    (shown,) = session.client.shown_documents
    assert shown.external is True and shown.uri.startswith("file:")
    page = uri_to_path(shown.uri)
    assert page.parent == runs_folder(cache_home)
    text = page.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "<svg" in text and "TP-DIVERGE" in text
    assert result["file"] == str(page) and result["html"] == text
    message = await session.message(lambda m: str(page) in m.message)
    assert message.type == lsp.MessageType.Info
    assert message.message == result["message"]
    assert message.message.startswith("trainproof show run lr_hot_diverges/trainer_state.json: FAIL")

    # Asked again (by URI this time): the same file, replaced, and nothing left beside it.
    again = await session.command(SHOW_RUN, log.as_uri())
    assert again["file"] == result["file"] and len(session.client.shown_documents) == 2
    assert sorted(runs_folder(cache_home).iterdir()) == [page]
    # Another run's log of the same name gets its own page.
    other = await session.command(SHOW_RUN, str(HF_RUNS / "healthy" / "trainer_state.json"))
    assert other["status"] == "done" and other["file"] != result["file"]
    assert Path(other["file"]).parent == runs_folder(cache_home)


@pytest.mark.parametrize("session", ["neovim-0.11"], indirect=True)
async def test_when_the_client_refuses_to_open_the_page_the_message_says_where_it_is(
        session: Session, client: LanguageClient, diverging_run: Path, cache_home: Path):
    asked: list[lsp.ShowDocumentParams] = []

    def refuse(params: lsp.ShowDocumentParams) -> lsp.ShowDocumentResult:
        asked.append(params)  # as Neovim answers when xdg-open fails
        return lsp.ShowDocumentResult(success=False)

    client.protocol.fm._features[lsp.WINDOW_SHOW_DOCUMENT] = refuse
    await session.start()
    result = await session.command(SHOW_RUN, str(diverging_run / "trainer_state.json"))
    assert result["status"] == "done" and result["opened"] is False, result
    (params,) = asked
    page = Path(result["file"])
    assert params.external is True and uri_to_path(params.uri) == page
    assert "TP-DIVERGE" in page.read_text(encoding="utf-8")
    message = await session.message(lambda m: str(page) in m.message)
    assert message.type == lsp.MessageType.Warning
    assert "did not open the page" in message.message and message.message.endswith(f"it is at {page}")


async def test_an_error_answer_to_show_document_is_the_reason_the_message_gives():
    # In-process: pytest-lsp fails a test whose client handler errors, so the error answer
    # a client without a handler sends is played by a stand-in for the server's request.
    from pygls.exceptions import JsonRpcMethodNotFound

    from trainproof_lsp.server.commands import _show_document

    class NoHandler:
        async def window_show_document_async(self, params: lsp.ShowDocumentParams) -> lsp.ShowDocumentResult:
            assert params.external is True
            raise JsonRpcMethodNotFound.of(lsp.WINDOW_SHOW_DOCUMENT)

    class Refuses:
        async def window_show_document_async(self, params: lsp.ShowDocumentParams) -> lsp.ShowDocumentResult:
            return lsp.ShowDocumentResult(success=False)

    assert "window/showDocument" in await _show_document(NoHandler(), "file:///run.html")
    assert await _show_document(Refuses(), "file:///run.html") == "it answered success: false"


@pytest.mark.parametrize("session", ["emacs", "neovim-0.7"], indirect=True)
async def test_a_client_with_neither_gets_the_page_written_and_named(session: Session, diverging_run: Path,
                                                                     cache_home: Path):
    await start_as_the_editor_does(session)
    result = await session.command(SHOW_RUN, str(diverging_run / "trainer_state.json"))
    assert result["status"] == "done" and result["opened"] is False, result
    assert session.client.shown_documents == []  # never asked: it could not have answered
    page = Path(result["file"])
    assert page.parent == runs_folder(cache_home)
    assert page.read_text(encoding="utf-8") == result["html"]
    message = await session.message(lambda m: str(page) in m.message)
    assert message.type == lsp.MessageType.Info and "open it in a browser" in message.message
