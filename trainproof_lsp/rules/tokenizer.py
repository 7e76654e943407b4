"""Tokenizer rules, judged from the tokenizer folder's JSON files alone.

Every check reads a `TokenizerFiles` (readers/tokenizer.py); the context says whether the
datasets given alongside are conversational (the chat-template checks only matter then).
The registry entries are the tuple TOKENIZER_RULES.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from ..core.model import Hit, Level, Location, Related, Span
from ..readers.bundle import RunSettings, assistant_end, end_markers
from ..readers.bundle import special_tokens as special_tokens  # re-exported: judge/preflight.py uses it
from ..readers.tokenizer import Sourced, TokenizerFiles
from .base import Family, NoLimits, Rule, Skip


@dataclass(frozen=True, kw_only=True)
class TokenizerContext:
    # True/False when datasets were given with the tokenizer; None when judged alone.
    conversational: bool | None = None
    # What the folder says about the run that used the tokenizer (readers/bundle.py:
    # training_args.bin, scripts); None when nothing was read.
    run: RunSettings | None = None


# Every rule here judges one tokenizer folder's files (readers/tokenizer.py).
TOKENIZER: Family[TokenizerFiles, TokenizerContext] = Family("tokenizer")


def _at(s: Sourced) -> Location:
    return Location(path=s.path, span=Span(s.line, 0, s.line, 0))


def _folder_file(tok: TokenizerFiles) -> Location:
    name = next((n for n in ("tokenizer_config.json", "special_tokens_map.json", "tokenizer.json")
                 if n in tok.present), tok.present[0])
    return Location(path=tok.path(name), span=Span(0, 0, 0, 0))


MISSING_EOS_DOC = """The tokenizer has no end-of-sequence token.

What it flags: neither tokenizer_config.json nor special_tokens_map.json names an
`eos_token`.
Why it matters: training has no stop signal — collators cannot append one, and the
fine-tuned model does not learn to end its answers (generation runs to max_new_tokens).
What it does not mean: that config.json's `eos_token_id` is missing; only the tokenizer's
own declaration is judged, since that is what data collators use.
"""


def check_missing_eos(tok: TokenizerFiles, limits: NoLimits, ctx: TokenizerContext) -> Iterator[Hit]:
    if tok.eos is None:
        looked = [n for n in ("tokenizer_config.json", "special_tokens_map.json") if n in tok.present]
        yield Hit(message=f"no eos_token in {' or '.join(looked) or 'the tokenizer files'}",
                  evidence={"files": len(tok.present)}, location=_folder_file(tok))


MISSING_EOS = Rule(id="TP-PRE-MISSING-EOS-TOKEN", name="missing-eos-token", level=Level.FAIL, doc=MISSING_EOS_DOC,
                   check=check_missing_eos, family=TOKENIZER, origin="trainproof")

MISSING_PAD_DOC = """The tokenizer has no padding token.

What it flags: no `pad_token` in tokenizer_config.json or special_tokens_map.json.
Why it matters: batching needs padding; collators raise ("Asking to pad but the
tokenizer does not have a padding token"), and the usual quick fix `pad_token =
eos_token` brings TP-PRE-PAD-EQUALS-EOS with it.
What it does not mean: a broken tokenizer for batch size 1 or packed sequences without
padding; it is a WARN.
"""


def check_missing_pad(tok: TokenizerFiles, limits: NoLimits, ctx: TokenizerContext) -> Iterator[Hit]:
    if tok.pad is None:
        yield Hit(message="no pad_token: batches cannot be padded until one is set",
                  evidence={"files": len(tok.present)}, location=_folder_file(tok))


MISSING_PAD = Rule(id="TP-PRE-MISSING-PAD-TOKEN", name="missing-pad-token", level=Level.WARN, doc=MISSING_PAD_DOC,
                   check=check_missing_pad, family=TOKENIZER, origin="trainproof")

PAD_EOS_DOC = """The padding token is the end-of-sequence token.

What it flags: `pad_token` equal to `eos_token` (same text, or the same id).
Why it matters: collators set the label of every padding position to -100, found by
`input_ids == pad_token_id` — with pad == eos that masks every real EOS too, so the model
is never trained to stop and generates past the answer.
What it does not mean: a broken run if your collator masks padding by attention mask
instead of by id, or adds the EOS label back (TRL's completion-only collators differ);
it is a WARN.
"""


def check_pad_equals_eos(tok: TokenizerFiles, limits: NoLimits, ctx: TokenizerContext) -> Iterator[Hit]:
    if tok.pad is None or tok.eos is None:
        return
    pad_id, eos_id = tok.id_of(tok.pad.value), tok.id_of(tok.eos.value)
    if tok.pad.value == tok.eos.value or (pad_id is not None and pad_id == eos_id):
        # Either way the shared id is the EOS's: one text has one id (or none known).
        yield Hit(message=f"pad_token {tok.pad.value!r} is the eos_token {tok.eos.value!r}"
                          + (f" (id {eos_id})" if eos_id is not None else "")
                          + ": masking padding by id masks every EOS label too",
                  evidence={"token_id": eos_id}, location=_at(tok.pad),
                  related=(Related(location=_at(tok.eos), message="eos_token"),))


PAD_EQUALS_EOS = Rule(id="TP-PRE-PAD-EQUALS-EOS", name="pad-equals-eos", level=Level.WARN, doc=PAD_EOS_DOC,
                      check=check_pad_equals_eos, family=TOKENIZER, origin="trainproof")

NO_TEMPLATE_DOC = """Conversational data, but the tokenizer has no chat template.

What it flags: a dataset with `messages`/`conversations` rows is given together with a
tokenizer folder whose tokenizer_config.json has no `chat_template` and that holds no
chat_template.jinja / chat_template.json.
Why it matters: `apply_chat_template` raises (recent transformers), or older versions
fall back to a generic template — the model is trained on a format it will not see at
inference.
What it does not mean: anything for plain-text datasets (the check is skipped) or when
your trainer formats conversations itself.
"""


def check_no_template(tok: TokenizerFiles, limits: NoLimits, ctx: TokenizerContext) -> Iterator[Hit]:
    if not ctx.conversational:
        raise Skip("no conversational dataset given with the tokenizer")
    if tok.chat_template is None:
        yield Hit(message="the dataset holds conversations but the tokenizer has no chat_template "
                          "(tokenizer_config.json, chat_template.jinja)",
                  evidence={"files": len(tok.present)}, location=_folder_file(tok))


NO_CHAT_TEMPLATE = Rule(id="TP-TOK-NO-CHAT-TEMPLATE", name="no-chat-template", level=Level.FAIL,
                        doc=NO_TEMPLATE_DOC, check=check_no_template, family=TOKENIZER)

TEMPLATE_EOS_DOC = """The chat template does not end the assistant's turn with an end marker.

What it flags: the chat template, rendered on a user/assistant exchange (in a jinja2
sandbox: no files, no network, bounded in time and output), writes nothing after the
assistant's content that holds the `eos_token` or an end-of-turn token of the tokenizer
(`<|im_end|>`, `<|eot_id|>`, `<end_of_turn>`, `<|end|>` and the like, taken from its added
tokens) — even when it ends user and system turns with one. Without jinja2 the template
is read as text: it is flagged only when it writes no such marker anywhere, and the check
is NOT-CHECKED when it does (the assistant turn itself could not be rendered).
Why it matters: rendered conversations carry no stop target after the assistant's
answer, so the fine-tuned model never learns to stop and generates until
max_new_tokens.
What it does not mean: anything for plain-text datasets (with only those given, the
check is skipped), or when your trainer appends the EOS itself after rendering (some
collators do, and a tokenizer with `add_eos_token: true` does when the rendered text is
encoded with special tokens — `apply_chat_template(tokenize=True)` does not; the message
says so when the flag is set). The template is still wrong for inference then.
"""

NO_TEMPLATE = "no chat template"
NOT_CONVERSATIONAL = "the datasets given are not conversational: the chat template is not used"
_end_markers = end_markers  # readers/bundle.py: the candidate end-of-turn tokens, once


def check_template_eos(tok: TokenizerFiles, limits: NoLimits, ctx: TokenizerContext) -> Iterator[Hit]:
    from ..readers import chat_template as ct

    tpl = tok.chat_template
    if tpl is None:
        raise Skip(NO_TEMPLATE)
    if ctx.conversational is False:
        raise Skip(NOT_CONVERSATIONAL)
    text = tpl.value
    markers = _end_markers(tok)
    eos = tok.eos.value if tok.eos is not None else None
    try:
        end = assistant_end(tok)  # rendered once per template: the bundle check shares it
    except ct.TemplateUnavailable as e:
        # Read as text: only a template that writes no marker anywhere is certain.
        if "eos_token" in text or any(m in text for m in markers):
            raise Skip(f"{e}; the template writes an end marker somewhere, but whether the assistant "
                       "turn ends with one needs the template rendered") from None
        yield Hit(message="the chat template writes no eos_token and no end-of-turn token anywhere "
                          f"({len(markers)} candidate marker(s) looked for; read as text: {e})",
                  evidence={"markers": len(markers), "rendered": False, "template_chars": len(text)},
                  location=_at(tpl))
        return
    except (ct.TemplateRejected, ct.TemplateUnusable) as e:
        raise Skip(f"the chat template could not render a user/assistant exchange: {e}") from None
    if end.marker is not None:
        return
    shown = end.tail if len(end.tail) <= 40 else end.tail[:39] + "…"
    adds_eos = tok.add_eos is not None and tok.add_eos.value is True
    yield Hit(message=f"the chat template ends the assistant's turn with {shown!r}, without the eos_token {eos!r} "
                      f"or an end-of-turn token ({len(markers)} candidate marker(s) looked for): "
                      "the model is never trained to stop"
                      + (" (add_eos_token is true: only text encoded with special tokens gets an EOS, "
                         "and apply_chat_template(tokenize=True) encodes without them)" if adds_eos else ""),
              evidence={"tail": shown, "markers": len(markers), "rendered": True, "template_chars": len(text)},
              location=_at(tpl))


TEMPLATE_NO_EOS = Rule(id="TP-TOK-TEMPLATE-NO-EOS", name="template-no-eos", level=Level.FAIL,
                       doc=TEMPLATE_EOS_DOC, check=check_template_eos, family=TOKENIZER)

# Reasons TP-TOK-TEMPLATE-NO-EOS stands down without anything to judge; any other skip
# means the template was there but could not be judged: NOT-CHECKED, never a pass.
QUIET_SKIPS = frozenset({NO_TEMPLATE, NOT_CONVERSATIONAL, "disabled by configuration"})

DOUBLE_BOS_DOC = """The run encodes rendered chat text again with special tokens: every example starts with two BOS.

What it flags: the chat template writes the BOS (`{{ bos_token }}` or its text), the
tokenizer also adds one when encoding (`add_bos_token: true`, or a tokenizer.json
post-processor that prepends it), and a script in the folder (or the run folder of a
checkpoint-N/) renders with `apply_chat_template(tokenize=False)` and passes text to the
tokenizer without `add_special_tokens=False`.
Why it matters: every training example then starts with two BOS tokens — a prefix the
model never sees at inference, learned on every step.
What it does not mean: certainty — the script is read statically (with `ast`, never run),
and which text reaches which call is not followed. Without such a script the pairing is
TP-TOK-DOUBLE-BOS-IF-REENCODED (INFO): Llama-3, Gemma-3 and DeepSeek ship it.
"""


def _double_bos(tok: TokenizerFiles) -> tuple[Sourced, Sourced, str] | None:
    """(the template, what adds the BOS, how) when the template writes the BOS the
    tokenizer also adds."""
    tpl = tok.chat_template
    if tpl is None:
        raise Skip(NO_TEMPLATE)
    bos = tok.bos.value if tok.bos is not None else None
    in_template = "bos_token" in tpl.value or (bool(bos) and bos in tpl.value)
    if not in_template:
        return None
    if tok.add_bos is not None and tok.add_bos.value is True:
        return tpl, tok.add_bos, "add_bos_token is true"
    if tok.post_processor_bos is not None and (bos is None or tok.post_processor_bos.value == bos):
        return tpl, tok.post_processor_bos, "tokenizer.json's post-processor prepends it"
    return None


def check_double_bos(tok: TokenizerFiles, limits: NoLimits, ctx: TokenizerContext) -> Iterator[Hit]:
    pair = _double_bos(tok)
    run = ctx.run
    encodes = run.encodes_rendered if run is not None else None
    if pair is None or encodes is None:
        return
    tpl, adder, how = pair
    bos = tok.bos.value if tok.bos is not None else None
    script = encodes.path.replace("\\", "/").rsplit("/", 1)[-1]  # rules name files, never open them
    yield Hit(message=f"the chat template writes the BOS {bos!r}, {how}, and {script} line {encodes.line + 1} "
                      "encodes rendered text with special tokens: every example starts with two",
              evidence={"bos": bos, "script_line": encodes.line + 1}, location=_at(tpl),
              related=(Related(location=_at(adder), message="the tokenizer adds BOS here"),
                       Related(location=_at(encodes), message=str(encodes.value))))


DOUBLE_BOS = Rule(id="TP-TOK-DOUBLE-BOS", name="double-bos", level=Level.WARN, doc=DOUBLE_BOS_DOC,
                  check=check_double_bos, family=TOKENIZER)

DOUBLE_BOS_IF_DOC = """The chat template writes the BOS the tokenizer also adds: re-encoded text would get two.

What it flags: the chat template writes the BOS (`{{ bos_token }}` or its text) and the
tokenizer adds one when encoding (`add_bos_token: true`, or a tokenizer.json
post-processor that prepends it), with no script in the folder showing the run encodes
rendered text again with special tokens.
Why it matters: only when `apply_chat_template(tokenize=False)` text goes through a plain
tokenizer call (special tokens added) does every example start with two BOS tokens.
`apply_chat_template(tokenize=True)` and `add_special_tokens=False` do not double it.
What it does not mean: a broken tokenizer — Llama-3, Gemma-3 and DeepSeek ship this
pairing. It is INFO; TP-TOK-DOUBLE-BOS (WARN) fires when a script shows the re-encoding.
"""


def check_double_bos_if(tok: TokenizerFiles, limits: NoLimits, ctx: TokenizerContext) -> Iterator[Hit]:
    pair = _double_bos(tok)
    run = ctx.run
    if pair is None or (run is not None and run.encodes_rendered is not None):
        return
    tpl, adder, how = pair
    bos = tok.bos.value if tok.bos is not None else None
    yield Hit(message=f"the chat template writes the BOS {bos!r} and {how}: text rendered with "
                      "apply_chat_template(tokenize=False) and encoded again with special tokens would start with "
                      "two (apply_chat_template(tokenize=True) or add_special_tokens=False gives one)",
              evidence={"bos": bos}, location=_at(tpl),
              related=(Related(location=_at(adder), message="the tokenizer adds BOS here"),))


DOUBLE_BOS_IF = Rule(id="TP-TOK-DOUBLE-BOS-IF-REENCODED", name="double-bos-if-reencoded", level=Level.INFO,
                     doc=DOUBLE_BOS_IF_DOC, check=check_double_bos_if, family=TOKENIZER)

SENTINEL_DOC = """The tokenizer's model_max_length is the "no limit" sentinel.

What it flags: `model_max_length` at or above `sentinel_at` (transformers writes
int(1e30) when it does not know the model's context length; Llama-3 and Gemma-3 ship it).
Why it matters: `truncation=True` without `max_length` truncates nothing, and length code
that reads `tokenizer.model_max_length` works with 1e30.
What it does not mean: a problem when the run sets its own max length (TRL's
`max_length`, a script's `max_length=`): it is INFO. TP-TOK-MAX-LENGTH-UNSET (WARN)
fires when the run's saved arguments show no max length either.
"""


@dataclass(frozen=True, kw_only=True)
class SentinelLimits:
    # transformers' VERY_LARGE_INTEGER is int(1e30); no real model has a context of even
    # 1e9 tokens, so anything from 1e29 on is the sentinel (and float rounding of it).
    sentinel_at: float = 1e29


def _sentinel(tok: TokenizerFiles, limits: SentinelLimits) -> Sourced | None:
    mml = tok.model_max_length
    if mml is None or isinstance(mml.value, bool) or not isinstance(mml.value, (int, float)):
        raise Skip("no model_max_length in tokenizer_config.json")
    return mml if mml.value >= limits.sentinel_at else None


def _args_said(run: RunSettings | None) -> str:
    if run is None or run.args is None:
        return "no training arguments in the folder say whether the run sets one"
    if not run.max_length:
        return f"{run.args.value} in training_args.bin has no max-length field (the script tokenizes)"
    return f"{run.args.value} in training_args.bin sets " + ", ".join(f"{k}={v!r}" for k, v in run.max_length)


def check_sentinel(tok: TokenizerFiles, limits: SentinelLimits, ctx: TokenizerContext) -> Iterator[Hit]:
    mml = _sentinel(tok, limits)
    run = ctx.run
    if mml is None or (run is not None and run.max_length_unset):
        return
    yield Hit(message=f"model_max_length is {mml.value:.3g} (>= {limits.sentinel_at:.0e}): the tokenizer does not "
                      f"know the context length, so truncation needs an explicit max_length ({_args_said(run)})",
              evidence={"model_max_length": float(mml.value)}, location=_at(mml))


MAX_LENGTH_SENTINEL = Rule(id="TP-TOK-MAX-LENGTH-SENTINEL", name="max-length-sentinel", level=Level.INFO,
                           doc=SENTINEL_DOC, limits=SentinelLimits, check=check_sentinel,
                           family=TOKENIZER)

UNSET_DOC = """No max length for the run: the tokenizer's is the 1e30 sentinel and the run's arguments set none.

What it flags: `model_max_length` at or above `sentinel_at` in tokenizer_config.json while
the run's saved arguments (training_args.bin of the folder, walked without unpickling)
hold max-length fields (`max_length`, `max_seq_length`) that are all unset.
Why it matters: nothing truncates: the longest rows reach the model whole and fail with
out-of-memory or run past the position embeddings, late in a run.
What it does not mean: a problem when the data is known to be short, or a collator
truncates by itself.
"""


def check_unset(tok: TokenizerFiles, limits: SentinelLimits, ctx: TokenizerContext) -> Iterator[Hit]:
    mml = _sentinel(tok, limits)
    if mml is None:
        return  # a real context length: nothing to look for in the run
    run = ctx.run
    if run is None or run.args is None:
        raise Skip("no training_args.bin in the folder: whether the run sets a max length is not known")
    if not run.max_length:
        raise Skip(f"{run.args.value} has no max-length field")
    if not run.max_length_unset:
        return
    fields = ", ".join(f"{k}=None" for k, _ in run.max_length)
    yield Hit(message=f"model_max_length is {mml.value:.3g} and {run.args.value} sets {fields}: "
                      "nothing bounds a sequence's length",
              evidence={"model_max_length": float(mml.value), "fields": len(run.max_length)}, location=_at(mml),
              related=(Related(location=_at(run.args), message=f"{run.args.value}: {fields}"),))


MAX_LENGTH_UNSET = Rule(id="TP-TOK-MAX-LENGTH-UNSET", name="max-length-unset", level=Level.WARN, doc=UNSET_DOC,
                        limits=SentinelLimits, check=check_unset, family=TOKENIZER)

BEYOND_VOCAB_DOC = """Added tokens have ids beyond the model's vocabulary.

What it flags: a token in tokenizer.json `added_tokens` (or tokenizer_config.json
`added_tokens_decoder`) whose id is >= `vocab_size` in the config.json of the same
folder.
Why it matters: the embedding matrix has `vocab_size` rows; the first batch holding such
a token fails with an index error (on GPU: a device-side assert that kills the process).
What it does not mean: a problem when your script calls
`model.resize_token_embeddings(len(tokenizer))` before training — but then the config.json
saved here is stale.
"""


def check_beyond_vocab(tok: TokenizerFiles, limits: NoLimits, ctx: TokenizerContext) -> Iterator[Hit]:
    if tok.vocab_size is None:
        raise Skip("no config.json with vocab_size in the tokenizer folder")
    if not tok.added_tokens:
        raise Skip("no added tokens")
    size = tok.vocab_size.value
    beyond = [(i, c, s) for i, c, s in tok.added_tokens if i >= size]
    if not beyond:
        return
    i, c, s = beyond[0]
    yield Hit(message=f"{len(beyond)} added token(s) have ids >= vocab_size {size}; first {c!r} id {i}, "
                      f"largest id {beyond[-1][0]}",
              evidence={"vocab_size": size, "beyond": len(beyond), "first_id": i, "max_id": beyond[-1][0]},
              location=_at(s), related=(Related(location=_at(tok.vocab_size), message="vocab_size"),))


ADDED_BEYOND_VOCAB = Rule(id="TP-TOK-ADDED-TOKENS-BEYOND-VOCAB", name="added-tokens-beyond-vocab",
                          level=Level.FAIL, doc=BEYOND_VOCAB_DOC, check=check_beyond_vocab,
                          family=TOKENIZER)

TOKENIZER_RULES: tuple[Rule[TokenizerFiles, TokenizerContext], ...] = (
    MISSING_EOS,
    MISSING_PAD,
    PAD_EQUALS_EOS,
    NO_CHAT_TEMPLATE,
    TEMPLATE_NO_EOS,
    DOUBLE_BOS,
    DOUBLE_BOS_IF,
    MAX_LENGTH_SENTINEL,
    MAX_LENGTH_UNSET,
    ADDED_BEYOND_VOCAB,
)
