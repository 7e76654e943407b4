"""Token lengths (`preflight DATA --tokenizer DIR --max-len N`) counted with transformers —
the path preflight takes when no token map can be built (no tokenizer.json, or no
`tokenizers`; the map's own tests are tests/test_token_map.py and the end of this file):
rows counted with a real transformers tokenizer, every overlong row and every row truncated to nothing reported on
its own line with the exact counts — and, without transformers or without --max-len,
the checks listed as skipped with the reason, never passed.

The tokenizer is written into a temporary folder by the committed generator
fixtures/tokenizers/make_tiny_tokenizer.py (no network): one token per word, `<s>` in
front of plain text, a chat turn is `<|role|> content <|end|>` (content + 2 tokens), the
generation prompt `<|assistant|>` (1 token). The counts in the comments below are done
by hand from those rules.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, jsonl_text
from trainproof_lsp.readers import tokens
from trainproof_lsp.cli import main
from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import Level, Verdict
from trainproof_lsp.judge.preflight import judge_dataset, preflight
from trainproof_lsp.judge.token_map import MapBuilder, MapOptions

pytest.importorskip("transformers")  # the `tokens` extra (installed with `peers` for the tests)

TOKEN_RULES = ("TP-PRE-CONTEXT-OVERFLOW", "TP-PRE-NO-TRAINABLE-TOKENS", "TP-PRE-CHAT-TEMPLATE-ERROR")
MAX_LEN = 16


def _generator():
    spec = importlib.util.spec_from_file_location("make_tiny_tokenizer",
                                                  REPO / "fixtures" / "tokenizers" / "make_tiny_tokenizer.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def counted_with_transformers(monkeypatch, request):
    """The tests here hold the transformers path: the map is made unavailable in this
    process, as when the folder has no tokenizer.json (the subprocess tests map)."""
    if "the_map" not in request.node.name:
        monkeypatch.setattr(MapBuilder, "usable", lambda self: False)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return _generator().write_tiny_tokenizer(tmp_path_factory.mktemp("tok") / "tiny")


@pytest.fixture(scope="module")
def tiny_no_template(tmp_path_factory) -> Path:
    return _generator().write_tiny_tokenizer(tmp_path_factory.mktemp("tok") / "plain", chat_template=None)


def chat(*turns: tuple[str, str]) -> dict:
    return {"messages": [{"role": r, "content": c} for r, c in turns]}


# Rows 3 and 7 are longer than 16 tokens; row 5's prompt alone is 20 tokens.
CHAT_ROWS = [
    chat(("user", "what is two plus two"), ("assistant", "four")),  # 7 + 3 = 10
    chat(("user", "say hello"), ("assistant", "hello")),  # 4 + 3 = 7
    chat(("user", "what is two plus two"),  # 7
         ("assistant", "two plus two is four and the cat sat on it")),  # 11 words + 2 = 13: 20 tokens
    chat(("user", "the cat"), ("assistant", "sat on the mat")),  # 4 + 6 = 10
    chat(("user", "the cat sat on the mat the cat sat on the mat the cat sat on it"),  # 17 words + 2 = 19
         ("assistant", "four")),  # + 3 = 22; prompt part 19 + <|assistant|> = 20 >= 16
    chat(("user", "hello"), ("assistant", "hello to the cat")),  # 3 + 6 = 9
    chat(("system", "say four"), ("user", "what is two plus two"),  # 4 + 7
         ("assistant", "four is two plus two")),  # + 7 = 18 tokens
    chat(("user", "two plus two"), ("assistant", "four")),  # 5 + 3 = 8
]


# The committed fixture (fixtures/datasets/make_datasets.py) holds exactly these rows.
CHAT_FIXTURE = REPO / "fixtures" / "datasets" / "chat_overflow_lines_3_7_no_trainable_line_5.jsonl"


@pytest.fixture()
def chat_file() -> Path:
    return CHAT_FIXTURE


def test_the_committed_fixture_holds_the_rows_counted_here():
    assert [json.loads(line) for line in CHAT_FIXTURE.read_text(encoding="utf-8").splitlines()] == CHAT_ROWS


def by_rule(report) -> dict[str, list[int]]:
    """rule id -> 1-based lines of its findings (INFO notes about the file's layout left out)."""
    out: dict[str, list[int]] = {}
    for f in report.findings:
        if f.level is Level.INFO:
            continue
        out.setdefault(f.id, []).append(f.location.span.start_line + 1)
    return out


def skipped(report) -> dict[str, str]:
    return {c.group: c.reason for c in report.checks if not c.ran}


# --- the findings ---------------------------------------------------------------------------


def test_rows_3_and_7_overflow_and_row_5_trains_on_nothing(chat_file, tiny):
    data, tok = preflight([chat_file], Config(), tokenizer_dir=tiny, max_len=MAX_LEN).reports
    assert by_rule(data) == {"TP-PRE-NO-TRAINABLE-TOKENS": [5], "TP-PRE-CONTEXT-OVERFLOW": [3, 7]}
    assert data.verdict is Verdict.FAIL
    dead, over3, over7 = data.findings
    assert (dead.level, over3.level) == (Level.FAIL, Level.WARN)
    assert dead.evidence == {"line": 5, "prompt_tokens": 20, "tokens": 22, "response_tokens": 2, "max_len": 16,
                             "rows_in_file": 1}
    assert over3.evidence == {"line": 3, "tokens": 20, "max_len": 16, "cut_tokens": 4, "rows_over_in_file": 2}
    assert over7.evidence == {"line": 7, "tokens": 18, "max_len": 16, "cut_tokens": 2, "rows_over_in_file": 2}
    assert "20 tokens > --max-len 16" in over3.message
    assert "the prompt alone is 20 tokens >= --max-len 16" in dead.message
    assert {c.group for c in data.checks if c.ran} >= set(TOKEN_RULES)
    assert tok.verdict is Verdict.PASS  # the tiny tokenizer itself is healthy


def test_a_limit_at_the_prompt_length_is_already_zero_trainable_tokens(chat_file, tiny):
    # Row 5's prompt part is 20 tokens: at --max-len 20 the response still gets none.
    r = judge_dataset(chat_file, Config(), tokenizer_dir=tiny, max_len=20)
    assert by_rule(r) == {"TP-PRE-NO-TRAINABLE-TOKENS": [5]}
    assert by_rule(judge_dataset(chat_file, Config(), tokenizer_dir=tiny, max_len=21)) == {
        "TP-PRE-CONTEXT-OVERFLOW": [5]}


def test_rows_within_the_limit_pass_with_the_token_checks_run(chat_file, tiny):
    r = judge_dataset(chat_file, Config(), tokenizer_dir=tiny, max_len=22)
    assert r.verdict is Verdict.PASS and r.findings == ()
    assert {c.group for c in r.checks if c.ran} >= set(TOKEN_RULES)


MIXED_ROWS = [
    {"text": "the cat sat"},
    {"prompt": "what is two plus two", "completion": " four"},
    {"instruction": "say hello", "input": "", "output": "hello"},
    {"prompt": "what is", "chosen": " four", "rejected": " two plus two"},
    {"conversations": [{"from": "human", "value": "hello"}, {"from": "gpt", "value": "hello to the cat"}]},
    {"prompt": [{"role": "user", "content": "what is two"}],
     "completion": [{"role": "assistant", "content": "four"}]},
    {"chosen": [{"role": "user", "content": "what is two"}, {"role": "assistant", "content": "four"}],
     "rejected": [{"role": "user", "content": "what is two"}, {"role": "assistant", "content": "two"}]},
    {"text": 5},  # not a string: TP-PRE-NON-STRING's row, not counted
]

N = tokens.NOT_COUNTED
# per line: (tokens, second side of a pair, prompt part)
MIXED_COUNTS = [
    (4, N, N),  # <s> the cat sat
    (7, N, 6),  # <s> what is two plus two four | <s> what is two plus two
    (4, N, 3),  # <s> say hello \n hello | <s> say hello
    (4, 6, 3),  # <s> what is four | <s> what is two plus two | <s> what is
    (9, N, 4),  # <|user|> hello <|end|> <|assistant|> hello to the cat <|end|> | <|user|> hello <|end|> <|assistant|>
    (8, N, 6),  # user turn 5 + assistant turn 3 | 5 + <|assistant|>
    (8, 8, 6),  # implicit prompt: the user turn chosen and rejected share
    (N, N, N),
]


def counts(lengths: tokens.TokenLengths) -> list[tuple[int, int, int]]:
    return list(zip(lengths.tokens, lengths.second, lengths.prompt))


def test_each_format_is_counted_as_its_trainer_sees_it(tmp_path, tiny):
    path = tmp_path / "mixed.jsonl"
    path.write_text(jsonl_text(MIXED_ROWS), encoding="utf-8")
    lengths = tokens.count_tokens(path, tokens.load_tokenizer(tiny), lines=len(MIXED_ROWS))
    assert counts(lengths) == MIXED_COUNTS
    assert lengths.rows == 7 and lengths.templated and lengths.template_errors == ()


def test_pair_findings_name_both_sides(tmp_path, tiny):
    path = tmp_path / "pairs.jsonl"
    path.write_text(jsonl_text(MIXED_ROWS[3:4]), encoding="utf-8")
    r = judge_dataset(path, Config(), tokenizer_dir=tiny, max_len=5)
    (f,) = r.findings
    assert f.evidence == {"line": 1, "tokens": 6, "max_len": 5, "cut_tokens": 1, "rows_over_in_file": 1,
                          "chosen_tokens": 4, "rejected_tokens": 6}


def test_without_a_chat_template_conversations_count_as_their_joined_contents(chat_file, tiny_no_template):
    lengths = tokens.count_tokens(chat_file, tokens.load_tokenizer(tiny_no_template), lines=len(CHAT_ROWS))
    assert not lengths.templated
    # <s> + the words of every turn ("\n" between turns is no token); prompt: the user turn(s).
    assert list(lengths.tokens) == [7, 4, 17, 7, 19, 6, 13, 5]
    assert list(lengths.prompt) == [6, 3, 6, 3, 18, 2, 8, 4]
    r = judge_dataset(chat_file, Config(), tokenizer_dir=tiny_no_template, max_len=MAX_LEN)
    assert by_rule(r) == {"TP-PRE-NO-TRAINABLE-TOKENS": [5], "TP-PRE-CONTEXT-OVERFLOW": [3]}


def test_a_row_the_chat_template_raises_on_is_a_fail_on_its_line(tmp_path, tiny):
    path = tmp_path / "tool.jsonl"
    rows = [CHAT_ROWS[0], chat(("user", "hi"), ("tool", "x"), ("assistant", "hello")), CHAT_ROWS[1]]
    path.write_text(jsonl_text(rows), encoding="utf-8")
    r = judge_dataset(path, Config(), tokenizer_dir=tiny, max_len=MAX_LEN)
    assert by_rule(r) == {"TP-PRE-CHAT-TEMPLATE-ERROR": [2]}
    (f,) = r.findings
    assert f.level is Level.FAIL and "unknown role tool" in f.message
    assert f.evidence == {"line": 2, "rows_in_file": 1}


def test_json_array_rows_are_located_at_their_first_line(tmp_path, tiny):
    path = tmp_path / "pretty.json"
    path.write_text(json.dumps(CHAT_ROWS[2:5], indent=2) + "\n", encoding="utf-8")
    r = judge_dataset(path, Config(), tokenizer_dir=tiny, max_len=MAX_LEN)
    text = path.read_text().splitlines()
    starts = [i + 1 for i, line in enumerate(text) if line == "  {"]  # the `{` of each element
    assert by_rule(r) == {"TP-PRE-NO-TRAINABLE-TOKENS": [starts[2]], "TP-PRE-CONTEXT-OVERFLOW": [starts[0]]}


def test_batches_do_not_change_the_counts(chat_file, tiny, monkeypatch):
    tok = tokens.load_tokenizer(tiny)
    whole = counts(tokens.count_tokens(chat_file, tok, lines=len(CHAT_ROWS)))
    monkeypatch.setattr(tokens, "BATCH_ROWS", 3)  # batch edges inside the file
    assert counts(tokens.count_tokens(chat_file, tok, lines=len(CHAT_ROWS))) == whole


def test_an_editor_buffer_is_counted_not_the_file(chat_file, tiny):
    buffer = jsonl_text(CHAT_ROWS[:2] + [CHAT_ROWS[4]]).encode()
    r = judge_dataset(chat_file, Config(), data=buffer, tokenizer_dir=tiny, max_len=MAX_LEN)
    assert by_rule(r) == {"TP-PRE-NO-TRAINABLE-TOKENS": [3]}


# --- coverage: skipped, never passed ---------------------------------------------------------------


def test_without_max_len_nothing_fires_and_the_token_rules_are_skipped_with_a_reason(chat_file, tiny):
    for out in (preflight([chat_file], Config()), preflight([chat_file], Config(), tokenizer_dir=tiny)):
        r = out.reports[0]
        assert r.verdict is Verdict.PASS and r.findings == ()
        reasons = {skipped(r)[rule] for rule in TOKEN_RULES}
        assert len(reasons) == 1 and "--max-len" in reasons.pop()
    assert skipped(preflight([chat_file], Config()).reports[0])["TP-PRE-CONTEXT-OVERFLOW"] == (
        "token lengths are counted by preflight --tokenizer DIR --max-len N")


def test_max_len_without_a_tokenizer_is_not_checked(chat_file):
    (r,) = preflight([chat_file], Config(), max_len=MAX_LEN).reports
    assert r.verdict is Verdict.NOT_CHECKED
    assert skipped(r)["TP-PRE-NO-TRAINABLE-TOKENS"] == "--max-len needs --tokenizer DIR to count tokens"
    assert [(f.id, f.level) for f in r.findings] == [("TP-NOT-CHECKED", Level.NOT_CHECKED)]


def hide_transformers(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` raises ImportError


def test_without_transformers_the_token_checks_are_not_checked_never_passed(chat_file, tiny, monkeypatch):
    hide_transformers(monkeypatch)
    data, tok = preflight([chat_file], Config(), tokenizer_dir=tiny, max_len=MAX_LEN).reports
    assert data.verdict is Verdict.NOT_CHECKED
    assert {rule: skipped(data)[rule] for rule in TOKEN_RULES} == dict.fromkeys(TOKEN_RULES, tokens.MISSING_TRANSFORMERS)
    (f,) = data.findings
    assert f.id == "TP-NOT-CHECKED" and "pip install 'trainproof-lsp[tokens]'" in f.message
    # Everything else about the file was still judged.
    assert {"TP-PRE-MALFORMED-JSONL", "TP-PRE-NO-ASSISTANT"} <= {c.group for c in data.checks if c.ran}
    assert tok.verdict is Verdict.PASS  # the folder's JSON needs no transformers


def test_without_transformers_the_cli_exits_2_or_1_when_something_fails(chat_file, tiny, tmp_path, monkeypatch,
                                                                      capsys):
    hide_transformers(monkeypatch)
    args = ["--tokenizer", str(tiny), "--max-len", str(MAX_LEN), "--json"]
    assert main(["preflight", str(chat_file), *args]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["worst_verdict"] == "NOT-CHECKED" and doc["reports"][0]["verdict"] == "NOT-CHECKED"
    broken = tmp_path / "broken.jsonl"
    broken.write_text(jsonl_text([{"text": "the cat"}, {"text": ""}]), encoding="utf-8")
    assert main(["preflight", str(broken), *args]) == 1  # the empty text still FAILs
    capsys.readouterr()
    # A WARN beside the check that could not run: the report is WARN, the exit code still 2.
    near = tmp_path / "near.jsonl"
    near.write_text(jsonl_text([{"text": "The cat sat"}, {"text": "the cat sat"}]), encoding="utf-8")
    assert main(["preflight", str(near), *args]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["reports"][0]["verdict"] == "WARN"
    assert sorted(f["id"] for f in doc["reports"][0]["findings"]) == ["TP-NOT-CHECKED", "TP-PRE-NEAR-DUPLICATE"]


def test_a_folder_transformers_cannot_load_is_not_checked(chat_file, tmp_path):
    folder = tmp_path / "not_loadable"
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text('{"eos_token": "</s>", "pad_token": "<pad>"}\n')
    r = judge_dataset(chat_file, Config(), tokenizer_dir=folder, max_len=MAX_LEN)
    assert r.verdict is Verdict.NOT_CHECKED
    reason = skipped(r)["TP-PRE-CONTEXT-OVERFLOW"]
    assert reason.startswith(f"{folder}: transformers cannot load this tokenizer (") and "\n" not in reason


def test_disabled_token_rules_need_no_tokenizer(chat_file, monkeypatch):
    hide_transformers(monkeypatch)
    from trainproof_lsp.rules.token_map import MAP_RULES

    counted = (*TOKEN_RULES, *(r.id for r in MAP_RULES))
    cfg = Config(ignore=frozenset(counted))
    r = judge_dataset(chat_file, cfg, tokenizer_dir="/nonexistent", max_len=MAX_LEN)
    assert r.verdict is Verdict.PASS
    assert {skipped(r)[rule] for rule in counted} == {"disabled by configuration"}


# --- the command line, end to end ---------------------------------------------------------------------


def run_cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("TRAINPROOF_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "trainproof_lsp", *map(str, args)], check=False, cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120)


def test_cli_preflight_json_end_to_end(chat_file, tiny, tmp_path):
    """The command line maps the rows (the folder has a tokenizer.json): TRL's default loss
    on conversations is every token, so row 5 trains on its first 16 tokens (prompt only)."""
    proc = run_cli("preflight", chat_file, "--tokenizer", tiny, "--max-len", MAX_LEN, "--json",
                   "--sarif", tmp_path / "out.sarif", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr  # WARNs only
    assert "Traceback" not in proc.stderr
    doc = json.loads(proc.stdout)
    data = doc["reports"][0]
    found = [(f["id"], f["level"], f["location"]["range"]["start"]["line"], f["evidence"].get("tokens"))
             for f in data["findings"]]
    assert found == [("TP-MAP-RESPONSE-CUT", "WARN", 2, None), ("TP-PRE-CONTEXT-OVERFLOW", "WARN", 2, 20),
                     ("TP-PRE-CONTEXT-OVERFLOW", "WARN", 4, 22), ("TP-PRE-CONTEXT-OVERFLOW", "WARN", 6, 18),
                     ("TP-MAP-LENGTHS", "INFO", 0, None)]
    assert set(TOKEN_RULES) <= set(data["checks"]["ran"])
    sarif = json.loads((tmp_path / "out.sarif").read_text())
    lines = sorted(r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in sarif["runs"][0]["results"])
    assert lines[-4:] == [3, 3, 5, 7]


def test_with_the_map_and_assistant_only_loss_row_5_trains_on_nothing(chat_file, tmp_path):
    """The map under assistant-only loss, with a template that marks the assistant turn."""
    template = ("{% for m in messages %}<|{{ m['role'] }}|> {% if m['role'] == 'assistant' %}{% generation %}"
                "{{ m['content'] }} <|end|>{% endgeneration %}{% else %}{{ m['content'] }} <|end|>{% endif %} "
                "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}")
    folder = _generator().write_tiny_tokenizer(tmp_path / "gen", chat_template=template)
    (data, _) = preflight([chat_file], Config(), tokenizer_dir=folder, max_len=MAX_LEN,
                          map_options=MapOptions(loss="assistant-only")).reports
    assert by_rule(data) == {"TP-PRE-NO-TRAINABLE-TOKENS": [5], "TP-PRE-CONTEXT-OVERFLOW": [3, 7],
                             "TP-MAP-RESPONSE-CUT": [3]}
    dead = next(f for f in data.findings if f.id == "TP-PRE-NO-TRAINABLE-TOKENS")
    assert dead.evidence == {"line": 5, "tokens": 22, "trained_before_truncation": 2, "max_len": 16,
                             "rows_in_file": 1, "share": 0.125}
    assert "truncation to --max-len 16 cuts all 2 trained token(s)" in dead.message


def test_without_transformers_the_map_still_counts(chat_file, tiny, monkeypatch):
    hide_transformers(monkeypatch)
    (data, _) = preflight([chat_file], Config(), tokenizer_dir=tiny, max_len=MAX_LEN).reports
    assert by_rule(data) == {"TP-PRE-CONTEXT-OVERFLOW": [3, 5, 7], "TP-MAP-RESPONSE-CUT": [3]}
    info = next(f for f in data.findings if f.id == "TP-MAP-LENGTHS")
    assert info.evidence["p50"] == 10 and info.evidence["max"] == 22 and info.evidence["over_max_len"] == 3


def test_importing_preflight_does_not_import_transformers(tmp_path):
    code = ("import sys, trainproof_lsp.judge.preflight, trainproof_lsp.cli; "
            "print('transformers' in sys.modules)")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.stdout.strip() == "False"
