"""The "Show run" code lens on a log, and `trainproof.showRun` answering with the run
report page (the page `doctor --html` writes) for the editor to show beside the log:
rendered from disk in a child process, compared with the editor's baseline when one is
set, and a clean answer plus a message for anything it cannot read."""

from __future__ import annotations

import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
import pytest_asyncio
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from lsp_support import CLIENTS, HF_RUNS, SERVER, Session

pytestmark = pytest.mark.asyncio

SHOW_RUN = "trainproof.showRun"


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient):
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


@pytest.mark.parametrize("session", ["neovim-0.11", "vscode"], indirect=True)
async def test_a_log_offers_show_run_with_its_path(session: Session, diverging_run: Path):
    await session.start()
    log = diverging_run / "trainer_state.json"
    uri = session.open(log)
    await session.diagnostics(uri)
    (lens,) = [lens for lens in await session.lenses(uri) if lens.command.title == "Show run"]
    assert lens.command.command == SHOW_RUN
    assert list(lens.command.arguments) == [str(log)]
    assert SHOW_RUN in session.result.capabilities.execute_command_provider.commands


@pytest.mark.parametrize("session", ["neovim-0.7", "vscode"], indirect=True)
async def test_show_run_answers_with_the_run_report_page_and_no_external_reference(session: Session,
                                                                                    diverging_run: Path):
    await session.start()
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
    from trainproof_lsp.server.kinds import optional_module

    if optional_module("compare") is None:
        pytest.skip("no compare in this version")
    await session.start()
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
async def test_show_run_on_garbage_answers_cleanly_with_a_message(session: Session, tmp_path: Path):
    await session.start()
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
    # ...and the server still answers.
    info = await session.command("trainproof.showServerInfo")
    assert SHOW_RUN in info["commands"]
