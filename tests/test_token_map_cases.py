"""The trained-tokens map rules (rules/token_map.py) asserted whole: each finding's message,
evidence and location, each skip's reason, rows the rules pass over (unmapped, flagged by
another rule, training on nothing) beside the rows they flag, a sampled map, the shown
lines at ten and past ten, and the length summary's percentiles, histogram and wording."""

from __future__ import annotations

from array import array
from typing import Any, Callable, Iterator, Sequence

import pytest

from trainproof_lsp.core.model import Hit, Level, Location, Span
from trainproof_lsp.readers.token_map import (DOUBLE_BOS, EOS_PRESENT, EOS_TRAINED, NOT_MAPPED, PAIR_IDENTICAL,
                                              PAIR_IDENTICAL_BEFORE, SPANS_UNKNOWN, TEMPLATE_MISSING, Masking,
                                              TokenMap)
from trainproof_lsp.rules import BY_ID
from trainproof_lsp.rules.base import NoLimits, Skip
from trainproof_lsp.rules.token_map import (BOS, CUT, EOS, HISTOGRAM_BINS, LENGTHS, MAP, MAP_RULES, PAIRS, RULES,
                                            SHOWN_LINES, TEMPLATE, check_bos, check_cut, check_eos, check_lengths,
                                            check_pairs, check_template, histogram, histogram_text, length_stats,
                                            parse_histogram, percentile)

_ = NOT_MAPPED
OK = EOS_PRESENT | EOS_TRAINED
PATH = "data/train.jsonl"


def token_map(tokens: Sequence[int], trained: Sequence[int], *, before: Sequence[int] | None = None,
              flags: Sequence[int] | None = None, second: Sequence[int] | None = None,
              kept: Sequence[int] | None = None, max_len: int | None = 64, pairs: int = 0, eos: str | None = "</s>",
              pad_is_eos: bool = False, stride: int = 1, sample: int | None = None, records: int | None = None,
              rows: int | None = None, loss: str = "completion", **masking: Any) -> TokenMap:
    n = len(tokens)
    if kept is None:
        kept = [min(t, max_len) if max_len is not None else t for t in tokens]
    return TokenMap(path=PATH, tokenizer="tok", masking=Masking(max_len=max_len, **masking),
                    rows=n if rows is None else rows, records=n if records is None else records, sample=sample,
                    stride=stride, generation_blocks=False, eos_token=eos, pad_token="<pad>", pad_is_eos=pad_is_eos,
                    loss=loss, tokens=array("i", tokens), second=array("i", second if second is not None else [_] * n),
                    kept=array("i", kept), prompt=array("i", [8] * n), trained=array("i", trained),
                    before=array("i", before if before is not None else trained),
                    flags=array("i", flags if flags is not None else [OK] * n), pairs=pairs)


def at(line: int) -> Location:
    return Location(path=PATH, span=Span(line, 0, line, 0))


def run(check: Callable[[TokenMap, NoLimits, object], Iterator[Hit]], m: TokenMap) -> list[Hit]:
    return list(check(m, NoLimits(), None))


def skip(check: Callable[[TokenMap, NoLimits, object], Iterator[Hit]], m: TokenMap) -> str:
    with pytest.raises(Skip) as e:
        run(check, m)
    return str(e.value)


# --- TP-MAP-RESPONSE-CUT ------------------------------------------------------------------------

def test_cut_counts_rows_that_keep_some_trained_tokens_and_lose_others():
    # Line 1 unchanged, line 2 cut (30 -> 10), line 3 cut to nothing (the other rule's), line 4
    # unmapped, line 5 cut by one (9 -> 8), line 6 trains more after than before (not a cut).
    m = token_map([20, 90, 99, 5, 70, 40], [12, 10, 0, _, 8, 9], before=[12, 30, 20, _, 9, 7])
    assert run(check_cut, m) == [
        Hit(message="2 of 6 mapped rows (33.3%) lose trained tokens to truncation at max length 64 (keep_start); "
                    "21 trained token(s) cut in all; lines 2, 5",
            evidence={"rows": 2, "share": 0.333333, "mapped_rows": 6, "trained_tokens_cut": 21, "max_len": 64,
                      "first_line": 2},
            location=at(1))]


def test_cut_of_a_sampled_map_with_keep_end_names_the_sample_and_the_side():
    m = token_map([90, 70], [1, 5], before=[2, 5], stride=3, sample=2, records=6, truncation="keep_end")
    assert run(check_cut, m) == [
        Hit(message="1 of 2 mapped rows (50%) (a sample: every 3th row) lose trained tokens to truncation at max "
                    "length 64 (keep_end); 1 trained token(s) cut in all; lines 1",
            evidence={"rows": 1, "share": 0.5, "mapped_rows": 2, "trained_tokens_cut": 1, "max_len": 64,
                      "first_line": 1},
            location=at(0))]


def test_cut_share_is_rounded_to_six_places():
    m = token_map([90] + [5] * 6, [1] + [5] * 6, before=[4] + [5] * 6)
    (hit,) = run(check_cut, m)
    assert hit.evidence["share"] == 0.142857 and "1 of 7 mapped rows (14.3%)" in hit.message


def test_cut_names_ten_lines_then_counts_the_rest():
    ten = token_map([90] * 10, [1] * 10, before=[2] * 10)
    assert run(check_cut, ten)[0].message.endswith("10 trained token(s) cut in all; lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10")
    eleven = token_map([90] * 11, [1] * 11, before=[2] * 11)
    assert run(check_cut, eleven)[0].message.endswith("lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 1 more")
    twelve = token_map([90] * 12, [1] * 12, before=[2] * 12)
    assert run(check_cut, twelve)[0].message.endswith("lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 2 more")
    assert SHOWN_LINES == 10


def test_cut_is_quiet_without_cut_rows_and_skips_without_a_max_length():
    assert run(check_cut, token_map([40, 30], [20, 12], before=[20, 12])) == []
    assert skip(check_cut, token_map([40], [20], max_len=None)) == "no max length"


# --- TP-MAP-EOS-NEVER-TRAINED ---------------------------------------------------------------------

def eos_hit(rows: int, why: str, first: int, *, pad_is_eos: bool = False, masked: bool = False,
            sampled: str = "") -> Hit:
    return Hit(message=f"none of the {rows} rows that train on something{sampled} trains on the EOS token: {why}",
               evidence={"rows_trained": rows, "pad_is_eos": pad_is_eos, "pad_masked_by_id": masked},
               location=at(first))


NOT_REACHED = ("no trained span of any row reaches the EOS '</s>' (the trained block or turn ends before it, or "
               "truncation cuts it)")
PAD_MASKED = "the pad token is the EOS ('</s>') and the collator masks every label equal to the pad id"


def test_eos_counts_only_rows_that_train_and_is_located_at_the_first():
    # Line 1 trains on nothing (its trained EOS flag does not count), line 2 is unmapped, lines 3-5 train.
    m = token_map([10, 10, 10, 10, 10], [0, _, 1, 4, 2], flags=[OK, OK, EOS_PRESENT, EOS_PRESENT, 0])
    assert run(check_eos, m) == [eos_hit(3, NOT_REACHED, 2)]


def test_eos_quiet_when_any_trained_row_trains_it():
    m = token_map([10, 10, 10], [2, 3, 1], flags=[EOS_PRESENT, EOS_PRESENT, OK])
    assert run(check_eos, m) == []


@pytest.mark.parametrize(("pad_is_eos", "masking", "masked"), [
    (True, {"pad_masked": True}, True),
    (True, {"response_template": "### Answer:"}, True),
    (True, {}, False),
    (False, {"pad_masked": True}, False),
    (False, {"response_template": "### Answer:"}, False),
])
def test_eos_names_the_pad_masking_only_when_the_pad_is_the_eos_and_a_collator_masks_it(pad_is_eos, masking, masked):
    m = token_map([10, 10], [1, 2], flags=[EOS_PRESENT, EOS_PRESENT], pad_is_eos=pad_is_eos, **masking)
    assert run(check_eos, m) == [eos_hit(2, PAD_MASKED if masked else NOT_REACHED, 0, pad_is_eos=pad_is_eos,
                                         masked=masked)]


def test_eos_of_a_sampled_map_says_so():
    m = token_map([10], [1], flags=[EOS_PRESENT], stride=2, sample=1, records=2)
    assert run(check_eos, m) == [eos_hit(1, NOT_REACHED, 0, sampled=" (a sample: every 2th row)")]


def test_eos_skips_with_their_reasons():
    assert skip(check_eos, token_map([10], [1], eos=None)) == "the tokenizer names no eos_token"
    # The only row holding an EOS trains on nothing: no trained row holds one.
    assert skip(check_eos, token_map([10, 10], [0, 3], flags=[EOS_PRESENT, 0])) == "no mapped row holds the EOS token"


# --- TP-MAP-RESPONSE-TEMPLATE-MISSING -------------------------------------------------------------

def test_template_missing_each_row_flagged_and_mapped_with_its_kept_tokens():
    # Line 2 flagged, line 3 flagged but unmapped, line 4 flagged, line 1 found.
    m = token_map([40, 90, 30, 12], [20, 0, _, 0], flags=[OK, TEMPLATE_MISSING, TEMPLATE_MISSING, TEMPLATE_MISSING],
                  kept=[40, 64, 30, 12], response_template="### Answer:")
    msg = ("line {}: the response template '### Answer:' tokenised alone is not in the row's {} tokens; the "
           "collator masks the whole row (2 of 4 rows, 50%)")
    assert run(check_template, m) == [
        Hit(message=msg.format(2, 64), evidence={"line": 2, "tokens": 64, "rows_in_file": 2, "share": 0.5},
            location=at(1)),
        Hit(message=msg.format(4, 12), evidence={"line": 4, "tokens": 12, "rows_in_file": 2, "share": 0.5},
            location=at(3))]


def test_template_missing_skips_without_a_response_template():
    assert skip(check_template, token_map([4], [2])) == "no response template (completion-only collator)"


# --- TP-MAP-PAIR-IDENTICAL ------------------------------------------------------------------------

def test_pairs_identical_only_after_the_cut_and_still_training():
    # Line 1 identical after the cut; line 2 identical as written too (the dataset rules'); line 3
    # identical after the cut but trains on nothing (TP-PRE-NO-TRAINABLE-TOKENS'); line 4 unmapped;
    # line 5 identical after the cut, one trained token; line 6 differs.
    m = token_map([80, 40, 90, 70, 66, 30], [10, 9, 0, _, 1, 5], second=[85, 40, 95, 70, 70, 31], pairs=7,
                  flags=[PAIR_IDENTICAL, PAIR_IDENTICAL | PAIR_IDENTICAL_BEFORE, PAIR_IDENTICAL, PAIR_IDENTICAL,
                         PAIR_IDENTICAL, OK], truncation="keep_end")
    msg = ("line {}: chosen and rejected are the same 64 tokens after truncation to 64 (keep_end); they differ "
           "only after the cut (2 of 7 pairs, 28.6%)")
    assert run(check_pairs, m) == [
        Hit(message=msg.format(1), evidence={"line": 1, "tokens": 64, "chosen_tokens": 80, "rejected_tokens": 85,
                                             "rows_in_file": 2, "share": 0.285714}, location=at(0)),
        Hit(message=msg.format(5), evidence={"line": 5, "tokens": 64, "chosen_tokens": 66, "rejected_tokens": 70,
                                             "rows_in_file": 2, "share": 0.285714}, location=at(4))]


def test_pairs_skip_without_pairs():
    assert skip(check_pairs, token_map([4], [2])) == "no preference pairs"
    assert run(check_pairs, token_map([4], [2], pairs=1)) == []


# --- TP-MAP-DOUBLE-BOS ----------------------------------------------------------------------------

def test_double_bos_once_for_the_file_at_the_first_mapped_row():
    # Line 1 flagged but unmapped; lines 3 and 4 flagged.
    m = token_map([10, 10, 10, 10, 10, 10, 10], [_, 2, 3, 0, 1, 1, 1],
                  flags=[DOUBLE_BOS, OK, OK | DOUBLE_BOS, DOUBLE_BOS, OK, OK, OK], stride=4, sample=7, records=28)
    assert run(check_bos, m) == [
        Hit(message="2 of 7 mapped rows (28.6%) (a sample: every 4th row) start with the BOS token twice as the run "
                    "encodes them; lines 3, 4",
            evidence={"rows": 2, "share": 0.285714, "first_line": 3}, location=at(2))]
    assert run(check_bos, token_map([10, 10], [1, 1])) == []


def test_double_bos_names_ten_lines_then_counts_the_rest():
    m = token_map([10] * 12, [1] * 12, flags=[DOUBLE_BOS] * 12)
    assert run(check_bos, m)[0].message == ("12 of 12 mapped rows (100%) start with the BOS token twice as the run "
                                            "encodes them; lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 2 more")


# --- TP-MAP-LENGTHS and its numbers ---------------------------------------------------------------

def test_percentile_is_the_nearest_rank():
    assert percentile([], 50) == 0
    assert percentile([7], 0) == 7
    assert percentile([7], 100) == 7
    values = list(range(1, 11))  # 1..10
    assert [percentile(values, q) for q in (0, 10, 11, 50, 51, 95, 99, 100)] == [1, 1, 2, 5, 6, 10, 10, 10]
    assert [percentile([1, 2, 3], q) for q in (33, 34, 66, 67)] == [1, 2, 2, 3]


def test_histogram_bins_from_zero_past_the_longest_row_and_the_max_length():
    assert HISTOGRAM_BINS == 16
    # Longest 32, max length 40: width ceil(40/16) = 3.
    edges, counts = histogram([0, 2, 3, 32], 40)
    assert edges == [3 * i for i in range(17)]
    assert counts == [2, 1] + [0] * 8 + [1] + [0] * 5
    # No max length: the longest row sets the width; a row at the top edge falls in the last bin.
    assert histogram([16, 15], None) == (list(range(17)), [0] * 15 + [2])
    assert histogram([17], None, bins=4) == ([0, 5, 10, 15, 20], [0, 0, 0, 1])
    # Nothing long: bins one token wide from 0 to the number of bins.
    assert histogram([], None, bins=2) == ([0, 1, 2], [0, 0])
    assert histogram([0], 0, bins=2) == ([0, 1, 2], [1, 0])
    assert histogram([3], 2, bins=2) == ([0, 2, 4], [0, 1])


def test_histogram_text_round_trips_and_bad_text_is_none():
    text = histogram_text([0, 2, 4], [1, 3])
    assert text == "0,2,4;1,3"
    assert parse_histogram(text) == ([0, 2, 4], [1, 3])
    assert parse_histogram("0,2;1,3") is None  # one edge short
    assert parse_histogram("0,2,4;1,x") is None
    assert parse_histogram("0,2,4") is None
    assert parse_histogram("0;1;2") is None


def test_length_stats_take_the_longer_side_and_skip_unmapped_rows():
    m = token_map([10, 50, 30, 70], [3, 5, _, 0], second=[12, 40, _, 71], max_len=50)
    assert length_stats(m) == {"rows": 4, "p50": 30, "p95": 71, "p99": 71, "max": 71, "over_max_len": 1,
                               "share_over_max_len": 0.25, "trained_tokens": 8,
                               "histogram": histogram_text(*histogram([12, 30, 50, 71], 50))}
    unmapped = token_map([_, 20, 5], [_, 4, 1], max_len=None)
    assert length_stats(unmapped) == {"rows": 2, "p50": 5, "p95": 20, "p99": 20, "max": 20, "over_max_len": 0,
                                      "share_over_max_len": 0.0, "trained_tokens": 5,
                                      "histogram": histogram_text(*histogram([5, 20], None))}
    assert length_stats(token_map([], [], rows=0))["share_over_max_len"] == 0.0
    assert length_stats(token_map([], [], rows=0))["max"] == 0


def test_length_stats_share_over_is_rounded_to_six_places():
    m = token_map([65] + [5] * 6, [1] * 7)
    assert length_stats(m)["share_over_max_len"] == 0.142857


def test_lengths_summary_of_a_sample_with_its_sources_and_unknown_spans():
    m = token_map([10, 90, 30], [3, 40, 0], stride=5, sample=3, records=15, loss="assistant_only",
                  flags=[OK, SPANS_UNKNOWN, SPANS_UNKNOWN | OK],
                  sources=(("max_len", "--max-len"), ("truncation", "the trainer's default")))
    s = length_stats(m)
    assert run(check_lengths, m) == [
        Hit(message="token map of a sample of 3 of 15 rows (--sample 3, every 5th row): loss assistant_only; tokens "
                    "p50 30, p95 90, p99 90, max 90; 1 (33.3%) over max length 64 (keep_start); 43 trained tokens; "
                    "2 row(s) whose generation blocks could not be told from their text [max_len from --max-len; "
                    "truncation from the trainer's default]",
            evidence={**s, "max_len": 64, "sample": 3, "stride": 5, "records": 15},
            location=Location(path=PATH, span=Span(0, 0, 0, 0)))]


def test_lengths_summary_without_a_max_length_sources_or_unknown_spans():
    m = token_map([10, 20], [3, 4], max_len=None)
    assert run(check_lengths, m) == [
        Hit(message="token map of 2 rows: loss completion; tokens p50 10, p95 20, p99 20, max 20; no max length; "
                    "7 trained tokens",
            evidence={**length_stats(m), "max_len": None, "sample": None, "stride": 1, "records": 2},
            location=Location(path=PATH, span=Span(0, 0, 0, 0)))]


def test_lengths_skip_when_no_row_was_mapped():
    assert skip(check_lengths, token_map([], [], rows=0)) == "no row could be mapped"


# --- the registry entries --------------------------------------------------------------------

def test_registry_entries():
    assert MAP_RULES == RULES == (CUT, EOS, TEMPLATE, PAIRS, BOS, LENGTHS)
    assert all(BY_ID[r.id] is r for r in MAP_RULES)
    assert [(r.id, r.name, r.level, r.family, r.origin) for r in MAP_RULES] == [
        ("TP-MAP-RESPONSE-CUT", "response-cut", Level.WARN, MAP, "new"),
        ("TP-MAP-EOS-NEVER-TRAINED", "eos-never-trained", Level.FAIL, MAP, "new"),
        ("TP-MAP-RESPONSE-TEMPLATE-MISSING", "response-template-missing", Level.FAIL, MAP, "new"),
        ("TP-MAP-PAIR-IDENTICAL", "pair-identical-after-truncation", Level.FAIL, MAP, "new"),
        ("TP-MAP-DOUBLE-BOS", "double-bos", Level.WARN, MAP, "new"),
        ("TP-MAP-LENGTHS", "token-map-lengths", Level.INFO, MAP, "new")]
    assert MAP.kind == "dataset"


def test_length_stats_percentiles_of_a_hundred_rows_and_the_histogram_up_to_the_max_length():
    m = token_map(list(range(1, 101)), [1] * 100, max_len=160)
    s = length_stats(m)
    assert (s["p50"], s["p95"], s["p99"], s["max"], s["over_max_len"]) == (50, 95, 99, 100, 0)
    # The bins reach the max length (160: ten tokens wide), not only the longest row.
    assert s["histogram"] == histogram_text(list(range(0, 170, 10)), [9] + [10] * 9 + [1] + [0] * 5)


def test_histogram_of_one_bin_is_at_least_one_token_wide():
    assert histogram([0], 0, bins=1) == ([0, 1], [1])
    assert histogram([1], None, bins=1) == ([0, 1], [1])


def test_lengths_summary_of_every_second_row_is_a_sample():
    m = token_map([10, 20], [3, 4], stride=2, sample=2, records=4)
    assert run(check_lengths, m)[0].message.startswith(
        "token map of a sample of 2 of 4 rows (--sample 2, every 2th row): loss completion;")
