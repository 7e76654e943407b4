"""Cases for the token-count rules of the dataset family: TokenLengths as the counting
reader gives them (readers/tokens.py: per line, the row's tokens, the other side of a
pair, the prompt part, and from the token map the trained tokens), built here line by
line, judged against --max-len (TokenContext)."""

from __future__ import annotations

from array import array
from typing import Sequence

from trainproof_lsp.readers.tokens import NOT_COUNTED, TemplateError, TokenLengths
from trainproof_lsp.rules.tokens import TokenContext

from . import Expect, FamilyCases, Fires, Quiet, RuleCases

MAX_LEN = 32
_ = NOT_COUNTED


def lengths(tokens: Sequence[int], *, second: Sequence[int] | None = None, prompt: Sequence[int] | None = None,
            trained: Sequence[int] | None = None, before: Sequence[int] | None = None, cause: str = "",
            errors: tuple[TemplateError, ...] = ()) -> TokenLengths:
    n = len(tokens)
    return TokenLengths(path="train.jsonl", tokenizer="tok", rows=n, templated=True, tokens=array("q", tokens),
                        second=array("q", second or [_] * n), prompt=array("q", prompt or [_] * n),
                        trained=array("q", trained) if trained is not None else None,
                        before=array("q", before) if before is not None else None, cause=cause,
                        template_errors=errors)


def context(_: TokenLengths) -> TokenContext:
    return TokenContext(max_len=MAX_LEN)


CASES: dict[str, RuleCases] = {
    "TP-PRE-CONTEXT-OVERFLOW": RuleCases(
        fires=(Fires(subject=lambda: lengths([10, 40, 32, 33]), hits=(Expect(message='line 2: 40 tokens > --max-len 32; the last 8 token(s) are cut',
                           evidence={'line': 2, 'tokens': 40, 'max_len': 32, 'cut_tokens': 8, 'rows_over_in_file': 2}, line=1),
                     Expect(message='line 4: 33 tokens > --max-len 32; the last 1 token(s) are cut',
                           evidence={'line': 4, 'tokens': 33, 'max_len': 32, 'cut_tokens': 1, 'rows_over_in_file': 2}, line=3),),
                    family=('TP-PRE-CONTEXT-OVERFLOW', 'TP-PRE-CONTEXT-OVERFLOW')),
               Fires(subject=lambda: lengths([30, 12], second=[36, 12], prompt=[8, 4]), hits=(Expect(message='line 1: prompt+chosen 30 tokens, prompt+rejected 36 tokens > --max-len 32; the last 4 token(s) are cut',
                           evidence={'line': 1, 'tokens': 36, 'max_len': 32, 'cut_tokens': 4, 'rows_over_in_file': 1, 'chosen_tokens': 30, 'rejected_tokens': 36}, line=0),),
                    family=('TP-PRE-CONTEXT-OVERFLOW',))),
        quiet=(Quiet(subject=lambda: lengths([10, 32, 31])),
               Quiet(subject=lambda: lengths([10, 40], prompt=[4, 35]))),
    ),
    "TP-PRE-NO-TRAINABLE-TOKENS": RuleCases(
        fires=(Fires(subject=lambda: lengths([10, 40, 50], prompt=[4, 32, 12]), hits=(Expect(message='line 2: the prompt alone is 32 tokens >= --max-len 32; the response (8 token(s) after it) is cut entirely and the row trains on nothing',
                           evidence={'line': 2, 'prompt_tokens': 32, 'tokens': 40, 'response_tokens': 8, 'max_len': 32, 'rows_in_file': 1}, line=1),),
                    family=('TP-PRE-CONTEXT-OVERFLOW', 'TP-PRE-NO-TRAINABLE-TOKENS')),
               Fires(subject=lambda: lengths([10, 40, 20, 12], trained=[6, 0, 0, 0], before=[6, 8, 0, 0],
                                             cause="the chat template has no {% generation %} blocks"),
                     hits=(Expect(message='line 2: the row trains on nothing: truncation to --max-len 32 cuts all 8 trained token(s) (the row is 40 tokens; 3 of 4 rows, 75%)',
                           evidence={'line': 2, 'tokens': 40, 'trained_before_truncation': 8, 'max_len': 32, 'rows_in_file': 3, 'share': 0.75}, line=1),
                     Expect(message='2 of 4 rows (50%) train on nothing whatever their length: the chat template has no {% generation %} blocks; lines 3, 4',
                           evidence={'line': 3, 'rows': 2, 'rows_in_file': 3, 'share': 0.75, 'max_len': 32}, line=2),),
                    family=('TP-PRE-NO-TRAINABLE-TOKENS', 'TP-PRE-NO-TRAINABLE-TOKENS'))),
        quiet=(Quiet(subject=lambda: lengths([10, 40, 50], prompt=[4, 31, 12])),
               Quiet(subject=lambda: lengths([10, 40], trained=[6, 20], before=[6, 30]))),
    ),
    "TP-PRE-CHAT-TEMPLATE-ERROR": RuleCases(
        fires=Fires(subject=lambda: lengths([10, _, 12, _], errors=(
            TemplateError(line=1, message="Conversation roles must alternate user/assistant/user/assistant/..."),
            TemplateError(line=3, message="System role not supported"))), hits=(Expect(message='line 2: the chat template raises: Conversation roles must alternate user/assistant/user/assistant/...',
                           evidence={'line': 2, 'rows_in_file': 2}, line=1),
                     Expect(message='line 4: the chat template raises: System role not supported',
                           evidence={'line': 4, 'rows_in_file': 2}, line=3),),
                    family=('TP-PRE-CHAT-TEMPLATE-ERROR', 'TP-PRE-CHAT-TEMPLATE-ERROR')),
        quiet=Quiet(subject=lambda: lengths([10, 12])),
    ),
}

FAMILY = FamilyCases(cases=CASES, context=context)
