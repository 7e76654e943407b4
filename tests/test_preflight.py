"""Dataset preflight over the fixtures in fixtures/datasets: every valid file passes and
every injected fault is reported on its own line, with its rule ID, level, columns and
evidence — and nowhere else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainproof_lsp.cli import main
from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import Level, Verdict
from trainproof_lsp.judge.preflight import judge_dataset, preflight

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "fixtures" / "datasets"
CORPUS = ROOT.parent / "shared" / "corpus" / "anchor-fixtures"


def judged(name: str, **kw):
    return judge_dataset(DATA / name, Config(), **kw)


def facts(report, *, info: bool = False) -> list[tuple[str, str, int, int]]:
    """(rule id, level, 0-based line, 0-based start column) of each finding."""
    return [(f.id, f.level.value, f.location.span.start_line, f.location.span.start_char)
            for f in report.findings if info or f.level is not Level.INFO]


@pytest.mark.parametrize("name", ["valid_chat.jsonl", "valid_text.jsonl", "valid_sharegpt.jsonl", "valid_dpo.jsonl",
                                  "valid_alpaca.jsonl", "valid_prompt_completion.jsonl"])
def test_valid_files_pass_with_every_check_run(name):
    r = judged(name)
    assert r.verdict is Verdict.PASS, facts(r)
    assert r.findings == ()
    ran = {c.group for c in r.checks if c.ran}
    assert {"TP-PRE-MALFORMED-JSONL", "TP-PRE-DUPLICATE-TEXT", "TP-PRE-NEAR-DUPLICATE", "TP-PRE-MIXED-FORMATS",
            "TP-PRE-NO-ASSISTANT", "TP-PRE-EMPTY-TEXT"} <= ran
    skipped = {c.group: c.reason for c in r.checks if not c.ran}
    tokens = "token lengths are counted by preflight --tokenizer DIR --max-len N"
    eval_only = ("judged on an eval file only, against its training files (preflight --eval EVAL, or doctor on a "
                 "folder where an eval/valid/test file pairs with a train file by name)")
    assert skipped == {"TP-PRE-EVAL-OVERLAP": eval_only, "TP-PRE-EVAL-OVERLAP-SHARE": eval_only,
                       "TP-PRE-EVAL-CONTAMINATED": eval_only, "TP-PRE-CONTEXT-OVERFLOW": tokens, "TP-PRE-NO-TRAINABLE-TOKENS": tokens,
                       "TP-PRE-CHAT-TEMPLATE-ERROR": tokens,
                       # the trained-tokens map's rules (rules/token_map.py) need the tokenizer too
                       **{f"TP-MAP-{name}": tokens for name in ("RESPONSE-CUT", "EOS-NEVER-TRAINED",
                                                               "RESPONSE-TEMPLATE-MISSING", "PAIR-IDENTICAL",
                                                               "DOUBLE-BOS", "LENGTHS")}}


def test_formats_are_detected_per_file():
    expect = {"valid_chat.jsonl": "jsonl:chat", "valid_text.jsonl": "jsonl:text",
              "valid_sharegpt.jsonl": "jsonl:sharegpt", "valid_dpo.jsonl": "jsonl:preference",
              "valid_alpaca.jsonl": "jsonl:alpaca", "valid_prompt_completion.jsonl": "jsonl:prompt-completion",
              "valid_chat_pretty_array.json": "json-array:chat"}
    assert {n: judged(n).artefact.format for n in expect} == expect


# (file, [(rule, level, line, column)]): lines are 0-based here, 1-based in the names.
FAULTS = [
    ("malformed_json_line_3.jsonl", [("TP-PRE-MALFORMED-JSONL", "FAIL", 2, 22)]),
    ("nan_value_line_2.jsonl", [("TP-PRE-MALFORMED-JSONL", "FAIL", 1, 24)]),
    ("invalid_utf8_line_4.jsonl", [("TP-PRE-MALFORMED-JSONL", "FAIL", 3, 13)]),
    ("not_an_object_line_2.jsonl", [("TP-PRE-MALFORMED-JSONL", "FAIL", 1, 0)]),
    ("empty_text_line_2.jsonl", [("TP-PRE-EMPTY-TEXT", "FAIL", 1, 0)]),
    ("whitespace_text_line_3.jsonl", [("TP-PRE-EMPTY-TEXT", "FAIL", 2, 0)]),
    ("null_text_line_4.jsonl", [("TP-PRE-EMPTY-TEXT", "FAIL", 3, 0)]),
    ("duplicate_line_4_of_2.jsonl", [("TP-PRE-DUPLICATE-TEXT", "WARN", 3, 0)]),
    ("near_duplicate_line_3_of_1.jsonl", [("TP-PRE-NEAR-DUPLICATE", "WARN", 2, 0)]),
    ("chat_assistant_first_line_3.jsonl", [("TP-PRE-ASSISTANT-FIRST", "WARN", 2, 0)]),
    ("chat_no_assistant_line_2.jsonl", [("TP-PRE-NO-ASSISTANT", "FAIL", 1, 0)]),
    ("chat_empty_assistant_line_4.jsonl", [("TP-PRE-EMPTY-ASSISTANT", "FAIL", 3, 0)]),
    ("chat_system_mid_line_3.jsonl", [("TP-PRE-SYSTEM-NOT-FIRST", "WARN", 2, 0)]),
    ("chat_unknown_role_line_2.jsonl", [("TP-PRE-UNKNOWN-ROLE", "FAIL", 1, 0)]),
    ("chat_non_string_content_line_3.jsonl", [("TP-PRE-NON-STRING", "FAIL", 2, 0)]),
    ("chat_last_turn_user_line_2.jsonl", [("TP-PRE-LAST-NOT-ASSISTANT", "WARN", 1, 0)]),
    ("chat_content_parts_line_2.jsonl", [("TP-PRE-CONTENT-PARTS", "WARN", 1, 0)]),
    ("sharegpt_unknown_from_line_2.jsonl", [("TP-PRE-UNKNOWN-ROLE", "FAIL", 1, 0)]),
    ("dpo_chosen_equals_rejected_line_3.jsonl", [("TP-PRE-CHOSEN-EQUALS-REJECTED", "FAIL", 2, 0)]),
    ("alpaca_missing_output_line_2.jsonl", [("TP-PRE-MISSING-KEYS", "FAIL", 1, 0)]),
    ("no_training_field_line_2.jsonl", [("TP-PRE-MISSING-KEYS", "FAIL", 1, 0)]),
    ("prompt_completion_extra_text_line_3.jsonl", [("TP-PRE-EXTRA-KEYS", "WARN", 2, 0)]),
    ("mixed_text_and_chat_from_line_4.jsonl", [("TP-PRE-MIXED-FORMATS", "WARN", 3, 0)]),
    ("pretty_array_broken_line_14.json", [("TP-PRE-MALFORMED-JSONL", "FAIL", 13, 23)]),
    ("pretty_array_no_assistant_element_line_18.json", [("TP-PRE-NO-ASSISTANT", "FAIL", 17, 2)]),
]


@pytest.mark.parametrize("name,expected", FAULTS, ids=[f[0] for f in FAULTS])
def test_each_fault_is_reported_on_its_line_and_nowhere_else(name, expected):
    r = judged(name)
    assert facts(r) == expected
    worst = "FAIL" if any(e[1] == "FAIL" for e in expected) else "WARN"
    assert r.verdict.value == worst


def test_malformed_line_names_the_column_and_the_reason():
    (f,) = judged("malformed_json_line_3.jsonl").findings
    assert f.evidence == {"line": 3, "column": 23}
    assert f.message == "line 3: invalid JSON at column 23: the line ends inside a value"
    (nan,) = judged("nan_value_line_2.jsonl").findings
    assert "NaN/Infinity are not JSON" in nan.message and nan.evidence["column"] == 25
    (utf,) = judged("invalid_utf8_line_4.jsonl").findings
    assert utf.evidence == {"line": 4, "byte": 13} and "0xe9" in utf.message


def test_duplicate_points_at_the_first_occurrence_and_ignores_metadata_keys():
    (f,) = judged("duplicate_line_4_of_2.jsonl").findings  # line 4 has an extra "id" key
    assert f.evidence == {"line": 4, "first_line": 2, "duplicates_in_file": 1}
    (rel,) = f.related
    assert rel.location.span.start_line == 1 and rel.message == "first occurrence"


def test_near_duplicate_ignores_case_and_outer_whitespace():
    (f,) = judged("near_duplicate_line_3_of_1.jsonl").findings
    assert f.evidence == {"line": 3, "first_line": 1, "near_duplicates_in_file": 1}
    assert f.related[0].location.span.start_line == 0


def test_mixed_formats_is_one_file_level_finding_with_counts():
    (f,) = judged("mixed_text_and_chat_from_line_4.jsonl").findings
    assert f.evidence == {"formats": 2, "main_rows": 3, "other_rows": 2, "rows_text": 3, "rows_chat": 2}
    assert f.related[0].location.span.start_line == 0


def test_row_level_evidence_names_the_turn():
    (f,) = judged("chat_assistant_first_line_3.jsonl").findings
    assert f.evidence == {"line": 3, "key": "messages", "turn": 1}
    (e,) = judged("chat_empty_assistant_line_4.jsonl").findings
    assert e.evidence == {"line": 4, "key": "messages", "turn": 1}
    assert e.message == "line 4: messages[1]: assistant turn content is whitespace only"


def test_bom_and_crlf_are_handled_and_noted():
    r = judged("valid_text_bom_crlf.jsonl")
    assert r.verdict is Verdict.PASS
    assert facts(r, info=True) == [("TP-PRE-FILE-LAYOUT", "INFO", 0, 0)]
    assert r.findings[0].evidence["bom"] is True and r.findings[0].evidence["crlf"] is True


def test_pretty_printed_json_array_is_recognised_and_said_so():
    r = judged("valid_chat_pretty_array.json")
    assert r.verdict is Verdict.PASS
    (f,) = r.findings
    assert f.id == "TP-PRE-FILE-LAYOUT" and f.evidence["json_array"] is True and f.evidence["records"] == 3


def test_empty_file_is_not_checked_never_a_fail():
    r = judged("empty_file.jsonl")
    assert r.verdict is Verdict.NOT_CHECKED
    assert r.reason.endswith("no records (0 line(s), 0 blank)")


def test_missing_file_is_not_checked_with_one_line_reason(tmp_path):
    r = judge_dataset(tmp_path / "absent.jsonl", Config())
    assert r.verdict is Verdict.NOT_CHECKED and "\n" not in r.reason and "cannot read" in r.reason


def test_eval_overlap_is_reported_on_the_eval_line_with_the_train_line():
    out = preflight([DATA / "valid_text.jsonl"], Config(), eval_path=DATA / "eval_overlaps_valid_text_line_2.jsonl")
    train, ev = out.reports
    assert train.verdict is Verdict.PASS
    # one eval row of three is in train: the row, and the file's share (33% >= 5%; < 50%)
    assert facts(ev) == [("TP-PRE-EVAL-OVERLAP", "WARN", 1, 0), ("TP-PRE-EVAL-OVERLAP-SHARE", "WARN", 1, 0)]
    f, share = ev.findings
    assert share.evidence == {"line": 2, "train_line": 4, "count": 1, "total": 3, "share": 1 / 3, "exact": 1,
                              "near": 0}
    assert f.evidence == {"line": 2, "train_line": 4, "exact": True}
    assert f.related[0].location.path.endswith("valid_text.jsonl")
    assert f.related[0].location.span.start_line == 3


def test_max_len_without_a_tokenizer_is_listed_as_skipped_and_not_checked():
    r = judged("valid_text.jsonl", max_len=512)
    skipped = {c.group: c.reason for c in r.checks if not c.ran}
    assert skipped["TP-PRE-CONTEXT-OVERFLOW"] == "--max-len needs --tokenizer DIR to count tokens"
    assert r.verdict is Verdict.NOT_CHECKED  # asked for and not run: never a pass (tests/test_preflight_tokens.py)


def test_config_can_disable_a_rule():
    cfg = Config(ignore=frozenset({"TP-PRE-DUPLICATE-TEXT"}))
    r = judge_dataset(DATA / "duplicate_line_4_of_2.jsonl", cfg)
    assert r.findings == () and r.verdict is Verdict.PASS
    assert ("TP-PRE-DUPLICATE-TEXT", "disabled by configuration") in [(c.group, c.reason) for c in r.checks]


def test_editor_buffer_is_judged_like_the_file():
    name = DATA / "chat_no_assistant_line_2.jsonl"
    assert facts(judge_dataset(name, Config(), data=name.read_bytes())) == facts(judged(name.name))
    edited = name.read_bytes().replace(b'"content": "Anyone there?"}', b'"content": "Anyone there?"}, '
                                                                       b'{"role": "assistant", "content": "Yes."}')
    assert judge_dataset(name, Config(), data=edited).verdict is Verdict.PASS


# --- command line ----------------------------------------------------------------------

def test_cli_exit_codes(capsys):
    assert main(["preflight", str(DATA / "valid_chat.jsonl")]) == 0
    assert main(["preflight", str(DATA / "chat_system_mid_line_3.jsonl")]) == 0  # WARN
    assert main(["preflight", str(DATA / "chat_no_assistant_line_2.jsonl")]) == 1
    assert main(["preflight", str(DATA / "empty_file.jsonl")]) == 2
    assert main(["preflight", str(DATA / "valid_chat.jsonl"), str(DATA / "empty_file.jsonl")]) == 2
    capsys.readouterr()


def test_cli_json_lists_every_finding_with_lines(capsys, tmp_path):
    lines = ['{"text": ""}'] * 30 + ['{"text": "ok"}']
    path = tmp_path / "many_empty.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert main(["preflight", "--json", str(path)]) == 1
    doc = json.loads(capsys.readouterr().out)
    found = [f for f in doc["reports"][0]["findings"] if f["id"] == "TP-PRE-EMPTY-TEXT"]
    assert [f["location"]["range"]["start"]["line"] for f in found] == list(range(30))
    assert main(["preflight", str(path)]) == 1
    text = capsys.readouterr().out
    assert "...and 10 more TP-PRE-EMPTY-TEXT" in text


def test_cli_sarif_anchors_the_dataset_line(tmp_path, capsys):
    sarif = tmp_path / "out.sarif"
    assert main(["preflight", "--sarif", str(sarif), str(DATA / "malformed_json_line_3.jsonl")]) == 1
    capsys.readouterr()
    (res,) = json.loads(sarif.read_text())["runs"][0]["results"]
    assert res["ruleId"] == "TP-PRE-MALFORMED-JSONL"
    assert res["locations"][0]["physicalLocation"]["region"]["startLine"] == 3
    assert res["locations"][0]["physicalLocation"]["region"]["startColumn"] == 23


def test_cli_eval_and_tokenizer_flags(capsys):
    code = main(["preflight", str(DATA / "valid_chat.jsonl"), "--eval", str(DATA / "valid_chat.jsonl"),
                 "--tokenizer", str(ROOT / "fixtures" / "tokenizers" / "healthy_chatml"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert [r["artefact"]["kind"] for r in doc["reports"]] == ["dataset", "dataset", "tokenizer"]
    assert len([f for f in doc["reports"][1]["findings"] if f["id"] == "TP-PRE-EVAL-OVERLAP"]) == 5
    # the eval file is the training file: all 5 rows in train, the file-level FAIL (no WARN headline beside it)
    assert [(f["id"], f["evidence"]["count"], f["evidence"]["total"]) for f in doc["reports"][1]["findings"]
            if f["id"].endswith(("-SHARE", "-CONTAMINATED"))] == [("TP-PRE-EVAL-CONTAMINATED", 5, 5)]
    assert doc["reports"][1]["verdict"] == "FAIL" and code == 1
    assert doc["reports"][2]["verdict"] == "PASS"


def test_doctor_judges_datasets_instead_of_listing_them(tmp_path, capsys):
    (tmp_path / "train.jsonl").write_bytes((DATA / "chat_no_assistant_line_2.jsonl").read_bytes())
    assert main(["doctor", "--json", str(tmp_path)]) == 1
    doc = json.loads(capsys.readouterr().out)
    (rep,) = doc["reports"]
    assert rep["artefact"]["kind"] == "dataset" and rep["verdict"] == "FAIL"
    assert doc["not_judged"] == []


# --- the shared corpus (read in place, never copied) -------------------------------------

@pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus not present")
def test_corpus_anchor_fixtures():
    got = {n: facts(judge_dataset(CORPUS / f"{n}.jsonl", Config())) for n in ("clean", "dupes", "empties", "malformed")}
    assert got == {
        "clean": [],
        "dupes": [("TP-PRE-DUPLICATE-TEXT", "WARN", 2, 0)],
        "empties": [("TP-PRE-EMPTY-TEXT", "FAIL", 1, 0)],
        "malformed": [("TP-PRE-MALFORMED-JSONL", "FAIL", 1, 1)],
    }


def test_jsonl_whose_first_row_is_an_array_is_read_as_jsonl(tmp_path):
    path = tmp_path / "first_row_array.jsonl"
    path.write_text('[1, 2]\n{"text": "a"}\n{"text": "b"}\n')
    r = judge_dataset(path, Config())
    assert facts(r) == [("TP-PRE-MALFORMED-JSONL", "FAIL", 0, 0)] and r.artefact.format == "jsonl:text"


def test_eval_overlap_up_to_case_prefers_an_exact_copy(tmp_path):
    train = tmp_path / "train.jsonl"
    train.write_text('{"text": "Alpha beta."}\n{"text": "ALPHA BETA."}\n{"text": "Gamma."}\n')
    ev = tmp_path / "eval.jsonl"
    ev.write_text('{"text": "alpha Beta."}\n{"text": "ALPHA BETA."}\n{"text": "Delta."}\n')
    out = preflight([train], Config(), eval_path=ev)
    got = [(f.location.span.start_line, f.evidence["train_line"], f.evidence["exact"])
           for f in out.reports[1].findings if f.id == "TP-PRE-EVAL-OVERLAP"]
    assert got == [(0, 1, False), (1, 2, True)]


def test_a_row_repeating_an_earlier_training_file_is_reported_on_the_later_row(tmp_path, capsys):
    rows = {name: [json.dumps({"text": f"{name} row {i}"}) for i in range(6)] for name in ("a", "b", "c")}
    rows["b"][2] = json.dumps({"id": 7, "text": "a row 4"})   # a's line 5 (metadata keys do not count)
    rows["b"][4] = rows["b"][2]                                # b's own repeat: TP-PRE-DUPLICATE-TEXT
    rows["c"][0] = json.dumps({"text": "  B ROW 1 "})         # b's line 2, up to case and outer whitespace
    for name, lines in rows.items():
        (tmp_path / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    ev = tmp_path / "eval.jsonl"
    ev.write_text(rows["a"][0] + "\n")                         # overlap, never a copy across training files
    paths = [tmp_path / f"{n}.jsonl" for n in ("a", "b", "c")]
    out = preflight(paths, Config(), eval_path=ev)
    a, b, c, e = out.reports
    assert a.findings == () and a.verdict is Verdict.PASS
    assert facts(b) == [("TP-PRE-DUPLICATE-ACROSS-FILES", "WARN", 2, 0), ("TP-PRE-DUPLICATE-TEXT", "WARN", 4, 0)]
    across = b.findings[0]
    assert across.message == f"line 3 repeats {paths[0]}:5 (an earlier file) exactly"
    assert across.evidence == {"line": 3, "first_line": 5, "first_file": 1, "exact": True, "across_files_in_file": 1}
    assert [(r.location.path, r.location.span.start_line, r.message) for r in across.related] == \
        [(str(paths[0]), 4, "first occurrence, in an earlier file")]
    assert facts(c) == [("TP-PRE-DUPLICATE-ACROSS-FILES", "WARN", 0, 0)]
    assert c.findings[0].evidence == {"line": 1, "first_line": 2, "first_file": 2, "exact": False,
                                      "across_files_in_file": 1}
    # its one row is in train: all of the eval file, so the file-level FAIL too
    assert facts(e) == [("TP-PRE-EVAL-CONTAMINATED", "FAIL", 0, 0), ("TP-PRE-EVAL-OVERLAP", "WARN", 0, 0)]
    # one file alone: nothing earlier to repeat, and the check ran
    alone = judge_dataset(paths[1], Config())
    assert facts(alone) == [("TP-PRE-DUPLICATE-TEXT", "WARN", 4, 0)]
    assert ("TP-PRE-DUPLICATE-ACROSS-FILES", True) in [(ch.group, ch.ran) for ch in alone.checks]
    # disabled by configuration: not searched, and said so
    off = preflight(paths, Config(ignore=frozenset({"TP-PRE-DUPLICATE-ACROSS-FILES"})))
    assert [f.id for r in off.reports for f in r.findings] == ["TP-PRE-DUPLICATE-TEXT"]
    assert ("TP-PRE-DUPLICATE-ACROSS-FILES", "disabled by configuration") in \
        [(ch.group, ch.reason) for ch in off.reports[1].checks]
    # the command line, in one process: the text names both places
    assert main(["preflight", *map(str, paths), "--jobs", "1"]) == 0  # WARNs pass
    text = capsys.readouterr().out
    assert f"{paths[1]}:3:1: WARN TP-PRE-DUPLICATE-ACROSS-FILES line 3 repeats {paths[0]}:5 (an earlier file) exactly" \
        in text
