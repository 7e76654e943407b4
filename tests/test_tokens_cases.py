"""The token-length rules (rules/tokens.py) asserted whole: each finding's message, evidence
and location, each limit met exactly and passed just, several rows in one file (a row the
rule passes over before one it flags), the map's trained counts against the prompt part,
and the registry entries' fixed fields."""

from __future__ import annotations

from array import array
from typing import Sequence

from trainproof_lsp.core.model import Hit, Level, Location, Span
from trainproof_lsp.readers.tokens import NOT_COUNTED, TemplateError, TokenLengths
from trainproof_lsp.rules import BY_ID
from trainproof_lsp.rules.base import NoLimits
from trainproof_lsp.rules.tokens import (NO_TRAINABLE, OVERFLOW, TEMPLATE_ERROR, TEMPLATES, TOKEN_RULES, TOKENS,
                                         TokenContext, check_no_trainable, check_overflow, check_template_errors)

_ = NOT_COUNTED
PATH = "data/train.jsonl"


def lengths(tokens: Sequence[int], *, second: Sequence[int] | None = None, prompt: Sequence[int] | None = None,
            trained: Sequence[int] | None = None, before: Sequence[int] | None = None, cause: str = "",
            errors: tuple[TemplateError, ...] = ()) -> TokenLengths:
    n = len(tokens)
    return TokenLengths(path=PATH, tokenizer="tok", rows=n, templated=True, tokens=array("q", tokens),
                        second=array("q", second if second is not None else [_] * n),
                        prompt=array("q", prompt if prompt is not None else [_] * n),
                        trained=array("q", trained) if trained is not None else None,
                        before=array("q", before) if before is not None else None, cause=cause,
                        template_errors=errors)


def at(line: int) -> Location:
    return Location(path=PATH, span=Span(line, 0, line, 0))


def overflow(ls: TokenLengths, max_len: int) -> list[Hit]:
    return list(check_overflow(ls, NoLimits(), TokenContext(max_len=max_len)))


def no_trainable(ls: TokenLengths, max_len: int) -> list[Hit]:
    return list(check_no_trainable(ls, NoLimits(), TokenContext(max_len=max_len)))


def over_hit(line: int, tokens: int, max_len: int, rows: int) -> Hit:
    return Hit(message=f"line {line + 1}: {tokens} tokens > --max-len {max_len}; the last {tokens - max_len} "
                       "token(s) are cut",
               evidence={"line": line + 1, "tokens": tokens, "max_len": max_len, "cut_tokens": tokens - max_len,
                         "rows_over_in_file": rows},
               location=at(line))


# --- TP-PRE-CONTEXT-OVERFLOW ----------------------------------------------------------------

def test_overflow_at_the_limit_is_quiet_and_one_token_past_it_fires():
    assert overflow(lengths([20, 20]), 20) == []
    assert overflow(lengths([20, 21]), 20) == [over_hit(1, 21, 20, 1)]


def test_overflow_flags_every_row_over_after_rows_within_and_between():
    got = overflow(lengths([5, 30, 12, 27, 20]), 20)
    assert got == [over_hit(1, 30, 20, 2), over_hit(3, 27, 20, 2)]


def test_overflow_of_a_pair_judges_the_longer_side_either_way():
    got = overflow(lengths([25, 18, 10], second=[22, 26, 10]), 20)
    assert got == [
        Hit(message="line 1: prompt+chosen 25 tokens, prompt+rejected 22 tokens > --max-len 20; the last 5 "
                    "token(s) are cut",
            evidence={"line": 1, "tokens": 25, "max_len": 20, "cut_tokens": 5, "rows_over_in_file": 2,
                      "chosen_tokens": 25, "rejected_tokens": 22},
            location=at(0)),
        Hit(message="line 2: prompt+chosen 18 tokens, prompt+rejected 26 tokens > --max-len 20; the last 6 "
                    "token(s) are cut",
            evidence={"line": 2, "tokens": 26, "max_len": 20, "cut_tokens": 6, "rows_over_in_file": 2,
                      "chosen_tokens": 18, "rejected_tokens": 26},
            location=at(1)),
    ]


def test_overflow_leaves_a_row_whose_prompt_fills_the_context_to_no_trainable():
    # Row 1's prompt is exactly the limit (dead: the other rule's); row 3's one under it (cut, still trains).
    ls = lengths([40, 30, 50, 10], prompt=[20, 19, 5, 2])
    assert overflow(ls, 20) == [over_hit(1, 30, 20, 2), over_hit(2, 50, 20, 2)]


def test_overflow_leaves_rows_the_map_says_train_on_nothing_whatever_their_prompt():
    # With the map, only trained == 0 is dead: row 0 (prompt over the limit, still trains) is cut.
    ls = lengths([40, 30, 50], prompt=[25, 2, 2], trained=[3, 0, 1], before=[9, 4, 9])
    assert overflow(ls, 20) == [over_hit(0, 40, 20, 2), over_hit(2, 50, 20, 2)]


def test_overflow_rows_without_a_prompt_part_are_never_dead():
    assert overflow(lengths([30]), 20) == [over_hit(0, 30, 20, 1)]


# --- TP-PRE-NO-TRAINABLE-TOKENS from the prompt part ----------------------------------------

def dead_hit(line: int, prompt: int, tokens: int, max_len: int, rows: int) -> Hit:
    response = max(tokens - prompt, 0)
    return Hit(message=f"line {line + 1}: the prompt alone is {prompt} tokens >= --max-len {max_len}; the response "
                       f"({response} token(s) after it) is cut entirely and the row trains on nothing",
               evidence={"line": line + 1, "prompt_tokens": prompt, "tokens": tokens, "response_tokens": response,
                         "max_len": max_len, "rows_in_file": rows},
               location=at(line))


def test_no_trainable_at_the_limit_fires_and_one_under_is_quiet():
    assert no_trainable(lengths([30, 30], prompt=[19, 2]), 20) == []
    assert no_trainable(lengths([30, 30], prompt=[19, 20]), 20) == [dead_hit(1, 20, 30, 20, 1)]


def test_no_trainable_flags_every_dead_row_with_rows_between():
    ls = lengths([30, 8, 44, 5], prompt=[21, 3, 40, _])
    assert no_trainable(ls, 20) == [dead_hit(0, 21, 30, 20, 2), dead_hit(2, 40, 44, 20, 2)]


def test_no_trainable_response_of_zero_tokens_when_the_row_is_all_prompt():
    # A row that is its prompt alone: 0 tokens after it (not 1).
    assert no_trainable(lengths([25], prompt=[25]), 20) == [
        Hit(message="line 1: the prompt alone is 25 tokens >= --max-len 20; the response (0 token(s) after it) is "
                    "cut entirely and the row trains on nothing",
            evidence={"line": 1, "prompt_tokens": 25, "tokens": 25, "response_tokens": 0, "max_len": 20,
                      "rows_in_file": 1},
            location=at(0))]


def test_no_trainable_of_a_pair_counts_the_longer_side():
    got = no_trainable(lengths([24, 31], second=[29, 26], prompt=[22, 21]), 20)
    assert got == [dead_hit(0, 22, 29, 20, 2), dead_hit(1, 21, 31, 20, 2)]


# --- TP-PRE-NO-TRAINABLE-TOKENS from the map -------------------------------------------------

def test_mapped_rows_cut_to_nothing_each_and_masked_rows_once_for_the_file():
    # Lines 1 and 4 are masked whatever their length (before 0); lines 2 and 5 lose their
    # trained tokens to truncation; line 3 and 6 train. A masked row comes first: the loop
    # passes over it and still reports the truncated rows after it.
    ls = lengths([10, 40, 12, 9, 33, 14], trained=[0, 0, 5, 0, 0, 7], before=[0, 6, 5, 0, 1, 7],
                 cause="the chat template has no {% generation %} blocks")
    assert no_trainable(ls, 32) == [
        Hit(message="line 2: the row trains on nothing: truncation to --max-len 32 cuts all 6 trained token(s) (the "
                    "row is 40 tokens; 4 of 6 rows, 66.7%)",
            evidence={"line": 2, "tokens": 40, "trained_before_truncation": 6, "max_len": 32, "rows_in_file": 4,
                      "share": 0.666667},
            location=at(1)),
        Hit(message="line 5: the row trains on nothing: truncation to --max-len 32 cuts all 1 trained token(s) (the "
                    "row is 33 tokens; 4 of 6 rows, 66.7%)",
            evidence={"line": 5, "tokens": 33, "trained_before_truncation": 1, "max_len": 32, "rows_in_file": 4,
                      "share": 0.666667},
            location=at(4)),
        Hit(message="2 of 6 rows (33.3%) train on nothing whatever their length: the chat template has no "
                    "{% generation %} blocks; lines 1, 4",
            evidence={"line": 1, "rows": 2, "rows_in_file": 4, "share": 0.666667, "max_len": 32},
            location=at(0)),
    ]


def test_mapped_share_is_rounded_to_six_places_and_unmapped_rows_are_not_counted():
    # 1 dead of 7 mapped rows (the NOT_COUNTED line is not mapped): 1/7 to six places.
    ls = lengths([40, 5, 5, 5, 5, 5, 5, 5], trained=[0, 1, 1, 1, 1, 1, 1, _], before=[3, 1, 1, 1, 1, 1, 1, _])
    assert no_trainable(ls, 32) == [
        Hit(message="line 1: the row trains on nothing: truncation to --max-len 32 cuts all 3 trained token(s) (the "
                    "row is 40 tokens; 1 of 7 rows, 14.3%)",
            evidence={"line": 1, "tokens": 40, "trained_before_truncation": 3, "max_len": 32, "rows_in_file": 1,
                      "share": 0.142857},
            location=at(0))]


def test_mapped_pair_row_is_the_longer_side():
    ls = lengths([30, 5], second=[36, 5], trained=[0, 2], before=[4, 2])
    assert no_trainable(ls, 32) == [
        Hit(message="line 1: the row trains on nothing: truncation to --max-len 32 cuts all 4 trained token(s) (the "
                    "row is 36 tokens; 1 of 2 rows, 50%)",
            evidence={"line": 1, "tokens": 36, "trained_before_truncation": 4, "max_len": 32, "rows_in_file": 1,
                      "share": 0.5},
            location=at(0))]


def test_mapped_without_before_counts_every_dead_row_as_masked_with_the_default_cause():
    # No counts before truncation: every dead row is the masking's; no cause given.
    ls = lengths([40, 8, 6], prompt=[36, 2, 2], trained=[0, 3, 0])
    assert no_trainable(ls, 32) == [
        Hit(message="2 of 3 rows (66.7%) train on nothing whatever their length: no token of the row carries loss; "
                    "lines 1, 3",
            evidence={"line": 1, "rows": 2, "rows_in_file": 2, "share": 0.666667, "max_len": 32},
            location=at(0))]


def test_mapped_rows_the_map_says_train_ignore_their_prompt_part():
    # The prompt fills the context but the map counts trained tokens: not dead.
    assert no_trainable(lengths([40, 8], prompt=[36, 2], trained=[2, 3], before=[9, 3]), 32) == []


def masked_message(n: int, mapped: int, lines: str) -> str:
    return (f"{n} of {mapped} rows ({100 * n / mapped:.3g}%) train on nothing whatever their length: no token of "
            f"the row carries loss; lines {lines}")


def test_mapped_ten_masked_rows_are_all_named_and_eleven_name_one_more():
    ten = lengths([5] * 10, trained=[0] * 10, before=[0] * 10)
    assert no_trainable(ten, 32) == [
        Hit(message=masked_message(10, 10, "1, 2, 3, 4, 5, 6, 7, 8, 9, 10"),
            evidence={"line": 1, "rows": 10, "rows_in_file": 10, "share": 1.0, "max_len": 32}, location=at(0))]
    twelve = lengths([5] * 13, trained=[1] + [0] * 12, before=[1] + [0] * 12)
    assert no_trainable(twelve, 32) == [
        Hit(message=masked_message(12, 13, "2, 3, 4, 5, 6, 7, 8, 9, 10, 11 and 2 more"),
            evidence={"line": 2, "rows": 12, "rows_in_file": 12, "share": 0.923077, "max_len": 32},
            location=at(1))]
    eleven = lengths([5] * 11, trained=[0] * 11, before=[0] * 11)
    assert no_trainable(eleven, 32)[0].message == masked_message(11, 11, "1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 1 more")


def test_mapped_nothing_dead_is_quiet():
    assert no_trainable(lengths([5, 6], trained=[1, 2], before=[1, 2]), 32) == []


# --- TP-PRE-CHAT-TEMPLATE-ERROR ---------------------------------------------------------------

def test_template_errors_each_on_its_line():
    ls = lengths([3, _, 4, _, _], errors=(TemplateError(line=1, message="roles must alternate"),
                                          TemplateError(line=4, message="System role not supported")))
    assert list(check_template_errors(ls, NoLimits(), None)) == [
        Hit(message="line 2: the chat template raises: roles must alternate", evidence={"line": 2, "rows_in_file": 2},
            location=at(1)),
        Hit(message="line 5: the chat template raises: System role not supported",
            evidence={"line": 5, "rows_in_file": 2}, location=at(4))]


# --- the registry entries --------------------------------------------------------------------

def test_registry_entries():
    assert all(BY_ID[r.id] is r for r in TOKEN_RULES)
    assert TOKEN_RULES == (OVERFLOW, NO_TRAINABLE, TEMPLATE_ERROR)
    assert [(r.id, r.name, r.level, r.family, r.origin) for r in TOKEN_RULES] == [
        ("TP-PRE-CONTEXT-OVERFLOW", "context-overflow", Level.WARN, TOKENS, "trainproof"),
        ("TP-PRE-NO-TRAINABLE-TOKENS", "no-trainable-tokens", Level.FAIL, TOKENS, "new"),
        ("TP-PRE-CHAT-TEMPLATE-ERROR", "chat-template-error", Level.FAIL, TEMPLATES, "new")]
    assert TOKENS.kind == TEMPLATES.kind == "dataset"


def test_mapped_with_no_row_mapped_is_quiet():
    # Every line unmapped: nothing is dead, and no share is taken of zero mapped rows.
    assert no_trainable(lengths([5, 6], trained=[_, _], before=[_, _]), 32) == []
    assert overflow(lengths([50, 60], trained=[_, _], before=[_, _]), 32) == [over_hit(0, 50, 32, 2),
                                                                              over_hit(1, 60, 32, 2)]
