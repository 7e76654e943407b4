"""Token-length rules: rows longer than the context, rows truncated to nothing to train on.

Every check reads the `TokenLengths` of one dataset file (trainproof_lsp/readers/tokens.py counts
them with the run's tokenizer) and the context length from `--max-len`; none of them
opens a file or loads a tokenizer. The registry entries are the tuple TOKEN_RULES; preflight
lists them as skipped, with the reason, whenever the counts are not there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Protocol

from ..core.model import Hit, Level, Location, Span
from ..readers.tokens import NOT_COUNTED, TemplateError, TokenLengths
from .base import Family, NoLimits, Rule


@dataclass(frozen=True, kw_only=True)
class TokenContext:
    """The context length the counts are judged against (`--max-len`)."""

    max_len: int


# The token counts of one dataset file (readers/tokens.py), judged against --max-len.
TOKENS: Family[TokenLengths, TokenContext] = Family("dataset")


class TemplateErrors(Protocol):
    """What TP-PRE-CHAT-TEMPLATE-ERROR reads: the rows a chat template raised on, from the
    token counts (TokenLengths) or from rendering alone (TemplateRendered, no --max-len)."""

    @property
    def path(self) -> str: ...

    @property
    def template_errors(self) -> tuple[TemplateError, ...]: ...


# Rows of one dataset file rendered with a chat template; no context needed.
TEMPLATES: Family[TemplateErrors, object] = Family("dataset")


def _line(lengths: TemplateErrors, line: int) -> Location:
    return Location(path=lengths.path, span=Span(line, 0, line, 0))


def _cut_to_nothing(prompt: int, max_len: int) -> bool:
    return prompt != NOT_COUNTED and prompt >= max_len


def _dead_lines(lengths: TokenLengths, max_len: int) -> set[int]:
    """Lines whose row trains on nothing: from the map's trained counts when there is a
    map, else the rows whose prompt part alone fills the context."""
    if lengths.trained is not None:
        return {i for i, t in enumerate(lengths.trained) if t == 0}
    return {i for i, p in enumerate(lengths.prompt) if _cut_to_nothing(p, max_len)}


OVERFLOW_DOC = """A row is longer than the context length.

What it flags: a row whose token count exceeds `--max-len`, counted with the tokenizer
given by `--tokenizer`: the text; prompt + completion; the conversation rendered by the
chat template (without one, its contents); instruction + input + output; for a
preference pair the longer of prompt + chosen and prompt + rejected. The message gives
the count, the limit and how many tokens are cut.
Why it matters: the trainer truncates the row, so its end — the end of the answer and
its EOS token — is never trained, and the model learns answers that stop mid-sentence
or never stop; trainers that drop overlong rows instead lose them silently.
What it does not mean: a broken row when you train with packing (rows are concatenated
and split into blocks; nothing is cut). Counts are the tokenizer's own: a prompt template
the trainer wraps alpaca rows in, or an EOS the collator appends, makes a row a few
tokens longer than stated, so a row just under the limit can still be cut. A row whose
prompt alone fills the context is TP-PRE-NO-TRAINABLE-TOKENS instead (one fault, one
finding).
"""


def check_overflow(lengths: TokenLengths, limits: NoLimits, ctx: TokenContext) -> Iterator[Hit]:
    max_len = ctx.max_len
    dead = _dead_lines(lengths, max_len)
    over = [(line, first, second) for line, (first, second)
            in enumerate(zip(lengths.tokens, lengths.second))
            if max(first, second) > max_len and line not in dead]
    for line, first, second in over:
        tokens = max(first, second)
        evidence: dict[str, Any] = {"line": line + 1, "tokens": tokens, "max_len": max_len,
                                    "cut_tokens": tokens - max_len, "rows_over_in_file": len(over)}
        if second == NOT_COUNTED:
            what = f"{tokens} tokens"
        else:
            what = f"prompt+chosen {first} tokens, prompt+rejected {second} tokens"
            evidence.update(chosen_tokens=first, rejected_tokens=second)
        yield Hit(message=f"line {line + 1}: {what} > --max-len {max_len}; the last {tokens - max_len} "
                          f"token(s) are cut",
                  evidence=evidence, location=_line(lengths, line))


OVERFLOW = Rule(id="TP-PRE-CONTEXT-OVERFLOW", name="context-overflow", level=Level.WARN, doc=OVERFLOW_DOC,
                check=check_overflow, family=TOKENS, origin="trainproof")

NO_TRAINABLE_DOC = """A row's prompt fills the whole context: its response is cut to zero tokens.

What it flags: a prompt/completion, preference, alpaca or conversational row whose
prompt part alone — the prompt; instruction + input; the turns before the first
assistant turn, with the template's assistant header — is already `--max-len` tokens
or more, so truncation to `--max-len` leaves none of the completion, chosen/rejected
answer, output or assistant turns.
Why it matters: with completion-only or assistant-only loss (the TRL and Axolotl
defaults) every label of the row is masked: it costs a full context of compute and
teaches nothing. It is a FAIL for the same reason as TP-PRE-NO-ASSISTANT and
TP-PRE-EMPTY-ASSISTANT, the other rows that train on nothing; rows that are cut but
still train something are the WARN TP-PRE-CONTEXT-OVERFLOW.
With the token map (a tokenizer.json and the `tokenizers` package), the rule reads the
map instead: a row none of whose tokens carries loss after the run's masking and
truncation — the response cut away, a template without {% generation %} blocks under
assistant-only loss, a prompt/completion row whose completion is empty once tokenised —
with the share of mapped rows: one finding a row for the rows truncation empties, one for
the file (count and first lines) for the rows the masking empties whatever their length. (TRL 1.16 drops such rows before training; older
trainers train on a batch whose loss is 0 or NaN.)
What it does not mean: a dead row when your trainer cuts the prompt rather than the end
(a left truncation side, a separate prompt budget such as DPO's `max_prompt_length`) or
trains on the prompt tokens too; then the row is only too long — disable this rule or
pass the `--max-len` your trainer truncates the whole row to.
"""


def check_no_trainable(lengths: TokenLengths, limits: NoLimits, ctx: TokenContext) -> Iterator[Hit]:
    max_len = ctx.max_len
    if lengths.trained is not None:
        yield from _no_trainable_mapped(lengths, max_len)
        return
    dead = [(line, prompt, max(first, second)) for line, (first, second, prompt)
            in enumerate(zip(lengths.tokens, lengths.second, lengths.prompt))
            if _cut_to_nothing(prompt, max_len)]
    for line, prompt, tokens in dead:
        response = max(tokens - prompt, 0)
        yield Hit(message=f"line {line + 1}: the prompt alone is {prompt} tokens >= --max-len {max_len}; "
                          f"the response ({response} token(s) after it) is cut entirely and the row trains on "
                          f"nothing",
                  evidence={"line": line + 1, "prompt_tokens": prompt, "tokens": tokens, "response_tokens": response,
                            "max_len": max_len, "rows_in_file": len(dead)},
                  location=_line(lengths, line))


def _no_trainable_mapped(lengths: TokenLengths, max_len: int) -> Iterator[Hit]:
    """From the token map: rows with no trained token after masking and truncation. Rows
    truncation empties are one finding each; rows the masking empties whatever their
    length (a template without generation blocks: often every row) are one finding for
    the file, with their count and first lines."""
    assert lengths.trained is not None
    dead = sorted(_dead_lines(lengths, max_len))
    if not dead:
        return
    # A dead row's trained count is 0, so it is mapped: with one, `mapped` is at least 1.
    mapped = sum(1 for t in lengths.trained if t != NOT_COUNTED)
    share = round(len(dead) / mapped, 6)
    before = lengths.before
    masked = [i for i in dead if before is None or before[i] <= 0]
    for line in dead:
        tokens = max(lengths.tokens[line], lengths.second[line])
        had = before[line] if before is not None else NOT_COUNTED
        if had <= 0:
            continue
        yield Hit(message=f"line {line + 1}: the row trains on nothing: truncation to --max-len {max_len} cuts all "
                          f"{had} trained token(s) (the row is {tokens} tokens; {len(dead)} of {mapped} rows, "
                          f"{100 * share:.3g}%)",
                  evidence={"line": line + 1, "tokens": tokens, "trained_before_truncation": had,
                            "max_len": max_len, "rows_in_file": len(dead), "share": share},
                  location=_line(lengths, line))
    if masked:
        shown = ", ".join(str(i + 1) for i in masked[:10]) + (f" and {len(masked) - 10} more" if len(masked) > 10
                                                               else "")
        yield Hit(message=f"{len(masked)} of {mapped} rows ({100 * len(masked) / mapped:.3g}%) train on nothing "
                          f"whatever their length: {lengths.cause or 'no token of the row carries loss'}; "
                          f"lines {shown}",
                  evidence={"line": masked[0] + 1, "rows": len(masked), "rows_in_file": len(dead), "share": share,
                            "max_len": max_len},
                  location=_line(lengths, masked[0]))


NO_TRAINABLE = Rule(id="TP-PRE-NO-TRAINABLE-TOKENS", name="no-trainable-tokens", level=Level.FAIL,
                    doc=NO_TRAINABLE_DOC, check=check_no_trainable, family=TOKENS)

TEMPLATE_ERROR_DOC = """The tokenizer's chat template raises on a row.

What it flags: a conversational row (chat, ShareGPT, or prompt/completion and preference
values given as message lists) that the chat template of the `--tokenizer` folder
refuses to render; the message quotes the template's error (e.g. "Conversation roles
must alternate user/assistant/user/assistant/...").
Why it matters: trainers render every row with that template before or during training
and stop at the exception — the run dies at this row. It is a FAIL like
TP-PRE-NON-STRING, the other row that crashes the tokenizer.
With `--tokenizer DIR` but no `--max-len` (or without transformers), the rows whose
turns do not alternate are rendered with the folder's template in a jinja2 sandbox, one
render per distinct role sequence: a row it refuses is flagged here instead of as
TP-PRE-TURNS-NOT-ALTERNATING.
What it does not mean: anything without `--tokenizer DIR`, or about rows the dataset
rules already report as unreadable in their format (those are not rendered).
"""


def check_template_errors(lengths: TemplateErrors, limits: NoLimits, ctx: object) -> Iterator[Hit]:
    for e in lengths.template_errors:
        yield Hit(message=f"line {e.line + 1}: the chat template raises: {e.message}",
                  evidence={"line": e.line + 1, "rows_in_file": len(lengths.template_errors)},
                  location=_line(lengths, e.line))


TEMPLATE_ERROR = Rule(id="TP-PRE-CHAT-TEMPLATE-ERROR", name="chat-template-error", level=Level.FAIL,
                      doc=TEMPLATE_ERROR_DOC, check=check_template_errors, family=TEMPLATES)

# A TemplateErrors rule judges TokenLengths too (contravariance), so it sits among these.
TOKEN_RULES: tuple[Rule[TokenLengths, TokenContext], ...] = (
    OVERFLOW,
    NO_TRAINABLE,
    TEMPLATE_ERROR,
)
