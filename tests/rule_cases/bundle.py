"""Cases for the bundle family: output folders written here file by file (config.json,
generation_config.json, a word-level tokenizer.json and tokenizer_config.json with a
chat template, safetensors weights by the safetensors library, an adapter beside its
base), read together by the reader (readers/bundle.read_bundle)."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from trainproof_lsp.readers.bundle import BundleFacts, read_bundle
from trainproof_lsp.rules.bundle import BundleContext

from . import Expect, FamilyCases, Fires, Quiet, RuleCases
from .checkpoint import _folder

ROWS = 64  # the model's vocabulary: words w0..w59, then <s> </s> <pad> <|eot|> at 60..63
SPECIALS = {"<s>": 60, "</s>": 61, "<pad>": 62, "<|eot|>": 63}
EOT_TEMPLATE = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}<|eot|>\n{% endfor %}"


def tokenizer_json(rows: int = ROWS) -> dict[str, Any]:
    """Words w0..w59, the specials at 60..63, and tokens added past them up to `rows` ids."""
    words = {f"w{i}": i for i in range(ROWS - len(SPECIALS))}
    added = [{"id": i, "content": t, "special": True} for t, i in SPECIALS.items()]
    added += [{"id": i, "content": f"<new{i}>", "special": False} for i in range(ROWS, rows)]
    return {"model": {"type": "WordLevel", "vocab": words, "unk_token": "w0"}, "added_tokens": added}


TOKENIZER_CONFIG = {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "chat_template": EOT_TEMPLATE}


def llama(layers: int = 2, rows: int = ROWS, hidden: int = 8, *, head: bool = True, empty: str = "") -> dict[str, Any]:
    """A tiny Llama-shaped state dict: embedding, per layer q/k/v/o and an MLP, the head."""
    t: dict[str, Any] = {"model.embed_tokens.weight": np.ones((rows, hidden), np.float32)}
    for n in range(layers):
        for m in ("q_proj", "k_proj", "v_proj", "o_proj"):
            t[f"model.layers.{n}.self_attn.{m}.weight"] = np.ones((hidden, hidden), np.float32)
        t[f"model.layers.{n}.mlp.up_proj.weight"] = np.ones((2 * hidden, hidden), np.float32)
    if head:
        t["lm_head.weight"] = np.ones((rows, hidden), np.float32)
    if empty:
        t[empty] = np.zeros((0,), np.float32)
    return t


def bundle(files: dict[str, Any], *, folder: Path | None = None) -> BundleFacts:
    """The files of a fresh folder (a dict or list is JSON, an array mapping is safetensors)."""
    from safetensors.numpy import save
    folder = folder or Path(tempfile.mkdtemp(dir=_folder()))
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".safetensors"):
            path.write_bytes(save(content))
        else:
            path.write_text(json.dumps(content, indent=2))
    return read_bundle(folder)


def model_folder(*, eos: Any = (61, 63), generation: dict[str, Any] | None = None, config: dict[str, Any] | None = None,
                 weights: dict[str, Any] | None = None, rows: int = ROWS, tok: dict[str, Any] | None = None) -> BundleFacts:
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": ROWS,
           "eos_token_id": list(eos) if isinstance(eos, tuple) else eos,
           "bos_token_id": 60, **(config or {})}
    files: dict[str, Any] = {"config.json": cfg, "tokenizer.json": tokenizer_json(rows),
                             "tokenizer_config.json": {**TOKENIZER_CONFIG, **(tok or {})},
                             "model.safetensors": weights if weights is not None else llama()}
    if generation is not None:
        files["generation_config.json"] = generation
    return bundle(files)


def adapter(settings: dict[str, Any], tensors: dict[str, Any] | None = None, *, rows: int = ROWS,
            base_layers: int = 2) -> BundleFacts:
    """An adapter folder beside its base model folder (base/, named by base_model_name_or_path)."""
    root = Path(tempfile.mkdtemp(dir=_folder()))
    bundle({"config.json": {"architectures": ["LlamaForCausalLM"], "vocab_size": ROWS},
            "model.safetensors": llama(base_layers)}, folder=root / "base")
    cfg = {"peft_type": "LORA", "base_model_name_or_path": "../base", "r": 4, "target_modules": ["q_proj", "v_proj"],
           **settings}
    lora = tensors if tensors is not None else lora_tensors(4)
    return bundle({"adapter_config.json": cfg, "adapter_model.safetensors": lora, "tokenizer.json": tokenizer_json(rows)},
                  folder=root / "adapter")


def lora_tensors(r: int, *, zero_b: bool = False, layers: int = 2, b_rank: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n in range(layers):
        for m in ("q_proj", "v_proj"):
            name = f"base_model.model.model.layers.{n}.self_attn.{m}"
            out[f"{name}.lora_A.weight"] = np.full((r, 8), 0.01, np.float32)
            out[f"{name}.lora_B.weight"] = np.zeros((8, b_rank or r), np.float32) if zero_b else \
                np.full((8, b_rank or r), 0.02, np.float32)
    return out


def sharded(misplace: bool = False, extra: bool = False) -> BundleFacts:
    w = llama()
    names = sorted(w)
    first, second = {n: w[n] for n in names[:5]}, {n: w[n] for n in names[5:]}
    if extra:
        second["model.stray.weight"] = np.ones((2, 2), np.float32)
    weight_map = {n: "model-00001-of-00002.safetensors" for n in first}
    weight_map.update({n: "model-00002-of-00002.safetensors" for n in w if n not in first})
    if misplace:
        weight_map[names[6]] = "model-00001-of-00002.safetensors"
    return bundle({"config.json": {"architectures": ["LlamaForCausalLM"], "vocab_size": ROWS},
                   "model-00001-of-00002.safetensors": first, "model-00002-of-00002.safetensors": second,
                   "model.safetensors.index.json": {"metadata": {}, "weight_map": weight_map}})


def context(_: BundleFacts) -> BundleContext:
    return BundleContext()


def normalize(text: str) -> str:
    return re.sub(re.escape(str(_folder())) + r"/[^/\s]+", "<tmp>", text)


CASES: dict[str, RuleCases] = {
    "TP-BUNDLE-STOP-TOKEN": RuleCases(
        fires=Fires(subject=lambda: model_folder(eos=61, generation={"eos_token_id": 61, "bos_token_id": 60}), hits=(Expect(message="the chat template ends the assistant's turn with '<|eot|>' (id 63), but generation_config.json stops generation on eos_token_id 61: generation runs on past the end of the answer",
                           evidence={'marker': '<|eot|>', 'marker_id': 63, 'stop_ids': '61', 'stop_file': 'generation_config.json'}, line=4),),
                    family=('TP-BUNDLE-STOP-TOKEN',)),
        quiet=(Quiet(subject=lambda: model_folder(eos=61, generation={"eos_token_id": [61, 63]})),
               Quiet(subject=lambda: model_folder(tok={"chat_template": None}), skip="no tokenizer with a chat template")),
    ),
    "TP-BUNDLE-SPECIAL-ID-MISMATCH": RuleCases(
        fires=Fires(subject=lambda: model_folder(eos=63, generation={"eos_token_id": 2, "bos_token_id": 1}), hits=(Expect(message="config.json eos_token_id 63 shares no id with generation_config.json's 2",
                           evidence={'token': 'eos', 'config': '63', 'generation_config': '2'}, line=6),
                     Expect(message="the tokenizer's eos_token '</s>' is id 61, but generation_config.json says eos_token_id 2",
                           evidence={'token': 'eos', 'tokenizer_id': 61, 'model_ids': '2', 'model_file': 'generation_config.json'}, line=2),
                     Expect(message="the tokenizer's bos_token '<s>' is id 60, but generation_config.json says bos_token_id 1",
                           evidence={'token': 'bos', 'tokenizer_id': 60, 'model_ids': '1', 'model_file': 'generation_config.json'}, line=1),),
                    family=('TP-BUNDLE-STOP-TOKEN', 'TP-BUNDLE-SPECIAL-ID-MISMATCH', 'TP-BUNDLE-SPECIAL-ID-MISMATCH', 'TP-BUNDLE-SPECIAL-ID-MISMATCH')),
        quiet=Quiet(subject=lambda: model_folder(eos=[61, 63], generation={"eos_token_id": [61, 63], "bos_token_id": 60})),
    ),
    "TP-BUNDLE-VOCAB-BEYOND-EMBEDDINGS": RuleCases(
        fires=Fires(subject=lambda: model_folder(rows=70), hits=(Expect(message='the tokenizer has 70 token ids but the embedding model.embed_tokens.weight in model.safetensors has 64 rows: 6 token(s) have no embedding',
                           evidence={'tokenizer_size': 70, 'embedding_rows': 64, 'beyond': 6}, line=67),),
                    family=('TP-BUNDLE-VOCAB-BEYOND-EMBEDDINGS',)),
        quiet=Quiet(subject=lambda: model_folder()),
    ),
    "TP-BUNDLE-NEW-TOKENS-NOT-SAVED": RuleCases(
        fires=Fires(subject=lambda: adapter({}, rows=70), hits=(Expect(message="the tokenizer has 6 token id(s) past the base model's 64 embedding rows, and the adapter saves no embedding (modules_to_save, trainable_token_indices): their trained rows are lost",
                           evidence={'tokenizer_size': 70, 'base_rows': 64, 'new_tokens': 6}, line=67),),
                    family=('TP-BUNDLE-NEW-TOKENS-NOT-SAVED',)),
        quiet=(Quiet(subject=lambda: adapter({"modules_to_save": ["embed_tokens", "lm_head"]}, rows=70)),
               Quiet(subject=lambda: adapter({}))),
    ),
    "TP-BUNDLE-ADAPTER-TARGETS-NONE": RuleCases(
        fires=Fires(subject=lambda: adapter({"target_modules": ["c_attn", "c_proj"]}), hits=(Expect(message="target_modules ['c_attn', 'c_proj'] match none of the 12 modules of the base weights (model.safetensors)",
                           evidence={'modules': 12, 'matched': 0, 'target_modules': "['c_attn', 'c_proj']"}, line=4),),
                    family=('TP-BUNDLE-ADAPTER-TARGETS-NONE',)),
        quiet=Quiet(subject=lambda: adapter({})),
    ),
    "TP-BUNDLE-ADAPTER-TARGETS-PARTIAL": RuleCases(
        fires=Fires(subject=lambda: adapter({"target_modules": r".*layers\.0\.self_attn\.(q_proj|v_proj)"}, lora_tensors(4, layers=1),
                                            base_layers=4), hits=(Expect(message="target_modules '.*layers\\\\.0\\\\.self_attn\\\\.(q_proj|v_proj)' match 2 module(s) in 1 of the 4 layers of the base weights that hold q_proj, v_proj (layers 0)",
                           evidence={'layers': 4, 'layers_matched': 1, 'modules_matched': 2}, line=4),),
                    family=('TP-BUNDLE-ADAPTER-TARGETS-PARTIAL',)),
        quiet=(Quiet(subject=lambda: adapter({}, base_layers=2)),
               Quiet(subject=lambda: adapter({"target_modules": r".*layers\.0\.self_attn\.(q_proj|v_proj)", "layers_to_transform": [0]},
                                             lora_tensors(4, layers=1), base_layers=4), skip="layers_to_transform is set")),
    ),
    "TP-BUNDLE-LORA-B-ZERO": RuleCases(
        fires=Fires(subject=lambda: adapter({}, lora_tensors(4, zero_b=True)), hits=(Expect(message='all 4 lora_B tensors in adapter_model.safetensors are zero (first base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight): the adapter adds nothing to the base model',
                           evidence={'lora_b_tensors': 4, 'zero': 4}, line=None),),
                    family=('TP-BUNDLE-LORA-B-ZERO',)),
        quiet=Quiet(subject=lambda: adapter({})),
    ),
    "TP-BUNDLE-LORA-RANK-MISMATCH": RuleCases(
        fires=Fires(subject=lambda: adapter({"r": 8}), hits=(Expect(message="8 of 8 LoRA tensors have a rank other than the config's: base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight [4, 8] has rank 4, adapter_config.json says r 8",
                           evidence={'tensors': 8, 'wrong': 8, 'rank': 4, 'r': 8}, line=3),),
                    family=('TP-BUNDLE-LORA-RANK-MISMATCH',)),
        quiet=(Quiet(subject=lambda: adapter({"r": 8, "rank_pattern": {"q_proj": 4, "v_proj": 4}})),
               Quiet(subject=lambda: adapter({}))),
    ),
    "TP-BUNDLE-INDEX-MISMATCH": RuleCases(
        fires=Fires(subject=lambda: sharded(misplace=True, extra=True), hits=(Expect(message='1 tensor(s) the index places in shards that do not hold them; first model.layers.0.self_attn.v_proj.weight in model-00001-of-00002.safetensors',
                           evidence={'misplaced': 1, 'first_tensor': 'model.layers.0.self_attn.v_proj.weight', 'shard': 'model-00001-of-00002.safetensors'}, line=9),
                     Expect(message='1 tensor(s) in the shards are not named in the index; first model.stray.weight in model-00002-of-00002.safetensors',
                           evidence={'unnamed': 1, 'first_tensor': 'model.stray.weight', 'shard': 'model-00002-of-00002.safetensors'}, line=None),),
                    family=('TP-BUNDLE-INDEX-MISMATCH', 'TP-BUNDLE-INDEX-MISMATCH')),
        quiet=Quiet(subject=lambda: sharded()),
    ),
    "TP-BUNDLE-ZERO-ELEMENT-TENSORS": RuleCases(
        fires=Fires(subject=lambda: model_folder(weights=llama(empty="model.norm.weight")), hits=(Expect(message='1 of 13 tensors have zero elements (first model.norm.weight [0] in model.safetensors): a sharded (ZeRO-3/FSDP) save without gathered parameters',
                           evidence={'tensors': 13, 'empty': 1, 'first_tensor': 'model.norm.weight'}, line=None),),
                    family=('TP-BUNDLE-ZERO-ELEMENT-TENSORS',)),
        quiet=Quiet(subject=lambda: model_folder()),
    ),
    "TP-BUNDLE-NO-LM-HEAD": RuleCases(
        fires=Fires(subject=lambda: model_folder(config={"tie_word_embeddings": False}, weights=llama(head=False)), hits=(Expect(message='tie_word_embeddings is false but the 11 saved tensors hold no lm_head (the embedding model.embed_tokens.weight is there): the head loads at random',
                           evidence={'tensors': 11, 'tie_word_embeddings': False}, line=11),),
                    family=('TP-BUNDLE-NO-LM-HEAD',)),
        quiet=(Quiet(subject=lambda: model_folder(config={"tie_word_embeddings": False})),
               Quiet(subject=lambda: model_folder(config={"tie_word_embeddings": True}, weights=llama(head=False)))),
    ),
}

FAMILY = FamilyCases(cases=CASES, context=context, normalize=normalize)
