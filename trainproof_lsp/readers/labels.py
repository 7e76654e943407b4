"""The objective's labels: what the model's head, the dataset, the script and a saved batch
say about the targets the loss sees, each fact at its line.

Read from what a run holds (facts only; rules/labels.py judges them):

    config.json     {"architectures": ["BertForSequenceClassification"],
                     "id2label": {"0": "neg", "1": "pos"}, "problem_type": "single_label_classification",
                     "vocab_size": 30522, ...}   (num_labels is len(id2label), or `num_labels` when written)
    dataset         JSONL / JSON array (readers/dataset_sources.iter_records) or CSV with a header:
                      classifier   {"text": "...", "label": 2}    (`label`, `labels`, `label_ids`:
                                   an int, or a list of ints for token classification / multi-hot)
                      causal LM    {"input_ids": [1, 5, 9], "labels": [1, 5, 9]}
    script          readers/script.read_script (the collator calls: DataCollatorForLanguageModeling(mlm=...),
                    label_pad_token_id=..., the model's config.json on disk) and an `ast` pass for the loss
                    (any call with `ignore_index=<int>`: nn.CrossEntropyLoss, F.cross_entropy) and for
                    `*ForCausalLM.from_pretrained` (a model whose loss shifts the labels itself)
    batch           one saved batch (`preflight --batch FILE`): `.safetensors` (its JSON header and the
                    integer tensors' raw little-endian bytes), `.npz` (numpy, allow_pickle=False) or
                    `.json` ({"input_ids": [[...]], "labels": [[...]]}). A `.pt`/`.pth`/`.bin` is a pickle:
                    never unpickled (torch.load runs code), refused with how to save one instead.

Every read is of a regular file within a byte cap; nothing is imported or run.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import struct
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from ..core.model import ReadError, Span
from .common import read_regular
from .dataset_sources import iter_records

# A model's config.json is a few KiB; a larger file is not one.
MAX_CONFIG_BYTES = 4 * 1024 * 1024
# A training script is read whole by readers/script.py; the ast pass here reads the same bytes.
MAX_SCRIPT_BYTES = 8 * 1024 * 1024
# One saved batch: a few MiB of ids. Larger is not one batch.
MAX_BATCH_BYTES = 256 * 1024 * 1024
# A CSV dataset read for its label column (JSONL is streamed by iter_records).
MAX_CSV_BYTES = 512 * 1024 * 1024
# A JSONL dataset up to this size is read whole (its lines' widths place the findings);
# a larger one is streamed and its findings sit at the start of their lines.
MAX_WHOLE_BYTES = 64 * 1024 * 1024
# Places kept per label value: findings are located at each of them, the rest counted.
MAX_PLACES = 20
# Places kept over all values before each value keeps only its first.
MAX_KEPT_PLACES = 100_000
# Rows with input_ids and labels kept for the shift check, and the tail of each kept
# (a tail, not a head: a prompt masked with -100 fills the head of an SFT row).
MAX_SEQUENCE_ROWS = 256
MAX_SEQUENCE_TAIL = 1024

# Label keys trainers read, in the order transformers' collators look for them.
LABEL_KEYS = ("label", "labels", "label_ids")
PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".pkl", ".pickle", ".ckpt")


@dataclass(frozen=True, slots=True, kw_only=True)
class Place:
    """A line of a file (0-based) and its width; `record` for a batch's row."""

    path: str
    line: int = 0
    width: int = 0
    record: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Setting:
    """A value as written in a file: config key, script keyword."""

    path: str
    line: int
    start: int
    end: int
    value: Any
    text: str  # what it is ("CrossEntropyLoss(ignore_index=0)", "id2label", ...)


@dataclass(frozen=True, kw_only=True)
class ModelLabels:
    """A model's config.json as far as its output layer goes."""

    path: str
    architectures: tuple[str, ...] = ()
    num_labels: Setting | None = None  # `num_labels`, else len(id2label) at the id2label key
    id2label: Mapping[int, Setting] = field(default_factory=dict)  # each entry at its line
    problem_type: Setting | None = None
    vocab_size: Setting | None = None

    @property
    def causal_lm(self) -> bool:
        """Its loss shifts the labels itself (transformers' *ForCausalLM / *LMHeadModel)."""
        return any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in self.architectures)

    @property
    def classifier(self) -> bool:
        return any(a.endswith(("ForSequenceClassification", "ForTokenClassification",
                               "ForAudioClassification", "ForImageClassification"))
                   for a in self.architectures) or (not self.causal_lm and self.num_labels is not None)


@dataclass(frozen=True, slots=True, kw_only=True)
class SequenceRow:
    """A row with input_ids and labels (their tails), for the shift check."""

    place: Place
    input_ids: tuple[int, ...]
    labels: tuple[int, ...]


@dataclass(frozen=True, kw_only=True)
class LabelColumn:
    """The label targets of one dataset (or one batch): counts and where each value is."""

    path: str
    split: str  # "train" | "eval" | "batch"
    column: str  # the key read ("label", "labels", ...); "" when none
    rows: int = 0  # rows with a label
    targets: int = 0  # target ids counted (a token-classification row holds many)
    counts: Mapping[int, int] = field(default_factory=dict)
    places: Mapping[int, tuple[Place, ...]] = field(default_factory=dict)  # up to MAX_PLACES a value
    multi_hot: bool = False  # lists of 0/1 as long as the classes (multi-label)
    positives: Mapping[int, int] = field(default_factory=dict)  # multi-hot: rows with class i set
    not_integer: int = 0  # labels that are not integers (strings, floats)
    first_not_integer: Place | None = None
    sequences: tuple[SequenceRow, ...] = ()


@dataclass(frozen=True, kw_only=True)
class LossSettings:
    """What a training script sets about the loss's targets."""

    path: str
    ignore_index: tuple[Setting, ...] = ()  # loss ignore_index and collator label_pad_token_id values
    lm_collator: Setting | None = None  # DataCollatorForLanguageModeling(...); value: its mlm (True default)
    causal_lm: Setting | None = None  # a *ForCausalLM.from_pretrained call
    model_configs: tuple[str, ...] = ()  # config.json files the script's from_pretrained names on disk


@dataclass(frozen=True, kw_only=True)
class LabelFacts:
    """Everything the objective rules read for one run."""

    model: ModelLabels | None
    data: tuple[LabelColumn, ...] = ()
    script: LossSettings | None = None
    batch: LabelColumn | None = None
    memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def train(self) -> tuple[LabelColumn, ...]:
        return tuple(d for d in self.data if d.split == "train")


# --- the model's config ----------------------------------------------------------------------

def _key_setting(path: str, text: str, key: str, value: Any, after: int = 0) -> tuple[Setting, int]:
    at = text.find(f'"{key}"', after)
    at = at if at >= 0 else after
    line = text.count("\n", 0, at)
    start = at - (text.rfind("\n", 0, at) + 1)
    return Setting(path=path, line=line, start=start, end=start + len(key) + 2, value=value, text=key), at


def read_model_labels(path: Path) -> ModelLabels | None:
    """A config.json's output-layer facts; None when it is not a model config (no
    architectures, id2label, num_labels or vocab_size). ReadError when unreadable."""
    raw = read_regular(path, MAX_CONFIG_BYTES)
    if len(raw) > MAX_CONFIG_BYTES:
        raise ReadError(f"{path}: over {MAX_CONFIG_BYTES >> 20} MiB; not a model config")
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise ReadError(f"{path}: not JSON ({e})") from None
    if not isinstance(doc, dict):
        return None
    text = raw.decode("utf-8", "replace")
    name = str(path)
    arch = doc.get("architectures")
    architectures = tuple(a for a in arch if isinstance(a, str)) if isinstance(arch, list) else ()
    id2label: dict[int, Setting] = {}
    num: Setting | None = None
    table = doc.get("id2label")
    if isinstance(table, dict) and table:
        head, at = _key_setting(name, text, "id2label", len(table))
        for k in sorted(table, key=lambda k: int(k) if str(k).lstrip("-").isdigit() else 1 << 62):
            if str(k).lstrip("-").isdigit():
                entry, _ = _key_setting(name, text, str(k), table[k], at)
                id2label[int(k)] = Setting(path=name, line=entry.line, start=entry.start, end=entry.end,
                                           value=table[k], text=f"id2label[{k}]")
        num = Setting(path=name, line=head.line, start=head.start, end=head.end, value=len(table),
                      text="id2label")
    n = doc.get("num_labels")
    if isinstance(n, int) and not isinstance(n, bool) and n > 0:
        num, _ = _key_setting(name, text, "num_labels", n)
    problem = doc.get("problem_type")
    problem_type = _key_setting(name, text, "problem_type", problem)[0] if isinstance(problem, str) else None
    vocab = doc.get("vocab_size")
    if not isinstance(vocab, int) and isinstance(doc.get("text_config"), dict):
        vocab = doc["text_config"].get("vocab_size")
    vocab_size = _key_setting(name, text, "vocab_size", vocab)[0] \
        if isinstance(vocab, int) and not isinstance(vocab, bool) and vocab > 0 else None
    if not architectures and num is None and vocab_size is None:
        return None
    return ModelLabels(path=name, architectures=architectures, num_labels=num, id2label=id2label,
                       problem_type=problem_type, vocab_size=vocab_size)


def find_model_config(folders: list[Path]) -> Path | None:
    """The first config.json among `folders` that is a model config."""
    for folder in folders:
        candidate = folder / "config.json"
        try:
            if candidate.is_file() and read_model_labels(candidate) is not None:
                return candidate
        except (ReadError, OSError):
            continue
    return None


# --- datasets ---------------------------------------------------------------------------------

def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return None


def _ints(v: Any) -> tuple[int, ...] | None:
    if not isinstance(v, list):
        return None
    out = []
    for x in v:
        i = _int(x)
        if i is None:
            return None
        out.append(i)
    return tuple(out)


class _Collect:
    """Label facts accumulated row by row (no Python object kept per row beyond the caps)."""

    def __init__(self, path: str, split: str) -> None:
        self.path, self.split = path, split
        self.column = ""
        self.rows = self.targets = self.not_integer = 0
        self.first_not_integer: Place | None = None
        self.counts: Counter[int] = Counter()
        self.places: dict[int, list[Place]] = {}
        self.kept = 0
        self.multi_hot = True
        self.lengths: Counter[int] = Counter()
        self.positives: Counter[int] = Counter()
        self.sequences: list[SequenceRow] = []

    def _place(self, value: int, place: Place) -> None:
        got = self.places.setdefault(value, [])
        # Past MAX_KEPT_PLACES (a language model's labels hold every token id), each value
        # keeps its first place only: memory stays bounded by the vocabulary.
        cap = MAX_PLACES if self.kept < MAX_KEPT_PLACES else 1
        if len(got) < cap and (not got or got[-1] != place):
            got.append(place)
            self.kept += 1

    def add(self, obj: Mapping[str, Any], place: Place) -> None:
        key = next((k for k in LABEL_KEYS if k in obj and obj[k] is not None), None)
        if key is None:
            return
        self.column = self.column or key
        value = obj[key]
        ids = _ints(obj.get("input_ids"))
        single = _int(value)
        many = _ints(value)
        if single is None and many is None:
            self.not_integer += 1
            self.first_not_integer = self.first_not_integer or place
            return
        self.rows += 1
        targets = (single,) if single is not None else many or ()
        if single is not None or not many or any(t not in (0, 1) for t in many):
            self.multi_hot = False
        elif many is not None:
            self.lengths[len(many)] += 1
            for i, t in enumerate(many):
                if t:
                    self.positives[i] += 1
        for t in targets:
            self.counts[t] += 1
            self._place(t, place)
        self.targets += len(targets)
        if ids is not None and many is not None and len(self.sequences) < MAX_SEQUENCE_ROWS \
                and len(many) in (len(ids), len(ids) - 1):
            tail = MAX_SEQUENCE_TAIL
            cut = max(0, len(many) - tail)
            self.sequences.append(SequenceRow(place=place, input_ids=ids[cut:cut + tail + 1], labels=many[cut:]))

    def finish(self) -> LabelColumn:
        # Multi-hot: every label a list of 0/1 of one length (BCE targets), not ids.
        multi = self.multi_hot and self.rows > 0 and len(self.lengths) == 1 and not self.sequences
        return LabelColumn(path=self.path, split=self.split, column=self.column, rows=self.rows,
                           targets=self.targets, counts=dict(self.counts),
                           places={k: tuple(v) for k, v in self.places.items()}, multi_hot=multi,
                           positives=dict(self.positives) if multi else {}, not_integer=self.not_integer,
                           first_not_integer=self.first_not_integer, sequences=tuple(self.sequences))


def _csv_rows(path: Path, data: bytes) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """(0-based line, width, row) of a CSV with a header; numbers parsed, lists as JSON."""
    text = data.decode("utf-8", "replace").lstrip("\ufeff")
    lines = text.split("\n")
    reader = csv.DictReader(io.StringIO(text))
    line = reader.line_num
    for row in reader:
        start, line = line, reader.line_num
        out: dict[str, Any] = {}
        for k, v in row.items():
            if k is None or v is None:
                continue
            s = v.strip()
            try:
                out[k] = json.loads(s) if s[:1] in "[-0123456789" and s else v
            except ValueError:
                out[k] = v
        yield start, len(lines[start].rstrip("\r")) if start < len(lines) else 0, out


def read_label_column(path: Path, *, split: str = "train", data: bytes | None = None) -> LabelColumn:
    """A dataset's label targets (JSONL/JSON array/CSV). OSError/ReadError when unreadable."""
    collect = _Collect(str(path), split)
    if path.suffix.lower() in (".csv", ".tsv"):
        raw = data if data is not None else read_regular(path, MAX_CSV_BYTES)
        if len(raw) > MAX_CSV_BYTES:
            raise ReadError(f"{path}: over {MAX_CSV_BYTES >> 20} MiB; labels not read")
        for line, width, row in _csv_rows(path, raw):
            collect.add(row, Place(path=str(path), line=line, width=width))
        return collect.finish()
    if data is None and path.stat().st_size <= MAX_WHOLE_BYTES:
        data = read_regular(path, MAX_WHOLE_BYTES)  # read whole: each finding's line gets its width
    head = data[:4096] if data is not None else read_regular(path, 4096)[:4096]
    layout = "json-array" if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"[") else "jsonl"
    lines = data.split(b"\n") if data is not None else None
    for line, obj in iter_records(path, layout=layout, data=data):
        width = len(lines[line].rstrip(b"\r")) if lines is not None and line < len(lines) else 0
        collect.add(obj, Place(path=str(path), line=line, width=width))
    return collect.finish()


# --- the script ---------------------------------------------------------------------------------

_LABEL_PAD_COLLATORS = ("DataCollatorForSeq2Seq", "DataCollatorForTokenClassification",
                        "DataCollatorWithFlattening")


def _const_int(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _const_int(node.operand)
        return -inner if inner is not None else None
    return None


def _callee(func: ast.AST) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def read_loss_settings(path: Path) -> LossSettings:
    """The script's loss targets settings. ReadError when it is not readable Python."""
    from .script import read_script

    raw = read_regular(path, MAX_SCRIPT_BYTES)
    if len(raw) > MAX_SCRIPT_BYTES:
        raise ReadError(f"{path}: over {MAX_SCRIPT_BYTES >> 20} MiB; not read as a training script")
    facts = read_script(path, raw)
    name = str(path)
    ignore: list[Setting] = []
    lm: Setting | None = None
    for call in facts.api_calls:
        cls = call.attr.rsplit(".", 1)[-1]
        kws = {k.name: k for k in call.keywords}
        if cls == "DataCollatorForLanguageModeling":
            mlm = kws.get("mlm")
            value: Any = mlm.value.value if mlm is not None and mlm.value.known else (None if mlm else True)
            lm = Setting(path=name, line=call.span.start_line, start=call.span.start_char,
                         end=call.span.end_char if call.span.end_line == call.span.start_line else call.span.start_char,
                         value=value, text=f"{call.written}(mlm={value})")
        pad = kws.get("label_pad_token_id")
        if pad is not None and pad.value.known and _int(pad.value.value) is not None:
            s = pad.value.span
            ignore.append(Setting(path=name, line=s.start_line, start=s.start_char, end=s.end_char,
                                  value=_int(pad.value.value), text=f"{cls}(label_pad_token_id={pad.value.text})"))
    causal: Setting | None = None
    tree = ast.parse(raw, filename=name)  # read_script parsed it already: it is valid Python
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        callee = _callee(node.func)
        if callee == "from_pretrained" and isinstance(node.func, ast.Attribute) and causal is None:
            owner = _callee(node.func.value)
            if owner.endswith(("ForCausalLM", "LMHeadModel")):
                causal = Setting(path=name, line=node.lineno - 1, start=node.col_offset,
                                 end=node.end_col_offset or node.col_offset, value=owner,
                                 text=f"{owner}.from_pretrained")
        if callee in _LABEL_PAD_COLLATORS:
            continue  # read above through read_script's library calls
        for kw in node.keywords:
            if kw.arg == "ignore_index":
                v = _const_int(kw.value)
                if v is not None:
                    ignore.append(Setting(path=name, line=kw.value.lineno - 1, start=kw.value.col_offset,
                                          end=kw.value.end_col_offset or kw.value.col_offset, value=v,
                                          text=f"{callee}(ignore_index={v})"))
    configs = tuple(m.config for m in facts.models if m.config)
    unique: dict[tuple[int, int], Setting] = {}
    for setting in ignore:
        unique.setdefault((setting.line, setting.start), setting)
    return LossSettings(path=name, ignore_index=tuple(unique.values()), lm_collator=lm, causal_lm=causal,
                        model_configs=configs)


# --- one saved batch ----------------------------------------------------------------------------

_ST_INTS = {"I64": ("q", 8), "I32": ("i", 4), "I16": ("h", 2), "I8": ("b", 1), "U8": ("B", 1),
            "U16": ("H", 2), "U32": ("I", 4), "U64": ("Q", 8)}


def _rows_of(values: list[int], shape: list[int]) -> list[tuple[int, ...]]:
    if len(shape) == 1:
        return [tuple(values)]
    width = shape[-1] if shape and shape[-1] > 0 else 1
    return [tuple(values[i:i + width]) for i in range(0, len(values), width)]


def _safetensors(raw: bytes, path: str) -> dict[str, list[tuple[int, ...]]]:
    # <u64 header length> <JSON header {"name": {"dtype": "I64", "shape": [2, 7],
    # "data_offsets": [begin, end]}, "__metadata__": {...}}> <tensor bytes>
    if len(raw) < 8:
        raise ReadError(f"{path}: not a safetensors file (cut off in its header length)")
    (n,) = struct.unpack_from("<Q", raw, 0)
    if n > len(raw) - 8 or n > 100 * 1024 * 1024:
        raise ReadError(f"{path}: safetensors header of {n:,} bytes in a {len(raw):,}-byte file")
    try:
        header = json.loads(raw[8:8 + n])
    except (ValueError, RecursionError) as e:
        raise ReadError(f"{path}: safetensors header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise ReadError(f"{path}: safetensors header is not a JSON object")
    body = 8 + n
    out: dict[str, list[tuple[int, ...]]] = {}
    for name in ("input_ids", "labels", "label", "label_ids"):
        t = header.get(name)
        if not isinstance(t, dict):
            continue
        kind = _ST_INTS.get(str(t.get("dtype")))
        shape, offsets = t.get("shape"), t.get("data_offsets")
        if kind is None or not isinstance(shape, list) or not isinstance(offsets, list) or len(offsets) != 2:
            raise ReadError(f"{path}: tensor {name!r} is {t.get('dtype')}, not integer ids")
        begin, end = body + int(offsets[0]), body + int(offsets[1])
        count = 1
        for s in shape:
            count *= int(s)
        if end > len(raw) or end - begin != count * kind[1]:
            raise ReadError(f"{path}: tensor {name!r} ({count:,} values) does not fit the file's bytes")
        values = list(struct.unpack_from(f"<{count}{kind[0]}", raw, begin))
        out[name] = _rows_of(values, [int(s) for s in shape])
    return out


def _npz(raw: bytes, path: str) -> dict[str, list[tuple[int, ...]]]:
    try:
        import numpy as np
    except ImportError as e:
        raise ReadError(f"{path}: an .npz batch needs numpy ({e})") from None
    out: dict[str, list[tuple[int, ...]]] = {}
    try:
        with np.load(io.BytesIO(raw), allow_pickle=False) as z:
            for name in ("input_ids", "labels", "label", "label_ids"):
                if name in z.files:
                    a = z[name]
                    if a.dtype.kind not in "iu":
                        raise ReadError(f"{path}: array {name!r} is {a.dtype}, not integer ids")
                    a = a.reshape(1, -1) if a.ndim == 1 and name == "input_ids" else a
                    out[name] = [tuple(int(x) for x in row) for row in (a.reshape(a.shape[0], -1) if a.ndim > 1
                                                                       else a.reshape(-1, 1))]
    except ReadError:
        raise
    except Exception as e:  # numpy's own errors on a damaged archive, or an object array (pickle) refused
        raise ReadError(f"{path}: not a readable .npz ({type(e).__name__}: {' '.join(str(e).split())[:160]})") \
            from None
    return out


def _json_batch(raw: bytes, path: str) -> dict[str, list[tuple[int, ...]]]:
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise ReadError(f"{path}: not JSON ({e})") from None
    if not isinstance(doc, dict):
        raise ReadError(f"{path}: a JSON batch is an object {{\"input_ids\": [[...]], \"labels\": [[...]]}}")
    out: dict[str, list[tuple[int, ...]]] = {}
    for name in ("input_ids", "labels", "label", "label_ids"):
        v = doc.get(name)
        if v is None:
            continue
        rows = v if isinstance(v, list) and v and isinstance(v[0], list) else [v] if isinstance(v, list) else [[v]]
        got = [_ints(r) for r in rows]
        if any(g is None for g in got):
            raise ReadError(f"{path}: {name!r} holds values that are not integer ids")
        out[name] = [g for g in got if g is not None]
    return out


def read_batch(path: Path) -> LabelColumn:
    """One saved batch's labels (and input_ids) as a LabelColumn of split "batch"; each row
    placed by its index. ReadError (one line) when it cannot be read or is a pickle."""
    name = str(path)
    suffix = path.suffix.lower()
    if suffix in PICKLE_SUFFIXES:
        raise ReadError(f"{name}: a {suffix} batch is a pickle and is never unpickled (loading it runs code); "
                        "save the batch with safetensors.torch.save_file(batch, 'batch.safetensors') or "
                        "numpy.savez('batch.npz', **batch)")
    raw = read_regular(path, MAX_BATCH_BYTES)
    if len(raw) > MAX_BATCH_BYTES:
        raise ReadError(f"{name}: over {MAX_BATCH_BYTES >> 20} MiB; not one batch")
    if suffix == ".safetensors":
        tensors = _safetensors(raw, name)
    elif suffix == ".npz":
        tensors = _npz(raw, name)
    elif suffix == ".json":
        tensors = _json_batch(raw, name)
    else:
        raise ReadError(f"{name}: a batch is read from .safetensors, .npz or .json (a .pt is never unpickled)")
    key = next((k for k in ("labels", "label", "label_ids") if k in tensors), None)
    if key is None:
        raise ReadError(f"{name}: no `labels` in the batch (found: {', '.join(sorted(tensors)) or 'nothing'})")
    collect = _Collect(name, "batch")
    ids = tensors.get("input_ids")
    labels = tensors[key]
    for i, row in enumerate(labels):
        obj: dict[str, Any] = {key: list(row) if len(row) != 1 or ids is not None else row[0]}
        if ids is not None and i < len(ids):
            obj["input_ids"] = list(ids[i])
        collect.add(obj, Place(path=name, record=i))
    return collect.finish()


__all__ = ["ModelLabels", "LabelColumn", "LossSettings", "LabelFacts", "Setting", "Place", "SequenceRow",
           "read_model_labels", "find_model_config", "read_label_column", "read_loss_settings", "read_batch",
           "LABEL_KEYS", "PICKLE_SUFFIXES"]
