"""Cases for the dataset family: DatasetScans of JSONL rows written here, scanned from
memory by the reader (readers/dataset.scan_dataset), judged with the rule's context (the
training files an eval file must not overlap, the rows of earlier shards)."""

from __future__ import annotations

import json
from typing import Any

from trainproof_lsp.readers.dataset import DatasetScan, scan_dataset
from trainproof_lsp.core.config import Config
from trainproof_lsp.judge.preflight import repeats_across_files
from trainproof_lsp.rules.dataset import DatasetContext

from . import Expect, FamilyCases, Fires, Quiet, RuleCases, straddle


def line(row: Any) -> str:
    return row if isinstance(row, str) else json.dumps(row)


def scan(*rows: Any, name: str = "train.jsonl", raw: bytes | None = None, max_row_bytes: int = 0) -> DatasetScan:
    """A scan of one row per line (a dict is written as JSON, a str as it is)."""
    data = raw if raw is not None else "".join(line(r) + "\n" for r in rows).encode()
    return scan_dataset(name, data, max_row_bytes=max_row_bytes)


def text(i: int) -> dict[str, str]:
    return {"text": f"row number {i} says something of its own"}


def texts(n: int, start: int = 0) -> list[dict[str, str]]:
    return [text(i) for i in range(start, start + n)]


def chat(*turns: tuple[str, Any]) -> dict[str, Any]:
    return {"messages": [{"role": r, "content": c} for r, c in turns]}


GOOD_CHAT = chat(("user", "hi"), ("assistant", "hello"))


def with_repeats(rows: int, repeats: float) -> DatasetScan:
    """`rows` rows of which `repeats` copy the first row."""
    k = int(repeats)
    return scan(*texts(rows - k), *[text(0)] * k)


def context(_: DatasetScan) -> DatasetContext:
    return DatasetContext()


TRAIN = tuple(texts(50))


def against_train(_: DatasetScan) -> DatasetContext:
    """An eval file's context: the 50 rows of train.jsonl."""
    return DatasetContext(train=(scan(*TRAIN),))


def eval_file(rows: int, shared: float, near: int = 0) -> DatasetScan:
    """An eval file of `rows` rows of which `shared` are rows of TRAIN (the last `near` of
    them in upper case)."""
    k = int(shared)
    copies = [dict(r) for r in TRAIN[:k]]
    for r in copies[k - near:] if near else []:
        r["text"] = r["text"].upper()
    return scan(*copies, *texts(rows - k, start=1000), name="eval.jsonl")


SHARD_0 = tuple(texts(10))


def after_shard_0(shard: DatasetScan) -> DatasetContext:
    """A second shard's context: its rows that repeat shard-0.jsonl's, found as preflight
    finds them (judge/preflight.repeats_across_files)."""
    return DatasetContext(earlier_copies=repeats_across_files([scan(*SHARD_0, name="shard-0.jsonl"), shard],
                                                              Config()).get(1, ()))


CASES: dict[str, RuleCases] = {
    "TP-PRE-MALFORMED-JSONL": RuleCases(
        fires=Fires(subject=lambda: scan(text(0), '{"text": "cut', "123", text(1)), hits=(Expect(message='line 2: invalid JSON at column 14: the line ends inside a value',
                           evidence={'line': 2, 'column': 14}, line=1),
                     Expect(message='line 3: valid JSON but not an object (int): a record needs named fields',
                           evidence={'line': 3, 'json_type': 'int'}, line=2),),
                    family=('TP-PRE-MALFORMED-JSONL', 'TP-PRE-MALFORMED-JSONL')),
        quiet=Quiet(subject=lambda: scan(*texts(3))),
    ),
    "TP-PRE-ROW-NOT-CHECKED": RuleCases(
        fires=Fires(subject=lambda: scan(text(0), "[" * 200_000 + "]" * 200_000, text(1)),
                    hits=(Expect(message="line 2: JSON nested too deeply to read (the decoder's depth limit); the row was not checked",
                           evidence={'line': 2}, line=1),),
                    family=('TP-PRE-ROW-NOT-CHECKED',)),
        quiet=Quiet(subject=lambda: scan(text(0), {"text": "x", "deep": [[[[["fine"]]]]]})),
    ),
    "TP-PRE-EMPTY-TEXT": RuleCases(
        fires=Fires(subject=lambda: scan(text(0), {"text": "  "}, {"prompt": "p", "completion": ""}), hits=(Expect(message='line 2: text is whitespace only',
                           evidence={'line': 2, 'key': 'text', 'length': 2}, line=1),
                     Expect(message='line 3: completion is empty',
                           evidence={'line': 3, 'key': 'completion'}, line=2),),
                    family=('TP-PRE-EMPTY-TEXT', 'TP-PRE-EMPTY-TEXT', 'TP-PRE-MIXED-FORMATS')),
        quiet=Quiet(subject=lambda: scan(text(0), {"instruction": "do", "input": "", "output": "done"})),
    ),
    "TP-PRE-MISSING-KEYS": RuleCases(
        fires=Fires(subject=lambda: scan(text(0), {"prompt": "p"}, {"chosen": "a", "prompt": "p"}), hits=(Expect(message="line 2: prompt-completion row without 'completion'",
                           evidence={'line': 2, 'missing': 1}, line=1),
                     Expect(message="line 3: preference row without 'rejected'",
                           evidence={'line': 3, 'missing': 1}, line=2),),
                    family=('TP-PRE-MISSING-KEYS', 'TP-PRE-MISSING-KEYS', 'TP-PRE-MIXED-FORMATS')),
        quiet=(Quiet(subject=lambda: scan(text(0), {"prompt": "p", "completion": "c", "id": 3})),),
    ),
    "TP-PRE-EXTRA-KEYS": RuleCases(
        fires=Fires(subject=lambda: scan(text(0), {"text": "t", **GOOD_CHAT}), hits=(Expect(message="line 2: chat row also has 'text' (keys of another format; trainers use one and ignore the rest)",
                           evidence={'line': 2, 'extra': 1}, line=1),),
                    family=('TP-PRE-EXTRA-KEYS', 'TP-PRE-MIXED-FORMATS')),
        quiet=Quiet(subject=lambda: scan({"text": "t", "source": "web", "id": 1})),
    ),
    "TP-PRE-NON-STRING": RuleCases(
        fires=Fires(subject=lambda: scan(text(0), {"text": 5}, {"messages": "hi"}), hits=(Expect(message='line 2: text is int, not a string',
                           evidence={'line': 2, 'key': 'text'}, line=1),
                     Expect(message='line 3: messages is str, not a list of message objects',
                           evidence={'line': 3, 'key': 'messages'}, line=2),),
                    family=('TP-PRE-NON-STRING', 'TP-PRE-NON-STRING', 'TP-PRE-MIXED-FORMATS')),
        quiet=Quiet(subject=lambda: scan(text(0), GOOD_CHAT)),
    ),
    "TP-PRE-CONTENT-PARTS": RuleCases(
        fires=Fires(subject=lambda: scan(chat(("user", [{"type": "text", "text": "hi"}]), ("assistant", "hello"))),
                    hits=(Expect(message='line 1: messages[0].content is a list of 1 part(s), not a string',
                           evidence={'line': 1, 'key': 'messages', 'turn': 0, 'parts': 1}, line=0),),
                    family=('TP-PRE-CONTENT-PARTS',)),
        quiet=Quiet(subject=lambda: scan(GOOD_CHAT)),
    ),
    "TP-PRE-UNKNOWN-ROLE": RuleCases(
        fires=Fires(subject=lambda: scan(GOOD_CHAT, chat(("human", "hi"), ("assistant", "hello"))), hits=(Expect(message="line 2: messages: turn 0 has role 'human', which chat templates do not know (known: system, user, assistant, tool, function, developer, ipython)",
                           evidence={'line': 2, 'key': 'messages', 'turn': 0}, line=1),),
                    family=('TP-PRE-UNKNOWN-ROLE',)),
        quiet=Quiet(subject=lambda: scan(chat(("system", "be brief"), ("user", "hi"), ("assistant", "hello")))),
    ),
    "TP-PRE-ASSISTANT-FIRST": RuleCases(
        fires=Fires(subject=lambda: scan(chat(("assistant", "hello"), ("user", "hi"), ("assistant", "yes"))), hits=(Expect(message='line 1: messages: the conversation opens with the assistant (turn 0) before any user turn',
                           evidence={'line': 1, 'key': 'messages', 'turn': 0}, line=0),),
                    family=('TP-PRE-ASSISTANT-FIRST',)),
        quiet=Quiet(subject=lambda: scan(GOOD_CHAT)),
    ),
    "TP-PRE-NO-ASSISTANT": RuleCases(
        fires=Fires(subject=lambda: scan(GOOD_CHAT, chat(("user", "hi"))), hits=(Expect(message='line 2: messages: no assistant turn among 1 turn(s)',
                           evidence={'line': 2, 'key': 'messages', 'turn': 0}, line=1),),
                    family=('TP-PRE-NO-ASSISTANT',)),
        quiet=Quiet(subject=lambda: scan(GOOD_CHAT)),
    ),
    "TP-PRE-EMPTY-ASSISTANT": RuleCases(
        fires=Fires(subject=lambda: scan(chat(("user", "hi"), ("assistant", " "))), hits=(Expect(message='line 1: messages[1]: assistant turn content is whitespace only',
                           evidence={'line': 1, 'key': 'messages', 'turn': 1}, line=0),),
                    family=('TP-PRE-EMPTY-ASSISTANT',)),
        quiet=Quiet(subject=lambda: scan(GOOD_CHAT)),
    ),
    "TP-PRE-EMPTY-TURN": RuleCases(
        fires=Fires(subject=lambda: scan(chat(("system", ""), ("user", "hi"), ("assistant", "hello"))), hits=(Expect(message='line 1: messages[0]: system turn content is empty',
                           evidence={'line': 1, 'key': 'messages', 'turn': 0}, line=0),),
                    family=('TP-PRE-EMPTY-TURN',)),
        quiet=Quiet(subject=lambda: scan(chat(("system", "s"), ("user", "hi"), ("assistant", "hello")))),
    ),
    "TP-PRE-SYSTEM-NOT-FIRST": RuleCases(
        fires=Fires(subject=lambda: scan(chat(("user", "hi"), ("system", "s"), ("assistant", "hello"))), hits=(Expect(message='line 1: messages: system message at turn 1, not first',
                           evidence={'line': 1, 'key': 'messages', 'turn': 1}, line=0),),
                    family=('TP-PRE-SYSTEM-NOT-FIRST',)),
        quiet=Quiet(subject=lambda: scan(chat(("system", "s"), ("user", "hi"), ("assistant", "hello")))),
    ),
    "TP-PRE-LAST-NOT-ASSISTANT": RuleCases(
        fires=Fires(subject=lambda: scan(chat(("user", "hi"), ("assistant", "hello"), ("user", "bye"))), hits=(Expect(message="line 1: messages: the last turn (2) is 'user', not the assistant",
                           evidence={'line': 1, 'key': 'messages', 'turn': 2}, line=0),),
                    family=('TP-PRE-LAST-NOT-ASSISTANT',)),
        quiet=Quiet(subject=lambda: scan(GOOD_CHAT)),
    ),
    "TP-PRE-TURNS-NOT-ALTERNATING": RuleCases(
        fires=Fires(subject=lambda: scan(GOOD_CHAT, chat(("user", "hi"), ("user", "again"), ("assistant", "hello"))),
                    hits=(Expect(message="line 2: messages: turns 0 and 1 are both 'user': user and assistant turns do not alternate",
                           evidence={'line': 2, 'key': 'messages', 'turn': 1}, line=1),),
                    family=('TP-PRE-TURNS-NOT-ALTERNATING',)),
        quiet=(Quiet(subject=lambda: scan(chat(("user", "hi"), ("assistant", "a"), ("tool", "t"), ("assistant", "b")))),),
    ),
    "TP-PRE-CHOSEN-EQUALS-REJECTED": RuleCases(
        fires=Fires(subject=lambda: scan({"prompt": "p", "chosen": "same", "rejected": "same"}), hits=(Expect(message='line 1: chosen and rejected are identical: the pair carries no preference',
                           evidence={'line': 1}, line=0),),
                    family=('TP-PRE-CHOSEN-EQUALS-REJECTED',)),
        quiet=Quiet(subject=lambda: scan({"prompt": "p", "chosen": "good", "rejected": "bad"})),
    ),
    "TP-PRE-DUPLICATE-TEXT": RuleCases(
        fires=Fires(subject=lambda: scan(text(0), text(1), text(0), text(2), text(1)), hits=(Expect(message='line 3 repeats line 1 exactly',
                           evidence={'line': 3, 'first_line': 1, 'duplicates_in_file': 2}, line=2),
                     Expect(message='line 5 repeats line 2 exactly',
                           evidence={'line': 5, 'first_line': 2, 'duplicates_in_file': 2}, line=4),),
                    family=('TP-PRE-DUPLICATE-TEXT', 'TP-PRE-DUPLICATE-TEXT')),
        quiet=Quiet(subject=lambda: scan(text(0), {"text": text(0)["text"].upper()})),
    ),
    "TP-PRE-NEAR-DUPLICATE": RuleCases(
        fires=Fires(subject=lambda: scan(text(0), text(1), {"text": "  " + text(0)["text"].upper()}), hits=(Expect(message='line 3 repeats line 1 up to letter case or whitespace',
                           evidence={'line': 3, 'first_line': 1, 'near_duplicates_in_file': 1}, line=2),),
                    family=('TP-PRE-NEAR-DUPLICATE',)),
        quiet=Quiet(subject=lambda: scan(text(0), text(1))),
    ),
    "TP-PRE-DUPLICATE-SHARE": RuleCases(
        fires=Fires(subject=lambda: with_repeats(30, 4), hits=(Expect(message='13% of rows repeat an earlier row of this file: 4 of 30, the first at line 27; 26 distinct rows; limit 10%',
                           evidence={'line': 27, 'first_line': 1, 'count': 4, 'total': 30, 'share': 0.1333333, 'exact': 4, 'near': 0, 'distinct': 26}, line=26),),
                    family=('TP-PRE-DUPLICATE-TEXT', 'TP-PRE-DUPLICATE-TEXT', 'TP-PRE-DUPLICATE-TEXT', 'TP-PRE-DUPLICATE-TEXT', 'TP-PRE-DUPLICATE-SHARE')),
        quiet=(Quiet(subject=lambda: with_repeats(30, 2)), Quiet(subject=lambda: with_repeats(10, 5))),
        straddles=(straddle("min_share", 0.1, lambda f: with_repeats(40, round(40 * f)), fire=0.1, quiet=0.075),
                   straddle("min_rows", 20, lambda n: with_repeats(int(n), 5), fire=20, quiet=19)),
    ),
    "TP-PRE-MOSTLY-DUPLICATES": RuleCases(
        fires=Fires(subject=lambda: with_repeats(30, 20), hits=(Expect(message='67% of rows repeat an earlier row of this file: 20 of 30, the first at line 11; 10 distinct rows; limit 50%',
                           evidence={'line': 11, 'first_line': 1, 'count': 20, 'total': 30, 'share': 0.6666667, 'exact': 20, 'near': 0, 'distinct': 10}, line=10),),
                    family=('TP-PRE-DUPLICATE-TEXT', 'TP-PRE-DUPLICATE-TEXT', 'TP-PRE-DUPLICATE-TEXT', 'TP-PRE-DUPLICATE-TEXT', 'TP-PRE-DUPLICATE-TEXT', 'TP-PRE-DUPLICATE-TEXT', 'TP-PRE-DUPLICATE-TEXT', 'TP-PRE-DUPLICATE-TEXT', 'TP-PRE-DUPLICATE-TEXT', 'TP-PRE-DUPLICATE-TEXT', 'TP-PRE-DUPLICATE-TEXT', 'TP-PRE-DUPLICATE-TEXT', 'TP-PRE-DUPLICATE-TEXT', 'TP-PRE-DUPLICATE-TEXT', 'TP-PRE-DUPLICATE-TEXT', 'TP-PRE-DUPLICATE-TEXT', 'TP-PRE-DUPLICATE-TEXT', 'TP-PRE-DUPLICATE-TEXT', 'TP-PRE-DUPLICATE-TEXT', 'TP-PRE-DUPLICATE-TEXT', 'TP-PRE-DUPLICATE-SHARE', 'TP-PRE-MOSTLY-DUPLICATES')),
        quiet=(Quiet(subject=lambda: with_repeats(30, 14)), Quiet(subject=lambda: with_repeats(19, 15))),
        straddles=(straddle("min_share", 0.5, lambda f: with_repeats(40, round(40 * f)), fire=0.5, quiet=0.475),
                   straddle("min_rows", 20, lambda n: with_repeats(int(n), 15), fire=20, quiet=19)),
    ),
    "TP-PRE-DUPLICATE-ACROSS-FILES": RuleCases(
        fires=Fires(subject=lambda: scan(text(100), text(7), text(101), {"text": text(9)["text"].upper()}, text(7),
                                         name="shard-1.jsonl"), hits=(Expect(message='line 2 repeats shard-0.jsonl:8 (an earlier file) exactly',
                           evidence={'line': 2, 'first_line': 8, 'first_file': 1, 'exact': True, 'across_files_in_file': 2}, line=1),
                     Expect(message='line 4 repeats shard-0.jsonl:10 (an earlier file) up to letter case or whitespace',
                           evidence={'line': 4, 'first_line': 10, 'first_file': 1, 'exact': False, 'across_files_in_file': 2}, line=3),),
                    family=('TP-PRE-DUPLICATE-TEXT', 'TP-PRE-DUPLICATE-ACROSS-FILES', 'TP-PRE-DUPLICATE-ACROSS-FILES')),
        quiet=Quiet(subject=lambda: scan(*texts(5, start=100), name="shard-1.jsonl")),
        context=after_shard_0,
    ),
    "TP-PRE-EVAL-OVERLAP": RuleCases(
        fires=Fires(subject=lambda: eval_file(6, 3, near=1), hits=(Expect(message='eval line 1 appears in the training data exactly (train.jsonl:1)',
                           evidence={'line': 1, 'train_line': 1, 'exact': True}, line=0),
                     Expect(message='eval line 2 appears in the training data exactly (train.jsonl:2)',
                           evidence={'line': 2, 'train_line': 2, 'exact': True}, line=1),
                     Expect(message='eval line 3 appears in the training data up to letter case or whitespace (train.jsonl:3)',
                           evidence={'line': 3, 'train_line': 3, 'exact': False}, line=2),),
                    family=('TP-PRE-EVAL-OVERLAP', 'TP-PRE-EVAL-OVERLAP', 'TP-PRE-EVAL-OVERLAP', 'TP-PRE-EVAL-OVERLAP-SHARE', 'TP-PRE-EVAL-CONTAMINATED')),
        quiet=(Quiet(subject=lambda: eval_file(6, 0)),),
        context=against_train,
    ),
    "TP-PRE-EVAL-OVERLAP-SHARE": RuleCases(
        fires=Fires(subject=lambda: eval_file(40, 4, near=1), hits=(Expect(message='4 of 40 eval rows (10%) are in the training data (1 of them up to letter case or whitespace), the first at line 1 (train.jsonl:1); limit 5%',
                           evidence={'line': 1, 'train_line': 1, 'count': 4, 'total': 40, 'share': 0.1, 'exact': 3, 'near': 1}, line=0),),
                    family=('TP-PRE-EVAL-OVERLAP', 'TP-PRE-EVAL-OVERLAP', 'TP-PRE-EVAL-OVERLAP', 'TP-PRE-EVAL-OVERLAP', 'TP-PRE-EVAL-OVERLAP-SHARE')),
        quiet=Quiet(subject=lambda: eval_file(40, 1)),
        straddles=(straddle("min_share", 0.05, lambda f: eval_file(100, round(100 * f)), fire=0.05, quiet=0.04),),
        context=against_train,
    ),
    "TP-PRE-EVAL-CONTAMINATED": RuleCases(
        fires=Fires(subject=lambda: eval_file(10, 10), hits=(Expect(message='10 of 10 eval rows (100%) are in the training data, the first at line 1 (train.jsonl:1); limit 50%',
                           evidence={'line': 1, 'train_line': 1, 'count': 10, 'total': 10, 'share': 1.0, 'exact': 10, 'near': 0}, line=0),),
                    family=('TP-PRE-EVAL-OVERLAP', 'TP-PRE-EVAL-OVERLAP', 'TP-PRE-EVAL-OVERLAP', 'TP-PRE-EVAL-OVERLAP', 'TP-PRE-EVAL-OVERLAP', 'TP-PRE-EVAL-OVERLAP', 'TP-PRE-EVAL-OVERLAP', 'TP-PRE-EVAL-OVERLAP', 'TP-PRE-EVAL-OVERLAP', 'TP-PRE-EVAL-OVERLAP', 'TP-PRE-EVAL-OVERLAP-SHARE', 'TP-PRE-EVAL-CONTAMINATED')),
        quiet=Quiet(subject=lambda: eval_file(10, 4)),
        straddles=(straddle("min_share", 0.5, lambda f: eval_file(40, round(40 * f)), fire=0.5, quiet=0.475),),
        context=against_train,
    ),
    "TP-PRE-MIXED-FORMATS": RuleCases(
        fires=Fires(subject=lambda: scan(*texts(3), GOOD_CHAT, {"prompt": "p", "completion": "c"}), hits=(Expect(message='rows in 3 formats: text 3 (first line 1), chat 1 (first line 4), prompt-completion 1 (first line 5)',
                           evidence={'formats': 3, 'main_rows': 3, 'other_rows': 2, 'rows_text': 3, 'rows_chat': 1, 'rows_prompt_completion': 1}, line=3),),
                    family=('TP-PRE-MIXED-FORMATS',)),
        quiet=Quiet(subject=lambda: scan(*texts(3))),
    ),
    "TP-PRE-JSON-ARRAY-IN-JSONL": RuleCases(
        fires=Fires(subject=lambda: scan(raw=json.dumps(texts(3)).encode()), hits=(Expect(message='the file is named .jsonl but holds a JSON array of 3 record(s): line-based JSONL loaders reject it',
                           evidence={'records': 3, 'lines': 1}, line=0),),
                    family=('TP-PRE-JSON-ARRAY-IN-JSONL',)),
        quiet=(Quiet(subject=lambda: scan(*texts(3))), Quiet(subject=lambda: scan(raw=json.dumps(texts(3)).encode(), name="train.json"))),
    ),
    "TP-PRE-FILE-LAYOUT": RuleCases(
        fires=Fires(subject=lambda: scan(raw=b"\xef\xbb\xbf" + b"".join(json.dumps(r).encode() + b"\r\n" for r in texts(3)) + b"\r\n"),
                    hits=(Expect(message='file starts with a UTF-8 byte-order mark (skipped); uses CRLF line endings (read as LF); 1 blank line(s) skipped',
                           evidence={'bom': True, 'crlf': True, 'blank_lines': 1, 'json_array': False, 'records': 3}, line=0),),
                    family=('TP-PRE-FILE-LAYOUT',)),
        quiet=Quiet(subject=lambda: scan(*texts(3))),
    ),
}

FAMILY = FamilyCases(cases=CASES, context=context)
