"""A tiny tokenizer folder made with `tokenizers` on CPU, for the token-map tests.

A byte-level BPE trained on a few sentences (deterministic: the trainer is), with BOS added
by its post-processor as Llama's is, the special tokens of a chat template, and that
template with or without {% generation %} blocks. transformers loads the folder as a
PreTrainedTokenizerFast; the map reads tokenizer.json with `tokenizers` alone.
"""

from __future__ import annotations

import json
from pathlib import Path

SPECIALS = ["<s>", "</s>", "<pad>", "<|user|>", "<|assistant|>", "<|system|>"]

# The assistant turn (content and EOS) inside {% generation %}: what TRL's
# assistant_only_loss trains on.
TEMPLATE_GENERATION = (
    "{% for m in messages %}"
    "{% if m['role'] == 'assistant' %}<|assistant|>{% generation %}{{ m['content'] }}{{ eos_token }}{% endgeneration %}"
    "{% else %}<|{{ m['role'] }}|>{{ m['content'] }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
# The same template without generation blocks.
TEMPLATE_PLAIN = TEMPLATE_GENERATION.replace("{% generation %}", "").replace("{% endgeneration %}", "")
# A template that writes the BOS itself (rendered text encoded with special tokens: two BOS).
TEMPLATE_BOS = "{{ bos_token }}" + TEMPLATE_GENERATION

CORPUS = [
    "the cat sat on the mat and the dog ran to the park",
    "what is two plus two? it is four. answer: four",
    "### Answer: the sky is blue because of scattering",
    "hello there, how are you today? i am fine, thank you",
    "write a poem about the sea. the sea is wide and deep",
] * 4


def make_tokenizer(folder: Path, *, template: str | None = TEMPLATE_GENERATION, pad: str | None = "<pad>",
                   eos: str = "</s>") -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer=trainer)
    bos_id = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", bos_id)])
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    config: dict[str, object] = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": eos,
                                 "model_max_length": 4096}
    if pad is not None:
        config["pad_token"] = pad
    if template is not None:
        config["chat_template"] = template
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder
