"""The bundle rules (rules/bundle.py) on facts built here, field by field: every finding
asserted whole (message, evidence, location, related places and their messages), every
skip by its exact reason, each limit met exactly and passed by one, several items in one
input (a rule that stopped at the first would miss the second), and each place a value
may come from (generation_config.json or config.json, the folder's weights or the
adapter's, the base weights or the base config).

The facts are what readers/bundle.read_bundle returns; building them directly proves the
rule and nothing in front of it (tests/test_bundle.py proves the folders the real writers
make, read end to end). A few cases at the end read a folder written here, to show the
facts built by hand are the reader's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import Hit, Location, Related, Span
from trainproof_lsp.judge.base import run_rules
from trainproof_lsp.readers.bundle import (Adapter, BundleFacts, LoraB, RunSettings, TemplateEnd, Tensor, Weights,
                                           read_bundle)
from trainproof_lsp.readers.tokenizer import Sourced, TokenizerFiles
from trainproof_lsp.rules import bundle as rules
from trainproof_lsp.rules.base import NoLimits
from trainproof_lsp.rules.bundle import (INDEX, LORA_ZERO, NEW_TOKENS, NO_HEAD, RANK, SPECIAL_IDS, STOP_TOKEN,
                                         TARGETS_NONE, TARGETS_PARTIAL, VOCAB, ZERO_ELEMENTS, BundleContext,
                                         embedding)

CFG = "/m/config.json"
GEN = "/m/generation_config.json"
TOKC = "/m/tokenizer_config.json"
TOKJ = "/m/tokenizer.json"
TMPL = "/m/chat_template.jinja"
MODEL = "/m/model.safetensors"
STATE = "/m/trainer_state.json"
AD = "/a/adapter_config.json"
ADW = "/a/adapter_model.safetensors"
BASE = "/b/model.safetensors"
BASE_CFG = "/b/config.json"
IDX = "/m/model.safetensors.index.json"
SHARD1 = "/m/model-00001-of-00002.safetensors"
SHARD2 = "/m/model-00002-of-00002.safetensors"
UNREAD = "could not be read (see the NOT-CHECKED finding)"


def src(value: Any, path: str = CFG, line: int = 0) -> Sourced:
    return Sourced(value=value, path=path, line=line)


def at(path: str, line: int) -> Location:
    return Location(path=path, span=Span(line, 0, line, 0))


def top(path: str) -> Location:
    return Location(path=path, span=Span(0, 0, 0, 0))


def ten(name: str, shape: tuple[int, ...], path: str = MODEL, offset: int = 100) -> Tensor:
    return Tensor(name=name, dtype="float32", shape=shape, path=path, byte_offset=offset)


def weights(*tensors: Tensor, files: tuple[str, ...] | None = None, index: str | None = None,
            index_map: dict[str, Sourced] | None = None) -> Weights:
    return Weights(files=files if files is not None else tuple(dict.fromkeys(t.path for t in tensors)),
                   tensors=tensors, index=index, index_map=index_map or {})


def facts(**kw: Any) -> BundleFacts:
    return BundleFacts(folder="/m", files=("config.json",), **kw)


def hits(rule: Any, b: BundleFacts) -> list[Hit]:
    return list(rule.check(b, NoLimits(), BundleContext()))


def skipped(rule: Any, b: BundleFacts) -> str:
    """The rule's reason for standing down, as the report's check carries it."""
    findings, (check,) = run_rules([rule], b, BundleContext(), Config())
    assert findings == [] and check.group == rule.id and not check.ran
    return check.reason


def ran(rule: Any, b: BundleFacts) -> bool:
    _, (check,) = run_rules([rule], b, BundleContext(), Config())
    return check.ran and check.reason == ""


# --- the module's helpers --------------------------------------------------------------------------------

def test_an_id_setting_is_read_as_a_tuple_of_ints():
    assert rules._ids(True) == () and rules._ids(False) == ()
    assert rules._ids(0) == (0,) and rules._ids(2) == (2,)
    assert rules._ids([2, True, "3", 3.0, None, 5]) == (2, 5)
    assert rules._ids([]) == () and rules._ids("2") == () and rules._ids(None) == () and rules._ids({"a": 1}) == ()


def test_ids_are_shown_alone_or_as_a_list():
    assert rules._shown((7,)) == "7"
    assert rules._shown((1, 2)) == "[1, 2]" and rules._shown((1, 2, 3)) == "[1, 2, 3]" and rules._shown(()) == "[]"


def test_a_file_is_named_by_its_last_part_whatever_the_separator():
    assert rules._file("/a/b/c.json") == "c.json"
    assert rules._file("a\\b\\c.json") == "c.json"
    assert rules._file("C:\\x/y\\z.bin") == "z.bin"
    assert rules._file("c.json") == "c.json"


def test_places_are_a_line_of_a_text_file_or_a_byte_of_a_tensor():
    assert rules._at(src(1, "/x/c.json", 7)) == Location(path="/x/c.json", span=Span(7, 0, 7, 0))
    assert rules._tensor_at(ten("w", (2, 2), "/x/m.safetensors", 48)) == Location(path="/x/m.safetensors",
                                                                                  byte_offset=48)


def test_the_embedding_is_the_first_two_dimensional_input_embedding():
    assert embedding(None) is None
    flat = ten("model.embed_tokens.weight", (64,))
    wte = ten("transformer.wte.weight", (64, 8))
    assert embedding(weights(flat, wte)) is wte
    assert embedding(weights(ten("model.embed_tokens.weight", (64, 8, 2)))) is None
    assert embedding(weights(ten("lm_head.weight", (64, 8)))) is None
    for name in ("shared.weight", "gpt_neox.embed_in.weight", "h.word_embeddings.weight", "tok_embeddings.weight",
                 "base_model.model.model.embed_tokens.modules_to_save.default.weight",
                 "base_model.model.model.embed_tokens.base_layer.weight"):
        t = ten(name, (64, 8))
        assert embedding(weights(t)) is t, name


def test_a_module_name_is_matched_as_peft_matches_it():
    assert rules._matches("model.layers.0.q_proj", r".*q_proj")
    assert not rules._matches("model.layers.0.q_proj_x", r".*q_proj")
    assert not rules._matches("x.q_proj", r"q_proj")  # a regex matches the whole name
    assert not rules._matches("x.q_proj", "(")  # an invalid regex matches nothing
    assert rules._matches("a.q_proj", ["q_proj"]) and rules._matches("q_proj", ["q_proj"])
    assert not rules._matches("aq_proj", ["q_proj"]) and not rules._matches("a.q_proj", ["x"])
    assert rules._matches("a.q_proj", [1, "q_proj"]) and not rules._matches("a.q_proj", [1])


def test_a_layer_number_is_the_first_dotted_number():
    assert rules._layer("model.layers.12.q_proj") == 12
    assert rules._layer("a.1.b.2.c") == 1 and rules._layer("layers.0.q") == 0
    assert rules._layer("model.q_proj") is None and rules._layer("model.layers.3") is None


def test_modules_are_the_two_dimensional_weights_sorted():
    w = weights(ten("z.q_proj.weight", (2, 2)), ten("a.norm.weight", (2,)), ten("b.k_proj.bias", (2, 2)),
                ten("b.k_proj.weight", (2, 2)))
    assert rules._modules(w) == ["b.k_proj", "z.q_proj"]


def test_a_module_rank_comes_from_its_rank_pattern_entry_else_r():
    m = "model.layers.0.self_attn.q_proj"
    assert rules._expected_rank(m, 4, None) == 4 and rules._expected_rank(m, 4, [("q_proj", 8)]) == 4
    assert rules._expected_rank(m, 4, {"q_proj": 8}) == 8  # a name suffix
    assert rules._expected_rank(m, 4, {m: 8}) == 8  # the whole name
    assert rules._expected_rank(m, 4, {r"model\.layers\.\d\..*": 8}) == 8  # a regex
    assert rules._expected_rank(m, 4, {"_proj": 8, "proj": 8, "(": 8}) == 4  # no suffix at a dot, a bad regex
    assert rules._expected_rank("model.xq_proj", 4, {"q_proj": 8}) == 4
    # entries that cannot be a rank are passed over, and the next one still read
    assert rules._expected_rank(m, 4, {1: 2, "q_proj": "8", "k_proj": 3, "self_attn.q_proj": 6, "q": 9}) == 6
    assert rules._valid("a+") and not rules._valid("(")


def test_the_module_exports_what_the_judge_uses():
    ns: dict[str, Any] = {}
    exec("from trainproof_lsp.rules.bundle import *", ns)
    assert {"BUNDLE", "BundleContext", "RULES", "embedding"} <= set(ns)
    assert rules.BUNDLE.kind == "bundle"


# --- TP-BUNDLE-STOP-TOKEN -----------------------------------------------------------------------------------

def tokenizer(**kw: Any) -> TokenizerFiles:
    base: dict[str, Any] = {"chat_template": src("{{ x }}", TOKC, 5),
                            "token_ids": {"<s>": 60, "</s>": 61, "<pad>": 62, "<|eot|>": 63}}
    return TokenizerFiles(folder="/m", present=("tokenizer.json", "tokenizer_config.json"), **{**base, **kw})


def stop_facts(*, gen: Any = 61, cfg: Any = 61, marker: str | None = "<|eot|>", **kw: Any) -> BundleFacts:
    parts: dict[str, Any] = {"tokenizer": tokenizer(),
                             "template_end": TemplateEnd(marker=marker, tail="x", where=src("t", TMPL, 3)),
                             "generation": {} if gen is None else {"eos_token_id": src(gen, GEN, 2)},
                             "config": {} if cfg is None else {"eos_token_id": src(cfg, CFG, 7)}}
    return facts(**{**parts, **kw})


def test_stop_token_missing_from_the_generation_stop_ids_is_found_whole():
    assert hits(STOP_TOKEN, stop_facts(gen=[61, 62])) == [Hit(
        message="the chat template ends the assistant's turn with '<|eot|>' (id 63), but generation_config.json "
                "stops generation on eos_token_id [61, 62]: generation runs on past the end of the answer",
        evidence={"marker": "<|eot|>", "marker_id": 63, "stop_ids": "[61, 62]", "stop_file": "generation_config.json"},
        location=at(TMPL, 3), related=(Related(location=at(GEN, 2), message="generation stops on [61, 62] here"),))]


def test_stop_ids_come_from_config_json_when_the_generation_config_sets_none():
    for gen in (None, [], [True], "63"):
        (hit,) = hits(STOP_TOKEN, stop_facts(gen=gen, cfg=61))
        assert hit.message == ("the chat template ends the assistant's turn with '<|eot|>' (id 63), but config.json "
                               "stops generation on eos_token_id 61: generation runs on past the end of the answer")
        assert hit.evidence["stop_file"] == "config.json" and hit.evidence["stop_ids"] == "61"
        assert hit.related == (Related(location=at(CFG, 7), message="generation stops on 61 here"),)
    assert hits(STOP_TOKEN, stop_facts(gen=None, cfg=[61, 63])) == []
    # the generation config, when it says, is the one generation stops on
    assert hits(STOP_TOKEN, stop_facts(gen=[61, 63], cfg=61)) == []
    assert len(hits(STOP_TOKEN, stop_facts(gen=61, cfg=[61, 63]))) == 1


def test_stop_token_skips_with_each_reason():
    assert skipped(STOP_TOKEN, stop_facts(tokenizer=None)) == "no tokenizer with a chat template in the folder"
    assert skipped(STOP_TOKEN, stop_facts(tokenizer=tokenizer(chat_template=None))) == \
        "no tokenizer with a chat template in the folder"
    assert skipped(STOP_TOKEN, stop_facts(template_end=None, template_note="the chat template could not be "
                                          "rendered: boom")) == "the chat template could not be rendered: boom"
    assert skipped(STOP_TOKEN, stop_facts(template_end=None)) == "the chat template's end of turn is not known"
    assert skipped(STOP_TOKEN, stop_facts(marker=None)) == \
        "the assistant turn ends with no end-of-turn token (TP-TOK-TEMPLATE-NO-EOS judges that)"
    assert skipped(STOP_TOKEN, stop_facts(gen=None, cfg=None)) == \
        "no eos_token_id in generation_config.json or config.json"
    assert skipped(STOP_TOKEN, stop_facts(gen=[], cfg=False)) == \
        "no eos_token_id in generation_config.json or config.json"
    assert skipped(STOP_TOKEN, stop_facts(marker="<|end|>")) == "the id of '<|end|>' is not in the tokenizer files"


def test_a_settings_file_that_could_not_be_read_stands_the_stop_token_down():
    assert skipped(STOP_TOKEN, stop_facts(unread=("generation_config.json",))) == \
        f"generation_config.json {UNREAD}"
    assert skipped(STOP_TOKEN, stop_facts(unread=("config.json",))) == f"config.json {UNREAD}"
    assert skipped(STOP_TOKEN, stop_facts(unread=("config.json", "generation_config.json"))) == \
        f"generation_config.json, config.json {UNREAD}"
    assert len(hits(STOP_TOKEN, stop_facts(unread=("tokenizer.json",)))) == 1


# --- TP-BUNDLE-SPECIAL-ID-MISMATCH ---------------------------------------------------------------------------

def ids_facts(*, gen: dict[str, Any] | None = None, cfg: dict[str, Any] | None = None, eos: str | None = "</s>",
              bos: str | None = "<s>", pad: str | None = "<pad>", **kw: Any) -> BundleFacts:
    tok = tokenizer(eos=None if eos is None else src(eos, TOKC, 2), bos=None if bos is None else src(bos, TOKC, 1),
                    pad=None if pad is None else src(pad, TOKC, 3))
    line = iter(range(10, 40))
    return facts(**{"tokenizer": tok,
                    "generation": {k: src(v, GEN, next(line)) for k, v in (gen or {}).items()},
                    "config": {k: src(v, CFG, next(line)) for k, v in (cfg or {}).items()}, **kw})


def test_each_special_token_differing_from_the_configs_is_found_whole():
    b = ids_facts(gen={"eos_token_id": [2, 3]}, cfg={"eos_token_id": 61, "bos_token_id": 1, "pad_token_id": 0})
    assert hits(SPECIAL_IDS, b) == [
        Hit(message="config.json eos_token_id 61 shares no id with generation_config.json's [2, 3]",
            evidence={"token": "eos", "config": "61", "generation_config": "[2, 3]"},
            location=at(CFG, 11), related=(Related(location=at(GEN, 10), message="eos_token_id [2, 3]"),)),
        Hit(message="the tokenizer's eos_token '</s>' is id 61, but generation_config.json says eos_token_id [2, 3]",
            evidence={"token": "eos", "tokenizer_id": 61, "model_ids": "[2, 3]", "model_file": "generation_config.json"},
            location=at(TOKC, 2), related=(Related(location=at(GEN, 10), message="eos_token_id [2, 3]"),)),
        Hit(message="the tokenizer's bos_token '<s>' is id 60, but config.json says bos_token_id 1",
            evidence={"token": "bos", "tokenizer_id": 60, "model_ids": "1", "model_file": "config.json"},
            location=at(TOKC, 1), related=(Related(location=at(CFG, 12), message="bos_token_id 1"),)),
        Hit(message="the tokenizer's pad_token '<pad>' is id 62, but config.json says pad_token_id 0",
            evidence={"token": "pad", "tokenizer_id": 62, "model_ids": "0", "model_file": "config.json"},
            location=at(TOKC, 3), related=(Related(location=at(CFG, 13), message="pad_token_id 0"),))]


def test_eos_lists_sharing_an_id_are_quiet():
    assert hits(SPECIAL_IDS, ids_facts(gen={"eos_token_id": [2, 61]}, cfg={"eos_token_id": [61, 5]})) == []


def test_a_token_passed_over_does_not_stop_the_next_from_being_judged():
    pad_hit = ("pad", 62, "0")
    cases = [
        ids_facts(cfg={"bos_token_id": 60, "pad_token_id": 0}, eos=None),  # no eos token declared
        ids_facts(cfg={"eos_token_id": 5, "bos_token_id": 60, "pad_token_id": 0}, eos="<none>"),  # id unknown
        ids_facts(cfg={"eos_token_id": [61], "bos_token_id": 60, "pad_token_id": 0}),  # eos agrees
        ids_facts(cfg={"eos_token_id": [], "bos_token_id": None, "pad_token_id": 0}),  # ids unset
    ]
    for b in cases:
        assert [(h.evidence["token"], h.evidence["tokenizer_id"], h.evidence["model_ids"]) for h in
                hits(SPECIAL_IDS, b)] == [pad_hit]


def test_a_model_id_comes_from_the_generation_config_first_then_config_json():
    b = ids_facts(gen={"pad_token_id": None, "bos_token_id": []}, cfg={"pad_token_id": 1, "bos_token_id": 2})
    assert [(h.evidence["model_file"], h.related[0].location) for h in hits(SPECIAL_IDS, b)] == [
        ("config.json", at(CFG, 13)), ("config.json", at(CFG, 12))]
    b = ids_facts(gen={"pad_token_id": 62}, cfg={"pad_token_id": 1})
    assert hits(SPECIAL_IDS, b) == [] and ran(SPECIAL_IDS, b)


def test_special_ids_skip_with_each_reason():
    assert skipped(SPECIAL_IDS, ids_facts()) == "no config.json or generation_config.json in the folder"
    assert skipped(SPECIAL_IDS, ids_facts(cfg={"eos_token_id": 61}, unread=("generation_config.json",))) == \
        f"generation_config.json {UNREAD}"
    assert skipped(SPECIAL_IDS, ids_facts(gen={"eos_token_id": 61}, unread=("config.json",))) == \
        f"config.json {UNREAD}"
    nothing = "no special token id is set in two of the files"
    assert skipped(SPECIAL_IDS, ids_facts(cfg={"vocab_size": 64})) == nothing
    assert skipped(SPECIAL_IDS, ids_facts(cfg={"eos_token_id": 61}, eos="<none>", bos=None, pad=None)) == nothing
    # eos ids in one file only, or an empty list in one of them: nothing compared
    assert skipped(SPECIAL_IDS, ids_facts(cfg={"eos_token_id": []}, gen={"eos_token_id": [2]}, tokenizer=None)) == \
        nothing
    assert skipped(SPECIAL_IDS, ids_facts(cfg={"eos_token_id": [2]}, gen={"eos_token_id": None}, tokenizer=None)) == \
        nothing


def test_special_ids_judge_from_one_settings_file_or_without_a_tokenizer():
    assert ran(SPECIAL_IDS, ids_facts(cfg={"eos_token_id": 61}))  # config.json alone, the tokenizer agrees
    assert ran(SPECIAL_IDS, ids_facts(gen={"eos_token_id": 61}))  # the generation config alone
    b = ids_facts(cfg={"eos_token_id": 2}, gen={"eos_token_id": [2]}, tokenizer=None)
    assert hits(SPECIAL_IDS, b) == [] and ran(SPECIAL_IDS, b)
    (hit,) = hits(SPECIAL_IDS, ids_facts(cfg={"eos_token_id": 3}, gen={"eos_token_id": [2]}, tokenizer=None))
    assert hit.evidence == {"token": "eos", "config": "3", "generation_config": "2"}


# --- TP-BUNDLE-VOCAB-BEYOND-EMBEDDINGS -----------------------------------------------------------------------

EMB = ten("model.embed_tokens.weight", (64, 8), MODEL, 128)


def vocab_facts(size: int | None = 66, *, own: Weights | None = None, vocab: Any = 64,
                added: tuple[int, ...] = (), **kw: Any) -> BundleFacts:
    tok = tokenizer(added_tokens=tuple((i, f"<t{i}>", src(f"<t{i}>", TOKJ, 4)) for i in added))
    parts: dict[str, Any] = {"tokenizer_size": None if size is None else src(size, TOKJ, 9), "tokenizer": tok,
                             "weights": own, "config": {} if vocab is None else {"vocab_size": src(vocab, CFG, 6)}}
    return facts(**{**parts, **kw})


def test_tokens_beyond_the_embedding_rows_are_found_whole():
    assert hits(VOCAB, vocab_facts(66, own=weights(ten("model.norm.weight", (8,)), EMB))) == [Hit(
        message="the tokenizer has 66 token ids but the embedding model.embed_tokens.weight in model.safetensors has "
                "64 rows: 2 token(s) have no embedding",
        evidence={"tokenizer_size": 66, "embedding_rows": 64, "beyond": 2}, location=at(TOKJ, 9),
        related=(Related(location=Location(path=MODEL, byte_offset=128), message="model.embed_tokens.weight [64, 8]"),))]


def test_the_embedding_rows_are_the_limit_met_exactly():
    assert hits(VOCAB, vocab_facts(64, own=weights(EMB))) == []
    assert [h.evidence["beyond"] for h in hits(VOCAB, vocab_facts(65, own=weights(EMB)))] == [1]
    # the embedding decides; config.json's smaller vocab_size is not read then
    assert hits(VOCAB, vocab_facts(64, own=weights(EMB), vocab=60)) == []


def test_an_adapter_saved_embedding_is_compared_when_the_folder_has_none():
    emb = ten("base_model.model.model.embed_tokens.modules_to_save.default.weight", (64, 8), ADW, 80)
    ad = Adapter(config_path=AD, settings={}, weights=weights(emb))
    for own in (None, weights(ten("model.norm.weight", (8,)))):
        (hit,) = hits(VOCAB, vocab_facts(66, own=own, adapter=ad, vocab=None))
        assert hit.evidence == {"tokenizer_size": 66, "embedding_rows": 64, "beyond": 2}
        assert f"{emb.name} in adapter_model.safetensors has 64 rows" in hit.message
        assert hit.related == (Related(location=Location(path=ADW, byte_offset=80), message=f"{emb.name} [64, 8]"),)


def test_tokens_beyond_config_vocab_size_are_found_whole_when_no_embedding_is_saved():
    no_weights = Adapter(config_path=AD, settings={})
    for b in (vocab_facts(66), vocab_facts(66, adapter=no_weights), vocab_facts(66, added=(60, 63))):
        assert hits(VOCAB, b) == [Hit(
            message="the tokenizer has 66 token ids but config.json vocab_size is 64",
            evidence={"tokenizer_size": 66, "vocab_size": 64, "beyond": 2}, location=at(TOKJ, 9),
            related=(Related(location=at(CFG, 6), message="vocab_size 64"),))]
    assert hits(VOCAB, vocab_facts(64)) == [] and ran(VOCAB, vocab_facts(64))
    assert [h.evidence["beyond"] for h in hits(VOCAB, vocab_facts(65))] == [1]
    assert [h.evidence["beyond"] for h in hits(VOCAB, vocab_facts(65, tokenizer=None))] == [1]


def test_added_tokens_at_or_past_vocab_size_are_left_to_the_tokenizer_rule():
    assert hits(VOCAB, vocab_facts(66, added=(60, 64))) == []  # an added id equal to vocab_size: past the rows
    assert hits(VOCAB, vocab_facts(66, added=(65,))) == [] and ran(VOCAB, vocab_facts(66, added=(65,)))
    assert len(hits(VOCAB, vocab_facts(66, added=(63,)))) == 1


def test_vocab_skips_with_each_reason():
    assert skipped(VOCAB, vocab_facts(None, own=weights(EMB))) == "no readable tokenizer.json in the folder"
    assert skipped(VOCAB, vocab_facts(66, unread=("config.json",))) == f"config.json {UNREAD}"
    none = "no embedding in the folder's weights and no vocab_size in config.json"
    assert skipped(VOCAB, vocab_facts(66, vocab=None)) == none
    assert skipped(VOCAB, vocab_facts(66, vocab="64")) == none
    # with an embedding, an unreadable config.json is not needed
    assert len(hits(VOCAB, vocab_facts(66, own=weights(EMB), unread=("config.json",)))) == 1


# --- TP-BUNDLE-NEW-TOKENS-NOT-SAVED ---------------------------------------------------------------------------

BASE_EMB = ten("model.embed_tokens.weight", (64, 8), BASE, 200)
LORA_Q = ten("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", (4, 8), ADW, 8)


def new_facts(size: int | None = 66, *, settings: dict[str, Any] | None = None, tensors: tuple[Tensor, ...] = (LORA_Q,),
              base: Weights | None = None, base_vocab: Any = None, **kw: Any) -> BundleFacts:
    line = iter(range(2, 30))
    ad = Adapter(config_path=AD, settings={k: src(v, AD, next(line)) for k, v in (settings or {}).items()},
                 weights=weights(*tensors) if tensors else None)
    parts: dict[str, Any] = {
        "adapter": ad, "tokenizer_size": None if size is None else src(size, "/a/tokenizer.json", 5),
        "base": base if base is not None else weights(BASE_EMB),
        "base_config": {} if base_vocab is None else {"vocab_size": src(base_vocab, BASE_CFG, 4)}}
    return facts(**{**parts, **kw})


def test_new_tokens_an_adapter_does_not_save_are_found_whole():
    b = new_facts(settings={"target_modules": ["q_proj"], "modules_to_save": ["q_proj"]}, base_vocab=100)
    assert hits(NEW_TOKENS, b) == [Hit(
        message="the tokenizer has 2 token id(s) past the base model's 64 embedding rows, and the adapter saves no "
                "embedding (modules_to_save, trainable_token_indices): their trained rows are lost",
        evidence={"tokenizer_size": 66, "base_rows": 64, "new_tokens": 2}, location=at("/a/tokenizer.json", 5),
        related=(Related(location=at(AD, 3), message="modules_to_save ['q_proj'], trainable_token_indices None"),
                 Related(location=Location(path=BASE, byte_offset=200), message="base embedding [64, 8]")))]


def test_the_base_rows_come_from_the_base_config_when_its_weights_hold_no_embedding():
    for base in (weights(ten("model.norm.weight", (8,), BASE)), Weights(files=(), tensors=())):
        (hit,) = hits(NEW_TOKENS, new_facts(67, base=base, base_vocab=64, settings={"target_modules": ["q_proj"]}))
        assert hit.evidence == {"tokenizer_size": 67, "base_rows": 64, "new_tokens": 3}
        assert hit.related == (Related(location=at(AD, 2), message="modules_to_save None, trainable_token_indices None"),
                               Related(location=at(BASE_CFG, 4), message="base vocab_size 64"))


def test_the_place_named_for_the_adapter_is_its_modules_or_targets_else_its_top():
    (hit,) = hits(NEW_TOKENS, new_facts(settings={"modules_to_save": None, "target_modules": ["q_proj"]}))
    assert hit.related[0].location == at(AD, 2)
    (hit,) = hits(NEW_TOKENS, new_facts(settings={"r": 4}))
    assert hit.related[0] == Related(location=top(AD), message="modules_to_save None, trainable_token_indices None")


def test_the_base_rows_are_the_limit_met_exactly():
    assert hits(NEW_TOKENS, new_facts(64)) == [] and ran(NEW_TOKENS, new_facts(64))
    assert [h.evidence["new_tokens"] for h in hits(NEW_TOKENS, new_facts(65))] == [1]
    assert hits(NEW_TOKENS, new_facts(64, base=Weights(files=(), tensors=()), base_vocab=64)) == []
    assert len(hits(NEW_TOKENS, new_facts(65, base=Weights(files=(), tensors=()), base_vocab=64))) == 1


def test_an_adapter_that_saves_its_embeddings_any_way_is_quiet():
    quiet = [new_facts(tensors=(LORA_Q, ten("base_model.model.lm_head.modules_to_save.default.weight", (66, 8), ADW))),
             new_facts(tensors=(LORA_Q, ten("base_model.model.model.embed_tokens.weight", (66, 8), ADW))),
             new_facts(settings={"modules_to_save": ["q_proj", "embed_tokens"]}),
             new_facts(settings={"modules_to_save": [3, "lm_head"]}),
             new_facts(settings={"trainable_token_indices": [64, 65]})]
    for b in quiet:
        assert hits(NEW_TOKENS, b) == [] and ran(NEW_TOKENS, b)
    # what does not save them: another module, a name that is not a string, a bare string, no weights
    others: list[dict[str, Any]] = [{"modules_to_save": [3, "q_proj"]}, {"modules_to_save": "embed_tokens"},
                                    {"trainable_token_indices": []}]
    for settings in others:
        assert len(hits(NEW_TOKENS, new_facts(settings=settings))) == 1, settings
    assert len(hits(NEW_TOKENS, new_facts(tensors=()))) == 1
    (hit,) = hits(NEW_TOKENS, new_facts(settings={"trainable_token_indices": []}))
    assert hit.related[0] == Related(location=top(AD), message="modules_to_save None, trainable_token_indices []")


def test_new_tokens_skip_with_each_reason():
    assert skipped(NEW_TOKENS, new_facts(adapter=None)) == "no adapter_config.json in the folder"
    assert skipped(NEW_TOKENS, new_facts(unread=("adapter_config.json",))) == f"adapter_config.json {UNREAD}"
    assert skipped(NEW_TOKENS, new_facts(None)) == "no readable tokenizer.json in the adapter folder"
    unknown = ("the base model's embedding rows are not known (base_model_name_or_path is not a local folder with "
               "weights or config.json)")
    assert skipped(NEW_TOKENS, new_facts(base=Weights(files=(), tensors=()))) == unknown
    assert skipped(NEW_TOKENS, new_facts(base=Weights(files=(), tensors=()), base_vocab="64")) == unknown
    assert ran(NEW_TOKENS, new_facts(unread=("config.json",)))


# --- TP-BUNDLE-ADAPTER-TARGETS-NONE and -PARTIAL ----------------------------------------------------------------

def llama_weights(layers: int = 2, path: str = BASE, kinds: tuple[str, ...] = ("q_proj", "v_proj")) -> Weights:
    t = [ten("model.embed_tokens.weight", (64, 8), path)]
    t += [ten(f"model.layers.{n}.self_attn.{k}.weight", (8, 8), path) for n in range(layers) for k in kinds]
    t += [ten("lm_head.weight", (64, 8), path)]
    return weights(*t)


def target_facts(target: Any = ("q_proj",), *, settings: dict[str, Any] | None = None, base: Weights | None = None,
                 **kw: Any) -> BundleFacts:
    s = {"target_modules": src(list(target) if isinstance(target, tuple) else target, AD, 4)}
    s.update({k: src(v, AD, 6) for k, v in (settings or {}).items()})
    parts: dict[str, Any] = {"adapter": Adapter(config_path=AD, settings=s),
                             "base": base if base is not None else llama_weights()}
    return facts(**{**parts, **kw})


def test_targets_matching_nothing_are_found_whole():
    assert hits(TARGETS_NONE, target_facts(("c_attn",))) == [Hit(
        message="target_modules ['c_attn'] match none of the 6 modules of the base weights (model.safetensors)",
        evidence={"modules": 6, "matched": 0, "target_modules": "['c_attn']"}, location=at(AD, 4),
        related=(Related(location=top(BASE), message="6 modules, e.g. lm_head"),))]
    assert hits(TARGETS_NONE, target_facts()) == [] and ran(TARGETS_NONE, target_facts())


def test_targets_are_matched_against_the_index_of_sharded_weights_and_named_by_it():
    w = Weights(files=(SHARD1,), tensors=llama_weights(path=SHARD1).tensors, index=IDX)
    (hit,) = hits(TARGETS_NONE, target_facts(("c_attn",), base=w))
    assert hit.message.endswith("(model.safetensors.index.json)")
    assert hit.related == (Related(location=top(IDX), message="6 modules, e.g. lm_head"),)


def test_targets_are_matched_against_the_folders_own_weights_without_a_base():
    own = llama_weights(path=MODEL)
    for base in (None, Weights(files=(), tensors=())):
        b = target_facts(("c_attn",), weights=own)
        b = BundleFacts(**{**b.__dict__, "base": base})
        (hit,) = hits(TARGETS_NONE, b)
        assert hit.related == (Related(location=top(MODEL), message="6 modules, e.g. lm_head"),)


def test_weights_without_two_dimensional_modules_match_nothing_and_name_none():
    w = weights(ten("model.norm.weight", (8,), BASE))
    (hit,) = hits(TARGETS_NONE, target_facts(base=w))
    assert (hit.message, hit.evidence) == (
        "target_modules ['q_proj'] match none of the 0 modules of the base weights (model.safetensors)",
        {"modules": 0, "matched": 0, "target_modules": "['q_proj']"})
    assert hit.related == (Related(location=top(BASE), message="0 modules, e.g. "),)


def test_all_linear_matches_every_linear_module_but_the_embedding_and_head():
    assert hits(TARGETS_NONE, target_facts("all-linear")) == []
    w = weights(ten("model.embed_tokens.weight", (64, 8), BASE), ten("lm_head.weight", (64, 8), BASE))
    (hit,) = hits(TARGETS_NONE, target_facts("all-linear", base=w))
    assert hit.message == ("target_modules 'all-linear' match none of the 2 modules of the base weights "
                           "(model.safetensors)")
    assert hit.evidence["target_modules"] == "all-linear"


def test_excluded_modules_are_taken_from_the_matched():
    (hit,) = hits(TARGETS_NONE, target_facts(settings={"exclude_modules": ["q_proj"]}))
    assert hit.evidence == {"modules": 6, "matched": 0, "target_modules": "['q_proj']"}
    assert hits(TARGETS_NONE, target_facts(("q_proj", "v_proj"), settings={"exclude_modules": ["q_proj"]})) == []
    assert hits(TARGETS_NONE, target_facts(settings={"exclude_modules": []})) == []


def test_targets_skip_with_each_reason():
    for rule in (TARGETS_NONE, TARGETS_PARTIAL):
        assert skipped(rule, target_facts(adapter=None)) == "no adapter_config.json in the folder"
        assert skipped(rule, target_facts(unread=("adapter_config.json",))) == f"adapter_config.json {UNREAD}"
        no_targets = "adapter_config.json sets no target_modules"
        assert skipped(rule, target_facts(adapter=Adapter(config_path=AD, settings={}))) == no_targets
        for value in (None, 5, {"q_proj": 1}):
            assert skipped(rule, target_facts(value)) == no_targets
        no_weights = ("no base model weights to match target_modules against (base_model_name_or_path is not a local "
                      "folder with safetensors)")
        b = target_facts()
        assert skipped(rule, BundleFacts(**{**b.__dict__, "base": None})) == no_weights
        assert skipped(rule, BundleFacts(**{**b.__dict__, "base": None,
                                            "weights": Weights(files=(MODEL,), tensors=())})) == no_weights
        assert ran(rule, target_facts(unread=("config.json",)))


def test_targets_reaching_some_layers_are_found_whole():
    b = target_facts(r"model\.layers\.[01]\.self_attn\.q_proj", base=llama_weights(4))
    assert hits(TARGETS_PARTIAL, b) == [Hit(
        message="target_modules 'model\\\\.layers\\\\.[01]\\\\.self_attn\\\\.q_proj' match 2 module(s) in 2 of the 4 "
                "layers of the base weights that hold q_proj (layers 0, 1)",
        evidence={"layers": 4, "layers_matched": 2, "modules_matched": 2}, location=at(AD, 4),
        related=(Related(location=top(BASE), message="4 layers hold q_proj"),))]


def test_the_layers_shown_stop_at_eight_and_the_kinds_at_four():
    five = ("a_proj", "b_proj", "c_proj", "d_proj", "e_proj")
    (hit,) = hits(TARGETS_PARTIAL, target_facts(r"model\.layers\.[0-8]\..*", base=llama_weights(10, kinds=five)))
    assert hit.message.endswith("match 45 module(s) in 9 of the 10 layers of the base weights that hold a_proj, "
                                "b_proj, c_proj, d_proj, ... (layers 0, 1, 2, 3, 4, 5, 6, 7, ...)")
    assert hit.related[0].message == "10 layers hold a_proj, b_proj, c_proj, d_proj, ..."
    (hit,) = hits(TARGETS_PARTIAL, target_facts(r"model\.layers\.[0-7]\..*", base=llama_weights(10, kinds=five[:4])))
    assert hit.message.endswith("match 32 module(s) in 8 of the 10 layers of the base weights that hold a_proj, "
                                "b_proj, c_proj, d_proj (layers 0, 1, 2, 3, 4, 5, 6, 7)")


def test_targets_reaching_every_layer_holding_their_kind_are_quiet():
    for b in (target_facts(), target_facts(("lm_head",)), target_facts(("c_attn",)),
              target_facts(r"model\.layers\.\d\.self_attn\.q_proj", base=llama_weights(4)),
              target_facts(settings={"layers_to_transform": None})):
        assert hits(TARGETS_PARTIAL, b) == [] and ran(TARGETS_PARTIAL, b)
    # a layer numbered 0 is a layer
    (hit,) = hits(TARGETS_PARTIAL, target_facts(r"model\.layers\.0\.self_attn\.q_proj"))
    assert hit.evidence == {"layers": 2, "layers_matched": 1, "modules_matched": 1}
    # the index names the weights when there is one
    w = Weights(files=(SHARD1,), tensors=llama_weights(path=SHARD1).tensors, index=IDX)
    (hit,) = hits(TARGETS_PARTIAL, target_facts(r"model\.layers\.0\.self_attn\.q_proj", base=w))
    assert hit.related == (Related(location=top(IDX), message="2 layers hold q_proj"),)


def test_the_layers_meant_are_those_holding_a_kind_the_targets_matched():
    """A hybrid model (attention in one layer of four): a regex reaching every q_proj there is
    is not partial, though every layer holds some other module."""
    t = [ten(f"model.layers.{n}.mamba.in_proj.weight", (8, 8), BASE) for n in range(4)]
    base = weights(*t, ten("model.layers.3.self_attn.q_proj.weight", (8, 8), BASE))
    b = target_facts(r".*self_attn\.q_proj", base=base)
    assert hits(TARGETS_PARTIAL, b) == [] and ran(TARGETS_PARTIAL, b)
    (hit,) = hits(TARGETS_PARTIAL, target_facts(r"model\.layers\.[01]\.mamba\.in_proj", base=base))
    assert hit.evidence == {"layers": 4, "layers_matched": 2, "modules_matched": 2}


def test_layers_chosen_on_purpose_are_not_partial():
    partial = r"model\.layers\.0\.self_attn\.q_proj"
    for value in ([0], 0, []):
        assert skipped(TARGETS_PARTIAL, target_facts(partial, settings={"layers_to_transform": value})) == \
            "layers_to_transform is set: the layers are chosen on purpose"
    assert skipped(TARGETS_PARTIAL, target_facts(partial, settings={"exclude_modules": ["v_proj"]})) == \
        "exclude_modules is set: the modules are chosen on purpose"
    assert len(hits(TARGETS_PARTIAL, target_facts(partial, settings={"exclude_modules": []}))) == 1


# --- TP-BUNDLE-LORA-B-ZERO ---------------------------------------------------------------------------------------

LORA_B = ten("base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight", (8, 4), ADW, 72)


def zero_facts(lb: LoraB | None = None, *, settings: dict[str, Any] | None = None, step: Any = None,
               tensors: tuple[Tensor, ...] = (LORA_Q, LORA_B)) -> BundleFacts:
    s = {k: src(v, AD, 3) for k, v in ({"r": 4} if settings is None else settings).items()}
    ad = Adapter(config_path=AD, settings=s, weights=weights(*tensors) if tensors else None,
                 lora_b=lb if lb is not None else LoraB(total=4, read=4, first=LORA_B))
    run = RunSettings(global_step=None if step is None else src(step, STATE, 5))
    return facts(adapter=ad, run=run)


def test_an_all_zero_adapter_is_found_whole():
    assert hits(LORA_ZERO, zero_facts()) == [Hit(
        message=f"all 4 lora_B tensors in adapter_model.safetensors are zero (first {LORA_B.name}): the adapter adds "
                "nothing to the base model",
        evidence={"lora_b_tensors": 4, "zero": 4}, location=Location(path=ADW, byte_offset=72),
        related=(Related(location=at(AD, 3), message="LORA adapter, r 4"),))]


def test_an_all_zero_adapter_after_logged_steps_names_them():
    (hit,) = hits(LORA_ZERO, zero_facts(settings={"peft_type": "ADALORA"}, step=0))
    assert hit.message == (f"all 4 lora_B tensors in adapter_model.safetensors are zero (first {LORA_B.name}), after 0 "
                           "logged optimizer step(s): the adapter adds nothing to the base model")
    assert hit.evidence == {"lora_b_tensors": 4, "zero": 4, "global_step": 0}
    assert hit.related == (Related(location=top(AD), message="ADALORA adapter, r None"),
                           Related(location=at(STATE, 5), message="global_step 0"))
    (hit,) = hits(LORA_ZERO, zero_facts(step="30"))  # not a number of steps
    assert hit.evidence == {"lora_b_tensors": 4, "zero": 4} and len(hit.related) == 1 and "after" not in hit.message


def test_a_lora_b_read_that_stopped_early_is_not_judged():
    assert skipped(LORA_ZERO, zero_facts(LoraB(total=4, read=4, first=LORA_B, note="stopped: the cap"))) == \
        "lora_B read 4 of 4 tensors, all zero so far: stopped: the cap"
    assert skipped(LORA_ZERO, zero_facts(LoraB(total=4, read=3, first=LORA_B))) == \
        "lora_B read 3 of 4 tensors, all zero so far: "
    assert hits(LORA_ZERO, zero_facts(LoraB(total=4, read=2, first=LORA_B, nonzero=LORA_B))) == []
    assert ran(LORA_ZERO, zero_facts(LoraB(total=4, read=2, first=LORA_B, nonzero=LORA_B)))


def test_lora_zero_skips_with_each_reason():
    none = "no adapter_model.safetensors in the folder"
    assert skipped(LORA_ZERO, facts()) == none
    assert skipped(LORA_ZERO, zero_facts(tensors=())) == none
    no_b = "the adapter has no lora_B tensors"
    assert skipped(LORA_ZERO, zero_facts(LoraB(total=0, read=0))) == no_b
    b = zero_facts()
    assert b.adapter is not None
    assert skipped(LORA_ZERO, facts(adapter=Adapter(config_path=AD, settings={}, weights=b.adapter.weights))) == no_b


# --- TP-BUNDLE-LORA-RANK-MISMATCH --------------------------------------------------------------------------------

def lora(module: str, a: tuple[int, int], b: tuple[int, int], offset: int = 0) -> tuple[Tensor, Tensor]:
    name = f"base_model.model.model.layers.{module}"
    return (ten(f"{name}.lora_A.weight", a, ADW, offset), ten(f"{name}.lora_B.weight", b, ADW, offset + 1))


def rank_facts(*tensors: Tensor, r: Any = 4, pattern: Any = None, **kw: Any) -> BundleFacts:
    s = {"r": src(r, AD, 7)} if r is not None else {}
    if pattern is not None:
        s["rank_pattern"] = src(pattern, AD, 8)
    return facts(**{"adapter": Adapter(config_path=AD, settings=s, weights=weights(*tensors)), **kw})


# Tensors passed over before the LoRA ones: a 1-D one, one that is no LoRA weight.
OTHERS = (ten("base_model.model.model.layers.0.q_proj.lora_A.bias", (4,), ADW),
          ten("base_model.model.model.embed_tokens.modules_to_save.default.weight", (64, 8), ADW))


def test_tensors_of_another_rank_are_found_whole():
    a0, b0 = lora("0.self_attn.q_proj", (4, 8), (8, 4), 10)
    a1, b1 = lora("1.self_attn.q_proj", (4, 8), (8, 2), 20)
    a2, b2 = lora("2.self_attn.q_proj", (2, 8), (8, 4), 30)
    assert hits(RANK, rank_facts(*OTHERS, a0, b0, a1, b1, a2, b2)) == [Hit(
        message=f"2 of 6 LoRA tensors have a rank other than the config's: {b1.name} [8, 2] has rank 2, "
                "adapter_config.json says r 4",
        evidence={"tensors": 6, "wrong": 2, "rank": 2, "r": 4}, location=at(AD, 7),
        related=(Related(location=Location(path=ADW, byte_offset=21), message=f"{b1.name} [8, 2]"),))]


def test_a_lora_a_rank_is_its_rows_and_a_lora_b_rank_its_columns():
    assert hits(RANK, rank_facts(*lora("0.q_proj", (4, 8), (8, 4)))) == []
    (hit,) = hits(RANK, rank_facts(*lora("0.q_proj", (8, 4), (4, 8))))
    assert hit.evidence == {"tensors": 2, "wrong": 2, "rank": 8, "r": 4}
    assert hit.message.startswith("2 of 2 LoRA tensors have a rank other than the config's: "
                                  "base_model.model.model.layers.0.q_proj.lora_A.weight [8, 4] has rank 8")


def test_a_rank_pattern_entry_sets_its_modules_rank():
    t = lora("0.self_attn.q_proj", (8, 16), (16, 8)) + lora("1.self_attn.q_proj", (4, 16), (16, 4))
    for pattern in ({r"model\.layers\.0\..*": 8}, {"model.layers.0.self_attn.q_proj": 8}, {"0.self_attn.q_proj": 8}):
        b = rank_facts(*t, pattern=pattern)
        assert hits(RANK, b) == [] and ran(RANK, b), pattern
    (hit,) = hits(RANK, rank_facts(*t, pattern={r"model\.layers\.1\..*": 8}))
    assert hit.evidence == {"tensors": 4, "wrong": 4, "rank": 8, "r": 4}
    assert "adapter_config.json says r 4" in hit.message


def test_rank_skips_with_each_reason():
    ab = lora("0.q_proj", (4, 8), (8, 4))
    none = "no adapter_model.safetensors in the folder"
    assert skipped(RANK, facts()) == none
    assert skipped(RANK, facts(adapter=Adapter(config_path=AD, settings={"r": src(4, AD, 7)}))) == none
    assert skipped(RANK, rank_facts(*ab, unread=("adapter_config.json",))) == f"adapter_config.json {UNREAD}"
    for r in (None, "4", True, 4.0):
        assert skipped(RANK, rank_facts(*ab, r=r)) == "adapter_config.json sets no r", r
    assert skipped(RANK, rank_facts(*OTHERS)) == "the adapter has no lora_A/lora_B tensors"
    assert ran(RANK, rank_facts(*ab, unread=("config.json",)))


# --- TP-BUNDLE-INDEX-MISMATCH -------------------------------------------------------------------------------------

def shard(name: str, path: str) -> Tensor:
    return ten(name, (2, 2), path, 300)


def index_facts(tensors: tuple[Tensor, ...], index_map: dict[str, str], *, files: tuple[str, ...] = (SHARD1, SHARD2),
                lines: dict[str, int] | None = None) -> BundleFacts:
    lines = lines or {}
    m = {n: src(s, IDX, lines.get(n, i + 3)) for i, (n, s) in enumerate(index_map.items())}
    return facts(weights=Weights(files=files, tensors=tensors, index=IDX, index_map=m))


S1, S2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"


def test_misplaced_and_unnamed_tensors_are_found_whole():
    tensors = (shard("d", SHARD2), shard("a", SHARD1), shard("z", SHARD1), shard("y", SHARD1), shard("b", SHARD2))
    # c and e placed in shard 1, which holds neither; e is on the index's earlier line; y and z
    # are named nowhere
    b = index_facts(tensors, {"a": S1, "b": S2, "d": S2, "c": S1, "e": S1}, lines={"c": 9, "e": 2})
    assert hits(INDEX, b) == [
        Hit(message=f"2 tensor(s) the index places in shards that do not hold them; first e in {S1}",
            evidence={"misplaced": 2, "first_tensor": "e", "shard": S1}, location=at(IDX, 2),
            related=(Related(location=Location(path=SHARD1, byte_offset=0), message=f"{S1} does not hold e"),)),
        Hit(message=f"2 tensor(s) in the shards are not named in the index; first y in {S1}",
            evidence={"unnamed": 2, "first_tensor": "y", "shard": S1}, location=Location(path=SHARD1, byte_offset=300),
            related=(Related(location=top(IDX), message="the index does not name it"),))]


def test_a_tensor_placed_in_a_shard_holding_nothing_is_misplaced_and_one_missing_is_not():
    b = index_facts((shard("a", SHARD1),), {"a": S1, "b": S2, "c": "model-00003.safetensors"})
    assert [h.evidence for h in hits(INDEX, b)] == [{"misplaced": 1, "first_tensor": "b", "shard": S2}]
    assert hits(INDEX, b)[0].related[0].location == Location(path=SHARD2, byte_offset=0)


def test_an_index_agreeing_with_its_shards_is_quiet():
    b = index_facts((shard("a", SHARD1), shard("b", SHARD2)), {"a": S1, "b": S2})
    assert hits(INDEX, b) == [] and ran(INDEX, b)


def test_index_skips_without_an_index():
    none = "no sharded index (*.safetensors.index.json) in the folder"
    assert skipped(INDEX, facts()) == none
    assert skipped(INDEX, facts(weights=weights(shard("a", MODEL)))) == none
    assert skipped(INDEX, facts(weights=Weights(files=(SHARD1,), tensors=(), index=IDX))) == none


# --- TP-BUNDLE-ZERO-ELEMENT-TENSORS ----------------------------------------------------------------------------

def test_zero_element_tensors_are_found_whole_across_the_model_and_adapter_weights():
    own = weights(ten("model.norm.weight", (8,)), ten("model.embed_tokens.weight", (64, 8)))
    ad = Adapter(config_path=AD, settings={}, weights=weights(ten("a.lora_A.weight", (4, 0), ADW, 40),
                                                              ten("b.lora_A.weight", (0,), ADW, 50)))
    b = facts(weights=own, adapter=ad, config={"model_type": src("llama", CFG, 3),
                                                "architectures": src(["LlamaForCausalLM"], CFG, 1)})
    assert hits(ZERO_ELEMENTS, b) == [Hit(
        message="2 of 4 tensors have zero elements (first a.lora_A.weight [4, 0] in adapter_model.safetensors): a "
                "sharded (ZeRO-3/FSDP) save without gathered parameters",
        evidence={"tensors": 4, "empty": 2, "first_tensor": "a.lora_A.weight"},
        location=Location(path=ADW, byte_offset=40),
        related=(Related(location=at(CFG, 3), message="the model these weights are saved for"),))]


def test_zero_elements_name_the_architectures_else_nothing_as_the_model():
    w = weights(ten("model.norm.weight", (0,)))
    (hit,) = hits(ZERO_ELEMENTS, facts(weights=w, config={"architectures": src(["X"], CFG, 1)}))
    assert hit.related == (Related(location=at(CFG, 1), message="the model these weights are saved for"),)
    (hit,) = hits(ZERO_ELEMENTS, facts(weights=w))
    assert hit.related == () and hit.evidence == {"tensors": 1, "empty": 1, "first_tensor": "model.norm.weight"}
    b = facts(weights=weights(ten("model.norm.weight", (1,))))
    assert hits(ZERO_ELEMENTS, b) == [] and ran(ZERO_ELEMENTS, b)


def test_zero_elements_skip_without_weights():
    none = "no safetensors weights in the folder"
    assert skipped(ZERO_ELEMENTS, facts()) == none
    assert skipped(ZERO_ELEMENTS, facts(weights=Weights(files=(), tensors=()),
                                        adapter=Adapter(config_path=AD, settings={}))) == none
    (hit,) = hits(ZERO_ELEMENTS, facts(adapter=Adapter(config_path=AD, settings={},
                                                       weights=weights(ten("x", (0, 2), ADW)))))
    assert hit.evidence == {"tensors": 1, "empty": 1, "first_tensor": "x"}


# --- TP-BUNDLE-NO-LM-HEAD ---------------------------------------------------------------------------------------

def head_facts(tie: Any = False, arch: Any = ("LlamaForCausalLM",), *, head: bool = False,
               w: Weights | None = None, **kw: Any) -> BundleFacts:
    cfg: dict[str, Sourced] = {} if tie is None else {"tie_word_embeddings": src(tie, CFG, 9)}
    if arch is not None:
        cfg["architectures"] = src(list(arch) if isinstance(arch, tuple) else arch, CFG, 2)
    t = [ten("model.norm.weight", (8,)), ten("model.embed_tokens.weight", (64, 8), MODEL, 16)]
    if head:
        t.append(ten("lm_head.weight", (64, 8)))
    return facts(**{"config": cfg, "weights": w if w is not None else weights(*t), **kw})


def test_an_untied_model_without_its_head_is_found_whole():
    assert hits(NO_HEAD, head_facts()) == [Hit(
        message="tie_word_embeddings is false but the 2 saved tensors hold no lm_head (the embedding "
                "model.embed_tokens.weight is there): the head loads at random",
        evidence={"tensors": 2, "tie_word_embeddings": False}, location=at(CFG, 9),
        related=(Related(location=Location(path=MODEL, byte_offset=16),
                         message="model.embed_tokens.weight without a head"),))]


def test_the_architectures_decide_whether_a_head_is_expected():
    causal: list[Any] = [("GPT2LMHeadModel",), ("BertModel", "LlamaForCausalLM"), (3, "MistralForCausalLM"), None,
                         "BertModel"]
    for arch in causal:
        assert len(hits(NO_HEAD, head_facts(arch=arch))) == 1, arch
    other: list[tuple[Any, ...]] = [("BertModel",), (3,), ("LMHeadModelX",), ()]
    for names in other:
        assert skipped(NO_HEAD, head_facts(arch=names)) == f"architectures {list(names)!r} is not a causal LM"


def test_a_head_saved_or_named_by_the_index_or_tied_is_quiet():
    for b in (head_facts(head=True), head_facts(tie=True), head_facts(tie=0),
              head_facts(w=Weights(files=(SHARD1,), tensors=(ten("model.embed_tokens.weight", (64, 8)),), index=IDX,
                                   index_map={"lm_head.weight": src(S2, IDX, 3)}))):
        assert hits(NO_HEAD, b) == [] and ran(NO_HEAD, b)


def test_no_head_skips_with_each_reason():
    assert skipped(NO_HEAD, head_facts(unread=("config.json",))) == f"config.json {UNREAD}"
    assert skipped(NO_HEAD, head_facts(tie=None)) == "config.json does not set tie_word_embeddings"
    assert skipped(NO_HEAD, head_facts(weights=None)) == "no model weights in the folder"
    assert skipped(NO_HEAD, head_facts(w=Weights(files=(MODEL,), tensors=()))) == "no model weights in the folder"
    assert skipped(NO_HEAD, head_facts(w=weights(ten("model.norm.weight", (8,))))) == \
        "the weights hold no input embedding"
    assert ran(NO_HEAD, head_facts(unread=("generation_config.json",)))


# --- the facts built here are the reader's ---------------------------------------------------------------------

def test_a_folder_written_here_reads_as_the_facts_the_cases_build(tmp_path: Path):
    from safetensors.numpy import save

    (tmp_path / "config.json").write_text(json.dumps(
        {"architectures": ["LlamaForCausalLM"], "vocab_size": 64, "eos_token_id": 61, "tie_word_embeddings": False},
        indent=2))
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [61, 62]}, indent=2))
    (tmp_path / "model.safetensors").write_bytes(save({"model.embed_tokens.weight": np.ones((64, 8), np.float32),
                                                        "model.norm.weight": np.ones((0,), np.float32)}))
    b = read_bundle(tmp_path)
    assert b.config["eos_token_id"] == Sourced(value=61, path=str(tmp_path / "config.json"), line=5)
    assert b.generation["eos_token_id"].value == [61, 62]
    assert b.weights is not None and {t.name: t.shape for t in b.weights.tensors} == {
        "model.embed_tokens.weight": (64, 8), "model.norm.weight": (0,)}
    (zero,) = hits(ZERO_ELEMENTS, b)
    assert zero.evidence == {"tensors": 2, "empty": 1, "first_tensor": "model.norm.weight"}
    (head,) = hits(NO_HEAD, b)
    assert head.location == at(str(tmp_path / "config.json"), 6)
    assert skipped(STOP_TOKEN, b) == "no tokenizer with a chat template in the folder"
