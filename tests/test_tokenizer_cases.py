"""The tokenizer rules (rules/tokenizer.py) asserted whole: each finding's message,
evidence, location and related places, each skip's reason in full, each alternative input
(which file a folder-wide finding points at, the id or the text a pad shares with the EOS,
the BOS written as text or as `bos_token`, added by `add_bos_token` or by the
post-processor), the sentinel and the 40-character tail at their limits, several added
tokens past the vocabulary, and the registry entries. TokenizerFiles are built here as the
reader returns them; the template's assistant turn is rendered for real where the
rendering decides, and stood in for where only its outcome does."""

from __future__ import annotations

import json
from typing import Any, Callable, Iterator

import pytest

from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import Hit, Level, Location, Related, Span
from trainproof_lsp.judge.preflight import judge_tokenizer
from trainproof_lsp.readers import chat_template as ct
from trainproof_lsp.readers.bundle import RunSettings
from trainproof_lsp.readers.tokenizer import Sourced, TokenizerFiles
from trainproof_lsp.rules import BY_ID
from trainproof_lsp.rules import tokenizer as rules
from trainproof_lsp.rules.base import NoLimits, Skip
from trainproof_lsp.rules.tokenizer import (ADDED_BEYOND_VOCAB, DOUBLE_BOS, DOUBLE_BOS_IF, MAX_LENGTH_SENTINEL,
                                            MAX_LENGTH_UNSET, MISSING_EOS, MISSING_PAD, NO_CHAT_TEMPLATE,
                                            PAD_EQUALS_EOS, QUIET_SKIPS, TEMPLATE_NO_EOS, TOKENIZER,
                                            TOKENIZER_RULES, SentinelLimits, TokenizerContext, check_beyond_vocab,
                                            check_double_bos, check_double_bos_if, check_missing_eos,
                                            check_missing_pad, check_no_template, check_pad_equals_eos,
                                            check_sentinel, check_template_eos, check_unset)

FOLDER = "models/tok"
CFG = f"{FOLDER}/tokenizer_config.json"
TJ = f"{FOLDER}/tokenizer.json"
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}")
OPEN_ENDED = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
SENTINEL = 1000000000000000019884624838656


def src(value: Any, line: int = 0, path: str = CFG) -> Sourced:
    return Sourced(value=value, path=path, line=line)


def tok(*, present: tuple[str, ...] = ("tokenizer_config.json",), **fields: Any) -> TokenizerFiles:
    return TokenizerFiles(folder=FOLDER, present=present, **fields)


def at(s: Sourced) -> Location:
    return Location(path=s.path, span=Span(s.line, 0, s.line, 0))


def top(name: str) -> Location:
    return Location(path=f"{FOLDER}/{name}", span=Span(0, 0, 0, 0))


Check = Callable[[TokenizerFiles, Any, TokenizerContext], Iterator[Hit]]


def run(check: Check, t: TokenizerFiles, ctx: TokenizerContext | None = None, limits: Any = None) -> list[Hit]:
    return list(check(t, limits if limits is not None else NoLimits(), ctx or TokenizerContext()))


def skip(check: Check, t: TokenizerFiles, ctx: TokenizerContext | None = None, limits: Any = None) -> str:
    with pytest.raises(Skip) as e:
        run(check, t, ctx, limits)
    return str(e.value)


# --- where a folder-wide finding points ---------------------------------------------------------

@pytest.mark.parametrize(("present", "where"), [
    (("tokenizer_config.json",), "tokenizer_config.json"),
    (("special_tokens_map.json", "tokenizer_config.json"), "tokenizer_config.json"),
    (("tokenizer.json", "special_tokens_map.json"), "special_tokens_map.json"),
    (("config.json", "tokenizer.json"), "tokenizer.json"),
    (("chat_template.jinja", "vocab.json"), "chat_template.jinja"),
])
def test_a_folder_wide_finding_points_at_the_first_file_that_declares_tokens(present, where):
    assert run(check_missing_pad, tok(present=present)) == [
        Hit(message="no pad_token: batches cannot be padded until one is set", evidence={"files": len(present)},
            location=top(where))]


# --- TP-PRE-MISSING-EOS-TOKEN -------------------------------------------------------------------

@pytest.mark.parametrize(("present", "looked"), [
    (("tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"),
     "tokenizer_config.json or special_tokens_map.json"),
    (("special_tokens_map.json",), "special_tokens_map.json"),
    (("tokenizer.json",), "the tokenizer files"),
])
def test_missing_eos_names_the_files_it_looked_in(present, looked):
    assert run(check_missing_eos, tok(present=present)) == [
        Hit(message=f"no eos_token in {looked}", evidence={"files": len(present)},
            location=top("tokenizer_config.json" if "tokenizer_config.json" in present else present[0]))]


def test_an_eos_or_pad_is_quiet():
    assert run(check_missing_eos, tok(eos=src("</s>"))) == []
    assert run(check_missing_pad, tok(pad=src("<pad>"))) == []


# --- TP-PRE-PAD-EQUALS-EOS ----------------------------------------------------------------------

def test_pad_equal_to_eos_by_text_with_its_id_and_the_eos_related():
    t = tok(pad=src("</s>", 4), eos=src("</s>", 2), token_ids={"</s>": 2})
    assert run(check_pad_equals_eos, t) == [
        Hit(message="pad_token '</s>' is the eos_token '</s>' (id 2): masking padding by id masks every EOS label too",
            evidence={"token_id": 2}, location=at(src("</s>", 4)),
            related=(Related(location=at(src("</s>", 2)), message="eos_token"),))]


def test_pad_equal_to_eos_by_id_under_two_names():
    t = tok(pad=src("<|endoftext|>", 7), eos=src("<eos>", 3, "special_tokens_map.json"),
            token_ids={"<|endoftext|>": 0, "<eos>": 0})
    assert run(check_pad_equals_eos, t) == [
        Hit(message="pad_token '<|endoftext|>' is the eos_token '<eos>' (id 0): masking padding by id masks every "
                    "EOS label too",
            evidence={"token_id": 0}, location=at(src("", 7)),
            related=(Related(location=Location(path="special_tokens_map.json", span=Span(3, 0, 3, 0)),
                             message="eos_token"),))]


def test_pad_unlike_eos_is_quiet_with_ids_unknown_or_different():
    assert run(check_pad_equals_eos, tok(pad=src("<pad>"), eos=src("</s>"))) == []
    assert run(check_pad_equals_eos, tok(pad=src("<pad>"), eos=src("</s>"), token_ids={"<pad>": 0, "</s>": 2})) == []
    assert run(check_pad_equals_eos, tok(pad=src("<pad>"), eos=src("</s>"), token_ids={"</s>": 2})) == []


def test_pad_equals_eos_needs_both():
    assert run(check_pad_equals_eos, tok(eos=src("</s>"))) == []
    assert run(check_pad_equals_eos, tok(pad=src("</s>"))) == []


# --- TP-TOK-NO-CHAT-TEMPLATE --------------------------------------------------------------------

def test_no_chat_template_only_with_conversational_data():
    reason = "no conversational dataset given with the tokenizer"
    assert skip(check_no_template, tok(), TokenizerContext()) == reason
    assert skip(check_no_template, tok(), TokenizerContext(conversational=False)) == reason
    assert run(check_no_template, tok(present=("tokenizer.json", "x")), TokenizerContext(conversational=True)) == [
        Hit(message="the dataset holds conversations but the tokenizer has no chat_template (tokenizer_config.json, "
                    "chat_template.jinja)", evidence={"files": 2}, location=top("tokenizer.json"))]
    assert run(check_no_template, tok(chat_template=src(CHATML)), TokenizerContext(conversational=True)) == []


# --- TP-TOK-TEMPLATE-NO-EOS ---------------------------------------------------------------------

def stand_in(monkeypatch: pytest.MonkeyPatch, result: Any) -> list[TokenizerFiles]:
    """Stands in for the sandboxed render: returns `result` (or raises it)."""
    seen: list[TokenizerFiles] = []

    def assistant_end(t: TokenizerFiles) -> Any:
        seen.append(t)
        if isinstance(result, Exception):
            raise result
        return result
    monkeypatch.setattr(rules, "assistant_end", assistant_end)
    return seen


def end(tail: str, marker: str | None = None) -> ct.AssistantEnd:
    return ct.AssistantEnd(tail=tail, marker=marker, system=False)


def no_eos_hit(t: TokenizerFiles, shown: str, markers: int, eos: str | None = "<|im_end|>", extra: str = "") -> Hit:
    assert t.chat_template is not None
    return Hit(message=f"the chat template ends the assistant's turn with {shown!r}, without the eos_token {eos!r} or "
                       f"an end-of-turn token ({markers} candidate marker(s) looked for): the model is never trained "
                       f"to stop{extra}",
               evidence={"tail": shown, "markers": markers, "rendered": True,
                         "template_chars": len(t.chat_template.value)},
               location=at(t.chat_template))


def test_template_without_an_end_marker_rendered_for_real():
    t = tok(eos=src("<|im_end|>"), chat_template=src(OPEN_ENDED, 5),
            added_tokens=((5, "<|eot_id|>", src("<|eot_id|>", 9, TJ)), (6, "<tool>", src("<tool>", 10, TJ))))
    assert run(check_template_eos, t, TokenizerContext(conversational=True)) == [no_eos_hit(t, "\n", 2)]
    # Judged alone (no dataset said whether it is conversational) as well.
    assert run(check_template_eos, t) == [no_eos_hit(t, "\n", 2)]


def test_template_ending_the_assistant_turn_with_the_eos_rendered_for_real_is_quiet():
    t = tok(eos=src("<|im_end|>"), chat_template=src(CHATML, 5))
    assert run(check_template_eos, t) == []


def test_template_tail_of_40_characters_is_shown_whole_and_41_cut(monkeypatch):
    t = tok(eos=None, chat_template=src("{{ messages }}", 3))
    stand_in(monkeypatch, end("x" * 40))
    assert run(check_template_eos, t) == [no_eos_hit(t, "x" * 40, 0, eos=None)]
    stand_in(monkeypatch, end("y" * 41))
    assert run(check_template_eos, t) == [no_eos_hit(t, "y" * 39 + "…", 0, eos=None)]


@pytest.mark.parametrize(("add_eos", "said"), [(True, True), (False, False), ("true", False), (None, False)])
def test_template_no_eos_says_add_eos_token_only_when_it_is_true(monkeypatch, add_eos, said):
    t = tok(eos=src("</s>"), chat_template=src("{{ messages }}", 3),
            add_eos=src(add_eos, 6) if add_eos is not None else None)
    stand_in(monkeypatch, end("\n"))
    extra = (" (add_eos_token is true: only text encoded with special tokens gets an EOS, and "
             "apply_chat_template(tokenize=True) encodes without them)") if said else ""
    assert run(check_template_eos, t) == [no_eos_hit(t, "\n", 1, eos="</s>", extra=extra)]


def test_template_with_a_marker_in_its_tail_is_quiet(monkeypatch):
    stand_in(monkeypatch, end("</s>\n", marker="</s>"))
    assert run(check_template_eos, tok(eos=src("</s>"), chat_template=src("{{ messages }}"))) == []


def test_template_no_eos_skips_without_a_template_or_with_plain_text_data(monkeypatch):
    seen = stand_in(monkeypatch, end("\n"))
    assert skip(check_template_eos, tok()) == "no chat template"
    assert skip(check_template_eos, tok(chat_template=src(OPEN_ENDED)), TokenizerContext(conversational=False)) == (
        "the datasets given are not conversational: the chat template is not used")
    assert seen == []
    assert QUIET_SKIPS == {"no chat template", "the datasets given are not conversational: the chat template is not "
                           "used", "disabled by configuration"}


@pytest.mark.parametrize("error", [ct.TemplateRejected("roles must alternate"), ct.TemplateUnusable("no compile")])
def test_a_template_that_cannot_render_the_exchange_is_skipped_with_why(monkeypatch, error):
    stand_in(monkeypatch, error)
    assert skip(check_template_eos, tok(chat_template=src(OPEN_ENDED))) == (
        f"the chat template could not render a user/assistant exchange: {error}")


MISSING = "jinja2 is not installed"


@pytest.mark.parametrize("text", ["{{ m.content }}{{ eos_token }}", "{{ m.content }}<|eot_id|>",
                                  "{{ m.content }}<|im_end|>"])
def test_without_jinja2_a_template_writing_a_marker_anywhere_is_not_judged(monkeypatch, text):
    stand_in(monkeypatch, ct.TemplateUnavailable(MISSING))
    t = tok(eos=src("<|im_end|>"), chat_template=src(text),
            added_tokens=((5, "<|eot_id|>", src("<|eot_id|>", 9, TJ)),))
    assert skip(check_template_eos, t) == (f"{MISSING}; the template writes an end marker somewhere, but whether the "
                                           "assistant turn ends with one needs the template rendered")


def test_without_jinja2_a_template_writing_no_marker_anywhere_is_flagged_from_its_text(monkeypatch):
    stand_in(monkeypatch, ct.TemplateUnavailable(MISSING))
    t = tok(eos=src("<|im_end|>"), chat_template=src(OPEN_ENDED, 8),
            added_tokens=((5, "<|eot_id|>", src("<|eot_id|>", 9, TJ)),))
    assert run(check_template_eos, t) == [
        Hit(message="the chat template writes no eos_token and no end-of-turn token anywhere (2 candidate marker(s) "
                    f"looked for; read as text: {MISSING})",
            evidence={"markers": 2, "rendered": False, "template_chars": len(OPEN_ENDED)},
            location=at(src(OPEN_ENDED, 8)))]


def test_a_disabled_template_check_is_no_not_checked_finding(tmp_path):
    folder = tmp_path / "tok"
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"eos_token": "</s>", "pad_token": "<pad>", "chat_template": "{{ raise_exception('no') }}"}))
    judged = judge_tokenizer(folder, Config(ignore=frozenset({TEMPLATE_NO_EOS.id})))
    assert [f.id for f in judged.findings] == []
    judged = judge_tokenizer(folder, Config(select=frozenset({TEMPLATE_NO_EOS.id})))
    assert [(f.id, f.message) for f in judged.findings] == [
        ("TP-NOT-CHECKED", "TP-TOK-TEMPLATE-NO-EOS not checked: the chat template could not render a user/assistant "
                           "exchange: no")]


# --- TP-TOK-DOUBLE-BOS and TP-TOK-DOUBLE-BOS-IF-REENCODED ----------------------------------------

ENCODES = Sourced(value="tokenizer(text)", path="C:\\runs\\scripts\\train.py", line=41)
REENCODES = TokenizerContext(run=RunSettings(encodes_rendered=ENCODES))
TPL_BOS = src("{{ bos_token }}" + CHATML, 5)
ADD_BOS = src(True, 7)
POST = src("<s>", 120, TJ)


def double_hit(how: str, adder: Sourced, bos: str | None = "<s>", tpl: Sourced = TPL_BOS) -> Hit:
    return Hit(message=f"the chat template writes the BOS {bos!r}, {how}, and train.py line 42 encodes rendered text "
                       "with special tokens: every example starts with two",
               evidence={"bos": bos, "script_line": 42}, location=at(tpl),
               related=(Related(location=at(adder), message="the tokenizer adds BOS here"),
                        Related(location=at(ENCODES), message="tokenizer(text)")))


def if_hit(how: str, adder: Sourced, bos: str | None = "<s>", tpl: Sourced = TPL_BOS) -> Hit:
    return Hit(message=f"the chat template writes the BOS {bos!r} and {how}: text rendered with "
                       "apply_chat_template(tokenize=False) and encoded again with special tokens would start with "
                       "two (apply_chat_template(tokenize=True) or add_special_tokens=False gives one)",
               evidence={"bos": bos}, location=at(tpl),
               related=(Related(location=at(adder), message="the tokenizer adds BOS here"),))


ADDS = "add_bos_token is true"
PREPENDS = "tokenizer.json's post-processor prepends it"


def test_double_bos_by_add_bos_token_with_a_script_that_reencodes():
    t = tok(bos=src("<s>"), add_bos=ADD_BOS, post_processor_bos=POST, chat_template=TPL_BOS)
    assert run(check_double_bos, t, REENCODES) == [double_hit(ADDS, ADD_BOS)]
    assert run(check_double_bos_if, t, REENCODES) == []


def test_double_bos_by_the_post_processor_and_the_bos_written_as_text():
    tpl = src("<s>" + CHATML, 2)
    t = tok(bos=src("<s>"), add_bos=src(False, 7), post_processor_bos=POST, chat_template=tpl)
    assert run(check_double_bos, t, REENCODES) == [double_hit(PREPENDS, POST, tpl=tpl)]
    assert run(check_double_bos_if, t) == [if_hit(PREPENDS, POST, tpl=tpl)]


def test_double_bos_by_the_post_processor_when_no_bos_is_declared():
    t = tok(post_processor_bos=POST, chat_template=TPL_BOS)
    assert run(check_double_bos, t, REENCODES) == [double_hit(PREPENDS, POST, bos=None)]
    assert run(check_double_bos_if, t, TokenizerContext(run=RunSettings())) == [if_hit(PREPENDS, POST, bos=None)]


def test_no_double_bos_when_the_post_processor_prepends_another_token():
    t = tok(bos=src("<s>"), post_processor_bos=src("<|begin_of_text|>", 3, TJ), chat_template=TPL_BOS)
    assert run(check_double_bos, t, REENCODES) == []
    assert run(check_double_bos_if, t) == []


@pytest.mark.parametrize("bos", [None, ""])
def test_no_double_bos_when_the_template_writes_no_bos(bos):
    t = tok(bos=src(bos) if bos is not None else None, add_bos=ADD_BOS, post_processor_bos=POST,
            chat_template=src(CHATML))
    assert run(check_double_bos, t, REENCODES) == []
    assert run(check_double_bos_if, t) == []


def test_no_double_bos_when_nothing_adds_one():
    t = tok(bos=src("<s>"), add_bos=src("true", 7), chat_template=TPL_BOS)
    assert run(check_double_bos, t, REENCODES) == []
    assert run(check_double_bos_if, t) == []


def test_double_bos_needs_the_script_and_the_if_rule_stands_down_for_it():
    t = tok(bos=src("<s>"), add_bos=ADD_BOS, chat_template=TPL_BOS)
    assert run(check_double_bos, t) == []
    assert run(check_double_bos, t, TokenizerContext(run=RunSettings())) == []
    assert run(check_double_bos_if, t) == [if_hit(ADDS, ADD_BOS)]
    assert run(check_double_bos_if, t, TokenizerContext(run=RunSettings(args=src("SFTConfig")))) == [
        if_hit(ADDS, ADD_BOS)]


def test_a_script_path_without_a_folder_is_named_as_it_is():
    bare = Sourced(value="tokenizer(text)", path="train.py", line=0)
    t = tok(bos=src("<s>"), add_bos=ADD_BOS, chat_template=TPL_BOS)
    (hit,) = run(check_double_bos, t, TokenizerContext(run=RunSettings(encodes_rendered=bare)))
    assert "and train.py line 1 encodes" in hit.message and hit.evidence["script_line"] == 1


def test_a_posix_script_path_is_named_by_its_file():
    posix = Sourced(value="tokenizer(text)", path="runs/scripts/train.py", line=41)
    t = tok(bos=src("<s>"), add_bos=ADD_BOS, chat_template=TPL_BOS)
    (hit,) = run(check_double_bos, t, TokenizerContext(run=RunSettings(encodes_rendered=posix)))
    assert "and train.py line 42 encodes" in hit.message
    assert hit.related[1] == Related(location=at(posix), message="tokenizer(text)")


def test_double_bos_skips_without_a_template():
    assert skip(check_double_bos, tok(add_bos=ADD_BOS), REENCODES) == "no chat template"
    assert skip(check_double_bos_if, tok(add_bos=ADD_BOS)) == "no chat template"


# --- TP-TOK-MAX-LENGTH-SENTINEL and TP-TOK-MAX-LENGTH-UNSET ---------------------------------------

ARGS = src("SFTConfig", 0, "out/training_args.bin")
LIMITS = SentinelLimits()


def sentinel_hit(value: float, said: str, line: int = 4) -> Hit:
    return Hit(message=f"model_max_length is {value:.3g} (>= 1e+29): the tokenizer does not know the context "
                       f"length, so truncation needs an explicit max_length ({said})",
               evidence={"model_max_length": float(value)}, location=at(src(0, line)))


def test_sentinel_at_the_limit_fires_and_just_under_it_is_quiet():
    assert LIMITS.sentinel_at == 1e29
    no_args = "no training arguments in the folder say whether the run sets one"
    assert run(check_sentinel, tok(model_max_length=src(10 ** 29, 4)), limits=LIMITS) == [sentinel_hit(1e29, no_args)]
    assert run(check_sentinel, tok(model_max_length=src(0.99e29, 4)), limits=LIMITS) == []
    assert run(check_unset, tok(model_max_length=src(0.99e29, 4)), limits=LIMITS) == []


@pytest.mark.parametrize(("run_settings", "said"), [
    (RunSettings(), "no training arguments in the folder say whether the run sets one"),
    (RunSettings(args=ARGS), "SFTConfig in training_args.bin has no max-length field (the script tokenizes)"),
    (RunSettings(args=ARGS, max_length=(("max_length", 2048), ("max_seq_length", None))),
     "SFTConfig in training_args.bin sets max_length=2048, max_seq_length=None"),
    (RunSettings(max_length=(("max_length", 1024),)), "no training arguments in the folder say whether the run sets one"),
])
def test_sentinel_says_what_the_run_arguments_set(run_settings, said):
    t = tok(model_max_length=src(SENTINEL, 4))
    assert run(check_sentinel, t, TokenizerContext(run=run_settings), LIMITS) == [sentinel_hit(1e30, said)]


def test_sentinel_stands_down_when_the_unset_rule_fires():
    t = tok(model_max_length=src(SENTINEL, 4))
    unset = TokenizerContext(run=RunSettings(args=ARGS, max_length=(("max_length", None), ("max_seq_length", None))))
    assert run(check_sentinel, t, unset, LIMITS) == []
    assert run(check_unset, t, unset, LIMITS) == [
        Hit(message="model_max_length is 1e+30 and SFTConfig sets max_length=None, max_seq_length=None: nothing "
                    "bounds a sequence's length",
            evidence={"model_max_length": 1e30, "fields": 2}, location=at(src(0, 4)),
            related=(Related(location=at(ARGS), message="SFTConfig: max_length=None, max_seq_length=None"),))]


def test_unset_of_a_float_sentinel_with_one_field():
    t = tok(model_max_length=src(1e30, 6))
    ctx = TokenizerContext(run=RunSettings(args=ARGS, max_length=(("max_seq_length", None),)))
    assert run(check_unset, t, ctx, LIMITS) == [
        Hit(message="model_max_length is 1e+30 and SFTConfig sets max_seq_length=None: nothing bounds a sequence's "
                    "length",
            evidence={"model_max_length": 1e30, "fields": 1}, location=at(src(0, 6)),
            related=(Related(location=at(ARGS), message="SFTConfig: max_seq_length=None"),))]


def test_unset_is_quiet_when_any_field_is_set():
    ctx = TokenizerContext(run=RunSettings(args=ARGS, max_length=(("max_length", None), ("max_seq_length", 512))))
    assert run(check_unset, tok(model_max_length=src(SENTINEL, 4)), ctx, LIMITS) == []


def test_unset_skips_when_the_run_is_not_known():
    t = tok(model_max_length=src(SENTINEL, 4))
    nothing = "no training_args.bin in the folder: whether the run sets a max length is not known"
    assert skip(check_unset, t, TokenizerContext(), LIMITS) == nothing
    assert skip(check_unset, t, TokenizerContext(run=RunSettings(max_length=(("max_length", None),))), LIMITS) == (
        nothing)
    assert skip(check_unset, t, TokenizerContext(run=RunSettings(args=ARGS)), LIMITS) == (
        "SFTConfig has no max-length field")


@pytest.mark.parametrize("value", [None, True, "1e30", [1]])
def test_sentinel_rules_skip_without_a_numeric_model_max_length(value):
    t = tok(model_max_length=src(value, 4) if value is not None else None)
    assert skip(check_sentinel, t, limits=LIMITS) == "no model_max_length in tokenizer_config.json"
    assert skip(check_unset, t, limits=LIMITS) == "no model_max_length in tokenizer_config.json"


# --- TP-TOK-ADDED-TOKENS-BEYOND-VOCAB ----------------------------------------------------------

VOCAB = src(1000, 12, f"{FOLDER}/config.json")


def added(*ids: int) -> tuple[tuple[int, str, Sourced], ...]:
    return tuple((i, f"<t{i}>", src(f"<t{i}>", 100 + i, TJ)) for i in ids)


def test_added_tokens_beyond_the_vocab_first_and_largest():
    t = tok(vocab_size=VOCAB, added_tokens=added(5, 1000, 999, 1001, 1004))
    assert run(check_beyond_vocab, t) == [
        Hit(message="3 added token(s) have ids >= vocab_size 1000; first '<t1000>' id 1000, largest id 1004",
            evidence={"vocab_size": 1000, "beyond": 3, "first_id": 1000, "max_id": 1004},
            location=at(src(0, 1100, TJ)), related=(Related(location=at(VOCAB), message="vocab_size"),))]


def test_added_tokens_just_inside_the_vocab_are_quiet():
    assert run(check_beyond_vocab, tok(vocab_size=VOCAB, added_tokens=added(999, 0))) == []


def test_added_tokens_skip_with_their_reasons():
    assert skip(check_beyond_vocab, tok(added_tokens=added(5))) == (
        "no config.json with vocab_size in the tokenizer folder")
    assert skip(check_beyond_vocab, tok(vocab_size=VOCAB)) == "no added tokens"


# --- the registry entries --------------------------------------------------------------------

def test_registry_entries():
    assert all(BY_ID[r.id] is r for r in TOKENIZER_RULES)
    assert [(r.id, r.name, r.level, r.family, r.origin, r.limits) for r in TOKENIZER_RULES] == [
        ("TP-PRE-MISSING-EOS-TOKEN", "missing-eos-token", Level.FAIL, TOKENIZER, "trainproof", NoLimits),
        ("TP-PRE-MISSING-PAD-TOKEN", "missing-pad-token", Level.WARN, TOKENIZER, "trainproof", NoLimits),
        ("TP-PRE-PAD-EQUALS-EOS", "pad-equals-eos", Level.WARN, TOKENIZER, "trainproof", NoLimits),
        ("TP-TOK-NO-CHAT-TEMPLATE", "no-chat-template", Level.FAIL, TOKENIZER, "new", NoLimits),
        ("TP-TOK-TEMPLATE-NO-EOS", "template-no-eos", Level.FAIL, TOKENIZER, "new", NoLimits),
        ("TP-TOK-DOUBLE-BOS", "double-bos", Level.WARN, TOKENIZER, "new", NoLimits),
        ("TP-TOK-DOUBLE-BOS-IF-REENCODED", "double-bos-if-reencoded", Level.INFO, TOKENIZER, "new", NoLimits),
        ("TP-TOK-MAX-LENGTH-SENTINEL", "max-length-sentinel", Level.INFO, TOKENIZER, "new", SentinelLimits),
        ("TP-TOK-MAX-LENGTH-UNSET", "max-length-unset", Level.WARN, TOKENIZER, "new", SentinelLimits),
        ("TP-TOK-ADDED-TOKENS-BEYOND-VOCAB", "added-tokens-beyond-vocab", Level.FAIL, TOKENIZER, "new", NoLimits)]
    assert TOKENIZER_RULES == (MISSING_EOS, MISSING_PAD, PAD_EQUALS_EOS, NO_CHAT_TEMPLATE, TEMPLATE_NO_EOS, DOUBLE_BOS,
                               DOUBLE_BOS_IF, MAX_LENGTH_SENTINEL, MAX_LENGTH_UNSET, ADDED_BEYOND_VOCAB)
    assert TOKENIZER.kind == "tokenizer"
    assert TokenizerContext() == TokenizerContext(conversational=None, run=None)
