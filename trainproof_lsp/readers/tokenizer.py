"""A Hugging Face tokenizer directory read as plain JSON — no transformers needed.

The files and the parts of them that matter here:

    tokenizer_config.json   {"bos_token": "<s>" | {"content": "<s>", ...}, "eos_token": ...,
                             "pad_token": ..., "add_bos_token": true, "model_max_length": 2048,
                             "chat_template": "{% for message in messages %}...",
                             "added_tokens_decoder": {"32000": {"content": "<|im_end|>", ...}}}
    special_tokens_map.json {"bos_token": ..., "eos_token": ..., "pad_token": ...}
    chat_template.jinja     the template as a file (newer transformers), or
    chat_template.json      {"chat_template": "..."}
    tokenizer.json          {"added_tokens": [{"id": 32000, "content": "<|im_end|>", ...}],
                             "post_processor": {"type": "TemplateProcessing", "single": [...]},
                             "model": {"vocab": {...}}}
    config.json             {"vocab_size": 32000, "eos_token_id": 2, "pad_token_id": 0, ...}
    generation_config.json  {"eos_token_id": [2, 32000], ...}

The reader records values with the file and line they came from; the rules in
rules/tokenizer.py judge them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import msgspec

from ..core.model import ReadError, Span

FILES = ("tokenizer_config.json", "special_tokens_map.json", "tokenizer.json", "chat_template.jinja",
         "chat_template.json", "config.json", "generation_config.json", "added_tokens.json")
TOKENIZER_FILES = ("tokenizer_config.json", "special_tokens_map.json", "tokenizer.json")


@dataclass(frozen=True, slots=True, kw_only=True)
class Sourced:
    """A value and where it was read (file path + 0-based line of its key)."""

    value: Any
    path: str
    line: int = 0


@dataclass(frozen=True, kw_only=True)
class TokenizerFiles:
    folder: str
    present: tuple[str, ...]
    bos: Sourced | None = None
    eos: Sourced | None = None
    pad: Sourced | None = None
    unk: Sourced | None = None
    add_bos: Sourced | None = None
    add_eos: Sourced | None = None
    model_max_length: Sourced | None = None
    chat_template: Sourced | None = None  # value: the template text (the default one if several)
    # post_processor of tokenizer.json adds this token to every single sequence
    post_processor_bos: Sourced | None = None
    # (id, content, where) of every added token known from tokenizer.json / tokenizer_config.json
    added_tokens: tuple[tuple[int, str, Sourced], ...] = ()
    vocab_size: Sourced | None = None  # config.json
    token_ids: Mapping[str, int] = field(default_factory=dict)  # special token -> id, when known
    config_ids: Mapping[str, Sourced] = field(default_factory=dict)  # config.json *_token_id

    def path(self, name: str) -> str:
        return str(Path(self.folder) / name)

    def id_of(self, token: str | None) -> int | None:
        return None if token is None else self.token_ids.get(token)


_dec = msgspec.json.Decoder()


class _AddedToken(msgspec.Struct):
    id: int
    content: str
    special: bool = False


class _TokenizerJson(msgspec.Struct):
    """The parts of tokenizer.json read here; the (large) vocab is kept raw."""

    added_tokens: list[_AddedToken] = []
    post_processor: Any = None
    model: Any = None


def _line_of(text: str, key: str) -> int:
    """0-based line of the first `"key":` in the text (0 when absent): one pass over the
    text, so only for the few named keys of a file, never once per added token."""
    m = re.search(r'"' + re.escape(key) + r'"\s*:', text)
    return text.count("\n", 0, m.start()) if m else 0


_NUMBERED_KEY = re.compile(r'"(\d+)"\s*:')


def _numbered_key_lines(text: str, wanted: set[str]) -> dict[str, int]:
    """0-based line of the first `"<digits>":` key for each of `wanted` (the ids of
    added_tokens_decoder), all in one pass: the lines are counted between one match and
    the next, so the work is linear in the text whatever the number of tokens (a line
    search per token was quadratic: 8,000 tokens after a 2 MB value took 14 s)."""
    lines: dict[str, int] = {}
    line = pos = 0
    for m in _NUMBERED_KEY.finditer(text):
        key = m.group(1)
        if key in wanted and key not in lines:
            line += text.count("\n", pos, m.start())
            pos = m.start()
            lines[key] = line
            if len(lines) == len(wanted):
                break
    return lines


def _token_text(v: Any) -> str | None:
    """Special tokens are strings or AddedToken dicts ({"content": "<s>", ...})."""
    if isinstance(v, str):
        return v
    content = v.get("content") if isinstance(v, dict) else None
    return content if isinstance(content, str) else None


def _read_json(path: Path) -> tuple[Any, str]:
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ReadError(f"{path}: not UTF-8 text (byte {e.start})") from None
    try:
        return _dec.decode(text.encode()), text
    except msgspec.DecodeError as e:
        m = re.search(r"\(byte (\d+)\)", str(e))
        line = text.encode()[: int(m.group(1))].count(b"\n") if m else 0
        raise ReadError(f"{path}:{line + 1}: invalid JSON ({str(e).split(' (byte')[0]})",
                        span=Span(line, 0, line, 0)) from None


def read_tokenizer_dir(folder: Path | str) -> TokenizerFiles:
    """Read what is there; ReadError when the folder holds no tokenizer files at all."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ReadError(f"{folder}: not a folder")
    present = tuple(n for n in FILES if (folder / n).is_file())
    if not any(n in present for n in TOKENIZER_FILES):
        raise ReadError(f"{folder}: no tokenizer_config.json, special_tokens_map.json or tokenizer.json")
    got: dict[str, Sourced] = {}

    def put(key: str, value: Any, path: Path, text: str, json_key: str | None = None) -> None:
        if value is not None and key not in got:
            got[key] = Sourced(value=value, path=str(path), line=_line_of(text, json_key or key))

    added: dict[int, tuple[str, Sourced]] = {}
    token_ids: dict[str, int] = {}
    template: Sourced | None = None
    post_bos: Sourced | None = None
    vocab_size: Sourced | None = None
    config_ids: dict[str, Sourced] = {}

    # tokenizer_config.json first: it is what AutoTokenizer reads; special_tokens_map.json
    # fills what it leaves out.
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        if name not in present:
            continue
        p = folder / name
        obj, text = _read_json(p)
        if not isinstance(obj, dict):
            raise ReadError(f"{p}: not a JSON object")
        for key in ("bos_token", "eos_token", "pad_token", "unk_token"):
            put(key, _token_text(obj.get(key)), p, text)
        if name == "tokenizer_config.json":
            for key in ("add_bos_token", "add_eos_token", "model_max_length"):
                put(key, obj.get(key), p, text)
            tpl = obj.get("chat_template")
            if isinstance(tpl, list):  # [{"name": "default", "template": "..."}, ...]
                named = {t.get("name"): t.get("template") for t in tpl if isinstance(t, dict)}
                tpl = named.get("default") or next((v for v in named.values() if isinstance(v, str)), None)
            if isinstance(tpl, str) and tpl.strip():
                template = Sourced(value=tpl, path=str(p), line=_line_of(text, "chat_template"))
            decoder = obj.get("added_tokens_decoder")
            if isinstance(decoder, dict):
                tokens = {k: c for k, v in decoder.items()
                          if k.isascii() and k.isdigit() and (c := _token_text(v)) is not None}
                lines = _numbered_key_lines(text, set(tokens))
                for k, content in tokens.items():
                    added.setdefault(int(k), (content, Sourced(value=content, path=str(p), line=lines.get(k, 0))))
    if template is None:
        for name in ("chat_template.jinja", "chat_template.json"):
            if name not in present:
                continue
            p = folder / name
            t: Any
            if name.endswith(".jinja"):
                t = p.read_text(encoding="utf-8", errors="replace")
            else:
                obj, _ = _read_json(p)
                t = obj.get("chat_template") if isinstance(obj, dict) else None
            if isinstance(t, str) and t.strip():
                template = Sourced(value=t, path=str(p), line=0)
                break
    if "tokenizer.json" in present:
        p = folder / "tokenizer.json"
        data = p.read_bytes()
        try:
            tj = msgspec.json.decode(data, type=_TokenizerJson)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise ReadError(f"{p}: unreadable ({str(e).split(' (byte')[0]})") from None
        text = data.decode("utf-8", "replace")
        at_line = _line_of(text, "added_tokens") if tj.added_tokens else 0  # once, not once a token
        for at in tj.added_tokens:
            added.setdefault(at.id, (at.content, Sourced(value=at.content, path=str(p), line=at_line)))
        vocab = tj.model.get("vocab") if isinstance(tj.model, dict) else None
        if isinstance(vocab, dict):
            for tok in {v.value for k, v in got.items() if k.endswith("_token")}:
                if tok in vocab and isinstance(vocab[tok], int):
                    token_ids.setdefault(tok, vocab[tok])
        pp = tj.post_processor
        single = None
        if isinstance(pp, dict):
            if pp.get("type") == "TemplateProcessing":
                single = pp.get("single")
            elif pp.get("type") == "Sequence":
                for sub in pp.get("processors") or []:
                    if isinstance(sub, dict) and sub.get("type") == "TemplateProcessing":
                        single = sub.get("single")
        if isinstance(single, list) and single:
            head = single[0]
            if isinstance(head, dict) and isinstance(head.get("SpecialToken"), dict):
                tok = head["SpecialToken"].get("id")
                if isinstance(tok, str):
                    post_bos = Sourced(value=tok, path=str(p), line=_line_of(text, "post_processor"))
    for i, (content, _) in added.items():
        token_ids.setdefault(content, i)
    for name in ("config.json", "generation_config.json"):
        if name not in present:
            continue
        p = folder / name
        try:
            obj, text = _read_json(p)
        except ReadError:
            continue  # a broken model config is not the tokenizer's problem here
        if not isinstance(obj, dict):
            continue
        if name == "config.json" and isinstance(obj.get("vocab_size"), int):
            vocab_size = Sourced(value=obj["vocab_size"], path=str(p), line=_line_of(text, "vocab_size"))
        for key in ("eos_token_id", "pad_token_id", "bos_token_id"):
            if key in obj and key not in config_ids:
                config_ids[key] = Sourced(value=obj[key], path=str(p), line=_line_of(text, key))
    return TokenizerFiles(
        folder=str(folder), present=present,
        bos=got.get("bos_token"), eos=got.get("eos_token"), pad=got.get("pad_token"), unk=got.get("unk_token"),
        add_bos=got.get("add_bos_token"), add_eos=got.get("add_eos_token"),
        model_max_length=got.get("model_max_length"), chat_template=template, post_processor_bos=post_bos,
        added_tokens=tuple(sorted((i, c, s) for i, (c, s) in added.items())),
        vocab_size=vocab_size, token_ids=token_ids, config_ids=config_ids,
    )
