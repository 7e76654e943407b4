"""The dataset rules (rules/dataset.py) at the edges tests/rule_cases/dataset.py does not reach:
every finding asserted whole (message, evidence, the place with its columns, the related
place and its words), each line rule on a file holding every kind of broken row (so a rule
takes its own rows and only those, on every line), the one-finding-per-file form of
TP-PRE-MISSING-KEYS on each side of its conditions, the chat-template stand-down of the
alternation WARN, the eval overlap search across several training files (an exact copy
wins over an earlier near one, the first file and the first line win), the exact skip
reason without training files, the shares on each side of configured limits and as they
print, and the layout notes one at a time. Every fixture is a few JSON rows written here."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from rule_cases.dataset import GOOD_CHAT, chat, scan, text, texts
from trainproof_lsp.core.model import Hit, Level, Location, Related, Span
from trainproof_lsp.readers import dataset as ds
from trainproof_lsp.rules import Skip
from trainproof_lsp.rules import dataset as D
from trainproof_lsp.rules.base import NoLimits


def hits(rule: Any, subject: ds.DatasetScan, ctx: Any = None, limits: Any = None) -> list[Hit]:
    return list(rule.check(subject, limits if limits is not None else rule.limits(), ctx))


def at(line: int, start: int = 0, end: int = 0, path: str = "train.jsonl") -> Location:
    return Location(path=path, span=Span(line, start, line, end))


# --- the line rules, on one file holding every kind of broken row --------------------------

EVERY_KIND = (
    text(0),                                                             # 0 fine
    '{"text": "cut',                                                     # 1 malformed
    "123",                                                               # 2 malformed
    {"text": 5},                                                         # 3 non-string
    {"messages": "hi"},                                                  # 4 bad-messages
    {"text": ""},                                                        # 5 empty-text
    chat(("user", [{"type": "text", "text": "a"}]), ("assistant", "b")),  # 6 content-parts
    chat(("bot", "x"), ("assistant", "y")),                              # 7 unknown-role
    chat(("assistant", "y"), ("user", "u"), ("assistant", "z")),         # 8 assistant-first
    chat(("user", "x")),                                                 # 9 no-assistant
    chat(("user", "x"), ("assistant", "")),                              # 10 empty-assistant
    chat(("user", ""), ("assistant", "a")),                              # 11 empty-turn
    chat(("user", "u"), ("system", "s"), ("assistant", "a")),            # 12 system-not-first
    chat(("user", "u"), ("assistant", "a"), ("user", "u2")),             # 13 last-not-assistant
    chat(("user", "u"), ("user", "u2"), ("assistant", "a")),             # 14 not-alternating
    {"prompt": "p", "chosen": "c", "rejected": "c"},                     # 15 chosen-equals-rejected
    {"text": "t", "prompt": "p", "completion": "c"},                     # 16 extra-keys
    {"prompt": "p"},                                                     # 17 missing-keys
    '{"text": 1.5}',                                                     # 18 non-string
    '{"text": "  "}',                                                    # 19 empty-text
    "[" * 200_000 + "]" * 200_000,                                       # 20 unreadable
    "[1, 2]",                                                            # 21 malformed
    {"text": "fine again"},                                              # 22 fine
)

# rule -> the rows it owns in EVERY_KIND, each (0-based line, its words, its evidence, its columns)
OWNED: dict[str, list[tuple[int, str, dict[str, Any], int, int]]] = {
    "TP-PRE-MALFORMED-JSONL": [
        (1, "invalid JSON at column 14: the line ends inside a value", {"column": 14}, 13, 14),
        (2, "valid JSON but not an object (int): a record needs named fields", {"json_type": "int"}, 0, 3),
        (21, "valid JSON but not an object (list): a record needs named fields", {"json_type": "list"}, 0, 6)],
    "TP-PRE-ROW-NOT-CHECKED": [
        (20, "JSON nested too deeply to read (the decoder's depth limit); the row was not checked", {}, 0, 400_000)],
    "TP-PRE-EMPTY-TEXT": [
        (5, "text is empty", {"key": "text", "length": 0}, 0, 12),
        (19, "text is whitespace only", {"key": "text", "length": 2}, 0, 14)],
    "TP-PRE-MISSING-KEYS": [(17, "prompt-completion row without 'completion'", {"missing": 1}, 0, 15)],
    "TP-PRE-EXTRA-KEYS": [(16, "prompt-completion row also has 'text' (keys of another format; trainers use one "
                               "and ignore the rest)", {"extra": 1}, 0, 47)],
    "TP-PRE-NON-STRING": [
        (3, "text is int, not a string", {"key": "text"}, 0, 11),
        (4, "messages is str, not a list of message objects", {"key": "messages"}, 0, 18),
        (18, "text is float, not a string", {"key": "text"}, 0, 13)],
    "TP-PRE-CONTENT-PARTS": [(6, "messages[0].content is a list of 1 part(s), not a string",
                              {"key": "messages", "turn": 0, "parts": 1}, 0, 115)],
    "TP-PRE-UNKNOWN-ROLE": [(7, "messages: turn 0 has role 'bot', which chat templates do not know (known: system, "
                                "user, assistant, tool, function, developer, ipython)",
                             {"key": "messages", "turn": 0}, 0, 86)],
    "TP-PRE-ASSISTANT-FIRST": [(8, "messages: the conversation opens with the assistant (turn 0) before any user turn",
                                {"key": "messages", "turn": 0}, 0, 126)],
    "TP-PRE-NO-ASSISTANT": [(9, "messages: no assistant turn among 1 turn(s)", {"key": "messages", "turn": 0}, 0, 48)],
    "TP-PRE-EMPTY-ASSISTANT": [(10, "messages[1]: assistant turn content is empty",
                                {"key": "messages", "turn": 1}, 0, 86)],
    "TP-PRE-EMPTY-TURN": [(11, "messages[0]: user turn content is empty", {"key": "messages", "turn": 0}, 0, 86)],
    "TP-PRE-SYSTEM-NOT-FIRST": [(12, "messages: system message at turn 1, not first",
                                 {"key": "messages", "turn": 1}, 0, 123)],
    "TP-PRE-LAST-NOT-ASSISTANT": [(13, "messages: the last turn (2) is 'user', not the assistant",
                                   {"key": "messages", "turn": 2}, 0, 122)],
    "TP-PRE-TURNS-NOT-ALTERNATING": [(14, "messages: turns 0 and 1 are both 'user': user and assistant turns do not "
                                          "alternate", {"key": "messages", "turn": 1}, 0, 122)],
    "TP-PRE-CHOSEN-EQUALS-REJECTED": [(15, "chosen and rejected are identical: the pair carries no preference", {},
                                       0, 47)],
}


def owned(rule_id: str) -> list[Hit]:
    return [Hit(message=f"line {line + 1}: {words}", evidence={"line": line + 1, **evidence},
                location=at(line, start, end))
            for line, words, evidence, start, end in OWNED[rule_id]]


@pytest.mark.parametrize("rule_id", sorted(OWNED))
def test_each_line_rule_takes_its_own_rows_on_every_line_and_only_those(rule_id):
    subject = scan(*EVERY_KIND)
    assert subject.records == 20  # the three malformed rows and the unreadable one are no records
    assert hits(_rule(rule_id), subject, D.DatasetContext()) == owned(rule_id)


def _rule(rule_id: str) -> Any:
    (rule,) = [r for r in D.DATASET_RULES if r.id == rule_id]
    return rule


def test_every_line_rule_is_in_the_registry_tuple_at_its_level_and_origin():
    levels = {r.id: (r.level, r.origin, r.family) for r in D.DATASET_RULES if r.id in OWNED}
    assert levels == {
        "TP-PRE-MALFORMED-JSONL": (Level.FAIL, "trainproof", D.DATASET),
        "TP-PRE-ROW-NOT-CHECKED": (Level.NOT_CHECKED, "new", D.DATASET),
        "TP-PRE-EMPTY-TEXT": (Level.FAIL, "trainproof", D.DATASET),
        "TP-PRE-MISSING-KEYS": (Level.FAIL, "new", D.DATASET),
        "TP-PRE-EXTRA-KEYS": (Level.WARN, "new", D.DATASET),
        "TP-PRE-NON-STRING": (Level.FAIL, "new", D.DATASET),
        "TP-PRE-CONTENT-PARTS": (Level.WARN, "new", D.DATASET),
        "TP-PRE-UNKNOWN-ROLE": (Level.FAIL, "new", D.DATASET),
        "TP-PRE-ASSISTANT-FIRST": (Level.WARN, "new", D.DATASET),
        "TP-PRE-NO-ASSISTANT": (Level.FAIL, "new", D.DATASET),
        "TP-PRE-EMPTY-ASSISTANT": (Level.FAIL, "new", D.DATASET),
        "TP-PRE-EMPTY-TURN": (Level.WARN, "new", D.DATASET),
        "TP-PRE-SYSTEM-NOT-FIRST": (Level.WARN, "new", D.DATASET),
        "TP-PRE-LAST-NOT-ASSISTANT": (Level.WARN, "new", D.DATASET),
        "TP-PRE-TURNS-NOT-ALTERNATING": (Level.WARN, "new", D.DATASET),
        "TP-PRE-CHOSEN-EQUALS-REJECTED": (Level.FAIL, "new", D.DATASET),
    }


def test_a_line_rule_is_built_from_its_kinds_alone():
    # _rule and _line_check as a new line rule would be built: the rule's own fields, the
    # project's origin unless told, and a check that takes the rows of its kinds only.
    made = D._rule("TP-PRE-X", "x-rule", Level.WARN, "One line.\n", (ds.EMPTY_TEXT, ds.NON_STRING))
    assert (made.id, made.name, made.level, made.doc, made.family, made.origin, made.limits) == (
        "TP-PRE-X", "x-rule", Level.WARN, "One line.\n", D.DATASET, "new", NoLimits)
    assert D._rule("TP-PRE-Y", "y", Level.FAIL, "d", (ds.MALFORMED,), origin="trainproof").origin == "trainproof"
    subject = scan(*EVERY_KIND)
    # NON_STRING's rule also owns the bad-messages kind (line 5); this one takes non-string alone
    expected = sorted([h for h in owned("TP-PRE-EMPTY-TEXT") + owned("TP-PRE-NON-STRING") if h.evidence["line"] != 5],
                      key=lambda h: h.location.span.start_line)
    assert list(made.check(subject, NoLimits(), None)) == expected
    assert list(D._line_check((ds.MISSING_KEYS,))(subject, NoLimits(), None)) == owned("TP-PRE-MISSING-KEYS")
    assert list(D._line_check(())(subject, NoLimits(), None)) == []


def test_a_line_rule_on_a_clean_file_says_nothing():
    subject = scan(text(0), GOOD_CHAT, {"prompt": "p", "completion": "c"})
    assert [r.id for r in D.DATASET_RULES if r.id in OWNED and hits(r, subject, D.DatasetContext())] == []


# --- TP-PRE-MISSING-KEYS: one finding for a file in its own shape ---------------------------

NO_FIELD = ("no training field (keys: answer, question); expected one of the formats text, prompt/completion, "
            "messages, conversations, instruction/output, chosen/rejected, or a field mapping (--field text=KEY)")


def test_every_row_in_its_own_shape_is_one_finding_with_the_count():
    subject = scan({"question": "q", "answer": "a"}, {"question": "q2", "answer": "a2"},
                   {"question": "q3", "answer": "a3"})
    assert hits(D.MISSING_KEYS, subject) == [Hit(
        message=f"every one of the 3 rows, from line 1: {NO_FIELD}",
        evidence={"rows": 3, "records": 3, "line": 1, "keys": 2}, location=at(0, 0, 32))]


def test_the_shape_is_the_words_before_the_keys_so_other_keys_are_the_same_shape():
    subject = scan({"question": "q", "answer": "a"}, {"q": "q2", "a": "a2"})
    assert hits(D.MISSING_KEYS, subject) == [Hit(
        message=f"every one of the 2 rows, from line 1: {NO_FIELD}",
        evidence={"rows": 2, "records": 2, "line": 1, "keys": 2}, location=at(0, 0, 32))]


def test_two_rows_without_their_completion_are_one_finding_too():
    subject = scan({"prompt": "q"}, {"prompt": "a"})
    assert hits(D.MISSING_KEYS, subject) == [Hit(
        message="every one of the 2 rows, from line 1: prompt-completion row without 'completion'",
        evidence={"rows": 2, "records": 2, "line": 1, "missing": 1}, location=at(0, 0, 15))]


def test_one_row_alone_is_said_on_its_line():
    subject = scan({"question": "q", "answer": "a"})
    assert hits(D.MISSING_KEYS, subject) == [Hit(
        message=f"line 1: {NO_FIELD}", evidence={"line": 1, "keys": 2}, location=at(0, 0, 32))]


def test_two_shapes_are_said_line_by_line():
    subject = scan({"question": "q", "answer": "a"}, {"prompt": "p"})
    assert hits(D.MISSING_KEYS, subject) == [
        Hit(message=f"line 1: {NO_FIELD}", evidence={"line": 1, "keys": 2}, location=at(0, 0, 32)),
        Hit(message="line 2: prompt-completion row without 'completion'", evidence={"line": 2, "missing": 1},
            location=at(1, 0, 15))]


def test_shapes_that_start_alike_are_still_two_shapes():
    subject = scan({"prompt": "p"}, {"completion": "c"})
    assert hits(D.MISSING_KEYS, subject) == [
        Hit(message="line 1: prompt-completion row without 'completion'", evidence={"line": 1, "missing": 1},
            location=at(0, 0, 15)),
        Hit(message="line 2: prompt-completion row without 'prompt'", evidence={"line": 2, "missing": 1},
            location=at(1, 0, 19))]


def test_one_row_with_its_field_leaves_the_others_line_by_line():
    subject = scan({"question": "q", "answer": "a"}, text(0), {"question": "q2", "answer": "a2"})
    assert hits(D.MISSING_KEYS, subject) == [
        Hit(message=f"line 1: {NO_FIELD}", evidence={"line": 1, "keys": 2}, location=at(0, 0, 32)),
        Hit(message=f"line 3: {NO_FIELD}", evidence={"line": 3, "keys": 2}, location=at(2, 0, 34))]


def test_a_malformed_row_is_no_record_so_the_rest_still_make_one_finding():
    subject = scan({"question": "q", "answer": "a"}, "{", {"question": "q2", "answer": "a2"})
    assert subject.records == 2
    assert hits(D.MISSING_KEYS, subject) == [Hit(
        message=f"every one of the 2 rows, from line 1: {NO_FIELD}",
        evidence={"rows": 2, "records": 2, "line": 1, "keys": 2}, location=at(0, 0, 32))]


# --- TP-PRE-TURNS-NOT-ALTERNATING stands down where the chat template refused the row ------

TWO_USERS = chat(("user", "u"), ("user", "u2"), ("assistant", "a"))
ALTERNATION = "messages: turns 0 and 1 are both 'user': user and assistant turns do not alternate"


def _alternation(line: int) -> Hit:
    return Hit(message=f"line {line + 1}: {ALTERNATION}", evidence={"line": line + 1, "key": "messages", "turn": 1},
               location=at(line, 0, 122))


@pytest.mark.parametrize("ctx,lines", [
    (None, [0, 2, 3]),
    (SimpleNamespace(), [0, 2, 3]),
    (D.DatasetContext(), [0, 2, 3]),
    (D.DatasetContext(template_rejected=frozenset({2})), [0, 3]),
    (D.DatasetContext(template_rejected=frozenset({0, 3})), [2]),
    (D.DatasetContext(template_rejected=frozenset({0, 1, 2, 3})), []),
])
def test_the_alternation_warn_stands_down_on_each_row_the_template_refused(ctx, lines):
    subject = scan(TWO_USERS, GOOD_CHAT, TWO_USERS, TWO_USERS)
    assert hits(D.NOT_ALTERNATING, subject, ctx) == [_alternation(n) for n in lines]


def test_the_alternation_rule_is_registered_as_a_warn_of_the_family():
    r = D.NOT_ALTERNATING
    assert (r.id, r.name, r.level, r.family, r.origin) == (
        "TP-PRE-TURNS-NOT-ALTERNATING", "turns-not-alternating", Level.WARN, D.DATASET, "new")


# --- duplicates within a file and across files ---------------------------------------------

def test_each_repeat_points_at_its_first_occurrence():
    subject = scan(text(0), text(1), text(0), {"text": text(1)["text"].upper()}, text(0), {"text": " row number 2 "},
                   {"text": "ROW NUMBER 2"})
    assert hits(D.DUPLICATE, subject) == [
        Hit(message=f"line {n + 1} repeats line 1 exactly", evidence={"line": n + 1, "first_line": 1,
                                                                       "duplicates_in_file": 2},
            location=at(n), related=(Related(location=at(0), message="first occurrence"),))
        for n in (2, 4)]
    assert hits(D.NEAR_DUPLICATE, subject) == [
        Hit(message="line 4 repeats line 2 up to letter case or whitespace",
            evidence={"line": 4, "first_line": 2, "near_duplicates_in_file": 2},
            location=at(3), related=(Related(location=at(1), message="first occurrence"),)),
        Hit(message="line 7 repeats line 6 up to letter case or whitespace",
            evidence={"line": 7, "first_line": 6, "near_duplicates_in_file": 2},
            location=at(6), related=(Related(location=at(5), message="first occurrence"),))]


def test_rows_of_each_shape_repeat_by_their_training_content():
    pair = {"prompt": "p", "completion": "c"}
    subject = scan(GOOD_CHAT, pair, {**pair, "id": 7}, dict(GOOD_CHAT, source="web"))
    assert [h.message for h in hits(D.DUPLICATE, subject)] == ["line 3 repeats line 2 exactly",
                                                               "line 4 repeats line 1 exactly"]


PREFERENCE = {"prompt": "p", "chosen": "good", "rejected": "bad"}
ALPACA = {"instruction": "do", "input": "", "output": "done"}
SHAREGPT = {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]}


def test_preference_alpaca_and_sharegpt_rows_repeat_and_overlap_by_their_training_content():
    subject = scan(PREFERENCE, ALPACA, SHAREGPT, dict(PREFERENCE, id=1), dict(ALPACA, source="x"),
                   dict(SHAREGPT, id=2), {"prompt": "P", "chosen": "GOOD", "rejected": "bad"})
    assert [h.message for h in hits(D.DUPLICATE, subject)] == [
        "line 4 repeats line 1 exactly", "line 5 repeats line 2 exactly", "line 6 repeats line 3 exactly"]
    assert [h.message for h in hits(D.NEAR_DUPLICATE, subject)] == [
        "line 7 repeats line 1 up to letter case or whitespace"]
    assert [h.message for h in hits(D.MIXED, subject)] == [
        "rows in 3 formats: preference 3 (first line 1), alpaca 2 (first line 2), sharegpt 2 (first line 3)"]
    evals = scan(SHAREGPT, PREFERENCE, {"instruction": "DO", "input": "", "output": "done"}, name="eval.jsonl")
    train = D.DatasetContext(train=(scan(ALPACA, PREFERENCE, SHAREGPT),))
    assert [h.message for h in hits(D.OVERLAP, evals, train)] == [
        "eval line 1 appears in the training data exactly (train.jsonl:3)",
        "eval line 2 appears in the training data exactly (train.jsonl:2)",
        "eval line 3 appears in the training data up to letter case or whitespace (train.jsonl:1)"]


ACROSS = D.DatasetContext(earlier_copies=(
    D.EarlierCopy(line=1, path="shard-0.jsonl", file=0, first_line=7, exact=True),
    D.EarlierCopy(line=3, path="dir/shard-1.jsonl", file=2, first_line=0, exact=False),
    D.EarlierCopy(line=4, path="shard-0.jsonl", file=0, first_line=2, exact=True),
))


def test_each_copy_from_an_earlier_file_is_said_with_that_file_and_line():
    subject = scan(*texts(5), name="shard-3.jsonl")
    assert hits(D.ACROSS_FILES, subject, ACROSS) == [
        Hit(message="line 2 repeats shard-0.jsonl:8 (an earlier file) exactly",
            evidence={"line": 2, "first_line": 8, "first_file": 1, "exact": True, "across_files_in_file": 3},
            location=at(1, path="shard-3.jsonl"),
            related=(Related(location=at(7, path="shard-0.jsonl"), message="first occurrence, in an earlier file"),)),
        Hit(message="line 4 repeats dir/shard-1.jsonl:1 (an earlier file) up to letter case or whitespace",
            evidence={"line": 4, "first_line": 1, "first_file": 3, "exact": False, "across_files_in_file": 3},
            location=at(3, path="shard-3.jsonl"),
            related=(Related(location=at(0, path="dir/shard-1.jsonl"),
                             message="first occurrence, in an earlier file"),)),
        Hit(message="line 5 repeats shard-0.jsonl:3 (an earlier file) exactly",
            evidence={"line": 5, "first_line": 3, "first_file": 1, "exact": True, "across_files_in_file": 3},
            location=at(4, path="shard-3.jsonl"),
            related=(Related(location=at(2, path="shard-0.jsonl"), message="first occurrence, in an earlier file"),)),
    ]


@pytest.mark.parametrize("ctx", [None, SimpleNamespace(), D.DatasetContext()])
def test_without_earlier_copies_nothing_is_said_across_files(ctx):
    assert hits(D.ACROSS_FILES, scan(*texts(3), text(0)), ctx) == []


# --- the eval overlap ----------------------------------------------------------------------

X, Y, Z, W, Q = ({"text": f"{w} is a row of its own"} for w in ("xray", "yankee", "zulu", "whiskey", "quebec"))


def _upper(row: dict[str, str]) -> dict[str, str]:
    return {"text": row["text"].upper()}


def _train() -> tuple[ds.DatasetScan, ...]:
    first = scan(_upper(X), Y, Y, "{", name="t1.jsonl")
    second = scan(X, Z, W, Y, "{", name="t2.jsonl")
    return first, second


def _eval() -> ds.DatasetScan:
    return scan(X, Y, Z, _upper(W), "{", Q, {"text": "  " + Z["text"].upper()}, name="eval.jsonl")


def test_the_overlap_search_prefers_an_exact_copy_then_the_first_file_then_its_first_line():
    assert D.find_overlaps(_eval(), _train()) == (
        D.Overlap(line=0, path="t2.jsonl", train_line=0, exact=True),   # exact in t2 beats near in t1
        D.Overlap(line=1, path="t1.jsonl", train_line=1, exact=True),   # t1 before t2, line 1 before 2
        D.Overlap(line=2, path="t2.jsonl", train_line=1, exact=True),
        D.Overlap(line=3, path="t2.jsonl", train_line=2, exact=False),  # the malformed rows match nothing
        D.Overlap(line=6, path="t2.jsonl", train_line=1, exact=False),
    )
    assert D.find_overlaps(_eval(), ()) == ()
    assert D.find_overlaps(scan("{", "[", name="eval.jsonl"), (scan("{", "[", name="t.jsonl"),)) == ()


def test_the_first_in_train_takes_the_first_file_and_line_of_each_wanted_hash():
    t1, t2 = _train()
    y, x = t1.exact[1], t2.exact[0]
    assert D._first_in_train((t1, t2), "exact", {x, y}) == {y: ("t1.jsonl", 1), x: ("t2.jsonl", 0)}
    assert D._first_in_train((t1, t2), "near", {t2.near[0]}) == {t2.near[0]: ("t1.jsonl", 0)}
    assert D._first_in_train((t1, t2), "exact", set()) == {}


def test_each_eval_row_in_the_training_data_is_said_with_its_place_there():
    ctx = D.DatasetContext(train=_train())
    found = hits(D.OVERLAP, _eval(), ctx)
    assert found[0] == Hit(message="eval line 1 appears in the training data exactly (t2.jsonl:1)",
                           evidence={"line": 1, "train_line": 1, "exact": True}, location=at(0, path="eval.jsonl"),
                           related=(Related(location=at(0, path="t2.jsonl"),
                                            message="the same row in the training data"),))
    assert found[3] == Hit(message="eval line 4 appears in the training data up to letter case or whitespace "
                                   "(t2.jsonl:3)", evidence={"line": 4, "train_line": 3, "exact": False},
                           location=at(3, path="eval.jsonl"),
                           related=(Related(location=at(2, path="t2.jsonl"),
                                            message="the same row in the training data"),))
    assert [(h.evidence["line"], h.evidence["train_line"], h.evidence["exact"]) for h in found] == [
        (1, 1, True), (2, 2, True), (3, 2, True), (4, 3, False), (7, 2, False)]


def test_a_context_of_another_kind_is_searched_all_the_same():
    ctx = SimpleNamespace(train=_train())
    assert [h.message for h in hits(D.OVERLAP, _eval(), ctx)] == [
        "eval line 1 appears in the training data exactly (t2.jsonl:1)",
        "eval line 2 appears in the training data exactly (t1.jsonl:2)",
        "eval line 3 appears in the training data exactly (t2.jsonl:2)",
        "eval line 4 appears in the training data up to letter case or whitespace (t2.jsonl:3)",
        "eval line 7 appears in the training data up to letter case or whitespace (t2.jsonl:2)"]


SKIP = ("judged on an eval file only, against its training files (preflight --eval EVAL, or doctor on a folder "
        "where an eval/valid/test file pairs with a train file by name)")


@pytest.mark.parametrize("rule", [D.OVERLAP, D.EVAL_OVERLAP_SHARE, D.EVAL_CONTAMINATED], ids=lambda r: r.id)
@pytest.mark.parametrize("ctx", [None, SimpleNamespace(), SimpleNamespace(train=()), D.DatasetContext()],
                         ids=["none", "bare", "empty", "context"])
def test_without_training_files_the_eval_rules_skip_with_the_reason(rule, ctx):
    with pytest.raises(Skip) as skipped:
        hits(rule, _eval(), ctx)
    assert str(skipped.value) == SKIP
    assert D.OVERLAP_SKIP == SKIP


def test_the_overlaps_are_searched_once_per_eval_scan():
    ctx = D.DatasetContext(train=_train())
    one, other = _eval(), scan(Q, Z, name="eval2.jsonl")
    first = ctx.overlaps(one)
    assert ctx.overlaps(one) is first
    assert ctx.overlaps(other) == (D.Overlap(line=1, path="t2.jsonl", train_line=1, exact=True),)
    assert ctx.overlaps(one) is first
    assert len(first) == 5


def test_the_three_eval_rules_share_one_search(monkeypatch):
    searches = []
    search = D.find_overlaps

    def counted(scan_: ds.DatasetScan, train: Any) -> tuple[D.Overlap, ...]:
        searches.append(scan_.path)
        return search(scan_, train)

    monkeypatch.setattr(D, "find_overlaps", counted)
    ctx = D.DatasetContext(train=_train())
    subject = _eval()
    assert [len(hits(r, subject, ctx)) for r in D.EVAL_RULES] == [5, 1, 1]
    assert searches == ["eval.jsonl"]
    # a context of another kind has nowhere to keep it: each rule searches
    assert [len(hits(r, subject, SimpleNamespace(train=_train()))) for r in D.EVAL_RULES] == [5, 1, 1]
    assert searches == ["eval.jsonl"] * 4


# --- shares: how they print, and each limit on both sides -----------------------------------

@pytest.mark.parametrize("share,limit,said", [
    (0.1, 0.1, ("10%", "10%")),
    (0.125, 0.125, ("12.5%", "12.5%")),       # at a limit that is not a round percentage: written as it is
    (0.0999, 0.1, ("9.99%", "10%")),          # not the limit: never printed as it
    (0.1001, 0.1, ("10.01%", "10%")),
    (0.0996, 0.1, ("9.96%", "10%")),
    (0.104, 0.1, ("10.4%", "10%")),
    (0.2, 0.1, ("20%", "10%")),
    (0.99999, 0.5, ("99.999%", "50%")),       # not all: never printed as 100%
    (0.999999, 0.5, ("99.9999%", "50%")),     # four decimals at most
    (0.995, 0.5, ("99.5%", "50%")),
    (1.0, 0.5, ("100%", "50%")),
    (0.5, 0.12345, ("50%", "12.345%")),
    (0.5, 0.125, ("50%", "12.5%")),
    (0.5, 0.1234567, ("50%", "12.3457%")),    # a limit of more than four decimals
    (0.1234, 0.12345, ("12%", "12.345%")),
    (0.12344, 0.1234, ("12%", "12.34%")),     # 12 is not 12.34: no decimals needed
    (0.0, 0.05, ("0%", "5%")),
    (0.5, 0.1 + 4.9e-9, ("50%", "10%")),      # float noise under a millionth of a point is no decimal
    (0.5, 0.1 + 1.5e-8, ("50%", "10.0000%")),  # over it, the limit is not a round number
])
def test_a_share_prints_with_as_many_decimals_as_it_takes(share, limit, said):
    assert D.share_text(share, limit) == said


def test_repeats_count_exact_and_near_and_start_at_the_lowest_line():
    subject = scan(text(0), text(1), {"text": text(1)["text"].upper()}, text(0), text(2))
    r = D.repeats(subject)
    assert r == D.Repeats(rows=5, exact=1, near=1, first=ds.Duplicate(line=2, first=1))
    assert (r.count, r.share) == (2, 0.4)
    assert D.repeats(scan(*texts(4))) is None
    assert D.repeats(scan()) is None


def _repeating(rows: int, exact: int, near: int = 0) -> ds.DatasetScan:
    """`rows` rows: the last `exact` copy row 0, the `near` before them are row 1 in upper
    case, each with its own number of leading spaces (so no two of them are exact copies)."""
    distinct = texts(rows - exact - near)
    near_rows = [{"text": " " * i + distinct[1]["text"].upper()} for i in range(near)]
    return scan(*distinct, *near_rows, *[distinct[0]] * exact)


def test_the_duplicate_share_finding_whole_with_its_near_repeats():
    subject = _repeating(30, 4, near=2)
    expected = Hit(message="20% of rows repeat an earlier row of this file: 6 of 30 (2 of them up to letter case "
                           "or whitespace), the first at line 25; 24 distinct rows; limit 10%",
                   evidence={"line": 25, "first_line": 2, "count": 6, "total": 30, "share": 0.2, "exact": 4,
                             "near": 2, "distinct": 24},
                   location=at(24), related=(Related(location=at(1), message="the row it repeats"),))
    assert hits(D.DUPLICATE_SHARE, subject) == [expected]
    assert hits(D.MOSTLY_DUPLICATES, subject) == []


@pytest.mark.parametrize("rule,limits", [(D.DUPLICATE_SHARE, D.DuplicateShareLimits(min_share=0.25, min_rows=8)),
                                         (D.MOSTLY_DUPLICATES, D.MostlyDuplicatesLimits(min_share=0.25, min_rows=8))],
                         ids=["warn", "fail"])
@pytest.mark.parametrize("rows,exact,fires", [
    (8, 2, True),    # at both limits
    (8, 1, False),   # a share just under
    (7, 2, False),   # one row short of min_rows (2 of 7 is over the share)
    (12, 3, True),
    (12, 2, False),
])
def test_configured_repeat_limits_on_each_side(rule, limits, rows, exact, fires):
    subject = _repeating(rows, exact)
    found = hits(rule, subject, limits=limits)
    if not fires:
        assert found == []
        return
    share = exact / rows
    assert found == [Hit(
        message=f"{share:.0%} of rows repeat an earlier row of this file: {exact} of {rows}, the first at line "
                f"{rows - exact + 1}; {rows - exact} distinct rows; limit 25%",
        evidence={"line": rows - exact + 1, "first_line": 1, "count": exact, "total": rows, "share": share,
                  "exact": exact, "near": 0, "distinct": rows - exact},
        location=at(rows - exact), related=(Related(location=at(0), message="the row it repeats"),))]


def test_the_default_repeat_limits_are_a_tenth_and_half_of_twenty_rows():
    assert D.DuplicateShareLimits() == D.DuplicateShareLimits(min_share=0.1, min_rows=20)
    assert D.MostlyDuplicatesLimits() == D.MostlyDuplicatesLimits(min_share=0.5, min_rows=20)
    assert D.EvalOverlapShareLimits().min_share == 0.05
    assert D.EvalContaminatedLimits().min_share == 0.5
    assert D.STANDS_DOWN == {"TP-PRE-DUPLICATE-SHARE": "TP-PRE-MOSTLY-DUPLICATES",
                             "TP-PRE-EVAL-OVERLAP-SHARE": "TP-PRE-EVAL-CONTAMINATED"}
    assert [r.id for r in D.EVAL_RULES] == ["TP-PRE-EVAL-OVERLAP", "TP-PRE-EVAL-OVERLAP-SHARE",
                                            "TP-PRE-EVAL-CONTAMINATED"]


def test_thousands_are_grouped_in_the_repeat_headline():
    subject = _repeating(2400, 1200, near=1100)
    (found,) = hits(D.MOSTLY_DUPLICATES, subject)
    assert found.message == ("96% of rows repeat an earlier row of this file: 2,300 of 2,400 (1,100 of them up to "
                             "letter case or whitespace), the first at line 101; 100 distinct rows; limit 50%")


def _eval_of(rows: int, exact: int, near: int = 0) -> ds.DatasetScan:
    """An eval file of `rows` rows: the first `exact` are rows of TRAIN, the next `near` are
    rows of TRAIN in upper case, the rest its own."""
    own = [{"text": f"eval row {i} is its own"} for i in range(rows - exact - near)]
    return scan(*TRAIN[:exact], *[_upper(r) for r in TRAIN[exact:exact + near]], *own, name="eval.jsonl")


TRAIN = tuple(texts(60))
AGAINST = D.DatasetContext(train=(scan(*TRAIN, name="train.jsonl"),))


def test_the_contamination_finding_whole_with_its_near_rows():
    found = hits(D.EVAL_CONTAMINATED, _eval_of(10, 4, near=2), D.DatasetContext(train=AGAINST.train))
    assert found == [Hit(
        message="6 of 10 eval rows (60%) are in the training data (2 of them up to letter case or whitespace), "
                "the first at line 1 (train.jsonl:1); limit 50%",
        evidence={"line": 1, "train_line": 1, "count": 6, "total": 10, "share": 0.6, "exact": 4, "near": 2},
        location=at(0, path="eval.jsonl"),
        related=(Related(location=at(0), message="the first of them in the training data"),))]


def test_the_contamination_starts_at_the_first_eval_row_found():
    subject = scan({"text": "its own"}, TRAIN[5], TRAIN[2], name="eval.jsonl")
    (found,) = hits(D.EVAL_CONTAMINATED, subject, D.DatasetContext(train=AGAINST.train))
    assert found == Hit(
        message="2 of 3 eval rows (67%) are in the training data, the first at line 2 (train.jsonl:6); limit 50%",
        evidence={"line": 2, "train_line": 6, "count": 2, "total": 3, "share": 2 / 3, "exact": 2, "near": 0},
        location=at(1, path="eval.jsonl"),
        related=(Related(location=at(5), message="the first of them in the training data"),))


@pytest.mark.parametrize("rule,limits", [(D.EVAL_OVERLAP_SHARE, D.EvalOverlapShareLimits(min_share=0.25)),
                                         (D.EVAL_CONTAMINATED, D.EvalContaminatedLimits(min_share=0.25))],
                         ids=["warn", "fail"])
@pytest.mark.parametrize("rows,shared,fires", [(8, 2, True), (9, 2, False), (12, 3, True), (12, 2, False),
                                               (4, 0, False)])
def test_configured_eval_limits_on_each_side(rule, limits, rows, shared, fires):
    found = hits(rule, _eval_of(rows, shared), D.DatasetContext(train=AGAINST.train), limits)
    assert [h.evidence["count"] for h in found] == ([shared] if fires else [])


def test_the_default_eval_limits_on_each_side():
    ctx = D.DatasetContext(train=AGAINST.train)
    assert [h.message for h in hits(D.EVAL_OVERLAP_SHARE, _eval_of(20, 1), ctx)] == [
        "1 of 20 eval rows (5%) are in the training data, the first at line 1 (train.jsonl:1); limit 5%"]
    assert hits(D.EVAL_OVERLAP_SHARE, _eval_of(21, 1), ctx) == []
    assert [h.message for h in hits(D.EVAL_CONTAMINATED, _eval_of(20, 10), ctx)] == [
        "10 of 20 eval rows (50%) are in the training data, the first at line 1 (train.jsonl:1); limit 50%"]
    assert hits(D.EVAL_CONTAMINATED, _eval_of(21, 10), ctx) == []


def test_an_eval_file_with_nothing_in_common_is_quiet_for_every_eval_rule():
    ctx = D.DatasetContext(train=AGAINST.train)
    assert [h for r in D.EVAL_RULES for h in hits(r, _eval_of(5, 0), ctx)] == []


# --- mixed formats, the layout notes, a JSON array named .jsonl -----------------------------

def test_two_formats_are_one_finding_on_the_first_row_of_the_other():
    subject = scan(*texts(2), GOOD_CHAT)
    assert hits(D.MIXED, subject) == [Hit(
        message="rows in 2 formats: text 2 (first line 1), chat 1 (first line 3)",
        evidence={"formats": 2, "main_rows": 2, "other_rows": 1, "rows_text": 2, "rows_chat": 1},
        location=at(2), related=(Related(location=at(0), message="first text row"),))]


def test_the_finding_sits_on_the_earliest_row_of_any_other_format():
    subject = scan(GOOD_CHAT, *texts(2), {"prompt": "p", "completion": "c"}, chat(("user", "x"), ("assistant", "y")),
                   GOOD_CHAT, text(9))
    assert hits(D.MIXED, subject) == [Hit(
        message="rows in 3 formats: chat 3 (first line 1), text 3 (first line 2), prompt-completion 1 (first line 4)",
        evidence={"formats": 3, "main_rows": 3, "other_rows": 4, "rows_chat": 3, "rows_text": 3,
                  "rows_prompt_completion": 1},
        location=at(1), related=(Related(location=at(0), message="first chat row"),))]
    later = scan(*texts(3), {"prompt": "p", "completion": "c"}, GOOD_CHAT, GOOD_CHAT)
    (found,) = hits(D.MIXED, later)
    assert (found.location, found.evidence["other_rows"]) == (at(3), 3)


@pytest.mark.parametrize("rows", [(), (text(0),), (GOOD_CHAT, GOOD_CHAT)])
def test_one_format_or_none_is_not_mixed(rows):
    assert hits(D.MIXED, scan(*rows)) == []


def _rows(*rows: Any, end: bytes = b"\n") -> bytes:
    return b"".join(json.dumps(r).encode() + end for r in rows)


LAYOUT_CASES = [
    (_rows(*texts(2)), "train.jsonl", None),
    (b"\xef\xbb\xbf" + _rows(*texts(2)), "train.jsonl",
     ("starts with a UTF-8 byte-order mark (skipped)", True, False, 0, False, 2)),
    (_rows(*texts(2), end=b"\r\n"), "train.jsonl", ("uses CRLF line endings (read as LF)", False, True, 0, False, 2)),
    (_rows(text(0)) + b"\n\n" + _rows(text(1)), "train.jsonl", ("2 blank line(s) skipped", False, False, 2, False, 2)),
    (json.dumps(texts(3)).encode(), "train.json",
     ("is a JSON array of 3 record(s), not JSON Lines (each element checked)", False, False, 0, True, 3)),
    (json.dumps(texts(3)).encode(), "train.jsonl", None),   # TP-PRE-JSON-ARRAY-IN-JSONL says it instead
    (json.dumps(texts(3)).encode(), "TRAIN.NDJSON", None),
    (b"\xef\xbb\xbf" + json.dumps(texts(2)).encode(), "train.json",
     ("starts with a UTF-8 byte-order mark (skipped); is a JSON array of 2 record(s), not JSON Lines (each element "
      "checked)", True, False, 0, True, 2)),
    (b"\xef\xbb\xbf" + json.dumps(texts(2)).encode(), "train.jsonl",
     ("starts with a UTF-8 byte-order mark (skipped)", True, False, 0, True, 2)),
]


@pytest.mark.parametrize("raw,name,said", LAYOUT_CASES)
def test_each_layout_note_alone_and_together(raw, name, said):
    found = hits(D.LAYOUT, scan(raw=raw, name=name))
    if said is None:
        assert found == []
        return
    words, bom, crlf, blank, array, records = said
    assert found == [Hit(message=f"file {words}",
                         evidence={"bom": bom, "crlf": crlf, "blank_lines": blank, "json_array": array,
                                   "records": records},
                         location=at(0, path=name))]


@pytest.mark.parametrize("name,suffix", [("train.jsonl", ".jsonl"), ("data.ndjson", ".ndjson"),
                                         ("dir.v2/DATA.NDJSON", ".NDJSON"), ("a.b.JsonL", ".JsonL")])
def test_a_json_array_named_jsonl_is_said_with_its_own_suffix(name, suffix):
    subject = scan(raw=json.dumps(texts(2), indent=1).encode(), name=name)
    assert D.json_array_named_jsonl(subject) is True
    assert hits(D.ARRAY_IN_JSONL, subject) == [Hit(
        message=f"the file is named {suffix} but holds a JSON array of 2 record(s): line-based JSONL loaders reject it",
        evidence={"records": 2, "lines": 8}, location=at(0, path=name))]


@pytest.mark.parametrize("raw,name", [(json.dumps(texts(2)).encode(), "train.json"),
                                      (json.dumps(texts(2)).encode(), "train.jsonl.txt"),
                                      (_rows(*texts(2)), "train.jsonl")])
def test_an_array_named_otherwise_or_json_lines_is_not_an_array_in_jsonl(raw, name):
    subject = scan(raw=raw, name=name)
    assert D.json_array_named_jsonl(subject) is False
    assert hits(D.ARRAY_IN_JSONL, subject) == []
