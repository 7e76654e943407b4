"""Cases for the token-map rules of the dataset family: TokenMaps as readers/token_map.py
builds them (per line: the row's tokens, the other side of a pair, what truncation keeps,
the prompt part, the trained tokens after and before truncation, and flags for what the
encoding showed), built here row by row with the masking they were mapped under."""

from __future__ import annotations

from array import array
from typing import Any, Sequence

from trainproof_lsp.readers.token_map import (DOUBLE_BOS, EOS_PRESENT, EOS_TRAINED, NOT_MAPPED, PAIR_IDENTICAL,
                                              PAIR_IDENTICAL_BEFORE, TEMPLATE_MISSING, Masking, TokenMap)

from . import Expect, FamilyCases, Fires, Quiet, RuleCases

_ = NOT_MAPPED
OK = EOS_PRESENT | EOS_TRAINED  # a row whose EOS is there and trained


def token_map(tokens: Sequence[int], trained: Sequence[int], *, before: Sequence[int] | None = None,
              flags: Sequence[int] | None = None, second: Sequence[int] | None = None, max_len: int | None = 64,
              pairs: int = 0, eos: str | None = "</s>", pad_is_eos: bool = False, **masking: Any) -> TokenMap:
    n = len(tokens)
    kept = [min(t, max_len) if max_len is not None else t for t in tokens]
    return TokenMap(path="train.jsonl", tokenizer="tok", masking=Masking(max_len=max_len, **masking), rows=n, records=n,
                    sample=None, stride=1, generation_blocks=False, eos_token=eos, pad_token="<pad>",
                    pad_is_eos=pad_is_eos, loss="completion", tokens=array("i", tokens),
                    second=array("i", second or [_] * n), kept=array("i", kept), prompt=array("i", [8] * n),
                    trained=array("i", trained), before=array("i", before or trained),
                    flags=array("i", flags or [OK] * n), pairs=pairs)


def context(_: TokenMap) -> None:
    return None


CASES: dict[str, RuleCases] = {
    "TP-MAP-RESPONSE-CUT": RuleCases(
        fires=Fires(subject=lambda: token_map([40, 90, 70, 30], [20, 40, 50, 12], before=[20, 66, 56, 12]), hits=(Expect(message='2 of 4 mapped rows (50%) lose trained tokens to truncation at max length 64 (keep_start); 32 trained token(s) cut in all; lines 2, 3',
                           evidence={'rows': 2, 'share': 0.5, 'mapped_rows': 4, 'trained_tokens_cut': 32, 'max_len': 64, 'first_line': 2}, line=1),),
                    family=('TP-MAP-RESPONSE-CUT', 'TP-MAP-LENGTHS')),
        quiet=(Quiet(subject=lambda: token_map([40, 30], [20, 12])),
               Quiet(subject=lambda: token_map([40, 30], [20, 12], max_len=None), skip="no max length")),
    ),
    "TP-MAP-EOS-NEVER-TRAINED": RuleCases(
        fires=(Fires(subject=lambda: token_map([40, 30, 20], [20, 12, 6], flags=[EOS_PRESENT] * 3, pad_is_eos=True, pad_masked=True),
                     hits=(Expect(message="none of the 3 rows that train on something trains on the EOS token: the pad token is the EOS ('</s>') and the collator masks every label equal to the pad id",
                           evidence={'rows_trained': 3, 'pad_is_eos': True, 'pad_masked_by_id': True}, line=0),),
                    family=('TP-MAP-EOS-NEVER-TRAINED', 'TP-MAP-LENGTHS')),
               Fires(subject=lambda: token_map([40, 30], [20, 12], flags=[EOS_PRESENT] * 2), hits=(Expect(message="none of the 2 rows that train on something trains on the EOS token: no trained span of any row reaches the EOS '</s>' (the trained block or turn ends before it, or truncation cuts it)",
                           evidence={'rows_trained': 2, 'pad_is_eos': False, 'pad_masked_by_id': False}, line=0),),
                    family=('TP-MAP-EOS-NEVER-TRAINED', 'TP-MAP-LENGTHS'))),
        quiet=(Quiet(subject=lambda: token_map([40, 30, 20], [20, 12, 6], flags=[EOS_PRESENT, OK, EOS_PRESENT])),
               Quiet(subject=lambda: token_map([40, 30], [20, 12], flags=[0, 0]), skip="no mapped row holds the EOS"),
               Quiet(subject=lambda: token_map([40, 30], [20, 12], eos=None), skip="names no eos_token")),
    ),
    "TP-MAP-RESPONSE-TEMPLATE-MISSING": RuleCases(
        fires=Fires(subject=lambda: token_map([40, 90, 30], [20, 0, 0], flags=[OK, TEMPLATE_MISSING, TEMPLATE_MISSING],
                                              response_template="### Answer:"), hits=(Expect(message="line 2: the response template '### Answer:' tokenised alone is not in the row's 64 tokens; the collator masks the whole row (2 of 3 rows, 66.7%)",
                           evidence={'line': 2, 'tokens': 64, 'rows_in_file': 2, 'share': 0.666667}, line=1),
                     Expect(message="line 3: the response template '### Answer:' tokenised alone is not in the row's 30 tokens; the collator masks the whole row (2 of 3 rows, 66.7%)",
                           evidence={'line': 3, 'tokens': 30, 'rows_in_file': 2, 'share': 0.666667}, line=2),),
                    family=('TP-MAP-RESPONSE-TEMPLATE-MISSING', 'TP-MAP-RESPONSE-TEMPLATE-MISSING', 'TP-MAP-LENGTHS')),
        quiet=(Quiet(subject=lambda: token_map([40, 30], [20, 12], response_template="### Answer:")),
               Quiet(subject=lambda: token_map([40, 30], [20, 12]), skip="no response template")),
    ),
    "TP-MAP-PAIR-IDENTICAL": RuleCases(
        fires=Fires(subject=lambda: token_map([80, 40, 90], [10, 20, 12], second=[85, 44, 90], pairs=3,
                                              flags=[OK | PAIR_IDENTICAL, OK, OK | PAIR_IDENTICAL | PAIR_IDENTICAL_BEFORE]),
                    hits=(Expect(message='line 1: chosen and rejected are the same 64 tokens after truncation to 64 (keep_start); they differ only after the cut (1 of 3 pairs, 33.3%)',
                           evidence={'line': 1, 'tokens': 64, 'chosen_tokens': 80, 'rejected_tokens': 85, 'rows_in_file': 1, 'share': 0.333333}, line=0),),
                    family=('TP-MAP-PAIR-IDENTICAL', 'TP-MAP-LENGTHS')),
        quiet=(Quiet(subject=lambda: token_map([80, 40], [10, 20], second=[85, 44], pairs=2)),
               Quiet(subject=lambda: token_map([80, 40], [10, 20]), skip="no preference pairs")),
    ),
    "TP-MAP-DOUBLE-BOS": RuleCases(
        fires=Fires(subject=lambda: token_map([40, 30, 20], [20, 12, 6], flags=[OK | DOUBLE_BOS, OK, OK | DOUBLE_BOS]),
                    hits=(Expect(message='2 of 3 mapped rows (66.7%) start with the BOS token twice as the run encodes them; lines 1, 3',
                           evidence={'rows': 2, 'share': 0.666667, 'first_line': 1}, line=0),),
                    family=('TP-MAP-DOUBLE-BOS', 'TP-MAP-LENGTHS')),
        quiet=Quiet(subject=lambda: token_map([40, 30, 20], [20, 12, 6])),
    ),
    "TP-MAP-LENGTHS": RuleCases(
        fires=Fires(subject=lambda: token_map([40, 90, 70, 30], [20, 40, 50, 12], before=[20, 66, 56, 12],
                                              sources=(("max_len", "--max-len"),)), hits=(Expect(message='token map of 4 rows: loss completion; tokens p50 40, p95 90, p99 90, max 90; 2 (50%) over max length 64 (keep_start); 122 trained tokens [max_len from --max-len]',
                           evidence={'rows': 4, 'p50': 40, 'p95': 90, 'p99': 90, 'max': 90, 'over_max_len': 2, 'share_over_max_len': 0.5, 'trained_tokens': 122, 'histogram': '0,6,12,18,24,30,36,42,48,54,60,66,72,78,84,90,96;0,0,0,0,0,1,1,0,0,0,0,1,0,0,0,1', 'max_len': 64, 'sample': None, 'stride': 1, 'records': 4}, line=0),),
                    family=('TP-MAP-RESPONSE-CUT', 'TP-MAP-LENGTHS')),
        quiet=Quiet(subject=lambda: token_map([], []), skip="no row could be mapped"),
    ),
}

FAMILY = FamilyCases(cases=CASES, context=context)
