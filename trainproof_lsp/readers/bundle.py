"""An output folder read as one bundle: the files that only make sense together.

A fine-tune's output folder (or a `checkpoint-N/`, or a tokenizer folder) holds several
files that each look healthy alone and fail together. Read here, each value with the file
and line it came from:

    config.json               {"vocab_size": 64, "eos_token_id": 2 | [2, 32000], "bos_token_id": 1,
                               "pad_token_id": null, "tie_word_embeddings": false, ...}
    generation_config.json    {"eos_token_id": 2 | [2, 32000], "bos_token_id": 1, "pad_token_id": 0}
    tokenizer files           readers/tokenizer.py (special tokens, added tokens, the chat
                              template in tokenizer_config.json or chat_template.jinja); here
                              also tokenizer.json's size: the largest id + 1 of its
                              `model.vocab` and `added_tokens`
    adapter_config.json       {"peft_type": "LORA", "r": 8, "lora_alpha": 16,
                               "target_modules": ["q_proj", "v_proj"] | "<regex>" | "all-linear",
                               "modules_to_save": null, "trainable_token_indices": null,
                               "layers_to_transform": null, "rank_pattern": {},
                               "base_model_name_or_path": "<hub id or local folder>"}
    adapter_model.safetensors base_model.model.<module>.lora_A.weight [r, in],
                              ...lora_B.weight [out, r]; lora_B's bytes are read (bounded)
                              only to tell whether every one is zero
    *.safetensors             headers only (readers/checkpoint.py): names, dtypes, shapes
    *.safetensors.index.json  {"weight_map": {"<tensor>": "<shard file>"}}
    training_args.bin         the pickled TrainingArguments, walked (never unpickled) for its
                              class and its max-length fields
    *.py                      the run's scripts, parsed with `ast` (never run) for
                              `apply_chat_template(tokenize=False)` text encoded again with
                              special tokens

The base model an adapter names is read too (its safetensors headers and config.json) when
`base_model_name_or_path` is a local folder: an adapter folder holds no base weights.
Nothing here judges: rules/bundle.py does. Every read is bounded (the caps below) and only
regular files are opened.
"""

from __future__ import annotations

import ast
import functools
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

import msgspec

from ..core.caps import MIB
from ..core.model import ReadError
from . import pickle_walk as pw
from .lfs import MAX_POINTER_BYTES, pointer_at
from .tokenizer import Sourced, TokenizerFiles, _line_of, _read_json, read_tokenizer_dir

# --- caps: every read below is bounded by one of these ------------------------------------

# Configs are a few KB; a 16 MiB config.json is not one (and would not be read whole).
MAX_JSON_BYTES = 16 * MIB
# tokenizer.json of the largest vocabularies in use (262k tokens) is ~35 MB; 256 MiB leaves
# room for merges-heavy BPE files and still bounds what one decode can allocate.
MAX_TOKENIZER_BYTES = 256 * MIB
# lora_B bytes read to tell a no-op adapter: a 7B model's r=16 adapter on all linear
# layers has ~40 MB of lora_B; the read stops at the first non-zero tensor, so a trained
# adapter costs one tensor. Past this many bytes of zeros the check says it stopped.
MAX_LORA_B_BYTES = 128 * MIB
# Safetensors files whose headers are read: a 405B model ships 191 shards.
MAX_WEIGHT_FILES = 512
# Scripts parsed for how the run encodes text: a run folder holds a few.
MAX_SCRIPTS = 20
MAX_SCRIPT_BYTES = 1 * MIB
# training_args.bin is a ~5 KB pickle; the walk reads at most this much of it.
MAX_ARGS_BYTES = 4 * MIB
MAX_ARGS_OPS = 200_000

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = ("adapter_model.safetensors",)
INDEX_SUFFIX = ".safetensors.index.json"
TRAINING_ARGS = "training_args.bin"
# The files that make a folder a bundle (besides *.safetensors and their index).
NAMED_FILES = ("config.json", "generation_config.json", "tokenizer_config.json", "special_tokens_map.json",
               "tokenizer.json", "chat_template.jinja", ADAPTER_CONFIG, "trainer_state.json", TRAINING_ARGS)
# The run settings that bound a sequence's length (TRL's SFTConfig: max_length, older
# max_seq_length; DPO/ORPO/KTO: max_length; reward: max_length).
MAX_LENGTH_FIELDS = ("max_length", "max_seq_length")


@dataclass(frozen=True, slots=True, kw_only=True)
class Tensor:
    """A tensor as a safetensors header names it."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    path: str  # the safetensors file
    byte_offset: int | None = None  # where its data starts in that file

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True, kw_only=True)
class Weights:
    """Safetensors headers of one model (one file, or the shards of an index)."""

    files: tuple[str, ...]  # the safetensors files whose headers were read
    tensors: tuple[Tensor, ...]
    index: str | None = None  # the *.safetensors.index.json, when there is one
    # tensor -> the shard the index places it in (value), with the index line naming it
    index_map: Mapping[str, Sourced] = field(default_factory=dict)
    missing_shards: tuple[str, ...] = ()  # named by the index, not in the folder
    notes: tuple[str, ...] = ()  # files that could not be read, and why

    def by_name(self) -> dict[str, Tensor]:
        return {t.name: t for t in self.tensors}


@dataclass(frozen=True, kw_only=True)
class LoraB:
    """What the bounded read of an adapter's lora_B tensors found."""

    total: int  # lora_B tensors in the adapter
    read: int  # of them read
    nonzero: Tensor | None = None  # the first one with a non-zero element
    first: Tensor | None = None  # the first lora_B tensor (where an all-zero finding points)
    note: str = ""  # why the read stopped before the end, when it did


@dataclass(frozen=True, kw_only=True)
class Adapter:
    config_path: str
    settings: Mapping[str, Sourced]  # adapter_config.json keys read (see the module doc)
    weights: Weights | None = None  # adapter_model.safetensors
    lora_b: LoraB | None = None

    def get(self, key: str) -> Any:
        s = self.settings.get(key)
        return None if s is None else s.value


@dataclass(frozen=True, kw_only=True)
class TemplateEnd:
    """The token the chat template ends an assistant turn with, found by rendering a
    user/assistant exchange (readers/chat_template.py, sandboxed)."""

    marker: str | None  # None: the tail holds no candidate marker
    tail: str
    where: Sourced  # the template file, at the marker's line when it is a file of its own


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    """What the folder says about how the run encoded text and how long a sequence was."""

    args: Sourced | None = None  # value: the TrainingArguments class name (training_args.bin)
    # the max-length fields the args hold, as (name, value); value None = unset
    max_length: tuple[tuple[str, Any], ...] = ()
    # a script that renders with apply_chat_template(tokenize=False) and encodes the text
    # again with special tokens; value: a short description of the call
    encodes_rendered: Sourced | None = None
    # trainer_state.json's global_step (value: the optimizer steps the run logged)
    global_step: Sourced | None = None
    notes: tuple[str, ...] = ()

    @property
    def max_length_unset(self) -> bool:
        """The run's args have max-length fields and every one is unset."""
        return bool(self.max_length) and all(v is None for _, v in self.max_length)


@dataclass(frozen=True, kw_only=True)
class BundleFacts:
    folder: str
    files: tuple[str, ...]  # the bundle's files that were there (names relative to the folder)
    config: Mapping[str, Sourced] = field(default_factory=dict)  # config.json keys read
    generation: Mapping[str, Sourced] = field(default_factory=dict)  # generation_config.json
    tokenizer: TokenizerFiles | None = None
    tokenizer_size: Sourced | None = None  # value: the largest token id + 1 (tokenizer.json)
    template_end: TemplateEnd | None = None
    template_note: str = ""  # why template_end is None when a template is there
    weights: Weights | None = None  # the folder's own model weights
    adapter: Adapter | None = None
    base: Weights | None = None  # the weights an adapter was trained on (local base folder)
    base_config: Mapping[str, Sourced] = field(default_factory=dict)
    base_folder: str | None = None
    run: RunSettings = field(default_factory=RunSettings)
    notes: tuple[str, ...] = ()  # files that could not be read, and why
    unread: tuple[str, ...] = ()  # names of the folder's files that could not be read

    def readable(self, name: str) -> bool:
        """The file is there and was read (a rule comparing it stands down otherwise:
        an unreadable generation_config.json is no licence to judge config.json's ids)."""
        return name in self.files and name not in self.unread

    def path(self, name: str) -> str:
        return str(Path(self.folder) / name)


# --- small readers ---------------------------------------------------------------------------

_CONFIG_KEYS = ("vocab_size", "eos_token_id", "bos_token_id", "pad_token_id", "tie_word_embeddings",
                "num_hidden_layers", "model_type", "architectures")
_GENERATION_KEYS = ("eos_token_id", "bos_token_id", "pad_token_id")
_ADAPTER_KEYS = ("peft_type", "r", "lora_alpha", "target_modules", "modules_to_save", "trainable_token_indices",
                 "layers_to_transform", "layers_pattern", "rank_pattern", "alpha_pattern",
                 "base_model_name_or_path", "exclude_modules", "use_rslora")


def _regular(path: Path) -> bool:
    try:
        return path.is_file()  # follows a link to its target: a FIFO or device is not a file
    except OSError:
        return False


def _json_keys(path: Path, keys: tuple[str, ...], notes: list[str]) -> dict[str, Sourced]:
    """The named top-level keys of a small JSON object file, each with its line."""
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            notes.append(f"{path}: {path.stat().st_size} bytes, over the {MAX_JSON_BYTES // MIB} MiB cap; not read")
            return {}
        obj, text = _read_json(path)
    except ReadError as e:
        notes.append(str(e))
        return {}
    except OSError as e:
        notes.append(f"{path}: cannot read ({e.strerror or e})")
        return {}
    if not isinstance(obj, dict):
        notes.append(f"{path}: not a JSON object")
        return {}
    return {k: Sourced(value=obj[k], path=str(path), line=_line_of(text, k)) for k in keys if k in obj}


class _Model(msgspec.Struct):
    vocab: Any = None


class _AddedId(msgspec.Struct):
    id: int


class _TokenizerSize(msgspec.Struct):
    added_tokens: list[_AddedId] = []
    model: _Model | None = None


def read_tokenizer_size(path: Path) -> Sourced | None:
    """The largest token id in tokenizer.json + 1: what `len(tokenizer)` is for a
    contiguous vocabulary, and the number of embedding rows it needs. `model.vocab` is a
    {piece: id} object (BPE, WordPiece, WordLevel) or a [[piece, score], ...] list (Unigram,
    ids by position). Only the sizes are kept."""
    size = path.stat().st_size
    if size > MAX_TOKENIZER_BYTES:
        raise ReadError(f"{path}: {size} bytes, over the {MAX_TOKENIZER_BYTES // MIB} MiB cap; its size was not read")
    data = path.read_bytes()
    try:
        tj = msgspec.json.decode(data, type=_TokenizerSize)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise ReadError(f"{path}: unreadable ({str(e).split(' (byte')[0]})") from None
    top = -1
    vocab = tj.model.vocab if tj.model is not None else None
    if isinstance(vocab, dict):
        top = max((v for v in vocab.values() if isinstance(v, int) and not isinstance(v, bool)), default=-1)
    elif isinstance(vocab, list):
        top = len(vocab) - 1
    top = max([top, *(a.id for a in tj.added_tokens)])
    if top < 0:
        return None
    text = data.decode("utf-8", "replace")
    return Sourced(value=top + 1, path=str(path), line=_line_of(text, "added_tokens" if tj.added_tokens else "model"))


def _safetensors(path: Path, notes: list[str]) -> list[Tensor]:
    from .checkpoint import CheckpointError, read_checkpoint

    try:
        facts = read_checkpoint(path, scan=False)
    except (CheckpointError, ReadError) as e:
        notes.append(str(e))
        return []
    except OSError as e:
        notes.append(f"{path}: cannot read ({e.strerror or e})")
        return []
    if facts.problems or facts.not_checked:
        what = facts.problems[0].message if facts.problems else facts.not_checked[0]
        notes.append(f"{path}: header not used ({what})")
        return []
    return [Tensor(name=t.name, dtype=t.dtype, shape=tuple(t.shape), path=str(path), byte_offset=t.byte_offset)
            for t in facts.tensors]


# `"<tensor>": "<shard>"` entries of an index's weight_map (HF writes one a line).
_ENTRY = re.compile(r'"((?:[^"\\]|\\.){1,1000})"\s*:\s*"((?:[^"\\]|\\.){1,1000})"')


def _index(path: Path, notes: list[str]) -> tuple[dict[str, Sourced], tuple[str, ...]] | None:
    try:
        if path.stat().st_size > MAX_JSON_BYTES * 4:  # 64 MiB: millions of tensor names
            notes.append(f"{path}: over {MAX_JSON_BYTES * 4 // MIB} MiB; not read")
            return None
        obj, text = _read_json(path)
    except ReadError as e:
        notes.append(str(e))
        return None
    except OSError as e:
        notes.append(f"{path}: cannot read ({e.strerror or e})")
        return None
    wm = obj.get("weight_map") if isinstance(obj, dict) else None
    if not isinstance(wm, dict):
        notes.append(f"{path}: no weight_map object")
        return None
    lines: dict[str, int] = {}
    line = pos = 0
    start = text.find('"weight_map"')
    for m in _ENTRY.finditer(text, max(start, 0)):  # one pass: lines counted between matches
        line += text.count("\n", pos, m.start())
        pos = m.start()
        lines.setdefault(m.group(1), line)
    out = {str(k): Sourced(value=v, path=str(path), line=lines.get(str(k), 0))
           for k, v in wm.items() if isinstance(v, str)}
    missing = tuple(sorted({s.value for s in out.values() if not _regular(path.parent / s.value)}))
    return out, missing


def read_weights(folder: Path, notes: list[str]) -> Weights | None:
    """The model weights' headers in a folder: its *.safetensors files (not an adapter's)
    and the *.safetensors.index.json naming them. None when there are none."""
    try:
        names = sorted(p.name for p in folder.iterdir() if p.name.endswith((".safetensors", INDEX_SUFFIX)))
    except OSError as e:
        notes.append(f"{folder}: cannot list ({e.strerror or e})")
        return None
    index_name = next((n for n in names if n.endswith(INDEX_SUFFIX) and not n.startswith("adapter")), None)
    shards = [n for n in names if n.endswith(".safetensors") and n not in ADAPTER_WEIGHTS
              and _regular(folder / n) and _pointer(folder / n) is None]
    if index_name is None and not shards:
        return None
    index_map: dict[str, Sourced] = {}
    missing: tuple[str, ...] = ()
    if index_name is not None:
        got = _index(folder / index_name, notes)
        if got is not None:
            index_map, missing = got
    if len(shards) > MAX_WEIGHT_FILES:
        notes.append(f"{folder}: {len(shards)} safetensors files, over the cap of {MAX_WEIGHT_FILES}; "
                     f"the first {MAX_WEIGHT_FILES} read")
        shards = shards[:MAX_WEIGHT_FILES]
    tensors: list[Tensor] = []
    for n in shards:
        tensors.extend(_safetensors(folder / n, notes))
    return Weights(files=tuple(str(folder / n) for n in shards), tensors=tuple(tensors),
                   index=str(folder / index_name) if index_name else None, index_map=index_map,
                   missing_shards=missing)


# --- lora_B ---------------------------------------------------------------------------------

_FLOATS = {"float64", "float32", "float16", "bfloat16"}
# The sign bit of each element's most significant byte (little endian: the last byte):
# -0.0 is zero too.
_CLEAR_SIGN = bytes(b & 0x7F for b in range(256))


def _all_zero(data: bytes, dtype: str, itemsize: int) -> bool:
    if dtype in _FLOATS and itemsize > 1:
        buf = bytearray(data)
        buf[itemsize - 1::itemsize] = buf[itemsize - 1::itemsize].translate(_CLEAR_SIGN)
        return buf.count(0) == len(buf)
    return data.count(0) == len(data)


def lora_b_tensors(weights: Weights) -> list[Tensor]:
    return [t for t in weights.tensors if ".lora_B." in t.name or ".lora_embedding_B." in t.name]


def read_lora_b(weights: Weights) -> LoraB:
    """Read lora_B tensors until one holds a non-zero element (or the byte cap). PEFT
    initialises lora_B to zero, so an adapter whose every lora_B is still zero adds
    nothing to the base model."""
    from .checkpoint import ITEMSIZE

    wanted = lora_b_tensors(weights)
    if not wanted:
        return LoraB(total=0, read=0)
    budget = MAX_LORA_B_BYTES
    read = 0
    for t in wanted:
        itemsize = ITEMSIZE.get(t.dtype)
        if itemsize is None or t.byte_offset is None:
            return LoraB(total=len(wanted), read=read, first=wanted[0],
                         note=f"{t.name}: dtype {t.dtype} not read")
        nbytes = t.numel * itemsize
        if nbytes > budget:
            return LoraB(total=len(wanted), read=read, first=wanted[0],
                         note=f"stopped after {read} tensor(s): the {MAX_LORA_B_BYTES // MIB} MiB read cap")
        try:
            with open(t.path, "rb") as f:
                f.seek(t.byte_offset)
                data = f.read(nbytes)
        except OSError as e:
            return LoraB(total=len(wanted), read=read, first=wanted[0], note=f"{t.path}: {e.strerror or e}")
        if len(data) != nbytes:
            return LoraB(total=len(wanted), read=read, first=wanted[0], note=f"{t.path}: shorter than its header says")
        budget -= nbytes
        read += 1
        if not _all_zero(data, t.dtype, itemsize):
            return LoraB(total=len(wanted), read=read, nonzero=t, first=wanted[0])
    return LoraB(total=len(wanted), read=read, first=wanted[0])


# --- the run: training args and scripts -----------------------------------------------------

def _pairs(state: Any) -> Iterator[tuple[Any, Any]]:
    if isinstance(state, pw.SymDict):
        for item in state.items:
            if isinstance(item, tuple) and len(item) == 2:
                yield item


def read_training_args(path: Path) -> tuple[Sourced | None, tuple[tuple[str, Any], ...], str]:
    """(the args class, its max-length fields, a note) from a training_args.bin: a
    torch.save ZIP whose data.pkl builds TrainingArguments with NEWOBJ + BUILD (a dict of
    its fields). Walked by pickle_walk, never unpickled."""
    try:
        if path.stat().st_size > MAX_ARGS_BYTES:
            return None, (), f"{path}: over {MAX_ARGS_BYTES // MIB} MiB; not read"
        with zipfile.ZipFile(path) as zf:
            entry = next((n for n in zf.namelist() if n.endswith("/data.pkl") or n == "data.pkl"), None)
            if entry is None:
                return None, (), f"{path}: no data.pkl"
            info = zf.getinfo(entry)
            if info.file_size > MAX_ARGS_BYTES:
                return None, (), f"{path}: its pickle is over {MAX_ARGS_BYTES // MIB} MiB; not read"
            data = zf.read(entry)
    except (OSError, zipfile.BadZipFile, KeyError, ValueError) as e:
        return None, (), f"{path}: not read ({e})"
    walked = pw.walk(data, max_bytes=MAX_ARGS_BYTES, max_ops=MAX_ARGS_OPS)
    root = walked.root
    if not isinstance(root, pw.Call) or not isinstance(root.func, pw.Global):
        return None, (), f"{path}: not a pickled arguments object"
    fields = {str(k): v for k, v in _pairs(root.state) if isinstance(k, str)}
    found = tuple((k, fields[k] if isinstance(fields[k], (int, float, str)) or fields[k] is None else str(fields[k]))
                  for k in MAX_LENGTH_FIELDS if k in fields)
    return Sourced(value=root.func.name, path=str(path), line=0), found, ""


_TOKENIZER_NAME = re.compile(r"tok|processing_class|processor", re.IGNORECASE)
_ENCODERS = {"encode", "encode_plus", "batch_encode_plus", "__call__"}


def _call_name(func: ast.expr) -> tuple[str, str]:
    """(receiver, method) of `a.b.tok.encode` -> ("tok", "encode"); of `tok(...)` -> ("tok", "__call__")."""
    if isinstance(func, ast.Attribute):
        inner = func.value
        recv = inner.attr if isinstance(inner, ast.Attribute) else inner.id if isinstance(inner, ast.Name) else ""
        return recv, func.attr
    if isinstance(func, ast.Name):
        return func.id, "__call__"
    return "", ""


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _is_false(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def encodes_rendered_text(path: Path, source: str) -> Sourced | None:
    """The first tokenizer call of a script that renders with
    `apply_chat_template(..., tokenize=False)` and encodes text with special tokens (no
    `add_special_tokens=False`): a rendered template that already writes BOS gets a
    second one. Read statically: which text reaches which call is not followed."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    renders = False
    encodes: list[ast.Call] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        recv, method = _call_name(node.func)
        if method == "apply_chat_template" and _is_false(_keyword(node, "tokenize")):
            renders = True
        elif method in _ENCODERS and _TOKENIZER_NAME.search(recv) and node.args \
                and not _is_false(_keyword(node, "add_special_tokens")):
            encodes.append(node)
    if not renders or not encodes:
        return None
    first = min(encodes, key=lambda c: (c.lineno, c.col_offset))
    recv, method = _call_name(first.func)
    call = f"{recv}(...)" if method == "__call__" else f"{recv}.{method}(...)"
    return Sourced(value=f"{call} without add_special_tokens=False after apply_chat_template(tokenize=False)",
                   path=str(path), line=first.lineno - 1)


# HF writes trainer_state.json with sorted keys: "global_step" comes before "log_history",
# within the first few hundred bytes, however long the log. Only this much is read.
_STATE_HEAD = 64 * 1024
_GLOBAL_STEP = re.compile(rb'"global_step"\s*:\s*(\d{1,12})')


def read_global_step(path: Path) -> Sourced | None:
    try:
        with open(path, "rb") as f:
            head = f.read(_STATE_HEAD)
    except OSError:
        return None
    m = _GLOBAL_STEP.search(head)
    if m is None:
        return None
    return Sourced(value=int(m.group(1)), path=str(path), line=head.count(b"\n", 0, m.start()))


def _run_folders(folder: Path) -> list[Path]:
    """The folder, and its run folder when it is a checkpoint-N/ copy (the scripts and
    args of a run sit beside its checkpoints)."""
    out = [folder]
    if re.fullmatch(r"checkpoint-\d+", folder.name):
        out.append(folder.parent)
    return out


def read_run_settings(folder: Path | str) -> RunSettings:
    """How the run in this folder encoded text and bounded its length, from what the
    folder holds (training_args.bin, *.py). Empty when it holds neither."""
    folder = Path(folder)
    args: Sourced | None = None
    max_length: tuple[tuple[str, Any], ...] = ()
    encodes: Sourced | None = None
    step: Sourced | None = None
    notes: list[str] = []
    for where in _run_folders(folder):
        if step is None and _regular(where / "trainer_state.json"):
            step = read_global_step(where / "trainer_state.json")
        p = where / TRAINING_ARGS
        if args is None and _regular(p):
            args, max_length, note = read_training_args(p)
            if note:
                notes.append(note)
        if encodes is not None:
            continue
        try:
            scripts = sorted(x for x in where.iterdir() if x.suffix == ".py")[:MAX_SCRIPTS]
        except OSError:
            continue
        for s in scripts:
            try:
                if not _regular(s) or s.stat().st_size > MAX_SCRIPT_BYTES:
                    continue
                source = s.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            encodes = encodes_rendered_text(s, source)
            if encodes is not None:
                break
    return RunSettings(args=args, max_length=max_length, encodes_rendered=encodes, global_step=step,
                       notes=tuple(notes))


# --- the chat template's end of turn ---------------------------------------------------------

_END_MARK = re.compile(r"end|eot|eos|</s>|\|im_end\|", re.IGNORECASE)


def end_markers(tok: TokenizerFiles) -> list[str]:
    """The tokens that may end a turn: added tokens named like an end (`<|eot_id|>`,
    `<|im_end|>`, `<end_of_turn>`, `</s>`) and the eos_token."""
    markers = {c for _, c, _ in tok.added_tokens if _END_MARK.search(c)}
    if tok.eos is not None and tok.eos.value:
        markers.add(tok.eos.value)
    return sorted(markers)


def special_tokens(tok: TokenizerFiles) -> dict[str, str | None]:
    """The special tokens a chat template sees as variables (as transformers passes them)."""
    return {"bos_token": tok.bos.value if tok.bos else None, "eos_token": tok.eos.value if tok.eos else None,
            "pad_token": tok.pad.value if tok.pad else None, "unk_token": tok.unk.value if tok.unk else None}


@functools.lru_cache(maxsize=64)
def _assistant_end(template: str, special: tuple[tuple[str, str | None], ...], markers: tuple[str, ...]) -> Any:
    from . import chat_template as ct

    return ct.assistant_end(template, special=dict(special), markers=markers)


def assistant_end(tok: TokenizerFiles) -> Any:
    """The template's assistant turn end (readers/chat_template.AssistantEnd), rendered in
    its sandboxed child once per template, special tokens and markers: the checkpoint-N/
    copies of a run and the tokenizer and bundle checks of one folder share the render (a
    child process each, ~0.3 s). Raises what chat_template.assistant_end raises."""
    from . import chat_template as ct

    assert tok.chat_template is not None
    if not ct.available():  # looked up each time: a cached render is no answer without jinja2
        raise ct.TemplateUnavailable(ct.MISSING_JINJA2)
    return _assistant_end(tok.chat_template.value, tuple(sorted(special_tokens(tok).items())),
                          tuple(end_markers(tok)))


def read_template_end(tok: TokenizerFiles) -> tuple[TemplateEnd | None, str]:
    """The assistant turn's end marker, rendered in the sandbox; (None, why) when the
    template cannot be rendered."""
    from . import chat_template as ct

    tpl = tok.chat_template
    if tpl is None:
        return None, "no chat template"
    try:
        end = assistant_end(tok)
    except (ct.TemplateUnavailable, ct.TemplateRejected, ct.TemplateUnusable) as e:
        return None, f"the chat template could not be rendered: {e}"
    line = tpl.line
    if end.marker is not None and tpl.path.endswith(".jinja"):  # a file of its own: the marker's line
        text = tpl.value
        at = text.find(end.marker)
        if at < 0 and tok.eos is not None and end.marker == tok.eos.value:
            at = text.find("eos_token")
        if at >= 0:
            line += text.count("\n", 0, at)
    return TemplateEnd(marker=end.marker, tail=end.tail, where=Sourced(value=end.marker, path=tpl.path, line=line)), ""


# --- the bundle --------------------------------------------------------------------------------

def _pointer(path: Path) -> str | None:
    """The reason when the file is a Git LFS pointer (not downloaded); only a file small
    enough to be one is opened, and only its first KiB read."""
    try:
        if path.stat().st_size > MAX_POINTER_BYTES:
            return None
    except OSError:
        return None
    return pointer_at(path)


def bundle_files(folder: Path) -> tuple[str, ...]:
    """The bundle's files present in the folder (sorted names): regular files, not Git LFS
    pointers (a pointer is not the file: doctor says so on its own report)."""
    try:
        names = [p.name for p in folder.iterdir()]
    except OSError:
        return ()
    return tuple(sorted(n for n in names if (n in NAMED_FILES or n.endswith((".safetensors", INDEX_SUFFIX)))
                        and _regular(folder / n) and _pointer(folder / n) is None))


# Settings files doctor passes over by name (readers/detect.RESIDENTS): a pointer in their
# place is said by the bundle, since no other report opens them.
_SAID_HERE = ("config.json", "generation_config.json", "adapter_config.json")


def _kind(name: str) -> str:
    if name == ADAPTER_CONFIG:
        return "adapter settings"
    if name in ADAPTER_WEIGHTS:
        return "adapter weights"
    if name.endswith((".safetensors", INDEX_SUFFIX)):
        return "weights"
    if name in ("tokenizer_config.json", "special_tokens_map.json", "tokenizer.json", "chat_template.jinja"):
        return "tokenizer"
    return name


def is_bundle(folder: Path) -> bool:
    """Two or more kinds of the model's files (configs, tokenizer, adapter settings,
    adapter weights, model weights): something to check across files. The run's own
    files (trainer_state.json, training_args.bin) do not count."""
    kinds = {_kind(n) for n in bundle_files(folder)} - {"trainer_state.json", TRAINING_ARGS}
    return len(kinds) >= 2


def _base_folder(folder: Path, base: Any) -> Path | None:
    """A local folder named by base_model_name_or_path (a hub id is not fetched: no network)."""
    if not isinstance(base, str) or not base or len(base) > 4096:
        return None
    for cand in (Path(base), folder / base):
        try:
            if not cand.is_dir():
                continue
            if (cand / "config.json").is_file() or any(p.suffix == ".safetensors" for p in cand.iterdir()):
                return cand
        except OSError:
            continue
    return None


def read_bundle(folder: Path | str, *, render_template: bool = True) -> BundleFacts:
    """Read the folder's bundle files together. ReadError when it is not a folder; files
    that cannot be read are named in `notes` and the rest is still read."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ReadError(f"{folder}: not a folder")
    files = bundle_files(folder)
    notes: list[str] = []
    unread: list[str] = []
    for name in NAMED_FILES:  # there, but not read: the rules comparing it stand down
        p = folder / name
        if name in files or not (p.exists() or p.is_symlink()):
            continue
        unread.append(name)
        if not _regular(p):  # a FIFO, device or socket: never opened
            notes.append(f"{p}: not a regular file; not read")
        elif name in _SAID_HERE and (why := _pointer(p)) is not None:
            notes.append(f"{p}: {why}")

    def keys(name: str, wanted: tuple[str, ...]) -> dict[str, Sourced]:
        if name not in files:
            return {}
        before = len(notes)
        got = _json_keys(folder / name, wanted, notes)
        if len(notes) > before:
            unread.append(name)
        return got

    config = keys("config.json", _CONFIG_KEYS)
    generation = keys("generation_config.json", _GENERATION_KEYS)
    tok: TokenizerFiles | None = None
    size: Sourced | None = None
    end: TemplateEnd | None = None
    template_note = ""
    if any(n in files for n in ("tokenizer_config.json", "special_tokens_map.json", "tokenizer.json")):
        try:
            if "tokenizer.json" in files and (folder / "tokenizer.json").stat().st_size > MAX_TOKENIZER_BYTES:
                raise ReadError(f"{folder / 'tokenizer.json'}: over the {MAX_TOKENIZER_BYTES // MIB} MiB cap; "
                                "the tokenizer was not read")
            tok = read_tokenizer_dir(folder)
            if "tokenizer.json" in files:
                size = read_tokenizer_size(folder / "tokenizer.json")
        except ReadError as e:
            notes.append(str(e))
            unread.append("tokenizer")
        except OSError as e:
            notes.append(f"{folder}: tokenizer files: {e.strerror or e}")
            unread.append("tokenizer")
        if tok is not None and render_template and tok.chat_template is not None:
            end, template_note = read_template_end(tok)
    weights = read_weights(folder, notes)
    adapter: Adapter | None = None
    base: Weights | None = None
    base_config: dict[str, Sourced] = {}
    base_folder: Path | None = None
    if ADAPTER_CONFIG in files:
        settings = keys(ADAPTER_CONFIG, _ADAPTER_KEYS)
        aw: Weights | None = None
        lora_b: LoraB | None = None
        wfile = next((folder / n for n in ADAPTER_WEIGHTS if n in files), None)
        if wfile is not None:
            tensors = _safetensors(wfile, notes)
            aw = Weights(files=(str(wfile),), tensors=tuple(tensors))
            if tensors:
                lora_b = read_lora_b(aw)
        adapter = Adapter(config_path=str(folder / ADAPTER_CONFIG), settings=settings, weights=aw, lora_b=lora_b)
        named = settings.get("base_model_name_or_path")
        base_folder = _base_folder(folder, named.value if named else None)
        if base_folder is not None and base_folder.resolve() != folder.resolve():
            base = read_weights(base_folder, notes)
            if (base_folder / "config.json").is_file():
                base_config = _json_keys(base_folder / "config.json", _CONFIG_KEYS, notes)
    return BundleFacts(
        folder=str(folder), files=files, config=config, generation=generation, tokenizer=tok,
        tokenizer_size=size, template_end=end, template_note=template_note, weights=weights, adapter=adapter,
        base=base, base_config=base_config, base_folder=str(base_folder) if base_folder is not None else None,
        run=read_run_settings(folder), notes=tuple(notes), unread=tuple(unread))


__all__ = ["BundleFacts", "Weights", "Tensor", "Adapter", "LoraB", "TemplateEnd", "RunSettings", "read_bundle",
           "read_run_settings", "read_weights", "read_tokenizer_size", "read_lora_b", "bundle_files", "is_bundle",
           "end_markers", "special_tokens", "encodes_rendered_text", "MAX_LENGTH_FIELDS"]
