"""Output folders made by the real writers, for the bundle tests.

transformers `save_pretrained` of a tiny Llama (hidden 16, 2 layers, 64 tokens) on CPU,
tokenizers built with the `tokenizers` library and saved by PreTrainedTokenizerFast, PEFT
LoRA adapters saved from the model, safetensors' own `save_file` for a rewritten shard. A
few settings the writers of today no longer emit (`add_bos_token` in tokenizer_config.json,
as transformers 4.x wrote it for Llama-3, Gemma-3 and DeepSeek) are set in the JSON after
the save, and say so.

`build(root)` makes every folder once (the imports cost seconds; the saves milliseconds)
and returns their paths by name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HIDDEN = 16
LAYERS = 2
ROWS = 64  # the model's vocabulary: its embedding rows


def tokenizer(specials: list[str], *, bos: str | None, eos: str, pad: str | None = None,
              template: str | None = None, prepend_bos: bool = False, model_max_length: int | None = None,
              added: list[str] = ()) -> Any:  # type: ignore[assignment]
    """A word-level tokenizer of ROWS ids: words w0.. then `specials` at the top ids
    (every special in tokenizer.json's added_tokens); `added` come after them (ids >= ROWS),
    as `add_tokens` gives them when the embeddings are not resized."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    words = ROWS - len(specials)
    vocab = {f"w{i}": i for i in range(words)}
    vocab.update({s: words + i for i, s in enumerate(specials)})
    unk = "<unk>" if "<unk>" in vocab else specials[0]
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token=unk))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    if prepend_bos and bos is not None:  # a post-processor that prepends BOS (Llama-3's tokenizer.json)
        tk.post_processor = processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                                          special_tokens=[(bos, vocab[bos])])
    kwargs: dict[str, Any] = {"bos_token": bos, "eos_token": eos, "unk_token": unk}
    if pad is not None:
        kwargs["pad_token"] = pad
    if model_max_length is not None:
        kwargs["model_max_length"] = model_max_length
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, **kwargs)
    others = [s for s in specials if s not in (bos, eos, pad, unk)]
    if others:
        tok.add_special_tokens({"additional_special_tokens": others})
    if added:
        tok.add_tokens(list(added))
    if template is not None:
        tok.chat_template = template
    return tok


def model(vocab: int = ROWS, *, bos: int | None = None, eos: int | list[int] | None = None,
          pad: int | None = None, seed: int = 0) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=HIDDEN, intermediate_size=2 * HIDDEN, num_hidden_layers=LAYERS,
                      num_attention_heads=2, num_key_value_heads=2, bos_token_id=bos, eos_token_id=eos,
                      pad_token_id=pad, tie_word_embeddings=False)
    return LlamaForCausalLM(cfg)


def set_generation(m: Any, **ids: Any) -> None:
    from transformers import GenerationConfig

    m.generation_config = GenerationConfig(**ids)


def edit_json(path: Path, **changes: Any) -> None:
    """Set keys of a saved JSON file (settings older writers emitted)."""
    obj = json.loads(path.read_text())
    obj.update(changes)
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


# Chat templates shaped as the families ship them (the turn markup, not their full logic).
EOT_TEMPLATE = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}<|eot|>\n{% endfor %}"
                "{% if add_generation_prompt %}assistant: {% endif %}")
LLAMA3_TEMPLATE = ("{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
                   "{{ m['content'] }}<|eot_id|>{% endfor %}"
                   "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}")
GEMMA3_TEMPLATE = ("{{ bos_token }}{% for m in messages %}<start_of_turn>"
                   "{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n{{ m['content'] }}<end_of_turn>\n"
                   "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")
DEEPSEEK_TEMPLATE = ("{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}<｜User｜>{{ m['content'] }}"
                     "{% else %}<｜Assistant｜>{{ m['content'] }}<｜end▁of▁sentence｜>{% endif %}{% endfor %}"
                     "{% if add_generation_prompt %}<｜Assistant｜>{% endif %}")

EOT_SPECIALS = ["<s>", "</s>", "<unk>", "<|eot|>"]  # ids 60..63


def _eot_tokenizer(**kw: Any) -> Any:
    return tokenizer(EOT_SPECIALS, bos="<s>", eos="</s>", pad="<unk>", template=EOT_TEMPLATE, **kw)


def _lora(base: Path, out: Path, *, targets: Any = ("q_proj", "v_proj"), r: int = 4, trained: bool = True,
          resize_to: int | None = None, modules_to_save: list[str] | None = None, saved_r: int | None = None,
          save_embedding_layers: Any = "auto", tok: Any = None) -> Path:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaForCausalLM

    m = LlamaForCausalLM.from_pretrained(str(base))
    if resize_to is not None:
        m.resize_token_embeddings(resize_to)
    pm = get_peft_model(m, LoraConfig(r=r, lora_alpha=2 * r, target_modules=targets if isinstance(targets, str)
                                      else list(targets), modules_to_save=modules_to_save))
    if trained:  # what a few optimizer steps leave: lora_B no longer zero
        torch.manual_seed(1)
        with torch.no_grad():
            for name, p in pm.named_parameters():
                if "lora_B" in name:
                    p.normal_(0, 0.02)
    if saved_r is not None:  # a config edited after training
        pm.peft_config["default"].r = saved_r
    pm.save_pretrained(str(out), save_embedding_layers=save_embedding_layers)
    if tok is not None:
        tok.save_pretrained(str(out))
    return out


def build(root: Path) -> dict[str, Path]:
    import torch
    from safetensors.torch import load_file, save_file

    root = Path(root)
    out: dict[str, Path] = {}

    def save(name: str, m: Any, tok: Any = None, **kw: Any) -> Path:
        p = root / name
        m.save_pretrained(str(p), **kw)
        if tok is not None:
            tok.save_pretrained(str(p))
        out[name] = p
        return p

    # A healthy full model: the template ends turns with <|eot|> (63), generation stops on [61, 63].
    m = model(bos=60, eos=61)
    set_generation(m, bos_token_id=60, eos_token_id=[61, 63], pad_token_id=62)
    save("healthy", m, _eot_tokenizer())
    # The same, generation stops on 61 only (a base model's generation config kept).
    m = model(bos=60, eos=61)
    set_generation(m, bos_token_id=60, eos_token_id=61)
    save("stop_missing", m, _eot_tokenizer())
    # Generation pads with 0 while the tokenizer pads with <unk> (62).
    m = model(bos=60, eos=61)
    set_generation(m, bos_token_id=60, eos_token_id=[61, 63], pad_token_id=0)
    save("pad_mismatch", m, _eot_tokenizer())
    # Two tokens added to the tokenizer, the embeddings never resized.
    m = model(bos=60, eos=61)
    set_generation(m, bos_token_id=60, eos_token_id=[61, 63])
    save("added_no_resize", m, _eot_tokenizer(added=["<tool>", "</tool>"]))
    m = model(bos=60, eos=61)
    set_generation(m, bos_token_id=60, eos_token_id=[61, 63])
    m.resize_token_embeddings(ROWS + 2)
    save("added_resized", m, _eot_tokenizer(added=["<tool>", "</tool>"]))
    # Sharded saves: one with a shard removed, one with a shard rewritten without a tensor.
    m = model(bos=60, eos=61)
    p = save("sharded", m, max_shard_size="12KB")
    p2 = save("sharded_missing", m, max_shard_size="12KB")
    shards = sorted(p2.glob("model-*.safetensors"))
    shards[-1].unlink()
    out["missing_shard_name"] = Path(shards[-1].name)
    p3 = save("sharded_rewritten", m, max_shard_size="12KB")
    first = sorted(p3.glob("model-*.safetensors"))[0]
    tensors = load_file(str(first))
    dropped = sorted(tensors)[0]
    save_file({k: v for k, v in tensors.items() if k != dropped}, str(first), metadata={"format": "pt"})
    out["dropped_tensor"] = Path(dropped)
    # A ZeRO-3 save without gathered parameters: every tensor an empty placeholder.
    m = model(bos=60, eos=61)
    save("zero3_empty", m, state_dict={k: torch.empty(0) for k in m.state_dict()})
    # A merged model saved without its head, embeddings untied.
    m = model(bos=60, eos=61)
    save("no_head", m, state_dict={k: v for k, v in m.state_dict().items() if not k.startswith("lm_head")})

    # The base model adapters are made from, and the adapters.
    m = model(bos=60, eos=61)
    set_generation(m, bos_token_id=60, eos_token_id=[61, 63])
    base = save("base", m, _eot_tokenizer())
    out["adapter_trained"] = _lora(base, root / "adapter_trained", tok=_eot_tokenizer())
    out["adapter_untrained"] = _lora(base, root / "adapter_untrained", trained=False)
    out["adapter_one_layer"] = _lora(base, root / "adapter_one_layer", targets=r"model\.layers\.0\.self_attn\.q_proj")
    out["adapter_rank_edited"] = _lora(base, root / "adapter_rank_edited", saved_r=8)
    grown = _eot_tokenizer(added=["<tool>", "</tool>"])
    out["adapter_new_tokens"] = _lora(base, root / "adapter_new_tokens", resize_to=ROWS + 2,
                                      save_embedding_layers=False, tok=grown)
    out["adapter_new_tokens_saved"] = _lora(base, root / "adapter_new_tokens_saved", resize_to=ROWS + 2,
                                            modules_to_save=["embed_tokens", "lm_head"], tok=grown)
    out["adapter_other_model"] = _gpt2_adapter(base, root / "adapter_other_model")

    # Tokenizer + config folders shaped as three families ship them.
    # Each with a pad token of its own: a tokenizer without one is TP-PRE-MISSING-PAD-TOKEN's WARN.
    out["llama3_shape"] = _family(root / "llama3_shape", ["<|begin_of_text|>", "<|end_of_text|>",
                                                          "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
                                                          "<|finetune_right_pad_id|>"],
                                  bos="<|begin_of_text|>", eos="<|end_of_text|>", pad="<|finetune_right_pad_id|>",
                                  template=LLAMA3_TEMPLATE,
                                  stop=["<|end_of_text|>", "<|eot_id|>"], model_max_length=int(1e30), prepend_bos=True)
    out["gemma3_shape"] = _family(root / "gemma3_shape", ["<pad>", "<eos>", "<bos>", "<start_of_turn>",
                                                          "<end_of_turn>"],
                                  bos="<bos>", eos="<eos>", pad="<pad>", template=GEMMA3_TEMPLATE,
                                  stop=["<eos>", "<end_of_turn>"], model_max_length=int(1e30), add_bos_token=True)
    out["deepseek_shape"] = _family(root / "deepseek_shape", ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>",
                                                              "<｜User｜>", "<｜Assistant｜>", "<｜▁pad▁｜>"],
                                    bos="<｜begin▁of▁sentence｜>", eos="<｜end▁of▁sentence｜>", pad="<｜▁pad▁｜>",
                                    template=DEEPSEEK_TEMPLATE, stop=["<｜end▁of▁sentence｜>"],
                                    model_max_length=16384, add_bos_token=True)
    return out


def _family(folder: Path, specials: list[str], *, bos: str, eos: str, template: str, stop: list[str],
            pad: str | None = None, model_max_length: int, add_bos_token: bool = False,
            prepend_bos: bool = False) -> Path:
    tok = tokenizer(specials, bos=bos, eos=eos, pad=pad, template=template, prepend_bos=prepend_bos,
                    model_max_length=model_max_length)
    ids = {s: tok.convert_tokens_to_ids(s) for s in specials}
    stops = [ids[s] for s in stop]
    m = model(bos=ids[bos], eos=ids[eos], pad=ids[pad] if pad else None)
    set_generation(m, bos_token_id=ids[bos], eos_token_id=stops if len(stops) > 1 else stops[0],
                   **({"pad_token_id": ids[pad]} if pad else {}))
    m.save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    if add_bos_token:  # transformers 4.x wrote it into tokenizer_config.json; 5.x leaves it out
        edit_json(folder / "tokenizer_config.json", add_bos_token=True)
    return folder


def _gpt2_adapter(base: Path, out: Path) -> Path:
    """An adapter made on a GPT-2 model (target c_attn) whose config names the Llama base."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    g = GPT2LMHeadModel(GPT2Config(vocab_size=ROWS, n_embd=HIDDEN, n_layer=LAYERS, n_head=2, n_positions=64))
    pm = get_peft_model(g, LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn"], fan_in_fan_out=True))
    pm.peft_config["default"].base_model_name_or_path = str(base)
    with torch.no_grad():
        for name, p in pm.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.02)
    pm.save_pretrained(str(out))
    return out


if __name__ == "__main__":  # python tests/bundle_folders.py OUT: the folders, to look at
    import sys

    for k, v in build(Path(sys.argv[1])).items():
        print(k, v)
