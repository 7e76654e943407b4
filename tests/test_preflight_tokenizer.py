"""Tokenizer folders (fixtures/tokenizers, hand-written JSON) judged from their files alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import Verdict
from trainproof_lsp.judge.preflight import judge_tokenizer, preflight
from trainproof_lsp.readers.tokenizer import read_tokenizer_dir

ROOT = Path(__file__).resolve().parents[1]
TOK = ROOT / "fixtures" / "tokenizers"
DATA = ROOT / "fixtures" / "datasets"


def judged(name: str, conversational: bool | None = True):
    return judge_tokenizer(TOK / name, Config(), conversational=conversational)


def facts(report) -> list[tuple[str, str, str, int]]:
    return [(f.id, f.level.value, Path(f.location.path).name, f.location.span.start_line) for f in report.findings]


@pytest.mark.parametrize("name", ["healthy_chatml", "healthy_template_in_jinja_file"])
def test_healthy_tokenizers_pass(name):
    r = judged(name)
    assert r.verdict is Verdict.PASS and r.findings == ()
    assert {c.group for c in r.checks if not c.ran} == set()


def test_template_may_live_in_chat_template_jinja():
    tok = read_tokenizer_dir(TOK / "healthy_template_in_jinja_file")
    assert tok.chat_template is not None and tok.chat_template.path.endswith("chat_template.jinja")


# (folder, [(rule, level, file, 0-based line)])
FAULTS = [
    ("missing_eos", [("TP-PRE-MISSING-EOS-TOKEN", "FAIL", "tokenizer_config.json", 0)]),
    ("missing_pad", [("TP-PRE-MISSING-PAD-TOKEN", "WARN", "tokenizer_config.json", 0)]),
    ("pad_equals_eos", [("TP-PRE-PAD-EQUALS-EOS", "WARN", "tokenizer_config.json", 22)]),
    ("no_chat_template", [("TP-TOK-NO-CHAT-TEMPLATE", "FAIL", "tokenizer_config.json", 0)]),
    ("template_no_eos", [("TP-TOK-TEMPLATE-NO-EOS", "FAIL", "tokenizer_config.json", 18)]),
    ("assistant_turn_no_eos", [("TP-TOK-TEMPLATE-NO-EOS", "FAIL", "tokenizer_config.json", 18)]),
    # Without a script in the folder that encodes rendered text again, doubling is only possible: INFO
    # (tests/test_bundle.py: the WARN with such a script).
    ("double_bos_add_bos_token", [("TP-TOK-DOUBLE-BOS-IF-REENCODED", "INFO", "tokenizer_config.json", 16)]),
    ("double_bos_post_processor", [("TP-TOK-DOUBLE-BOS-IF-REENCODED", "INFO", "tokenizer_config.json", 16)]),
    # Without the run's arguments the sentinel is INFO (TP-TOK-MAX-LENGTH-UNSET: tests/test_bundle.py).
    ("max_length_sentinel", [("TP-TOK-MAX-LENGTH-SENTINEL", "INFO", "tokenizer_config.json", 21)]),
    ("added_tokens_beyond_vocab", [("TP-TOK-ADDED-TOKENS-BEYOND-VOCAB", "FAIL", "tokenizer_config.json", 8)]),
]


@pytest.mark.parametrize("name,expected", FAULTS, ids=[f[0] for f in FAULTS])
def test_each_tokenizer_fault_is_reported_once_at_its_key(name, expected):
    r = judged(name)
    assert facts(r) == expected


def test_pad_equals_eos_says_why_and_names_the_shared_id():
    (f,) = judged("pad_equals_eos").findings
    assert f.evidence == {"token_id": 151645}
    assert "masks every EOS label" in f.message
    assert f.related[0].message == "eos_token"


def test_double_bos_points_at_what_adds_the_second_one():
    (f,) = judged("double_bos_post_processor").findings
    assert Path(f.related[0].location.path).name == "tokenizer.json"
    (g,) = judged("double_bos_add_bos_token").findings
    assert g.related[0].location.span.start_line == 21  # "add_bos_token": true


def test_added_tokens_evidence():
    (f,) = judged("added_tokens_beyond_vocab").findings
    assert f.evidence == {"vocab_size": 151644, "beyond": 2, "first_id": 151644, "max_id": 151645}


def test_sentinel_threshold_is_a_limit():
    (f,) = judged("max_length_sentinel").findings
    assert f.limits == {"sentinel_at": 1e29} and f.evidence == {"model_max_length": 1e30}


def test_chat_template_check_is_skipped_without_conversational_data():
    r = judged("no_chat_template", conversational=False)
    assert r.verdict is Verdict.PASS
    skipped = {c.group: c.reason for c in r.checks if not c.ran}
    assert skipped["TP-TOK-NO-CHAT-TEMPLATE"] == "no conversational dataset given with the tokenizer"


def test_preflight_passes_the_datasets_format_to_the_tokenizer_check():
    text = preflight([DATA / "valid_text.jsonl"], Config(), tokenizer_dir=TOK / "no_chat_template")
    assert text.reports[-1].verdict is Verdict.PASS
    chat = preflight([DATA / "valid_chat.jsonl"], Config(), tokenizer_dir=TOK / "no_chat_template")
    assert [f.id for f in chat.reports[-1].findings] == ["TP-TOK-NO-CHAT-TEMPLATE"]
    pairs = preflight([DATA / "valid_dpo.jsonl"], Config(), tokenizer_dir=TOK / "no_chat_template")
    assert [f.id for f in pairs.reports[-1].findings] == ["TP-TOK-NO-CHAT-TEMPLATE"]


def test_folder_without_tokenizer_files_is_not_checked():
    r = judged("not_a_tokenizer")
    assert r.verdict is Verdict.NOT_CHECKED and "no tokenizer_config.json" in r.reason


def test_broken_tokenizer_json_is_not_checked_with_its_line(tmp_path):
    (tmp_path / "tokenizer_config.json").write_text('{\n  "eos_token": "</s>",\n  oops\n}\n')
    r = judge_tokenizer(tmp_path, Config())
    assert r.verdict is Verdict.NOT_CHECKED
    assert "tokenizer_config.json:3: invalid JSON" in r.reason
    assert r.findings[0].location.span.start_line == 2


def test_added_token_lines_are_found_in_one_pass_at_10x_the_reported_size(tmp_path, monkeypatch):
    # The audit's file: 8,000 added tokens after a 2 MB value took 14 s (a line search from
    # the top per token). Here 80,000 after 20 MB: the ids' lines come from one pass, and
    # the named keys' searches are as many as there are named keys, whatever the tokens.
    from concurrent.futures import ThreadPoolExecutor

    from trainproof_lsp.readers import tokenizer as reader

    n = 80_000
    config = {"eos_token": "</s>", "padding_side": "x" * 20_000_000,
              "added_tokens_decoder": {str(1000 + i): {"content": f"<t{i}>", "special": False} for i in range(n)}}
    text = json.dumps(config, indent=2)
    (tmp_path / "tokenizer_config.json").write_text(text)
    passes = {"numbered": 0, "named": 0}
    numbered, named = reader._numbered_key_lines, reader._line_of

    def count_numbered(*args):
        passes["numbered"] += 1
        return numbered(*args)

    def count_named(*args):
        passes["named"] += 1
        return named(*args)

    monkeypatch.setattr(reader, "_numbered_key_lines", count_numbered)
    monkeypatch.setattr(reader, "_line_of", count_named)
    with ThreadPoolExecutor(1) as pool:  # a safety net only: a quadratic read would take hours
        tok = pool.submit(read_tokenizer_dir, tmp_path).result(timeout=300)
    assert passes == {"numbered": 1, "named": 1}  # eos_token's line; the 80,000 ids in one pass
    assert len(tok.added_tokens) == n
    lines = text.splitlines()
    first, last = tok.added_tokens[0], tok.added_tokens[-1]
    assert (first[0], first[1], first[2].line) == (1000, "<t0>", lines.index('    "1000": {'))
    assert (last[0], last[1], last[2].line) == (1000 + n - 1, f"<t{n - 1}>", lines.index(f'    "{1000 + n - 1}": {{'))
    assert tok.eos is not None and tok.eos.line == 1


def test_each_added_token_keeps_the_line_of_its_own_id(tmp_path):
    # The one-pass lookup gives each id the line of its first `"id":` key, as a search would.
    (tmp_path / "tokenizer_config.json").write_text(
        '{\n  "eos_token": "</s>",\n  "added_tokens_decoder": {\n    "5": {"content": "<a>"},\n'
        '    "7": {"content": "<b>"},\n\n    "6": {"content": "<c>"}\n  }\n}\n')
    tok = read_tokenizer_dir(tmp_path)
    assert [(i, c, s.line) for i, c, s in tok.added_tokens] == [(5, "<a>", 3), (6, "<c>", 6), (7, "<b>", 4)]
