"""Cases for the tokenizer family: tokenizer folders written here (tokenizer_config.json,
config.json, tokenizer.json as a saved tokenizer lays them out), read by the reader
(readers/tokenizer.read_tokenizer_dir), judged with what the datasets and the run said
(TokenizerContext)."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

from trainproof_lsp.readers.bundle import RunSettings
from trainproof_lsp.readers.tokenizer import Sourced, TokenizerFiles, read_tokenizer_dir
from trainproof_lsp.rules.tokenizer import TokenizerContext

from . import Expect, FamilyCases, Fires, Quiet, RuleCases, straddle
from .checkpoint import _folder

# A ChatML-style template: each turn closes with <|im_end|>, the eos token.
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
# A template that closes nothing: the model is never shown where an answer ends.
OPEN_ENDED = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
WITH_BOS = "{{ bos_token }}" + CHATML


def tokenizer(config: dict[str, Any] | None = None, *, model: dict[str, Any] | None = None,
              added: list[tuple[int, str]] | None = None, drop: tuple[str, ...] = ()) -> TokenizerFiles:
    """A tokenizer folder: tokenizer_config.json (eos, pad, bos and `config` over them),
    config.json when `model` is given, tokenizer.json with `added` tokens when given."""
    folder = Path(tempfile.mkdtemp(dir=_folder()))
    cfg: dict[str, Any] = {"bos_token": "<s>", "eos_token": "<|im_end|>", "pad_token": "<pad>",
                           "model_max_length": 4096, "chat_template": CHATML}
    cfg.update(config or {})
    for key in drop:
        cfg.pop(key)
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2))
    if model is not None:
        (folder / "config.json").write_text(json.dumps(model, indent=2))
    if added is not None:
        tokens = [{"id": i, "content": c, "special": True} for i, c in added]
        (folder / "tokenizer.json").write_text(json.dumps({"added_tokens": tokens, "model": {"type": "BPE"}}, indent=2))
    return read_tokenizer_dir(folder)


def context(_: TokenizerFiles) -> TokenizerContext:
    return TokenizerContext()


def conversational(_: TokenizerFiles) -> TokenizerContext:
    """Judged with a chat dataset."""
    return TokenizerContext(conversational=True)


ARGS = Sourced(value="SFTConfig", path="out/training_args.bin")


def run_unset(_: TokenizerFiles) -> TokenizerContext:
    """The run's training_args.bin holds max_length and max_seq_length, both None."""
    return TokenizerContext(run=RunSettings(args=ARGS, max_length=(("max_length", None), ("max_seq_length", None))))


def reencodes(_: TokenizerFiles) -> TokenizerContext:
    """A script beside the folder renders with tokenize=False and encodes the text again."""
    return TokenizerContext(run=RunSettings(encodes_rendered=Sourced(
        value="tokenizer(tokenizer.apply_chat_template(..., tokenize=False))", path="scripts/train.py", line=41)))


def normalize(text: str) -> str:
    return re.sub(re.escape(str(_folder())) + r"/[^/\s]+", "<tmp>", text)


CASES: dict[str, RuleCases] = {
    "TP-PRE-MISSING-EOS-TOKEN": RuleCases(
        fires=Fires(subject=lambda: tokenizer(drop=("eos_token",)), hits=(Expect(message='no eos_token in tokenizer_config.json',
                           evidence={'files': 1}, line=0),),
                    family=('TP-PRE-MISSING-EOS-TOKEN', 'TP-TOK-TEMPLATE-NO-EOS')),
        quiet=Quiet(subject=lambda: tokenizer()),
    ),
    "TP-PRE-MISSING-PAD-TOKEN": RuleCases(
        fires=Fires(subject=lambda: tokenizer(drop=("pad_token",)), hits=(Expect(message='no pad_token: batches cannot be padded until one is set',
                           evidence={'files': 1}, line=0),),
                    family=('TP-PRE-MISSING-PAD-TOKEN',)),
        quiet=Quiet(subject=lambda: tokenizer()),
    ),
    "TP-PRE-PAD-EQUALS-EOS": RuleCases(
        fires=Fires(subject=lambda: tokenizer({"pad_token": "<|im_end|>"}), hits=(Expect(message="pad_token '<|im_end|>' is the eos_token '<|im_end|>': masking padding by id masks every EOS label too",
                           evidence={'token_id': None}, line=3),),
                    family=('TP-PRE-PAD-EQUALS-EOS',)),
        quiet=(Quiet(subject=lambda: tokenizer()), Quiet(subject=lambda: tokenizer(drop=("pad_token",)))),
    ),
    "TP-TOK-NO-CHAT-TEMPLATE": RuleCases(
        fires=Fires(subject=lambda: tokenizer(drop=("chat_template",)), hits=(Expect(message='the dataset holds conversations but the tokenizer has no chat_template (tokenizer_config.json, chat_template.jinja)',
                           evidence={'files': 1}, line=0),),
                    family=('TP-TOK-NO-CHAT-TEMPLATE',)),
        quiet=Quiet(subject=lambda: tokenizer()),
        context=conversational,
    ),
    "TP-TOK-TEMPLATE-NO-EOS": RuleCases(
        fires=Fires(subject=lambda: tokenizer({"chat_template": OPEN_ENDED}), hits=(Expect(message="the chat template ends the assistant's turn with '\\n', without the eos_token '<|im_end|>' or an end-of-turn token (1 candidate marker(s) looked for): the model is never trained to stop",
                           evidence={'tail': '\n', 'markers': 1, 'rendered': True, 'template_chars': 71}, line=5),),
                    family=('TP-TOK-TEMPLATE-NO-EOS',)),
        quiet=(Quiet(subject=lambda: tokenizer()),
               Quiet(subject=lambda: tokenizer(drop=("chat_template",)), skip="no chat template")),
        context=conversational,
    ),
    "TP-TOK-DOUBLE-BOS": RuleCases(
        fires=Fires(subject=lambda: tokenizer({"chat_template": WITH_BOS, "add_bos_token": True}), hits=(Expect(message="the chat template writes the BOS '<s>', add_bos_token is true, and train.py line 42 encodes rendered text with special tokens: every example starts with two",
                           evidence={'bos': '<s>', 'script_line': 42}, line=5),),
                    family=('TP-TOK-DOUBLE-BOS',)),
        quiet=(Quiet(subject=lambda: tokenizer({"chat_template": WITH_BOS, "add_bos_token": False})),
               Quiet(subject=lambda: tokenizer({"add_bos_token": True}))),
        context=reencodes,
    ),
    "TP-TOK-DOUBLE-BOS-IF-REENCODED": RuleCases(
        fires=Fires(subject=lambda: tokenizer({"chat_template": WITH_BOS, "add_bos_token": True}), hits=(Expect(message="the chat template writes the BOS '<s>' and add_bos_token is true: text rendered with apply_chat_template(tokenize=False) and encoded again with special tokens would start with two (apply_chat_template(tokenize=True) or add_special_tokens=False gives one)",
                           evidence={'bos': '<s>'}, line=5),),
                    family=('TP-TOK-DOUBLE-BOS-IF-REENCODED',)),
        quiet=(Quiet(subject=lambda: tokenizer({"add_bos_token": True})),
               Quiet(subject=lambda: tokenizer(drop=("chat_template",)), skip="no chat template")),
    ),
    "TP-TOK-MAX-LENGTH-SENTINEL": RuleCases(
        fires=Fires(subject=lambda: tokenizer({"model_max_length": 1000000000000000019884624838656}), hits=(Expect(message='model_max_length is 1e+30 (>= 1e+29): the tokenizer does not know the context length, so truncation needs an explicit max_length (no training arguments in the folder say whether the run sets one)',
                           evidence={'model_max_length': 1e+30}, line=4),),
                    family=('TP-TOK-MAX-LENGTH-SENTINEL',)),
        quiet=(Quiet(subject=lambda: tokenizer()),
               Quiet(subject=lambda: tokenizer(drop=("model_max_length",)), skip="no model_max_length")),
        straddles=(straddle("sentinel_at", 1e29, lambda v: tokenizer({"model_max_length": v}), fire=1e29, quiet=0.99e29),),
    ),
    "TP-TOK-MAX-LENGTH-UNSET": RuleCases(
        fires=Fires(subject=lambda: tokenizer({"model_max_length": 1000000000000000019884624838656}), hits=(Expect(message="model_max_length is 1e+30 and SFTConfig sets max_length=None, max_seq_length=None: nothing bounds a sequence's length",
                           evidence={'model_max_length': 1e+30, 'fields': 2}, line=4),),
                    family=('TP-TOK-MAX-LENGTH-UNSET',)),
        quiet=Quiet(subject=lambda: tokenizer()),
        straddles=(straddle("sentinel_at", 1e29, lambda v: tokenizer({"model_max_length": v}), fire=1e29, quiet=0.99e29),),
        context=run_unset,
    ),
    "TP-TOK-ADDED-TOKENS-BEYOND-VOCAB": RuleCases(
        fires=Fires(subject=lambda: tokenizer(model={"vocab_size": 1000}, added=[(998, "<pad>"), (1000, "<tool>"), (1003, "<x>")]),
                    hits=(Expect(message="2 added token(s) have ids >= vocab_size 1000; first '<tool>' id 1000, largest id 1003",
                           evidence={'vocab_size': 1000, 'beyond': 2, 'first_id': 1000, 'max_id': 1003}, line=1),),
                    family=('TP-TOK-ADDED-TOKENS-BEYOND-VOCAB',)),
        quiet=(Quiet(subject=lambda: tokenizer(model={"vocab_size": 1004}, added=[(998, "<pad>"), (1003, "<x>")])),
               Quiet(subject=lambda: tokenizer(added=[(1003, "<x>")]), skip="no config.json with vocab_size")),
    ),
}

FAMILY = FamilyCases(cases=CASES, context=context, normalize=normalize)
