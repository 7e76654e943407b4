"""Rules across the files of one output folder (readers/bundle.py reads them together).

Each rule compares two or more files and names both: the finding sits on one file and its
related location on the other (the language server shows it on both). A rule whose files
are not all there stands down with a reason (a skipped check, never a pass). The registry
entries are the tuple RULES.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from ..core.model import Hit, Level, Location, Related, Span
from ..readers.bundle import BundleFacts, Tensor, Weights
from ..readers.tokenizer import Sourced
from .base import Family, NoLimits, Rule, Skip


@dataclass(frozen=True, kw_only=True)
class BundleContext:
    """Nothing besides the folder's own files: the bundle is judged from them alone."""


# Every rule here judges one folder's files read together (readers/bundle.py).
BUNDLE: Family[BundleFacts, BundleContext] = Family("bundle")


def _at(s: Sourced) -> Location:
    return Location(path=s.path, span=Span(s.line, 0, s.line, 0))


def _tensor_at(t: Tensor) -> Location:
    return Location(path=t.path, byte_offset=t.byte_offset)


def _ids(value: Any) -> tuple[int, ...]:
    """An id setting as a tuple: `2`, `[2, 32000]`, null."""
    if isinstance(value, bool):
        return ()
    if isinstance(value, int):
        return (value,)
    if isinstance(value, list):
        return tuple(v for v in value if isinstance(v, int) and not isinstance(v, bool))
    return ()


def _shown(ids: tuple[int, ...]) -> str:
    return str(ids[0]) if len(ids) == 1 else "[" + ", ".join(map(str, ids)) + "]"


def _file(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


# --- stop tokens -------------------------------------------------------------------------------

STOP_DOC = """The chat template ends the assistant's turn with a token generation does not stop on.

What it flags: the token the chat template writes after an assistant message (found by
rendering a user/assistant exchange in the sandbox: `<|eot_id|>`, `<|im_end|>`,
`<end_of_turn>`, the eos_token...) whose id is not among the ids generation stops on —
`generation_config.json`'s `eos_token_id` (one id or a list), or `config.json`'s when
there is no generation config.
Why it matters: the model is trained to end its answers with that token, and
`generate()` runs on past it to `max_new_tokens`, inventing the next user turn: the model
that "never stops".
What it does not mean: anything when generation_config.json lists the end-of-turn token
beside the eos (how Llama-3, Gemma-3 and Qwen instruct models ship). Limits: needs the
template to render (jinja2) and the token's id from the tokenizer files; otherwise it is
skipped with the reason.
"""


def _unread(b: BundleFacts, *names: str) -> None:
    """Stand down when a file the comparison needs is there but could not be read."""
    bad = [n for n in names if n in b.unread]
    if bad:
        raise Skip(f"{', '.join(bad)} could not be read (see the NOT-CHECKED finding)")


def _stop_ids(b: BundleFacts) -> Sourced | None:
    _unread(b, "generation_config.json", "config.json")
    for where in (b.generation, b.config):
        s = where.get("eos_token_id")
        if s is not None and _ids(s.value):
            return s
    return None


def check_stop_token(b: BundleFacts, limits: NoLimits, ctx: BundleContext) -> Iterator[Hit]:
    tok = b.tokenizer
    if tok is None or tok.chat_template is None:
        raise Skip("no tokenizer with a chat template in the folder")
    end = b.template_end
    if end is None:
        raise Skip(b.template_note or "the chat template's end of turn is not known")
    if end.marker is None:
        raise Skip("the assistant turn ends with no end-of-turn token (TP-TOK-TEMPLATE-NO-EOS judges that)")
    stop = _stop_ids(b)
    if stop is None:
        raise Skip("no eos_token_id in generation_config.json or config.json")
    marker_id = tok.id_of(end.marker)
    if marker_id is None:
        raise Skip(f"the id of {end.marker!r} is not in the tokenizer files")
    ids = _ids(stop.value)
    if marker_id in ids:
        return
    yield Hit(message=f"the chat template ends the assistant's turn with {end.marker!r} (id {marker_id}), but "
                      f"{_file(stop.path)} stops generation on eos_token_id {_shown(ids)}: generation runs on "
                      "past the end of the answer",
              evidence={"marker": end.marker, "marker_id": marker_id, "stop_ids": _shown(ids),
                        "stop_file": _file(stop.path)},
              location=_at(end.where),
              related=(Related(location=_at(stop), message=f"generation stops on {_shown(ids)} here"),))


STOP_TOKEN = Rule(id="TP-BUNDLE-STOP-TOKEN", name="turn-end-not-a-stop-token", level=Level.FAIL, doc=STOP_DOC,
                  check=check_stop_token, family=BUNDLE)

# --- special token ids ----------------------------------------------------------------------------

IDS_DOC = """The eos, bos or pad token id differs between the tokenizer and the model's configs.

What it flags: the id of the tokenizer's `eos_token`/`bos_token`/`pad_token` (from
tokenizer_config.json or special_tokens_map.json, looked up in tokenizer.json) that is
not among the ids `generation_config.json` gives for it (`config.json`'s when the
generation config does not say), and an `eos_token_id` in config.json sharing no id with
generation_config.json's.
Why it matters: training appends, pads and masks with the tokenizer's ids; generation
starts, stops and pads with the configs'. A pad id that differs is masked in one place and
generated in the other; an eos that differs is learned but never stopped on.
What it does not mean: a problem where one file leaves the id unset (null or absent:
nothing to compare), or where the generation config lists several eos ids and the
tokenizer's is one of them. It is a WARN: a config id no code path uses is harmless.
"""


def check_special_ids(b: BundleFacts, limits: NoLimits, ctx: BundleContext) -> Iterator[Hit]:
    tok = b.tokenizer
    _unread(b, "generation_config.json", "config.json")
    if not b.config and not b.generation:
        raise Skip("no config.json or generation_config.json in the folder")
    compared = 0
    cfg_eos, gen_eos = b.config.get("eos_token_id"), b.generation.get("eos_token_id")
    if cfg_eos is not None and gen_eos is not None and _ids(cfg_eos.value) and _ids(gen_eos.value):
        compared += 1
        a, g = _ids(cfg_eos.value), _ids(gen_eos.value)
        if not set(a) & set(g):
            yield Hit(message=f"config.json eos_token_id {_shown(a)} shares no id with generation_config.json's "
                              f"{_shown(g)}",
                      evidence={"token": "eos", "config": _shown(a), "generation_config": _shown(g)},
                      location=_at(cfg_eos),
                      related=(Related(location=_at(gen_eos), message=f"eos_token_id {_shown(g)}"),))
    if tok is not None:
        for name, declared in (("eos", tok.eos), ("bos", tok.bos), ("pad", tok.pad)):
            key = f"{name}_token_id"
            model = next((s for s in (b.generation.get(key), b.config.get(key)) if s is not None and _ids(s.value)),
                         None)
            if declared is None or model is None:
                continue
            tid = tok.id_of(declared.value)
            if tid is None:
                continue
            compared += 1
            ids = _ids(model.value)
            if tid in ids:
                continue
            yield Hit(message=f"the tokenizer's {name}_token {declared.value!r} is id {tid}, but {_file(model.path)} "
                              f"says {key} {_shown(ids)}",
                      evidence={"token": name, "tokenizer_id": tid, "model_ids": _shown(ids),
                                "model_file": _file(model.path)},
                      location=_at(declared),
                      related=(Related(location=_at(model), message=f"{key} {_shown(ids)}"),))
    if not compared:
        raise Skip("no special token id is set in two of the files")


SPECIAL_IDS = Rule(id="TP-BUNDLE-SPECIAL-ID-MISMATCH", name="special-token-id-mismatch", level=Level.WARN,
                   doc=IDS_DOC, check=check_special_ids, family=BUNDLE)

# --- vocabulary and embeddings ------------------------------------------------------------------------

# Input embedding names across the architectures transformers saves (Llama/Mistral/Qwen
# `model.embed_tokens`, GPT-2 `transformer.wte`, BLOOM `word_embeddings`, GPT-NeoX
# `embed_in`, T5 `shared`), possibly under an adapter's prefix.
_EMBED = re.compile(r"(?:^|\.)(?:embed_tokens|wte|word_embeddings|embed_in|tok_embeddings|shared)"
                    r"(?:\.modules_to_save\.default|\.base_layer)?\.weight$")
_HEAD = re.compile(r"(?:^|\.)(?:lm_head|embed_out|output)(?:\.modules_to_save\.default|\.base_layer)?\.weight$")


def embedding(weights: Weights | None) -> Tensor | None:
    if weights is None:
        return None
    return next((t for t in weights.tensors if _EMBED.search(t.name) and len(t.shape) == 2), None)


VOCAB_DOC = """The tokenizer has more tokens than the model has embedding rows.

What it flags: tokenizer.json's largest id + 1 (its vocabulary with the added tokens)
above the rows of the input embedding in the folder's weights (model safetensors, or the
embedding an adapter saved), or above `config.json`'s `vocab_size` when no added token
explains it (added tokens past `vocab_size` are TP-TOK-ADDED-TOKENS-BEYOND-VOCAB's).
Why it matters: the first batch holding a token past the last row fails with an index
error (a device-side assert on GPU); `resize_token_embeddings(len(tokenizer))` was not
called, or was called and the resized weights were not saved.
What it does not mean: anything for a model with more rows than tokens (padded to a
multiple of 64 or 128 for speed is normal). An adapter folder without saved embeddings is
TP-BUNDLE-NEW-TOKENS-NOT-SAVED's.
"""


def check_vocab(b: BundleFacts, limits: NoLimits, ctx: BundleContext) -> Iterator[Hit]:
    size = b.tokenizer_size
    if size is None:
        raise Skip("no readable tokenizer.json in the folder")
    emb = embedding(b.weights) or embedding(b.adapter.weights if b.adapter else None)
    if emb is not None:
        rows = emb.shape[0]
        if size.value > rows:
            yield Hit(message=f"the tokenizer has {size.value} token ids but the embedding {emb.name} in "
                              f"{_file(emb.path)} has {rows} rows: {size.value - rows} token(s) have no embedding",
                      evidence={"tokenizer_size": size.value, "embedding_rows": rows, "beyond": size.value - rows},
                      location=_at(size),
                      related=(Related(location=_tensor_at(emb), message=f"{emb.name} {list(emb.shape)}"),))
        return
    _unread(b, "config.json")
    vocab = b.config.get("vocab_size")
    if vocab is None or not isinstance(vocab.value, int):
        raise Skip("no embedding in the folder's weights and no vocab_size in config.json")
    tok = b.tokenizer
    if tok is not None and any(i >= vocab.value for i, _, _ in tok.added_tokens):
        return  # TP-TOK-ADDED-TOKENS-BEYOND-VOCAB reports these, at the token
    if size.value > vocab.value:
        yield Hit(message=f"the tokenizer has {size.value} token ids but config.json vocab_size is {vocab.value}",
                  evidence={"tokenizer_size": size.value, "vocab_size": vocab.value,
                            "beyond": size.value - vocab.value},
                  location=_at(size), related=(Related(location=_at(vocab), message=f"vocab_size {vocab.value}"),))


VOCAB = Rule(id="TP-BUNDLE-VOCAB-BEYOND-EMBEDDINGS", name="vocab-beyond-embeddings", level=Level.FAIL,
             doc=VOCAB_DOC, check=check_vocab, family=BUNDLE)

NEW_TOKENS_DOC = """A LoRA adapter trained with new tokens does not save their embeddings.

What it flags: an adapter folder whose tokenizer has more ids than the base model's
embedding rows (the base weights' embedding, or its config.json `vocab_size`, read when
`base_model_name_or_path` is a local folder), while the adapter saves no embedding: no
embedding or LM head tensor in adapter_model.safetensors, none in `modules_to_save`, and
no `trainable_token_indices`.
Why it matters: the new tokens' rows were added by `resize_token_embeddings` and, frozen
under LoRA, stayed random; the adapter does not carry them, so the model loaded later
gets other random rows — the tokens the fine-tune relied on mean nothing.
What it does not mean: a problem when the base model already had rows for the tokens, or
the adapter saves the embeddings (PEFT's `save_embedding_layers`). Limits: a base model
named by a hub id is not fetched (no network): then the check is skipped.
"""

_SAVES_EMBEDDINGS = re.compile(r"embed|wte|lm_head|embed_out|word_embeddings|shared")


def check_new_tokens(b: BundleFacts, limits: NoLimits, ctx: BundleContext) -> Iterator[Hit]:
    ad = b.adapter
    if ad is None:
        raise Skip("no adapter_config.json in the folder")
    _unread(b, "adapter_config.json")
    size = b.tokenizer_size
    if size is None:
        raise Skip("no readable tokenizer.json in the adapter folder")
    emb = embedding(b.base)
    base_rows: int | None = emb.shape[0] if emb is not None else None
    base_vocab = b.base_config.get("vocab_size")
    if base_rows is None and base_vocab is not None and isinstance(base_vocab.value, int):
        base_rows = base_vocab.value
    if base_rows is None:
        raise Skip("the base model's embedding rows are not known (base_model_name_or_path is not a local folder "
                   "with weights or config.json)")
    if size.value <= base_rows:
        return
    saved = [t.name for t in (ad.weights.tensors if ad.weights else ()) if _SAVES_EMBEDDINGS.search(t.name)]
    modules = ad.get("modules_to_save")
    in_modules = [m for m in modules if isinstance(m, str) and _SAVES_EMBEDDINGS.search(m)] \
        if isinstance(modules, list) else []
    if saved or in_modules or ad.get("trainable_token_indices"):
        return
    where = ad.settings.get("modules_to_save") or ad.settings.get("target_modules")
    related = [Related(location=_at(where) if where else Location(path=ad.config_path, span=Span(0, 0, 0, 0)),
                       message=f"modules_to_save {modules!r}, trainable_token_indices "
                               f"{ad.get('trainable_token_indices')!r}")]
    if emb is not None:
        related.append(Related(location=_tensor_at(emb), message=f"base embedding {list(emb.shape)}"))
    elif base_vocab is not None:
        related.append(Related(location=_at(base_vocab), message=f"base vocab_size {base_vocab.value}"))
    yield Hit(message=f"the tokenizer has {size.value - base_rows} token id(s) past the base model's {base_rows} "
                      "embedding rows, and the adapter saves no embedding (modules_to_save, trainable_token_indices): "
                      "their trained rows are lost",
              evidence={"tokenizer_size": size.value, "base_rows": base_rows, "new_tokens": size.value - base_rows},
              location=_at(size), related=tuple(related))


NEW_TOKENS = Rule(id="TP-BUNDLE-NEW-TOKENS-NOT-SAVED", name="new-tokens-not-saved", level=Level.WARN,
                  doc=NEW_TOKENS_DOC, check=check_new_tokens, family=BUNDLE)

# --- adapter targets ---------------------------------------------------------------------------------

_LAYER = re.compile(r"\.(\d+)\.")


def _modules(weights: Weights) -> list[str]:
    """Module names of the 2-D weights (linear and embedding layers): `<module>.weight`."""
    return sorted(t.name[: -len(".weight")] for t in weights.tensors
                  if t.name.endswith(".weight") and len(t.shape) == 2)


def _matches(module: str, target: Any) -> bool:
    """PEFT's rule: a string is a regex the whole module name must match; a list matches a
    name equal to an entry or ending with "." + entry."""
    if isinstance(target, str):
        try:
            return re.fullmatch(target, module) is not None
        except re.error:
            return False
    return any(isinstance(t, str) and (module == t or module.endswith("." + t)) for t in target)


def _layer(module: str) -> int | None:
    m = _LAYER.search(module)
    return int(m.group(1)) if m else None


def _targets(b: BundleFacts) -> tuple[Sourced, list[str], list[str], Weights]:
    ad = b.adapter
    if ad is None:
        raise Skip("no adapter_config.json in the folder")
    _unread(b, "adapter_config.json")
    tm = ad.settings.get("target_modules")
    if tm is None or not (isinstance(tm.value, str) or isinstance(tm.value, list)):
        raise Skip("adapter_config.json sets no target_modules")
    weights = b.base if b.base is not None and b.base.tensors else b.weights
    if weights is None or not weights.tensors:
        raise Skip("no base model weights to match target_modules against (base_model_name_or_path is not a local "
                   "folder with safetensors)")
    modules = _modules(weights)
    target = tm.value
    if target == "all-linear":
        matched = [m for m in modules if not _EMBED.search(m + ".weight") and not _HEAD.search(m + ".weight")]
    else:
        matched = [m for m in modules if _matches(m, target)]
    excluded = ad.get("exclude_modules")
    if excluded:
        matched = [m for m in matched if not _matches(m, excluded)]
    return tm, modules, matched, weights


TARGETS_NONE_DOC = """The adapter's target_modules match no module of the base model.

What it flags: `target_modules` in adapter_config.json (names, or a regex the whole
module name must match, as PEFT reads them) that matches none of the linear/embedding
modules in the base model's weights (safetensors headers of the folder, or of the local
folder `base_model_name_or_path` names).
Why it matters: PEFT refuses such a config when the adapter is made on this model, so the
adapter was made on another model: loading it here fails, or (with a renamed
architecture) loads nothing.
What it does not mean: anything about a hub base model, which is not fetched (the check
is skipped). Limits: module names are the weights' names (`model.layers.0.self_attn.q_proj`);
a model whose modules hold no 2-D `weight` (quantized packs) is not matched.
"""


def check_targets_none(b: BundleFacts, limits: NoLimits, ctx: BundleContext) -> Iterator[Hit]:
    tm, modules, matched, weights = _targets(b)
    if matched:
        return
    where = weights.index or weights.files[0]
    yield Hit(message=f"target_modules {tm.value!r} match none of the {len(modules)} modules of the base weights "
                      f"({_file(where)})",
              evidence={"modules": len(modules), "matched": 0, "target_modules": str(tm.value)},
              location=_at(tm), related=(Related(location=Location(path=where, span=Span(0, 0, 0, 0)),
                                                 message=f"{len(modules)} modules, e.g. {modules[0] if modules else ''}"),))


TARGETS_NONE = Rule(id="TP-BUNDLE-ADAPTER-TARGETS-NONE", name="adapter-targets-nothing", level=Level.FAIL,
                    doc=TARGETS_NONE_DOC, check=check_targets_none, family=BUNDLE)

TARGETS_PARTIAL_DOC = """The adapter's target_modules reach only some of the model's layers.

What it flags: `target_modules` that match modules in fewer of the numbered layers
(`layers.<n>.`) than the base weights hold modules of the kinds matched (a regex reaching
`q_proj` in layer 0 of 24 layers that all hold one), while `layers_to_transform` and
`exclude_modules` are unset (a user who limits the layers on purpose sets one). The
message gives both counts.
Why it matters: a regex written for one layer (`model.layers.1.self_attn.q_proj`) or a
prefix that stops at layer 9 (`layers.[0-9].`) adapts a sliver of the model; the run
trains, the loss falls a little, and the fine-tune is far weaker than it should be.
What it does not mean: a broken adapter — it is a WARN; when fewer layers are what you
meant, set `layers_to_transform` to say so.
"""


def check_targets_partial(b: BundleFacts, limits: NoLimits, ctx: BundleContext) -> Iterator[Hit]:
    tm, modules, matched, weights = _targets(b)
    ad = b.adapter
    assert ad is not None
    if ad.get("layers_to_transform") is not None:
        raise Skip("layers_to_transform is set: the layers are chosen on purpose")
    if ad.get("exclude_modules"):
        raise Skip("exclude_modules is set: the modules are chosen on purpose")
    # The layers the user likely meant: those holding a module of a kind the targets matched
    # (q_proj, ...). A hybrid model with attention in every 8th layer is not "partial".
    kinds = {m.rsplit(".", 1)[-1] for m in matched}
    meant = {n for m in modules if m.rsplit(".", 1)[-1] in kinds and (n := _layer(m)) is not None}
    hit = {n for n in map(_layer, matched) if n is not None}
    # hit is within meant (a matched module is one of the modules, of a kind matched): the
    # finding is fewer layers hit than meant. No match, or matches in no numbered layer,
    # leave meant and hit alike (empty, or the same layers).
    if len(hit) >= len(meant):
        return
    shown = ", ".join(map(str, sorted(hit)[:8])) + (", ..." if len(hit) > 8 else "")
    named = ", ".join(sorted(kinds)[:4]) + (", ..." if len(kinds) > 4 else "")
    where = weights.index or weights.files[0]
    yield Hit(message=f"target_modules {tm.value!r} match {len(matched)} module(s) in {len(hit)} of the "
                      f"{len(meant)} layers of the base weights that hold {named} (layers {shown})",
              evidence={"layers": len(meant), "layers_matched": len(hit), "modules_matched": len(matched)},
              location=_at(tm), related=(Related(location=Location(path=where, span=Span(0, 0, 0, 0)),
                                                 message=f"{len(meant)} layers hold {named}"),))


TARGETS_PARTIAL = Rule(id="TP-BUNDLE-ADAPTER-TARGETS-PARTIAL", name="adapter-targets-some-layers",
                       level=Level.WARN, doc=TARGETS_PARTIAL_DOC, check=check_targets_partial, family=BUNDLE)

# --- adapter weights ---------------------------------------------------------------------------------

LORA_ZERO_DOC = """Every lora_B weight of the saved adapter is zero: the adapter does nothing.

What it flags: adapter_model.safetensors whose `lora_B` tensors (PEFT initialises them to
zero) all hold only zeros (0.0 or -0.0), read tensor by tensor up to a byte cap.
Why it matters: the adapter's update is lora_B x lora_A = 0; the model loaded with it is
the base model. The run "trained" (the optimizer never stepped on these weights: a frozen
adapter, a learning rate of 0, gradients that never reached it, a save before training or
from the wrong model object).
What it does not mean: anything for an adapter with at least one non-zero lora_B. When
the read stops at the cap before finding one, the check is skipped and says so.
"""


def check_lora_zero(b: BundleFacts, limits: NoLimits, ctx: BundleContext) -> Iterator[Hit]:
    ad = b.adapter
    if ad is None or ad.weights is None:
        raise Skip("no adapter_model.safetensors in the folder")
    lb = ad.lora_b
    if lb is None or lb.total == 0:
        raise Skip("the adapter has no lora_B tensors")
    if lb.nonzero is not None:
        return
    if lb.note or lb.read < lb.total:
        raise Skip(f"lora_B read {lb.read} of {lb.total} tensors, all zero so far: {lb.note}")
    first = lb.first
    assert first is not None
    r = ad.settings.get("r")
    related = [Related(location=_at(r) if r else Location(path=ad.config_path, span=Span(0, 0, 0, 0)),
                       message=f"{ad.get('peft_type') or 'LORA'} adapter, r {ad.get('r')}")]
    evidence: dict[str, int] = {"lora_b_tensors": lb.total, "zero": lb.total}
    step = b.run.global_step
    trained = ""
    if step is not None and isinstance(step.value, int):  # the run says it stepped: the save missed it
        evidence["global_step"] = step.value
        trained = f", after {step.value} logged optimizer step(s)"
        related.append(Related(location=_at(step), message=f"global_step {step.value}"))
    yield Hit(message=f"all {lb.total} lora_B tensors in {_file(first.path)} are zero (first {first.name}){trained}: "
                      "the adapter adds nothing to the base model",
              evidence=evidence, location=_tensor_at(first), related=tuple(related))


LORA_ZERO = Rule(id="TP-BUNDLE-LORA-B-ZERO", name="lora-b-all-zero", level=Level.FAIL, doc=LORA_ZERO_DOC,
                 check=check_lora_zero, family=BUNDLE)

RANK_DOC = """The adapter's tensor shapes contradict its r.

What it flags: a `lora_A` weight of shape [r', in] (or `lora_B` [out, r']) whose r' is not
the adapter_config.json `r` (nor the module's entry in `rank_pattern`).
Why it matters: PEFT builds the layers from the config and then loads the tensors:
"size mismatch" — the adapter cannot be loaded; a config edited after training, or
weights from another run copied beside it. The scaling lora_alpha / r is then also not
the one the adapter was trained with.
What it does not mean: anything about `lora_alpha` itself, which no tensor records: only
r can be told from the shapes.
"""


def _expected_rank(module: str, r: int, pattern: Any) -> int:
    """The module's rank: its rank_pattern entry (a name suffix or a regex, as PEFT
    matches it), else r."""
    if isinstance(pattern, dict):
        for key, value in pattern.items():
            if not isinstance(key, str) or not isinstance(value, int):
                continue
            if module == key or module.endswith("." + key) or (_valid(key) and re.fullmatch(key, module)):
                return value
    return r


def _valid(pattern: str) -> bool:
    try:
        re.compile(pattern)
        return True
    except re.error:
        return False


def check_rank(b: BundleFacts, limits: NoLimits, ctx: BundleContext) -> Iterator[Hit]:
    ad = b.adapter
    if ad is None or ad.weights is None:
        raise Skip("no adapter_model.safetensors in the folder")
    _unread(b, "adapter_config.json")
    r = ad.settings.get("r")
    if r is None or not isinstance(r.value, int) or isinstance(r.value, bool):
        raise Skip("adapter_config.json sets no r")
    wrong: list[tuple[Tensor, int, int]] = []
    seen = 0
    for t in ad.weights.tensors:
        if len(t.shape) != 2:
            continue
        if ".lora_A." in t.name:
            got = t.shape[0]
            module = t.name.split(".lora_A.")[0]
        elif ".lora_B." in t.name:
            got = t.shape[1]
            module = t.name.split(".lora_B.")[0]
        else:
            continue
        seen += 1
        want = _expected_rank(module.removeprefix("base_model.model."), r.value, ad.get("rank_pattern"))
        if got != want:
            wrong.append((t, got, want))
    if not seen:
        raise Skip("the adapter has no lora_A/lora_B tensors")
    if not wrong:
        return
    t, got, want = wrong[0]
    yield Hit(message=f"{len(wrong)} of {seen} LoRA tensors have a rank other than the config's: {t.name} "
                      f"{list(t.shape)} has rank {got}, adapter_config.json says r {want}",
              evidence={"tensors": seen, "wrong": len(wrong), "rank": got, "r": want},
              location=_at(r), related=(Related(location=_tensor_at(t), message=f"{t.name} {list(t.shape)}"),))


RANK = Rule(id="TP-BUNDLE-LORA-RANK-MISMATCH", name="lora-rank-mismatch", level=Level.FAIL, doc=RANK_DOC,
            check=check_rank, family=BUNDLE)

# --- saved weights ------------------------------------------------------------------------------------

INDEX_DOC = """The sharded index and the shards' headers disagree.

What it flags: tensors `model.safetensors.index.json` places in a shard whose header
does not hold them, and tensors a shard holds that the index does not name. Shards the
index names that are not in the folder are TP-ENV-CKPT-MISSING's (the index's own
report); this rule compares the shards that are there.
Why it matters: `from_pretrained` looks each tensor up through the index: one placed in
the wrong shard is "missing" and initialised at random (a warning few read), one the
index does not name is never loaded.
What it does not mean: damaged tensor data — only headers are read.
"""


def check_index(b: BundleFacts, limits: NoLimits, ctx: BundleContext) -> Iterator[Hit]:
    w = b.weights
    if w is None or w.index is None or not w.index_map:
        raise Skip("no sharded index (*.safetensors.index.json) in the folder")
    present = {_file(f) for f in w.files}
    held: dict[str, set[str]] = {}
    for t in w.tensors:
        held.setdefault(_file(t.path), set()).add(t.name)
    misplaced = [(name, s) for name, s in w.index_map.items()
                 if s.value in present and name not in held.get(s.value, set())]
    unnamed = sorted((t for t in w.tensors if t.name not in w.index_map), key=lambda t: (t.path, t.name))
    if misplaced:
        name, s = min(misplaced, key=lambda x: x[1].line)
        yield Hit(message=f"{len(misplaced)} tensor(s) the index places in shards that do not hold them; first "
                          f"{name} in {s.value}",
                  evidence={"misplaced": len(misplaced), "first_tensor": name, "shard": s.value},
                  location=_at(s), related=(Related(location=Location(path=str(_sibling(w, s.value)), byte_offset=0),
                                                    message=f"{s.value} does not hold {name}"),))
    if unnamed:
        t = unnamed[0]
        yield Hit(message=f"{len(unnamed)} tensor(s) in the shards are not named in the index; first {t.name} in "
                          f"{_file(t.path)}",
                  evidence={"unnamed": len(unnamed), "first_tensor": t.name, "shard": _file(t.path)},
                  location=_tensor_at(t),
                  related=(Related(location=Location(path=w.index, span=Span(0, 0, 0, 0)),
                                   message="the index does not name it"),))


def _sibling(w: Weights, shard: str) -> str:
    return next(f for f in w.files if _file(f) == shard)


INDEX = Rule(id="TP-BUNDLE-INDEX-MISMATCH", name="index-shard-mismatch", level=Level.FAIL, doc=INDEX_DOC,
             check=check_index, family=BUNDLE)

ZERO_DOC = """The saved model holds tensors with zero elements.

What it flags: tensors in the folder's safetensors files (model or adapter) with a 0 in
their shape, e.g. `[0]`.
Why it matters: a ZeRO-3 or FSDP save made without gathering the parameters writes each
rank's empty placeholder: the file loads, and `from_pretrained` fails with a size mismatch
or silently initialises the layer at random.
What it does not mean: anything for tensors that are legitimately tiny (a [1] scale): only
zero elements count.
"""


def _all_tensors(b: BundleFacts) -> Iterable[Tensor]:
    if b.weights is not None:
        yield from b.weights.tensors
    if b.adapter is not None and b.adapter.weights is not None:
        yield from b.adapter.weights.tensors


def check_zero_elements(b: BundleFacts, limits: NoLimits, ctx: BundleContext) -> Iterator[Hit]:
    tensors = list(_all_tensors(b))
    if not tensors:
        raise Skip("no safetensors weights in the folder")
    empty = [t for t in tensors if t.numel == 0]
    if not empty:
        return
    t = empty[0]
    anchor = b.config.get("model_type") or b.config.get("architectures")
    related = (Related(location=_at(anchor), message="the model these weights are saved for"),) if anchor else ()
    yield Hit(message=f"{len(empty)} of {len(tensors)} tensors have zero elements (first {t.name} {list(t.shape)} "
                      f"in {_file(t.path)}): a sharded (ZeRO-3/FSDP) save without gathered parameters",
              evidence={"tensors": len(tensors), "empty": len(empty), "first_tensor": t.name},
              location=_tensor_at(t), related=related)


ZERO_ELEMENTS = Rule(id="TP-BUNDLE-ZERO-ELEMENT-TENSORS", name="zero-element-tensors", level=Level.FAIL,
                     doc=ZERO_DOC, check=check_zero_elements, family=BUNDLE)

NO_HEAD_DOC = """A model saved without its LM head while its embeddings are not tied.

What it flags: config.json with `"tie_word_embeddings": false` for a `*ForCausalLM`
architecture whose saved weights hold the input embedding but no output head
(`lm_head.weight`, `embed_out.weight`, `output.weight`).
Why it matters: `from_pretrained` initialises the head at random (with a warning) and the
model generates noise — the usual result of merging an adapter and saving only the base
model's state, or of dropping the head as a "duplicate" of the embedding.
What it does not mean: anything when embeddings are tied (the head is the embedding) or
when config.json does not say (the model type's default is not assumed).
"""


def check_no_head(b: BundleFacts, limits: NoLimits, ctx: BundleContext) -> Iterator[Hit]:
    _unread(b, "config.json")
    tie = b.config.get("tie_word_embeddings")
    if tie is None:
        raise Skip("config.json does not set tie_word_embeddings")
    if tie.value is not False:
        return
    arch = b.config.get("architectures")
    if arch is not None and isinstance(arch.value, list) and not any(
            isinstance(a, str) and a.endswith("LMHeadModel") or isinstance(a, str) and "CausalLM" in a
            for a in arch.value):
        raise Skip(f"architectures {arch.value!r} is not a causal LM")
    w = b.weights
    if w is None or not w.tensors:
        raise Skip("no model weights in the folder")
    emb = embedding(w)
    if emb is None:
        raise Skip("the weights hold no input embedding")
    names = [t.name for t in w.tensors] + list(w.index_map)
    if any(_HEAD.search(n) for n in names):
        return
    yield Hit(message=f"tie_word_embeddings is false but the {len(w.tensors)} saved tensors hold no lm_head "
                      f"(the embedding {emb.name} is there): the head loads at random",
              evidence={"tensors": len(w.tensors), "tie_word_embeddings": False},
              location=_at(tie), related=(Related(location=_tensor_at(emb), message=f"{emb.name} without a head"),))


NO_HEAD = Rule(id="TP-BUNDLE-NO-LM-HEAD", name="merged-without-lm-head", level=Level.FAIL, doc=NO_HEAD_DOC,
               check=check_no_head, family=BUNDLE)

RULES: tuple[Rule[BundleFacts, BundleContext], ...] = (
    STOP_TOKEN,
    SPECIAL_IDS,
    VOCAB,
    NEW_TOKENS,
    TARGETS_NONE,
    TARGETS_PARTIAL,
    LORA_ZERO,
    RANK,
    INDEX,
    ZERO_ELEMENTS,
    NO_HEAD,
)

__all__ = ["BUNDLE", "BundleContext", "RULES", "embedding"]
