"""Chat templates are rendered in a child process under a CPU-time limit, an address-space
limit and a wall-clock timeout (readers/template_child.py, readers/chat_template.py), never
in the process of the command line or the language server.

The hostile templates are the audit's: each spends its time in C or in untraced jinja code
(a big-integer power, lipsum), or builds a gigabyte string in one C call (format widths given
as strings), where the sandbox's own trace and size checks cannot reach. Each must give a
NOT-CHECKED with its reason — never a hang, a crash or a FAIL — and cost this process
nothing: the CPU is spent in the child (counted by RUSAGE_CHILDREN), this process's peak
memory does not move.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import REPO, jsonl_text
from lsp_pipe import PipeClient
from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import Level, Verdict
from trainproof_lsp.judge.preflight import judge_tokenizer, preflight
from trainproof_lsp.readers import chat_template as ct
from trainproof_lsp.readers import template_child
from trainproof_lsp.readers.tokens import render_rows

TOK = REPO / "fixtures" / "tokenizers"
CPU = f"the chat template render exceeded {ct.MAX_CPU_SECONDS} s CPU"
MEMORY = f"the chat template render exceeded {ct.MAX_MEMORY_MIB} MiB memory"
LOOP = f"the chat template did not finish rendering within {ct.MAX_SECONDS:g} s"
# A child's CPU: its start-up (~0.1 s of CPU) and at most MAX_CPU_SECONDS + 1 for the render
# (RLIMIT_CPU counts whole seconds). Generous on the start-up side for a slow machine.
CHILD_CPU_CEILING = ct.MAX_CPU_SECONDS + 1 + 1.5
# This process's peak RSS may move a little (imports, the test's own objects), never by the
# hundreds of MiB a render in this process would take.
OWN_GROWTH_CEILING_MIB = 64

HOSTILE = {
    # 3^(64^5): each exponent is within the sandbox's bound of 64; the power runs in C for minutes.
    "power-tower": ("{{ 3**64**64**64**64**64 }}", CPU),
    # 100,000 paragraphs made in jinja's own (untraced) helper: a size argument under the bound.
    "lipsum": ("{{ lipsum(100000) }}", CPU),
    # A width given as a string is no size argument the sandbox sees: str.format builds ~1 GB.
    "format-width": ("{{ '{:{w}}'.format('x', w='999999999') }}", MEMORY),
    # The width behind a mapping key escapes the %-format check: ~1 GB again.
    "percent-width": ("{{ '%(a)999999999s' % {'a': 'x'} }}", MEMORY),
    # 1 GiB of spaces, the width as a positional string argument.
    "gigabyte-string": ("{{ '{0:>{1}}'.format('', '1073741824') }}", MEMORY),
    # A plain loop in template code: the sandbox's own trace stops it, the child lives on.
    "infinite-loop": ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", LOOP),
}


class Spent:
    """CPU seconds of reaped children and this process's peak RSS, before and after."""

    def __enter__(self) -> "Spent":
        self._children = self._child_cpu()
        self._peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return self

    def __exit__(self, *exc: object) -> None:
        self.child_cpu = self._child_cpu() - self._children
        self.own_growth_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - self._peak) / 1024

    @staticmethod
    def _child_cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime


def tokenizer_with(folder: Path, template: str) -> Path:
    shutil.copytree(TOK / "healthy_chatml", folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["chat_template"] = template
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    return folder


@pytest.mark.parametrize("template,reason", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_template_is_not_checked_with_its_reason_within_the_limits(template, reason, tmp_path):
    folder = tokenizer_with(tmp_path / "tok", template)
    with Spent() as spent:
        report = judge_tokenizer(folder, Config())
    assert report.verdict is Verdict.NOT_CHECKED
    (f,) = report.findings
    assert (f.id, f.level) == ("TP-NOT-CHECKED", Level.NOT_CHECKED)
    assert f.message == ("TP-TOK-TEMPLATE-NO-EOS not checked: the chat template could not render a "
                         f"user/assistant exchange: {reason}")
    assert spent.child_cpu < CHILD_CPU_CEILING
    assert spent.own_growth_mib < OWN_GROWTH_CEILING_MIB
    if reason == CPU:  # the limit spoke: the child ran to it, not past it
        assert spent.child_cpu >= ct.MAX_CPU_SECONDS


@pytest.fixture()
def started(monkeypatch) -> list[list[str]]:
    """The argv of every process the renderer starts."""
    argvs: list[list[str]] = []
    real = subprocess.Popen

    def popen(*args, **kwargs):
        argvs.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(ct.subprocess, "Popen", popen)
    return argvs


def test_a_normal_template_renders_in_one_child_for_both_turn_layouts(started):
    # A template that refuses a conversation without a system turn first: two renders.
    template = ("{% if messages[0].role != 'system' %}{{ raise_exception('system first') }}{% endif %}"
                "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{{ eos_token }}{% endfor %}")
    end = ct.assistant_end(template, special={"eos_token": "</s>"}, markers=["</s>"])
    assert (end.tail, end.marker, end.system) == ("</s>", "</s>", True)
    assert started == [[sys.executable, "-I", str(Path(template_child.__file__))]]


def test_the_rows_of_one_file_share_one_child(tmp_path, started):
    template = ("{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('no tools') }}{% endif %}"
                "<|{{ m.role }}|>{{ m.content }}{% endfor %}")
    rows = [{"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]},
            {"messages": [{"role": "user", "content": "a"}, {"role": "tool", "content": "b"}]},
            {"messages": [{"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}]}]
    path = tmp_path / "rows.jsonl"
    path.write_text(jsonl_text(rows))
    got = render_rows(path, template, {}, [0, 1, 2])
    assert (got.rendered, [(e.line, e.message) for e in got.template_errors]) == (3, [(1, "no tools")])
    assert len(started) == 1


# --- the parent's side: a child that hangs, dies, or answers too much -------------------------

def fake_child(tmp_path: Path, body: str) -> Path:
    """A stand-in for template_child.py: answers the set-up, then does `body`."""
    script = tmp_path / "fake_child.py"
    script.write_text(textwrap.dedent("""\
        import os, signal, sys, time
        sys.stdin.readline()
        sys.stdout.write('{"ok": true}\\n'); sys.stdout.flush()
        sys.stdin.readline()
        """) + textwrap.dedent(body))
    return script


@pytest.mark.parametrize("body,reason", [
    # stuck without spending CPU: only the wall clock ends it
    ("sys.stdin.read()\n", "the chat template render did not finish within 1 s (wall clock; "
                           "the render process was killed)"),
    ("os.kill(os.getpid(), signal.SIGSEGV)\n", "the chat template render process was killed by SIGSEGV "
                                               f"(limits: {ct.MAX_CPU_SECONDS} s CPU, {ct.MAX_MEMORY_MIB} MiB memory)"),
    ("os.kill(os.getpid(), signal.SIGXCPU)\n", CPU),
    ("sys.exit(3)\n", "the chat template render process ended (exit 3)"),
    ("print('not json')\n", "the chat template render process answered something else than JSON"),
    ("sys.stdout.write('x' * (4 << 20)); sys.stdout.flush(); sys.stdin.read()\n",
     "the chat template render wrote more than 2404096 bytes"),
], ids=["hangs", "crashes", "cpu-signal", "exits", "garbage", "endless-answer"])
def test_a_child_that_misbehaves_is_killed_and_named(body, reason, tmp_path, monkeypatch):
    monkeypatch.setattr(ct, "CHILD", fake_child(tmp_path, body))
    monkeypatch.setattr(ct, "MAX_WALL_SECONDS", 1.0)
    renderer = ct.Renderer("{{ messages }}", variables={})
    with pytest.raises(ct.TemplateUnusable) as e:
        renderer.render([{"role": "user", "content": "x"}])
    assert str(e.value) == reason
    assert renderer._proc is None  # killed and reaped
    with pytest.raises(ct.TemplateUnusable) as again:  # the template stays unusable: no second child
        renderer.render([{"role": "user", "content": "x"}])
    assert str(again.value) == reason


def test_where_select_cannot_wait_on_pipes_a_reader_thread_waits(tmp_path, monkeypatch):
    monkeypatch.setattr(ct, "SELECT_ON_PIPES", False)  # as on Windows
    assert ct.render("{{ messages[0].content }}", [{"role": "user", "content": "hi"}], special={}) == "hi"
    monkeypatch.setattr(ct, "CHILD", fake_child(tmp_path, "sys.stdin.read()\n"))
    monkeypatch.setattr(ct, "MAX_WALL_SECONDS", 1.0)
    with pytest.raises(ct.TemplateUnusable) as e:
        ct.Renderer("{{ 1 }}", variables={}).render([{"role": "user", "content": "x"}])
    assert str(e.value).startswith("the chat template render did not finish within 1 s")


def test_without_jinja2_in_the_child_the_render_is_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "jinja2.sandbox", None)
    template_child._environment.cache_clear()
    try:
        with pytest.raises(template_child.TemplateUnavailable) as e:
            template_child.compile_template("{{ 1 }}")
        assert str(e.value) == ct.MISSING_JINJA2
    finally:
        template_child._environment.cache_clear()


def test_the_child_imports_nothing_from_the_working_folder_or_a_relative_pythonpath(tmp_path, monkeypatch):
    marker = tmp_path / "imported"
    for name in ("jinja2/__init__.py", "json.py", "markupsafe/__init__.py", "re.py"):
        module = tmp_path / name
        module.parent.mkdir(exist_ok=True)
        module.write_text(f"open({str(marker)!r}, 'a').write({name!r})\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([".", "", str(tmp_path / "nothing_here")]))
    assert ct.render("{{ messages[0].content }}!", [{"role": "user", "content": "hi"}], special={}) == "hi!"
    assert not marker.exists()


# --- preflight --max-len: transformers' own render, in the bounded child -------------------


def _tiny_tokenizer(folder: Path, template: str) -> Path:
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_tiny_tokenizer",
                                                  REPO / "fixtures" / "tokenizers" / "make_tiny_tokenizer.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.write_tiny_tokenizer(folder, chat_template=template)


CHAT_ROWS = [{"messages": [{"role": "user", "content": "what is two plus two"}, {"role": "assistant", "content": "four"}]}]


@pytest.mark.parametrize("name", ["lipsum", "percent-width"])
def test_max_len_counting_renders_under_the_same_limits(name, tmp_path):
    pytest.importorskip("transformers")
    template, reason = HOSTILE[name]
    tok = _tiny_tokenizer(tmp_path / "tok", template)
    data = tmp_path / "chat.jsonl"
    data.write_text(jsonl_text(CHAT_ROWS))
    from trainproof_lsp.readers.tokens import load_tokenizer

    load_tokenizer(tok)  # transformers' imports and the tokenizer's load, before measuring
    with Spent() as spent:
        report, tok_report = preflight([data], Config(), tokenizer_dir=tok, max_len=16).reports
    assert report.verdict is Verdict.NOT_CHECKED and tok_report.verdict is Verdict.NOT_CHECKED
    skipped = {c.group: c.reason for c in report.checks if not c.ran}
    assert skipped["TP-PRE-CONTEXT-OVERFLOW"] == f"{tok}: {reason}"
    assert [f.level for f in report.findings] == [Level.NOT_CHECKED]
    # Two children: the counting's (transformers' render) and the tokenizer check's.
    assert spent.child_cpu < 2 * CHILD_CPU_CEILING + 1.5  # + transformers' import in the first
    assert spent.own_growth_mib < OWN_GROWTH_CEILING_MIB


def test_max_len_counts_match_transformers_own_render(tmp_path, started):
    pytest.importorskip("transformers")
    from trainproof_lsp.readers.tokens import count_tokens, load_tokenizer

    template = ("{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} <|end|> {% endfor %}"
                "{% if add_generation_prompt %}<|assistant|> {% endif %}{{ eos_token }}")
    tok = load_tokenizer(_tiny_tokenizer(tmp_path / "tok", template))
    data = tmp_path / "chat.jsonl"
    data.write_text(jsonl_text(CHAT_ROWS))
    lengths = count_tokens(data, tok, lines=1)
    assert len(started) == 1  # the file's renders (whole rows and prompt parts) in one child
    messages = CHAT_ROWS[0]["messages"]
    full = tok.apply_chat_template(messages, tokenize=False)
    prompt = tok.apply_chat_template(messages[:1], tokenize=False, add_generation_prompt=True)
    count = lambda text: len(tok(text, add_special_tokens=False)["input_ids"])  # noqa: E731
    assert (lengths.tokens[0], lengths.prompt[0]) == (count(full), count(prompt)) == (11, 9)


def test_the_counting_child_renders_with_the_environments_own_transformers(tmp_path):
    # transformers is in this environment (a virtual one here) and not necessarily in the
    # base interpreter's: the child must find it where this process did. Its wording of a
    # refusal says who rendered: transformers raises jinja's TemplateError, the sandbox
    # reports the bare message.
    pytest.importorskip("transformers")
    from trainproof_lsp.readers.tokens import count_tokens, load_tokenizer

    template = "{% for m in messages %}{{ raise_exception('no ' + m['role']) }}{% endfor %}"
    tok = load_tokenizer(_tiny_tokenizer(tmp_path / "tok", template))
    data = tmp_path / "chat.jsonl"
    data.write_text(jsonl_text(CHAT_ROWS))
    lengths = count_tokens(data, tok, lines=1)
    assert [(e.line, e.message) for e in lengths.template_errors] == [(0, "TemplateError: no user")]


def test_the_cli_max_len_path_answers_not_checked_with_the_reason(tmp_path):
    pytest.importorskip("transformers")
    template, reason = HOSTILE["power-tower"]
    tok = _tiny_tokenizer(tmp_path / "tok", template)
    data = tmp_path / "chat.jsonl"
    data.write_text(jsonl_text(CHAT_ROWS))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "trainproof_lsp", "preflight", str(data), "--tokenizer", str(tok),
                           "--max-len", "16", "--json"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)  # a safety net: the limits answer in seconds
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    doc = json.loads(proc.stdout)
    data_report, tok_report = doc["reports"]
    assert data_report["verdict"] == tok_report["verdict"] == "NOT-CHECKED"
    assert any(reason in f["message"] for f in data_report["findings"])
    assert any(reason in f["message"] for f in tok_report["findings"])


# --- the language server ------------------------------------------------------------------


# The server peaks at ~65 MiB on this test; the gigabyte string built in its process would
# take it past 1 GiB.
SERVER_PEAK_CEILING_MIB = 256


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the server's peak RSS from /proc")
def test_the_server_stays_responsive_while_a_hostile_template_renders(tmp_path):
    slow = tokenizer_with(tmp_path / "slow_tok", HOSTILE["power-tower"][0])
    big = tokenizer_with(tmp_path / "big_tok", HOSTILE["gigabyte-string"][0])
    data = tmp_path / "data.jsonl"
    data.write_text('{"text": "hello"}\n{"text": \n')  # line 2 is malformed: a finding to wait for
    client = PipeClient([sys.executable, "-m", "trainproof_lsp", "serve"], cwd=tmp_path,
                        env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        client.initialize(tmp_path, capabilities={"textDocument": {"publishDiagnostics": {}}})
        opened = []
        for path in (slow / "tokenizer_config.json", big / "tokenizer_config.json", data):
            client.notify("textDocument/didOpen", {"textDocument": {
                "uri": path.as_uri(), "languageId": "json", "version": 1, "text": path.read_text()}})
            opened.append(path.as_uri())

        def published(uri: str, text: str):
            def match(m: dict) -> bool:
                return (m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri
                        and any(text in d["message"] or text == d["code"] for d in m["params"]["diagnostics"]))
            return match

        # The dataset's finding comes while the power tower is still rendering in its child.
        shown = client.wait_for(published(opened[2], "TP-PRE-MALFORMED-JSONL"), what="the dataset's diagnostics")
        assert [(d["code"], d["range"]["start"]["line"]) for d in shown["params"]["diagnostics"]] == [
            ("TP-PRE-MALFORMED-JSONL", 1)]
        at_data = client.messages.index(shown)
        at_slow = client.messages.index(client.wait_for(published(opened[0], CPU), timeout=120,
                                                        what="the power tower's NOT-CHECKED"))
        client.wait_for(published(opened[1], MEMORY), timeout=120, what="the gigabyte string's NOT-CHECKED")
        assert at_data < at_slow
        assert client.command("trainproof.showServerInfo")["name"] == "trainproof-lsp"
        # The gigabyte was built (and refused) in the child: the server's peak stays small.
        assert _peak_rss_mib(client.proc.pid) < SERVER_PEAK_CEILING_MIB
    finally:
        code = client.close()
    assert code == 0, client.stderr[-2000:]

