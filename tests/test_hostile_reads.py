"""Only regular files are opened, and a cited file's line text is read only as far as a
diagnostic needs it: a FIFO, a device or /dev/zero behind a symlink, named like a log or
a dataset, is NOT-CHECKED with a one-line reason — in `doctor`, `preflight` (data and
--eval), the engine's own opens and the language server — never a hang; a big binary
file a finding cites is not read into the server.

Waits are on events (a notification, a thread finishing) with generous safety timeouts;
the server runs as editors start it (`python -m trainproof_lsp serve` on stdio) under a
1 GiB address-space limit, so a regression fails here instead of taking the machine.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import socket
import struct
import sys
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import HF_RUNS
from limited_child import findings, run_limited
from lsp_pipe import PipeClient
from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import Finding, Level, Location, Related, Span
from trainproof_lsp.judge import engine
from trainproof_lsp.readers import common
from trainproof_lsp.readers.common import NotRegularFile, open_regular, read_regular
from trainproof_lsp.readers.dataset import scan_dataset
from trainproof_lsp.server import lines as disk_lines
from trainproof_lsp.server.lines import DiskLines, cited_lines

MIB = 1 << 20
SAFETY_S = 60.0  # a ceiling so a blocked open fails the test instead of hanging it
FIFO_REASON = "a FIFO (named pipe), not a regular file: only regular files are read"
ZERO_REASON = "a character device (through a symlink), not a regular file: only regular files are read"
DIVERGING = HF_RUNS / "lr_hot_diverges" / "trainer_state.json"


def within(fn: Callable[[], Any], timeout: float = SAFETY_S) -> Any:
    """fn() in a thread, waited for (an event, with a safety ceiling): a blocked open
    fails the test instead of hanging it."""
    done = threading.Event()
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as e:  # handed to the test
            out["error"] = e
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(timeout), f"still blocked after {timeout:g} s"
    if "error" in out:
        raise out["error"]
    return out.get("value")


def _zero(path: Path) -> Path:
    path.symlink_to("/dev/zero")
    return path


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


# --- the one opener ------------------------------------------------------------------------

def test_open_regular_refuses_every_kind_of_file_that_is_not_regular(tmp_path: Path):
    fifo = _fifo(tmp_path / "trainer_state.json")
    zero = _zero(tmp_path / "metrics.jsonl")
    sock_path = tmp_path / "s.jsonl"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    try:
        got = {}
        for path in (fifo, zero, sock_path, tmp_path):
            with pytest.raises(NotRegularFile) as err:
                within(lambda p=path: open_regular(p))
            got[path.name] = err.value.strerror
            assert isinstance(err.value, OSError)  # every reader's `except OSError` catches it
    finally:
        sock.close()
    assert got == {"trainer_state.json": FIFO_REASON, "metrics.jsonl": ZERO_REASON,
                   "s.jsonl": "a socket, not a regular file: only regular files are read",
                   tmp_path.name: "a folder, not a regular file: only regular files are read"}
    text = tmp_path / "ok.jsonl"
    text.write_bytes(b'{"a": 1}\n')
    assert read_regular(text) == b'{"a": 1}\n'
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "missing.jsonl")


def test_read_regular_stops_one_byte_past_its_limit_without_allocating_the_limit(tmp_path: Path):
    path = tmp_path / "big.jsonl"
    path.write_bytes(b"x" * 1000)
    assert len(read_regular(path, 10)) == 11  # over the limit: the caller's cap check says so
    assert len(read_regular(path, 5000)) == 1000
    # 1 TiB asked of a 1000-byte file: read whole, with no 1 TiB buffer (this would fail).
    assert len(read_regular(path, 1 << 40)) == 1000


def test_a_file_swapped_for_a_fifo_after_the_check_is_refused_at_the_open(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch):
    """The engine checks a path before it opens it; the open itself refuses a FIFO too,
    so a file replaced between the check and the open cannot block a reader."""
    log = _fifo(tmp_path / "trainer_state.json")
    data = _fifo(tmp_path / "train.jsonl")
    monkeypatch.setattr(engine, "not_regular", lambda path: None)  # as if it were regular at the check
    report = within(lambda: engine.judge_file(log, Config()))
    assert report.verdict.value == "NOT-CHECKED" and FIFO_REASON in report.reason
    with pytest.raises(Exception) as err:
        within(lambda: scan_dataset(data))
    assert str(err.value) == f"{data}: cannot read ({FIFO_REASON})"
    with pytest.raises(NotRegularFile):  # the metric readers' own read of a path
        within(lambda: common.file_data(log, None))


# --- the command line -------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_preflight_on_a_fifo_or_dev_zero_as_data_and_as_eval_is_not_checked(tmp_path: Path, cwd: Path, kind: str):
    bad = tmp_path / "eval.jsonl"
    reason = FIFO_REASON if kind == "fifo" else ZERO_REASON
    _fifo(bad) if kind == "fifo" else _zero(bad)
    good = tmp_path / "train.jsonl"
    good.write_text("".join(json.dumps({"text": f"row {i}"}) + "\n" for i in range(20)))
    for jobs in ("1", "2"):
        code, data, _ = run_limited("preflight", bad, "--jobs", jobs, cwd=cwd)  # as data
        assert code == 2
        (report,) = data["reports"]
        assert report["verdict"] == "NOT-CHECKED" and report["reason"] == f"{bad}: {reason}"
        code, data, _ = run_limited("preflight", good, "--eval", bad, "--jobs", jobs, cwd=cwd)
        assert code == 2
        assert [(r["artefact"]["path"], r["verdict"]) for r in data["reports"]] == [
            (str(good), "PASS"), (str(bad), "NOT-CHECKED")]
        assert data["reports"][1]["reason"] == f"{bad}: {reason}"


def test_doctor_on_a_folder_with_fifo_logs_names_each_and_judges_the_rest(tmp_path: Path, cwd: Path):
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(DIVERGING, run / "trainer_state.json")
    fifos = [_fifo(run / name) for name in ("metrics.csv", "train_log.jsonl", "train.jsonl")]
    code, data, _ = run_limited("doctor", run, cwd=cwd)
    assert code == 1  # the diverging log still FAILs
    assert sorted(data["not_judged"], key=lambda e: e["path"]) == sorted(
        ({"path": str(p), "reason": FIFO_REASON} for p in fifos), key=lambda e: e["path"])
    assert "TP-DIVERGE" in {f["id"] for f in findings(data)}


# --- the language server -----------------------------------------------------------------------

def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def _server(tmp_path: Path) -> PipeClient:
    client = PipeClient([sys.executable, "-m", "trainproof_lsp", "serve"], cwd=tmp_path, preexec_fn=_limit_memory,
                        settings={"debounceMs": 0})
    client.initialize(tmp_path, capabilities={"workspace": {"configuration": True,
                                                            "didChangeWatchedFiles": {"dynamicRegistration": True}},
                                              "textDocument": {"publishDiagnostics": {}}})
    return client


def _watched(client: PipeClient, *paths: Path) -> None:
    client.notify("workspace/didChangeWatchedFiles",
                  {"changes": [{"uri": p.as_uri(), "type": 1} for p in paths]})


def _published(client: PipeClient, path: Path, accept: Callable[[list[dict]], bool]) -> list[dict]:
    uri = path.as_uri()
    msg = client.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                          and m["params"]["uri"] == uri and accept(m["params"]["diagnostics"]),
                          what=f"diagnostics for {path.name}")
    return list(msg["params"]["diagnostics"])


def _peak_rss_mib(client: PipeClient) -> float:
    status = Path(f"/proc/{client.proc.pid}/status").read_text()
    kib = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
    return kib / 1024


def _not_checked(reason: str) -> Callable[[list[dict]], bool]:
    return lambda diags: any(d.get("code") == "TP-NOT-CHECKED" and reason in d["message"] for d in diags)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the server's peak RSS from /proc")
def test_fifo_logs_appearing_in_the_workspace_block_no_judge_and_the_server_exits(tmp_path: Path):
    # Two FIFOs, one per judge thread: the head read before the regular-file check held
    # both threads, so nothing was judged after them and shutdown never returned.
    for folder in ("a", "b", "c"):
        (tmp_path / folder).mkdir()
    fifo_a = _fifo(tmp_path / "a" / "trainer_state.json")
    fifo_b = _fifo(tmp_path / "b" / "metrics.jsonl")
    log = tmp_path / "c" / "trainer_state.json"
    client = _server(tmp_path)
    try:
        _watched(client, fifo_a, fifo_b)
        for fifo in (fifo_a, fifo_b):
            (diag,) = _published(client, fifo, _not_checked(FIFO_REASON))
            # (the path as the editor shows it: relative to the workspace folder, or whole)
            assert diag["message"].endswith(f"{fifo.name}: {FIFO_REASON}")
            assert diag["range"]["start"] == {"line": 0, "character": 0}
        shutil.copy(DIVERGING, log)  # a normal log is still judged after them
        _watched(client, log)
        diags = _published(client, log, lambda ds: any(d.get("code") == "TP-DIVERGE" for d in ds))
        assert [d["severity"] for d in diags if d.get("code") == "TP-DIVERGE"] == [1]
    finally:
        code = client.close()
    assert code == 0, client.stderr[-2000:]


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the server's peak RSS from /proc")
def test_a_dev_zero_log_in_the_workspace_is_not_checked_and_read_no_further(tmp_path: Path):
    zero = _zero(tmp_path / "trainer_state.json")
    client = _server(tmp_path)
    try:
        _watched(client, zero)
        (diag,) = _published(client, zero, _not_checked(ZERO_REASON))
        assert diag["message"].endswith(f"{zero.name}: {ZERO_REASON}")
        _watched(client, zero)  # again: still nothing read
        assert client.command("trainproof.showServerInfo")["name"] == "trainproof-lsp"
        # The server's whole peak (interpreter, pygls, the engine): far below what one
        # read of /dev/zero would reach before the 1 GiB limit stops it.
        assert _peak_rss_mib(client) < 300
    finally:
        code = client.close()
    assert code == 0, client.stderr[-2000:]


def _cut_safetensors(path: Path, size: int) -> Path:
    """A safetensors file of `size` bytes (sparse: no disk used) whose one tensor runs past
    its end: doctor cites it (TP-ENV-CKPT-TRUNCATED) with no line to place it on."""
    header = json.dumps({"w": {"dtype": "F32", "shape": [size // 4], "data_offsets": [0, size]}}).encode()
    with path.open("wb") as fh:
        fh.write(struct.pack("<Q", len(header)) + header)
        fh.truncate(size)
    return path


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the server's peak RSS from /proc")
def test_a_512_mib_checkpoint_a_doctor_finding_cites_is_not_read_into_the_server(tmp_path: Path):
    run = tmp_path / "run"
    run.mkdir()
    ckpt = _cut_safetensors(run / "model.safetensors", 512 * MIB)
    client = _server(tmp_path)
    try:
        client.command("trainproof.doctor", str(run), timeout=120)
        diags = _published(client, ckpt, lambda ds: len(ds) > 0)
        assert "TP-ENV-CKPT-TRUNCATED" in {d.get("code") for d in diags}
        assert {d["range"]["start"]["line"] for d in diags} == {0}
        assert _peak_rss_mib(client) < 300  # reading it whole took the server past 1.6 GB
    finally:
        code = client.close()
    assert code == 0, client.stderr[-2000:]


# --- line text for the diagnostics of files that are not open ------------------------------------

class _CountingOpen:
    """A spy on the opener DiskLines uses: how many bytes it read, from which files."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.read: dict[str, int] = {}
        real = common.open_regular
        spy = self

        class Counting:
            def __init__(self, fh: Any, name: str) -> None:
                self.fh, self.name = fh, name

            def read(self, n: int = -1) -> bytes:
                block = self.fh.read(n)
                spy.read[self.name] = spy.read.get(self.name, 0) + len(block)
                return block

            def fileno(self) -> int:
                return int(self.fh.fileno())

            def __enter__(self) -> "Counting":
                return self

            def __exit__(self, *exc: object) -> None:
                self.fh.close()

        def counting_open(path: Any, buffering: int = -1) -> Any:
            spy.read.setdefault(Path(path).name, 0)
            return Counting(real(path, buffering), Path(path).name)

        monkeypatch.setattr(common, "open_regular", counting_open)


def _finding(path: Path, line: int, *, related: tuple[Path, int] | None = None) -> Finding:
    rel = () if related is None else (Related(location=Location(path=str(related[0]),
                                                                span=Span(related[1], 0, related[1], 1)),
                                              message="there"),)
    return Finding(id="TP-X", level=Level.WARN, message="m", evidence={},
                   location=Location(path=str(path), span=Span(line, 2, line, 4)), related=rel)


def test_a_binary_file_cited_on_a_line_is_read_one_block_and_gives_no_line_text(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch):
    spy = _CountingOpen(monkeypatch)
    ckpt = tmp_path / "model.pt"
    with ckpt.open("wb") as fh:
        fh.write(b"PK\x03\x04\x00\x00" + b"\n" * 100)
        fh.truncate(64 * MIB)
    big_text = tmp_path / "huge.jsonl"
    with big_text.open("wb") as fh:
        fh.write(b'{"a": "\xc3\xa9"}\n')
        fh.truncate(disk_lines.MAX_FILE_BYTES + 1)  # over the size cap (sparse)
    lines = DiskLines()
    lines.load(cited_lines([_finding(ckpt, 50), _finding(big_text, 0)]))
    assert spy.read == {"model.pt": disk_lines.BLOCK_BYTES, "huge.jsonl": 0}
    assert lines(str(ckpt), 50) is None and lines(str(big_text), 0) is None
    lines.load(cited_lines([_finding(ckpt, 50)]))  # known binary, unchanged: not read again
    assert spy.read["model.pt"] == disk_lines.BLOCK_BYTES


def test_cited_lines_are_read_up_to_the_last_one_and_kept_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    spy = _CountingOpen(monkeypatch)
    path = tmp_path / "train.jsonl"
    rows = [f'{{"text": "row {i} é"}}\r\n' if i % 2 else f'{{"text": "row {i}"}}\n' for i in range(200_000)]
    path.write_text("".join(rows), encoding="utf-8")
    other = tmp_path / "eval.jsonl"
    other.write_text('{"text": "a"}\n{"text": "ü"}', encoding="utf-8")  # no newline at the end
    lines = DiskLines()
    wanted = cited_lines([_finding(path, 3), _finding(path, 7, related=(other, 1)), _finding(path, 120_000)])
    assert wanted == {str(path): {3, 7, 120_000}, str(other): {1}}
    lines.load(wanted)
    assert lines(str(path), 3) == '{"text": "row 3 é"}' and lines(str(path), 7) == '{"text": "row 7 é"}'
    assert lines(str(path), 120_000) == '{"text": "row 120000"}'
    assert lines(str(other), 1) == '{"text": "ü"}'
    assert lines(str(path), 4) is None  # not cited: not kept (and never read on a call)
    size_to_last = sum(len(r.encode()) for r in rows[:120_001])
    assert size_to_last <= spy.read["train.jsonl"] < size_to_last + disk_lines.BLOCK_BYTES
    assert lines.cost < 1000
    lines.load(cited_lines([_finding(path, 3)]))  # kept: not read again
    assert spy.read["train.jsonl"] < size_to_last + disk_lines.BLOCK_BYTES
    path.write_text('{"text": "é"}\n' * 5, encoding="utf-8")  # the file changed: read again
    lines.load(cited_lines([_finding(path, 3)]))
    assert lines(str(path), 3) == '{"text": "é"}' and lines(str(path), 120_000) is None


def test_a_line_over_the_line_cap_and_a_line_past_the_end_give_no_text(tmp_path: Path):
    path = tmp_path / "trainer_state.json"
    long_line = b'{"log_history": [{"note": "' + b"a" * disk_lines.MAX_LINE_BYTES + b'"}]}'
    path.write_bytes(b"{\n" + long_line + b"\n}\n")
    lines = DiskLines()
    lines.load({str(path): {0, 1, 2, 9}})
    assert [lines(str(path), n) for n in (0, 1, 2, 9)] == ["{", None, "}", None]
    assert lines.cost < 1000


def test_kept_lines_are_bounded_least_recently_used_first_out(tmp_path: Path):
    lines = DiskLines(budget=3 * (disk_lines._LINE_OVERHEAD + 1000))
    paths = []
    for i in range(5):
        p = tmp_path / f"{i}.jsonl"
        p.write_text("x" * 1000 + "\n")
        paths.append(p)
        lines.load({str(p): {0}})
    assert lines.cost <= 3 * (disk_lines._LINE_OVERHEAD + 1000)
    assert [lines(str(p), 0) is not None for p in paths] == [False, False, True, True, True]


def test_not_regular_files_give_no_line_text_and_no_wait(tmp_path: Path):
    fifo = _fifo(tmp_path / "trainer_state.json")
    zero = _zero(tmp_path / "metrics.jsonl")
    lines = DiskLines()
    within(lambda: lines.load({str(fifo): {0}, str(zero): {0, 5}, str(tmp_path): {0}}))
    assert lines(str(fifo), 0) is None and lines(str(zero), 5) is None


@pytest.mark.parametrize("seed", range(4))
def test_read_lines_matches_a_whole_split_for_any_block_size(seed: int, monkeypatch: pytest.MonkeyPatch):
    import io
    import random

    rng = random.Random(seed)
    monkeypatch.setattr(disk_lines, "MAX_LINE_BYTES", 12)
    for _ in range(300):
        monkeypatch.setattr(disk_lines, "BLOCK_BYTES", rng.choice((1, 2, 3, 5, 8, 64)))
        data = "".join(rng.choice(["a", "é", "\n", "\r\n", "b" * 7]) for _ in range(rng.randint(0, 40))).encode()
        data = data.replace(b"\x00", b"")
        whole = data.split(b"\n")
        wanted = sorted(rng.sample(range(len(whole) + 3), rng.randint(1, min(5, len(whole) + 3))))
        got = disk_lines.read_lines(io.BytesIO(data), wanted)
        expected = {n: (whole[n].decode().removesuffix("\r") if len(whole[n]) <= 12 else None)
                    for n in wanted if n < len(whole)}
        assert got == expected, (data, wanted)
