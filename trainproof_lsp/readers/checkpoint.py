"""Checkpoints read without executing them: torch ZIP archives, legacy pickles,
safetensors files and sharded indexes -> `CheckpointFacts`.

Never `torch.load`, never `pickle.load`, never `import torch`. Pickles are walked opcode
by opcode (`pickle_walk`); tensor bytes are read straight from the file (mmap) and scanned
with numpy when it is installed, with `bytes` operations in C otherwise.

The formats, as this module reads them:

torch.save (>= 1.6) — a ZIP with STORED entries and data descriptors (flag bit 3):
    <name>/data.pkl            pickle of the object; tensors are persistent ids
                               ('storage', torch.FloatStorage, '<key>', 'cpu', numel)
    <name>/data/<key>          raw storage bytes, 64-byte aligned
    <name>/byteorder           "little" | "big"
    <name>/version, .format_version, .storage_alignment, .data/serialization_id
    central directory + end-of-central-directory record at the tail (written last: a
    save killed mid-write has local headers but no central directory)

legacy torch.save (< 1.6, or _use_new_zipfile_serialization=False) — concatenated
pickles: magic number 0x1950a86a20f9469cfc6c, protocol version, sys_info, the object,
the list of storage keys, then raw storages.

safetensors — u64 little-endian header length N, N bytes of JSON
    {"<tensor>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
     "__metadata__": {...}}, then the data section (offsets are relative to it).

sharded index (*.index.json) — {"metadata": {...}, "weight_map": {"<tensor>": "<shard file>"}}.

numpy (.npy / .npz) — \x93NUMPY, version, header length, a dict literal with 'descr'; an
object array's data is a pickle. An .npz is a ZIP of .npy entries.

A loader does not look at a name: a file under any name but *.safetensors that reads as
safetensors or as a tar is also walked as a pickle from byte 0 (torch.load and pickle.load
read one there).
"""

from __future__ import annotations

import json
import math
import mmap
import os
import re
import struct
import zipfile
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, TypedDict

from ..core.caps import DEFAULT_CAPS, MIB, Caps, mib
from ..core.formats import NPY_MAGIC, tar_checksum_ok
from ..core.model import Span
from ..core.positions import ByteIndex
from . import pickle_walk as pw
from .lfs import MAX_POINTER_BYTES, pointer_reason, pointer_size

# torch.serialization's MAGIC_NUMBER: the first pickle of a legacy torch.save file.
LEGACY_MAGIC = 0x1950A86A20F9469CFC6C

_STORAGE_DTYPES = {
    "DoubleStorage": "float64", "FloatStorage": "float32", "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32",
    "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8",
    "BoolStorage": "bool", "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128", "UntypedStorage": "uint8",
    "QInt8Storage": "qint8", "QUInt8Storage": "quint8", "QInt32Storage": "qint32",
    "Float8_e4m3fnStorage": "float8_e4m3fn", "Float8_e5m2Storage": "float8_e5m2",
    "UInt16Storage": "uint16", "UInt32Storage": "uint32", "UInt64Storage": "uint64",
}
_TORCH_DTYPE_ALIASES = {"float": "float32", "double": "float64", "half": "float16",
                        "long": "int64", "int": "int32", "short": "int16",
                        "cfloat": "complex64", "cdouble": "complex128"}
ITEMSIZE = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4,
    "int16": 2, "int8": 1, "uint8": 1, "bool": 1, "complex64": 8, "complex128": 16,
    "qint8": 1, "quint8": 1, "qint32": 4, "float8_e4m3fn": 1, "float8_e5m2": 1,
    "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1, "float8_e8m0fnu": 1, "uint16": 2,
    "uint32": 4, "uint64": 8,
}
_SAFETENSORS_DTYPES = {
    "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
    "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8",
    "U16": "uint16", "U32": "uint32", "U64": "uint64", "BOOL": "bool",
    "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "F8_E8M0": "float8_e8m0fnu",
    "C64": "complex64",
}
# The floating dtypes whose NaN/Inf/zero scan is implemented (IEEE layouts).
FLOATS = ("float64", "float32", "float16", "bfloat16")

# safetensors refuses headers above 100 MB; a bigger length is not a safetensors file.
_SAFETENSORS_MAX_HEADER = 100_000_000

# Names HF Trainer gives the model weights of a checkpoint-<step>/ folder; the
# optimizer-state check for that folder is reported once, on this file.
_HF_MAIN_WEIGHTS = {"model.safetensors", "pytorch_model.bin", "adapter_model.safetensors",
                    "adapter_model.bin", "model.safetensors.index.json",
                    "pytorch_model.bin.index.json"}
_HF_CHECKPOINT_DIR = re.compile(r"checkpoint-\d+$")

_OPTIMIZER_KEYS = {"optimizer", "optimizer_states", "optimizer_state_dict", "optimizer_state",
                   "optim", "opt", "optimizers", "optim_state", "optimizer_state_dicts"}
_WEIGHT_KEYS = {"state_dict", "model", "model_state_dict", "module", "model_state", "ema",
                "ema_state_dict", "params", "weights", "net", "network", "generator"}
_PROGRESS_KEYS = ("epoch", "global_step", "step", "iteration", "iter", "steps", "epochs")
_RNG_KEYS = {"python", "numpy", "cpu", "cuda", "mps", "xla", "npu", "hpu", "mlu", "musa"}


# --- records -------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class TensorFacts:
    """One tensor as the file describes it, and what its bytes hold."""

    name: str  # dotted path in the pickle ("state_dict.fc.weight") or safetensors key
    dtype: str  # "float32", "bfloat16", ... or "unknown:<storage>"
    shape: tuple[int, ...]
    numel: int
    stride: tuple[int, ...] = ()  # in elements; () means contiguous
    entry: str  # ZIP entry holding the storage ("sd/data/0"); "" elsewhere
    byte_offset: int | None  # file offset of the tensor's first element
    role: str  # "weights" | "optimizer" | "rng" | "other"
    scanned: bool = False
    nan: int = 0
    inf: int = 0
    first_bad: int | None = None  # element index of the first NaN/Inf
    all_zero: bool = False
    note: str = ""  # why the bytes were not scanned


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """What is wrong with the file as a container (empty, cut off, CRC, header...)."""

    kind: str  # "empty" | "truncated" | "corrupt" | "legacy" | "unreadable" | "bad-header" | "missing"
    message: str
    byte_offset: int | None = None
    span: Span | None = None
    evidence: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class UnsafeGlobal:
    module: str
    name: str
    danger: str  # what calling it does, when known
    byte_offset: int  # file offset of the opcode naming it
    entry: str  # ZIP entry of the pickle ("" for a bare pickle)


@dataclass(frozen=True, kw_only=True)
class CheckpointFacts:
    path: str
    format: str  # "torch-zip" | "torch-legacy" | "pickle" | "safetensors" | "sharded-index" | "unknown"
    size: int
    problems: tuple[Problem, ...] = ()
    unsafe: tuple[UnsafeGlobal, ...] = ()
    pickles_walked: int = 0
    tensors: tuple[TensorFacts, ...] = ()
    scanned: bool = False  # tensor bytes were read
    scan_note: str = ""  # why they were not
    top_keys: tuple[str, ...] = ()
    # A dict with training progress (epoch/global_step...) and model weights: a resume
    # checkpoint. has_optimizer says whether it carries optimizer state.
    progress_keys: tuple[str, ...] = ()
    has_optimizer: bool | None = None
    # HF checkpoint-<step>/ folder holding weights and trainer_state.json but no optimizer
    # state: the folder, else None.
    hf_folder_without_optimizer: str | None = None
    bytes_scanned: int = 0
    numpy_used: bool = False
    # What could not be judged and why (a size cap, an unwalked pickle): each becomes a
    # TP-NOT-CHECKED finding, so the report never passes what it did not look at.
    not_checked: tuple[str, ...] = ()
    unsafe_unlisted: int = 0  # unsafe globals past the first _MAX_UNSAFE_LISTED
    # Why no loader unpickles anything from this file (an .npy array without objects): the
    # unsafe-pickle check ran and found nothing to walk. "" when that is not known.
    no_pickle: str = ""
    # Set by the engine for --reference: the checkpoint to compare shapes against.
    reference: "CheckpointFacts | None" = None

    @property
    def readable(self) -> bool:
        return not any(p.kind in ("empty", "truncated", "unreadable", "bad-header", "legacy", "missing")
                       for p in self.problems)


class CheckpointError(Exception):
    """The file cannot be opened at all (permissions, a folder...). One line."""


class LfsPointerError(CheckpointError):
    """The file is a Git LFS pointer: the checkpoint was not downloaded. One line."""


# A checkpoint with a payload names one or two unsafe globals; a hostile pickle may name
# millions. The first this many are findings, the rest one count.
_MAX_UNSAFE_LISTED = 100

# Names that hold pickles whatever their suffix says: HF Trainer's residents and the
# generic pickle suffixes (walked, never unpickled; a clean one is judged, not "unreadable").
PICKLE_SUFFIXES = (".pkl", ".pickle", ".joblib")


def is_pickle_name(name: str) -> bool:
    return name.lower().endswith(PICKLE_SUFFIXES) or name == "training_args.bin"


# --- entry point -------------------------------------------------------------------------

def read_checkpoint(path: Path, *, scan: bool = True, caps: Caps = DEFAULT_CAPS) -> CheckpointFacts:
    """Read `path` as a checkpoint. Raises CheckpointError when it cannot be opened;
    everything else (empty, cut off, corrupt, not a checkpoint) is in the facts."""
    name = str(path)
    if path.name.lower().endswith(".index.json"):
        return _read_index(path)
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise CheckpointError(f"{name}: not a regular file")
        if size == 0:
            return CheckpointFacts(path=name, format="unknown", size=0, problems=(Problem(
                kind="empty", byte_offset=0,
                message="zero-byte file: the save was interrupted before writing anything"),))
        with path.open("rb") as fh:
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as e:
        raise CheckpointError(f"{name}: cannot read ({e.strerror or e})") from None
    try:
        # A Git LFS pointer in the checkpoint's place: not downloaded, so not judged (its
        # text would read as a safetensors header length or as no pickle at all).
        lfs = pointer_size(mm[:size]) if size <= MAX_POINTER_BYTES else None
        if lfs is not None:
            raise LfsPointerError(f"{name}: {pointer_reason(lfs)}")
        facts = _read_mapped(path, mm, size, scan, caps)
    finally:
        try:
            mm.close()
        except BufferError:  # a numpy view still alive; the GC closes it
            pass
    return _with_hf_folder(path, facts)


def _walk(data: Any, caps: Caps, start: int = 0, *, stop: int | None = None, base: int = 0) -> pw.Walked:
    return pw.walk(data, start=start, stop=stop, base=base, max_bytes=caps.max_pickle_mb * MIB,
                   max_ops=caps.max_pickle_ops)


def _capped_note(walked: pw.Walked, where: str) -> tuple[str, ...]:
    if not walked.capped:
        return ()
    return (f"{where}: the walk {walked.capped}; globals after that were not checked "
            "(raise the cap in [tool.trainproof.caps] to walk it all)",)


def _read_mapped(path: Path, mm: mmap.mmap, size: int, scan: bool, caps: Caps) -> CheckpointFacts:
    name = str(path)
    head = mm[:16]
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        # pickle.load stops at a ZIP's first byte ('P', a persistent id it has no loader
        # for), and torch.load and np.load open it as a ZIP: its pickles are its entries.
        return _read_zip(path, mm, size, scan, caps)
    if head[:6] == NPY_MAGIC:
        return _read_npy(path, mm, size, caps)
    if path.suffix.lower() == ".safetensors":
        return _read_safetensors(path, mm, size, scan, caps)
    # Any other name may be handed to torch.load or pickle.load, which read a pickle from
    # byte 0 whatever else the file also is: a file that reads as safetensors or as a tar
    # is walked from byte 0 too (a polyglot hides its payload there).
    if _looks_like_safetensors(head, size):
        return _also_from_byte_0(_read_safetensors(path, mm, size, scan, caps), mm, caps)
    if _is_tar(mm, size):
        return _also_from_byte_0(_read_legacy_tar(path, mm, size, caps), mm, caps)
    walked = _walk(mm, caps)
    if walked.error and not walked.globals and walked.ops < 2:
        return CheckpointFacts(path=name, format="unknown", size=size, problems=(Problem(
            kind="unreadable", byte_offset=0,
            message=f"not a checkpoint: neither a torch ZIP archive, a pickle nor safetensors "
                    f"(first bytes {bytes(head[:8])!r})",
            evidence={"first_bytes": bytes(head[:8]).hex()}),))
    return _read_pickles(path, mm, size, walked, caps)


# Where a file that is also a pickle says so: its byte-0 pickle's findings carry this entry.
BYTE_0 = "read from byte 0"


def _also_from_byte_0(facts: CheckpointFacts, mm: mmap.mmap, caps: Caps) -> CheckpointFacts:
    """`facts` plus what the pickle that starts at byte 0 would import and call.

    A crafted file can be a valid safetensors file or tar archive and a pickle at once:
    torch.load(weights_only=False) of a file that is not a ZIP (and not a tar) unpickles
    from byte 0, and pickle.load always does. The walk's globals are reported like any
    pickle's; where it did not reach the pickle's end, the rest is not checked. A file that
    is no pickle stops within a few opcodes, as the unpickler does, with nothing named."""
    w = _walk(mm, caps)
    unsafe, unlisted = _dedupe_unsafe(facts.unsafe + _unsafe(w, BYTE_0), facts.unsafe_unlisted + w.unlisted)
    notes = facts.not_checked + _capped_note(w, f"the pickle {BYTE_0}")
    return replace(facts, unsafe=unsafe, unsafe_unlisted=unlisted, not_checked=notes,
                   pickles_walked=facts.pickles_walked + 1)


# --- torch ZIP archives ------------------------------------------------------------------

def _local_data_offset(mm: mmap.mmap, header_offset: int) -> int | None:
    # Local file header: signature, version, flags, method, time, date, crc, sizes,
    # name length, extra length (30 bytes), then name and extra, then the data.
    if mm[header_offset:header_offset + 4] != b"PK\x03\x04":
        return None
    nlen: int
    elen: int
    nlen, elen = struct.unpack_from("<HH", mm, header_offset + 26)
    return header_offset + 30 + nlen + elen


class _Walk(TypedDict):
    """The CheckpointFacts fields every outcome of walking a file's pickles shares."""

    unsafe: tuple[UnsafeGlobal, ...]
    pickles_walked: int
    not_checked: tuple[str, ...]
    unsafe_unlisted: int


def _read_zip(path: Path, mm: mmap.mmap, size: int, scan: bool, caps: Caps) -> CheckpointFacts:
    name = str(path)
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, struct.error):
        return _read_truncated_zip(path, mm, size, caps)
    except OSError as e:
        raise CheckpointError(f"{name}: cannot read ({e.strerror or e})") from None
    with zf:
        infos = zf.infolist()
        names = [i.filename for i in infos]
        pkl = sorted((n for n in names if n.endswith("data.pkl")), key=len)
        if not pkl and any(n.lower().endswith(".npy") for n in names):
            return _read_npz(path, zf, mm, size, caps)
        if not pkl:
            if any(n.endswith("constants.pkl") or "/code/" in n for n in names):
                why = "a TorchScript archive (torch.jit.save): not judged by this version"
            else:
                why = f"a ZIP archive without data.pkl ({len(names)} entries): not a torch checkpoint"
            return CheckpointFacts(path=name, format="zip", size=size,
                                   problems=(Problem(kind="unreadable", message=why, byte_offset=0),))
        prefix = pkl[0][: -len("data.pkl")]
        problems: list[Problem] = []
        offsets: dict[str, tuple[int, int, int]] = {}  # entry -> (data offset, size, method)
        for info in infos:
            data_off = _local_data_offset(mm, info.header_offset)
            if data_off is None or data_off + info.compress_size > size:
                problems.append(Problem(
                    kind="corrupt", byte_offset=info.header_offset,
                    message=f"entry {info.filename}: local header at byte {info.header_offset} is damaged",
                    evidence={"entry": info.filename}))
                continue
            offsets[info.filename] = (data_off, info.compress_size, info.compress_type)
        # CRC of every entry, as the ZIP itself records it.
        not_checked: list[str] = []
        inflate_left = caps.max_inflate_mb * MIB
        view = memoryview(mm)
        try:
            for info in infos:
                if info.filename not in offsets:
                    continue
                data_off, csize, method = offsets[info.filename]
                if method == zipfile.ZIP_STORED:
                    crc = zlib.crc32(view[data_off:data_off + csize]) & 0xFFFFFFFF
                    ok = crc == info.CRC
                else:
                    # A compressed entry (torch.save never writes one): inflating it is
                    # bounded, a zip bomb stops at the cap.
                    if info.file_size > inflate_left:
                        not_checked.append(
                            f"entry {info.filename} inflates to {info.file_size} bytes "
                            f"({mib(info.file_size)}; {csize} compressed), over the cap of "
                            f"{caps.max_inflate_mb} MiB (max_inflate_mb): its CRC and content were not checked")
                        continue
                    inflate_left -= info.file_size
                    ok = _crc_by_zipfile(zf, info)
                    crc = None
                if not ok:
                    problems.append(Problem(
                        kind="corrupt", byte_offset=data_off,
                        message=f"entry {info.filename} fails its CRC-32 check "
                                f"(recorded {info.CRC:08x}" + (f", data gives {crc:08x})" if crc is not None else ")"),
                        evidence={"entry": info.filename, "crc_recorded": f"{info.CRC:08x}",
                                  "crc_actual": f"{crc:08x}" if crc is not None else ""}))
            byteorder = "little"
            if f"{prefix}byteorder" in offsets:
                bo_off, bo_size, _ = offsets[f"{prefix}byteorder"]
                byteorder = bytes(view[bo_off:bo_off + bo_size]).decode("ascii", "replace").strip() or "little"
        finally:
            view.release()
        # Every pickle in the archive is walked: torch.load reads one archive folder's
        # data.pkl, and a ZIP with two folders leaves which one to whoever loads it.
        all_pkl = [pkl[0]] + sorted(n for n in names if n.endswith(".pkl") and n != pkl[0])
        unsafe: tuple[UnsafeGlobal, ...] = ()
        unlisted = 0
        walked_main: pw.Walked | None = None
        pkl_off = offsets.get(pkl[0], (0, 0, -1))[0]
        for entry in all_pkl:
            w = _walk_zip_entry(zf, mm, entry, offsets, caps, not_checked)
            if w is None:
                continue
            unsafe += _unsafe(w, entry)
            unlisted += w.unlisted
            not_checked.extend(_capped_note(w, f"entry {entry}"))
            if entry == pkl[0]:
                walked_main = w
    unsafe, unlisted = _dedupe_unsafe(unsafe, unlisted)
    common = _Walk(unsafe=unsafe, pickles_walked=len(all_pkl), not_checked=tuple(not_checked),
                   unsafe_unlisted=unlisted)
    if len(set(n.rsplit("/", 1)[0] for n in all_pkl if n.endswith("data.pkl"))) > 1:
        common["not_checked"] = common["not_checked"] + (
            f"the archive holds {sum(n.endswith('data.pkl') for n in all_pkl)} archive folders "
            f"({', '.join(all_pkl[:3])}): which one torch.load reads is ambiguous; every pickle was "
            f"walked, tensors were read from {pkl[0]} only",)
    if walked_main is None or walked_main.capped:
        return CheckpointFacts(path=name, format="torch-zip", size=size, problems=tuple(problems),
                               scan_note=f"{pkl[0]} was not walked to its end; tensors not read", **common)
    walked = walked_main
    if walked.error:
        return CheckpointFacts(path=name, format="torch-zip", size=size, problems=tuple(problems) + (Problem(
            kind="corrupt", byte_offset=pkl_off, evidence={"entry": pkl[0]},
            message=f"entry {pkl[0]} is not a complete pickle ({walked.error})"),),
            scan_note="data.pkl could not be walked", **common)
    if len(pw.top_keys(walked.root)) > caps.max_tensors or _count_refs(walked.root, caps.max_tensors):
        common["not_checked"] += (f"{pkl[0]} describes more than {caps.max_tensors} tensors, over the cap "
                                   "(max_tensors): tensors were not read",)
        return CheckpointFacts(path=name, format="torch-zip", size=size, problems=tuple(problems),
                               scan_note="too many tensors", **common)
    tensors, more_problems = _zip_tensors(walked.root, prefix, offsets, byteorder, path)
    problems.extend(more_problems)
    facts = CheckpointFacts(path=name, format="torch-zip", size=size, problems=tuple(problems),
                            tensors=tuple(tensors), top_keys=pw.top_keys(walked.root),
                            **_resume_shape(walked.root), **common)
    if not scan:
        return replace(facts, scan_note="content scan not requested")
    return _scan_all(facts, mm, byteorder)


def _crc_by_zipfile(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> bool:
    try:
        with zf.open(info) as fh:
            while fh.read(1 << 20):
                pass
        return True
    except (zipfile.BadZipFile, zlib.error, OSError, NotImplementedError, EOFError):
        return False


def _walk_zip_entry(zf: zipfile.ZipFile, mm: mmap.mmap, entry: str,
                    offsets: Mapping[str, tuple[int, int, int]], caps: Caps,
                    not_checked: list[str]) -> pw.Walked | None:
    """Walk one pickle entry of a ZIP: STORED entries in place (file offsets), compressed
    ones inflated up to the caps. None (with a note) when it cannot be walked."""
    if entry not in offsets:
        not_checked.append(f"entry {entry}: its local header is damaged; the pickle was not walked")
        return None
    off, csize, method = offsets[entry]
    if method == zipfile.ZIP_STORED:
        return _walk(mm, caps, off, stop=off + csize)
    cap = min(caps.max_pickle_mb, caps.max_inflate_mb) * MIB
    declared = zf.getinfo(entry).file_size
    if declared > cap:
        not_checked.append(f"entry {entry} inflates to {declared} bytes ({mib(declared)}; {csize} "
                           f"compressed), over the cap of {mib(cap)} (max_inflate_mb/max_pickle_mb): "
                           "the pickle was not walked")
        return None
    try:
        with zf.open(entry) as fh:
            data = fh.read(cap + 1)
    except (zipfile.BadZipFile, zlib.error, OSError, NotImplementedError, EOFError) as e:
        not_checked.append(f"entry {entry} cannot be inflated ({e}); the pickle was not walked")
        return None
    if len(data) > cap:
        not_checked.append(f"entry {entry} inflates to more than {cap} bytes ({mib(cap)}; "
                           f"{csize} compressed), over the cap (max_inflate_mb/max_pickle_mb): "
                           "the pickle was not walked")
        return None
    return _walk(data, caps)


def _count_refs(root: Any, limit: int) -> bool:
    """More than `limit` tensors under root (stops counting there)."""
    n = 0
    for _ in pw.tensors_by_path(root):
        n += 1
        if n > limit:
            return True
    return False


def _dedupe_unsafe(unsafe: tuple[UnsafeGlobal, ...], unlisted: int) -> tuple[tuple[UnsafeGlobal, ...], int]:
    seen: set[tuple[str, str, str]] = set()
    out: list[UnsafeGlobal] = []
    for g in unsafe:
        key = (g.module, g.name, g.entry)
        if key in seen:
            continue
        seen.add(key)
        out.append(g)
    if len(out) > _MAX_UNSAFE_LISTED:
        unlisted += len(out) - _MAX_UNSAFE_LISTED
        out = out[:_MAX_UNSAFE_LISTED]
    return tuple(out), unlisted


def _unsafe(walked: pw.Walked, entry: str) -> tuple[UnsafeGlobal, ...]:
    seen: set[tuple[str, str]] = set()
    out = []
    for g in walked.globals:
        if g.allowed or (g.module, g.name) in seen:
            continue
        seen.add((g.module, g.name))
        out.append(UnsafeGlobal(module=g.module, name=g.name, danger=g.danger,
                                byte_offset=g.offset, entry=entry))
    return tuple(out)


def _storage_of(ref: pw.TensorRef) -> tuple[str, str, int | None] | None:
    """(key, dtype, numel or None) of a tensor's storage persistent id."""
    storage = ref.storage
    if not isinstance(storage, pw.Persistent) or not isinstance(storage.pid, tuple):
        return None
    pid = storage.pid
    if len(pid) < 3 or pid[0] != "storage":
        return None
    stype, key = pid[1], pid[2]
    if not isinstance(key, str):
        return None
    dtype = "unknown"
    if isinstance(stype, pw.Global):
        dtype = _STORAGE_DTYPES.get(stype.name, f"unknown:{stype.name}")
    numel = pid[4] if len(pid) > 4 and isinstance(pid[4], int) else None
    return key, dtype, numel


def _is_optimizer_file(file_name: str) -> bool:
    # HF optimizer.pt, accelerate optimizer.bin / optimizer_1.bin, DeepSpeed *_optim_states.pt
    lower = file_name.lower()
    return lower.startswith("optimizer") or lower.endswith("optim_states.pt")


def _role(path: str, top: tuple[str, ...], file_name: str) -> str:
    first = path.split(".", 1)[0]
    lower_name = file_name.lower()
    if _is_optimizer_file(file_name) or set(top) >= {"state", "param_groups"}:
        return "optimizer"
    if lower_name.startswith("rng_state") or (top and set(top) <= _RNG_KEYS):
        return "rng"
    if first in _OPTIMIZER_KEYS:
        return "optimizer"
    if first in _WEIGHT_KEYS:
        return "weights"
    if first in ("lr_schedulers", "callbacks", "loops", "scheduler", "lr_scheduler", "scaler",
                 "hyper_parameters", "hparams", "args", "config"):
        return "other"
    # A flat state dict: every tensor sits right under the root.
    return "weights"


def _resume_shape(root: Any) -> dict[str, Any]:
    keys = pw.top_keys(root)
    if not keys:
        return {}
    progress = tuple(k for k in keys if k in _PROGRESS_KEYS)
    has_weights = any(k in _WEIGHT_KEYS for k in keys)
    if not (progress and has_weights):
        return {"progress_keys": progress}
    has_opt = False
    for k in keys:
        if k in _OPTIMIZER_KEYS:
            v = pw.value_at(root, k)
            # Lightning writes optimizer_states: [] when there is nothing to save.
            if not (isinstance(v, (pw.SymList, pw.SymDict)) and not v.items) and v is not None:
                has_opt = True
    return {"progress_keys": progress, "has_optimizer": has_opt}


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _zip_tensors(root: Any, prefix: str, offsets: Mapping[str, tuple[int, int, int]], byteorder: str,
                 path: Path) -> tuple[list[TensorFacts], list[Problem]]:
    top = pw.top_keys(root)
    tensors: list[TensorFacts] = []
    problems: list[Problem] = []
    for tpath, ref in pw.tensors_by_path(root):
        shape = tuple(s for s in ref.size if isinstance(s, int))
        stride = tuple(s for s in ref.stride if isinstance(s, int))
        storage = _storage_of(ref)
        role = _role(tpath, top, path.name)
        if storage is None or len(shape) != len(ref.size):
            tensors.append(TensorFacts(name=tpath, dtype="unknown", shape=shape, numel=_numel(shape),
                                       entry="", byte_offset=None, role=role,
                                       note="storage reference not understood"))
            continue
        key, dtype, _numel_pid = storage
        if ref.dtype:
            dtype = _TORCH_DTYPE_ALIASES.get(ref.dtype, ref.dtype)
        entry = f"{prefix}data/{key}"
        numel = _numel(shape)
        itemsize = ITEMSIZE.get(dtype)
        if entry not in offsets:
            problems.append(Problem(kind="corrupt", byte_offset=None,
                                    message=f"data.pkl names storage {entry} for tensor {tpath}, "
                                            "but the archive has no such entry",
                                    evidence={"entry": entry, "tensor": tpath}))
            tensors.append(TensorFacts(name=tpath, dtype=dtype, shape=shape, numel=numel, entry=entry,
                                       byte_offset=None, role=role, note="storage entry missing"))
            continue
        data_off, esize, method = offsets[entry]
        byte_offset = data_off + ref.offset * itemsize if itemsize else None
        note = ""
        if itemsize and numel:
            extent = ref.offset + 1 + sum((s - 1) * abs(st) for s, st in zip(shape, stride))
            if len(stride) != len(shape) or extent * itemsize > esize:
                problems.append(Problem(
                    kind="corrupt", byte_offset=data_off,
                    message=f"tensor {tpath} {list(shape)} needs {extent * itemsize} bytes of "
                            f"{entry}, which holds {esize}",
                    evidence={"entry": entry, "tensor": tpath, "needed": extent * itemsize, "held": esize}))
                note = "storage shorter than the tensor"
        if method != zipfile.ZIP_STORED:
            note = note or "compressed entry; bytes not scanned"
        tensors.append(TensorFacts(name=tpath, dtype=dtype, shape=shape, numel=numel, entry=entry,
                                   byte_offset=byte_offset, role=role, note=note,
                                   stride=() if _is_contiguous(shape, stride) else stride))
    return tensors, problems


def _read_truncated_zip(path: Path, mm: mmap.mmap, size: int, caps: Caps) -> CheckpointFacts:
    """No central directory: walk the local headers to say what was written before the cut."""
    name = str(path)
    complete: list[tuple[str, int, int]] = []  # (entry, data offset, size)
    pos = 0
    cut_entry, cut_at = "", size
    while pos + 30 <= size and mm[pos:pos + 4] == b"PK\x03\x04":
        flags, method = struct.unpack_from("<HH", mm, pos + 6)
        csize, = struct.unpack_from("<I", mm, pos + 18)
        nlen, elen = struct.unpack_from("<HH", mm, pos + 26)
        data_off = pos + 30 + nlen + elen
        entry = bytes(mm[pos + 30:pos + 30 + nlen]).decode("utf-8", "replace")
        if data_off > size:
            cut_entry, cut_at = entry + ("..." if pos + 30 + nlen > size else ""), pos
            break
        if flags & 0x08:
            # Sizes follow the data in a descriptor: PK\x07\x08, crc, sizes (4 or 8 bytes).
            end, desc_len = _find_descriptor(mm, data_off, size)
            if end is None:
                cut_entry, cut_at = entry, pos
                break
        else:
            if csize == 0xFFFFFFFF:  # zip64 sizes in the extra field: not needed by torch
                cut_entry, cut_at = entry, pos
                break
            end, desc_len = data_off + csize, 0
            if end > size:
                cut_entry, cut_at = entry, pos
                break
        complete.append((entry, data_off, end - data_off))
        pos = end + desc_len
    else:
        if mm[pos:pos + 4] == b"PK\x01\x02":
            cut_entry = "(central directory)"
        cut_at = pos
    if not complete and not cut_entry:
        return CheckpointFacts(path=name, format="torch-zip", size=size, problems=(Problem(
            kind="unreadable", byte_offset=0,
            message="starts like a ZIP archive but no entry could be read: not a checkpoint"),))
    written = ", ".join(e for e, _, _ in complete[:4]) + (", ..." if len(complete) > 4 else "")
    problem = Problem(
        kind="truncated", byte_offset=cut_at,
        message=(f"cut off mid-write: the ZIP has no central directory; {len(complete)} complete "
                 f"entr{'y' if len(complete) == 1 else 'ies'} ({written or 'none'})"
                 + (f", entry {cut_entry!r} incomplete from byte {cut_at}" if cut_entry else "")
                 + f"; file ends at byte {size}"),
        evidence={"complete_entries": len(complete), "incomplete_entry": cut_entry, "file_size": size,
                  "cut_at": cut_at})
    unsafe: tuple[UnsafeGlobal, ...] = ()
    walked_count = 0
    unlisted = 0
    notes: list[str] = []
    for entry, data_off, esize in complete:
        if entry.endswith(".pkl"):
            walked = _walk(mm, caps, data_off, stop=data_off + esize)
            unsafe += _unsafe(walked, entry)
            unlisted += walked.unlisted
            notes.extend(_capped_note(walked, f"entry {entry}"))
            walked_count += 1
    unsafe, unlisted = _dedupe_unsafe(unsafe, unlisted)
    return CheckpointFacts(path=name, format="torch-zip", size=size, problems=(problem,), unsafe=unsafe,
                           pickles_walked=walked_count, scan_note="the archive is cut off; tensors not read",
                           not_checked=tuple(notes), unsafe_unlisted=unlisted)


def _find_descriptor(mm: mmap.mmap, data_off: int, size: int) -> tuple[int | None, int]:
    at = mm.find(b"PK\x07\x08", data_off)
    while at != -1:
        if at + 16 <= size:
            c32, = struct.unpack_from("<I", mm, at + 8)
            if c32 == at - data_off:
                return at, 16
        if at + 24 <= size:
            c64, = struct.unpack_from("<Q", mm, at + 8)
            if c64 == at - data_off:
                return at, 24
        at = mm.find(b"PK\x07\x08", at + 1)
    return None, 0


# --- bare pickles (legacy torch.save, or not torch at all) --------------------------------

def _read_pickles(path: Path, mm: mmap.mmap, size: int, first: pw.Walked, caps: Caps) -> CheckpointFacts:
    name = str(path)
    unsafe = list(_unsafe(first, ""))
    unlisted = first.unlisted
    notes = list(_capped_note(first, "the pickle"))
    walked = 1
    legacy = isinstance(first.root, int) and not isinstance(first.root, bool) and first.root == LEGACY_MAGIC
    if legacy and not first.error and not first.capped:
        # protocol version, sys_info, the object, the storage keys; raw storages follow.
        pos = first.end
        for _ in range(4):
            if pos >= size:
                break
            w = _walk(mm, caps, pos)
            walked += 1
            unsafe.extend(_unsafe(w, ""))
            unlisted += w.unlisted
            notes.extend(_capped_note(w, f"the pickle at byte {pos}"))
            if w.error or w.capped:
                break
            pos = w.end
        listed, unlisted = _dedupe_unsafe(tuple(unsafe), unlisted)
        problem = Problem(
            kind="legacy", byte_offset=0,
            message=("pre-1.6 torch.save format (a bare pickle followed by raw storages): its tensors "
                     "are not read by this version, so weights were not checked; the pickle's "
                     "globals were checked without running it. Re-save with torch >= 1.6 to have it judged"),
            evidence={"pickles_walked": walked})
        return CheckpointFacts(path=name, format="torch-legacy", size=size, problems=(problem,),
                               unsafe=listed, pickles_walked=walked, unsafe_unlisted=unlisted,
                               not_checked=tuple(notes), scan_note="pre-1.6 torch format; tensors not read")
    listed, unlisted = _dedupe_unsafe(tuple(unsafe), unlisted)
    common = _Walk(unsafe=listed, pickles_walked=walked, unsafe_unlisted=unlisted, not_checked=tuple(notes))
    no_tensors = "not a torch checkpoint; tensors not read"
    if first.error:
        why = (f"a pickle not walked to its end ({first.error}; stopped at byte {first.stopped_at}); "
               "its globals up to there "
               "were checked without running it")
        return CheckpointFacts(path=name, format="pickle", size=size,
                               problems=(Problem(kind="unreadable", byte_offset=0, message=why),), scan_note=no_tensors, **common)
    if is_pickle_name(path.name):
        # A pickle by name (model.pkl, training_args.bin, *.joblib): what matters is the
        # code it would run, and that was checked in full. Nothing in it is weights.
        return CheckpointFacts(path=name, format="pickle", size=size, scan_note=no_tensors, **common)
    why = ("a bare pickle, not a torch.save archive: nothing in it is judged as weights; its "
           "globals were checked without running it")
    return CheckpointFacts(path=name, format="pickle", size=size,
                           problems=(Problem(kind="unreadable", byte_offset=0, message=why),), scan_note=no_tensors, **common)


# --- torch's legacy tar format ---------------------------------------------------------------

def _is_tar(mm: mmap.mmap, size: int) -> bool:
    """A tar archive as tarfile (and so torch.load) opens one: the first 512-byte header's
    checksum holds, whatever the member (a PAX header, a README, torch's own)."""
    return size >= 512 and tar_checksum_ok(bytes(mm[:512]))


# The members torch.load reads from its legacy tar format, in its order; it takes the last
# member of each name (tarfile's getmember).
_TORCH_TAR_MEMBERS = ("storages", "tensors", "pickle")
# Members listed before the walk gives up listing: torch lists them all, so one named
# storages/tensors/pickle past the cap could be the one it reads; then it is NOT-CHECKED.
# A torch tar has four members; an archive of more than this is built to hide one.
_MAX_TAR_MEMBERS = 10_000
# Records (storages or tensors) walked in one member; torch's own count can be anything.
_MAX_TAR_RECORDS = 1_000_000


def _read_legacy_tar(path: Path, mm: mmap.mmap, size: int, caps: Caps) -> CheckpointFacts:
    """A tar archive, read as torch.load reads its oldest format (torch < 0.4):

        storages   a pickle (count N), then per storage: a pickle (key, location, type),
                   an int64 element count and the raw bytes; then a pickle (storage views)
        tensors    a pickle (count), then per tensor: a pickle (key, storage id, type),
                   int32 ndim, 4 bytes, ndim int64 sizes, ndim int64 strides, int64 offset
        pickle     the object, one pickle (tensors as persistent ids)
    torch extracts each by name (the last member of that name), so every member is listed
    and those are walked; any other member is never read by torch. Every pickle is walked;
    the raw parts are skipped by their recorded lengths."""
    import tarfile

    name = str(path)
    unsafe: list[UnsafeGlobal] = []
    unlisted = 0
    notes: list[str] = []
    walked = 0
    chosen: dict[str, tarfile.TarInfo] = {}
    listed = 0
    try:
        with tarfile.open(path, mode="r:") as tar:
            while True:
                m = tar.next()
                if m is None:
                    break
                listed += 1
                if m.name in _TORCH_TAR_MEMBERS:
                    chosen[m.name] = m  # a later member of the name replaces an earlier one
                if listed >= _MAX_TAR_MEMBERS:
                    if tar.next() is not None:
                        notes.append(f"the tar holds more than {_MAX_TAR_MEMBERS} members; members after "
                                     f"the first {_MAX_TAR_MEMBERS} were not listed, and torch.load reads "
                                     "the last member named storages, tensors or pickle, which may be "
                                     "among them")
                    break
    except (tarfile.TarError, OSError, EOFError, ValueError) as e:
        return CheckpointFacts(path=name, format="torch-tar", size=size, problems=(Problem(
            kind="unreadable", byte_offset=0, message=f"a tar archive that cannot be listed ({e})"),))
    for mname in _TORCH_TAR_MEMBERS:
        m = chosen.get(mname)
        if m is None:
            continue
        if not m.isfile():
            notes.append(f"member {mname} is a {'link' if m.islnk() or m.issym() else 'special member'}"
                         f"{f' to {m.linkname!r}' if m.linkname else ''}: torch.load follows it; what it "
                         "reads there was not walked")
            continue
        start, stop = m.offset_data, min(m.offset_data + m.size, size)
        if m.offset_data + m.size > size:
            notes.append(f"member {mname} runs past the end of the file (cut off)")
        w_count, more = _walk_tar_member(mname, mm, start, stop, caps, unsafe, notes)
        walked += w_count
        unlisted += more
    listed_unsafe, unlisted = _dedupe_unsafe(tuple(unsafe), unlisted)
    if not chosen:
        # torch.load fails on it (no storages member) before unpickling anything.
        return CheckpointFacts(path=name, format="tar", size=size, unsafe=listed_unsafe,
                               unsafe_unlisted=unlisted, pickles_walked=walked, not_checked=tuple(notes),
                               scan_note=f"a tar archive of {listed} member(s), none of them one torch.load "
                                         "reads (storages, tensors, pickle); not a checkpoint")
    return CheckpointFacts(path=name, format="torch-tar", size=size, problems=(Problem(
        kind="legacy", byte_offset=0,
        message=("torch's legacy tar format (torch < 0.4): its tensors are not read by this version; "
                 "every pickle torch.load reads from it was checked without running it")),),
        unsafe=listed_unsafe, unsafe_unlisted=unlisted, pickles_walked=walked, not_checked=tuple(notes),
        scan_note="legacy tar format; tensors not read")


def _walk_tar_member(mname: str, mm: mmap.mmap, start: int, stop: int, caps: Caps,
                     unsafe: list[UnsafeGlobal], notes: list[str]) -> tuple[int, int]:
    """Walk the pickles of one member as torch reads them: (pickles walked, unlisted)."""
    walked = unlisted = 0
    pos = start
    count: int | None = None  # records after the count pickle (storages/tensors)
    k = -1 if mname != "pickle" else 0  # -1: the count pickle comes next; then records 1, 2, ...
    while pos < stop:  # a member that ends early makes torch.load fail there: nothing after runs
        w = _walk(mm, caps, pos, stop=stop)
        walked += 1
        unsafe.extend(_unsafe(w, mname))
        unlisted += w.unlisted
        notes.extend(_capped_note(w, f"member {mname}"))
        if w.error or w.capped:
            if w.error:
                notes.append(f"member {mname}: a pickle at byte {pos} is damaged ({w.error}); the rest "
                             "of the member was not walked")
            break
        pos = w.end
        if mname == "pickle":
            break
        if k < 0:  # the count torch loops over
            if not (isinstance(w.root, int) and not isinstance(w.root, bool)) or w.root < 0:
                break  # torch's range(count) fails here: nothing after it is read
            count = w.root
            if count > _MAX_TAR_RECORDS:
                notes.append(f"member {mname} says it holds {count} records, over the cap of "
                             f"{_MAX_TAR_RECORDS}: records after that were not walked")
                count = _MAX_TAR_RECORDS
            k = 0
            if mname == "tensors" and count == 0:
                break
            continue
        k += 1
        assert count is not None
        if mname == "storages":
            if k > count:  # the storage-views pickle after the storages: the member's last
                break
            pos = _skip_storage(w.root, mm, pos, stop)
        else:
            pos = _skip_tensor_header(mm, pos, stop)
            if k >= count:
                break
        if pos < 0:
            notes.append(f"member {mname}: record {k} is not understood; the rest of the member was "
                         "not walked")
            break
    return walked, unlisted


def _skip_storage(root: Any, mm: mmap.mmap, pos: int, stop: int) -> int:
    """Past one storage's raw bytes: int64 element count, then count x element size."""
    stype = root[2] if isinstance(root, tuple) and len(root) >= 3 else None
    dtype = _STORAGE_DTYPES.get(stype.name) if isinstance(stype, pw.Global) else None
    itemsize = ITEMSIZE.get(dtype or "")
    if itemsize is None or pos + 8 > stop:
        return -1
    n, = struct.unpack_from("<q", mm, pos)
    end = pos + 8 + n * itemsize
    return end if 0 <= n and end <= stop else -1


def _skip_tensor_header(mm: mmap.mmap, pos: int, stop: int) -> int:
    if pos + 8 > stop:
        return -1
    ndim, = struct.unpack_from("<i", mm, pos)
    end = pos + 8 + 16 * ndim + 8
    return end if 0 <= ndim <= 64 and end <= stop else -1


# --- numpy .npy / .npz ------------------------------------------------------------------------

# numpy's own default bound on an .npy header is 10,000 bytes, but np.load(allow_pickle=True)
# lifts it; past this many bytes the header (a Python literal) is not parsed.
_NPY_MAX_HEADER = 64 * 1024
# A dtype description with no object in it: a scalar type code with an optional size and
# datetime unit ('<f4', '|b1', '<M8[ns]', '<U5'). Anything else is told apart field by field.
_NPY_PLAIN = re.compile(r"[<>|=]?(?:[?bBhHiIlLqQpPefdgFDGmM]|[biufcSUVamM]\d{1,9})(?:\[\w{1,8}\])?")


def npy_header(buf: Any, at: int = 0) -> tuple[int, bool] | str:
    """(offset just past the header, whether np.load unpickles the data) of the .npy array
    that starts at buf[at], or why that is not known.

        \x93NUMPY, major, minor, header length (u16 for 1.x, u32 for 2.x/3.x), then a
        Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': ...}
    np.load(allow_pickle=True) unpickles the data when the dtype holds objects."""
    import ast

    if bytes(buf[at:at + 6]) != NPY_MAGIC or len(buf) < at + 10:
        return "not an .npy array (no \\x93NUMPY magic)"
    major = buf[at + 6]
    if major == 1:
        hlen, start = struct.unpack_from("<H", buf, at + 8)[0], at + 10
    elif major in (2, 3) and len(buf) >= at + 12:
        hlen, start = struct.unpack_from("<I", buf, at + 8)[0], at + 12
    else:
        return f".npy format version {major} is not one numpy writes"
    if hlen > _NPY_MAX_HEADER:
        return f"its .npy header is {hlen} bytes, over the cap of {_NPY_MAX_HEADER}: not parsed"
    if start + hlen > len(buf):
        return "its .npy header is cut off"
    text = bytes(buf[start:start + hlen]).decode("utf-8" if major == 3 else "latin1", "replace")
    try:
        header = ast.literal_eval(text)  # a literal only, as numpy parses it: never code
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return "its .npy header is not a Python literal"
    if not isinstance(header, dict) or "descr" not in header:
        return "its .npy header has no descr"
    holds = _descr_has_object(header["descr"], 0)
    if holds is None:
        return f"its .npy dtype {str(header['descr'])[:80]!r} is not understood"
    return start + hlen, holds


def _descr_has_object(descr: Any, depth: int) -> bool | None:
    """Whether an .npy dtype description holds Python objects (None: not understood)."""
    if depth > 32:
        return None
    if isinstance(descr, str):
        if _NPY_PLAIN.fullmatch(descr):
            return False
        return True if descr.lstrip("<>|=").startswith("O") else None
    if isinstance(descr, list):
        out = False
        for field_ in descr:
            if not (isinstance(field_, tuple) and len(field_) in (2, 3)):
                return None
            inner = _descr_has_object(field_[1], depth + 1)
            if inner is None:
                return None
            out = out or inner
        return out
    return None


def _read_npy(path: Path, mm: mmap.mmap, size: int, caps: Caps) -> CheckpointFacts:
    name = str(path)
    got = npy_header(mm)
    if isinstance(got, str):
        return CheckpointFacts(path=name, format="npy", size=size, scan_note="not read",
                               not_checked=(f"{got}: whether np.load(allow_pickle=True) runs a pickle "
                                            "from it was not checked",))
    data_at, holds = got
    if not holds:
        return CheckpointFacts(path=name, format="npy", size=size, scan_note="a numpy array; not judged as weights",
                               no_pickle="an .npy array without objects: np.load reads its bytes, no pickle")
    w = _walk(mm, caps, data_at)
    return _npy_facts(name, "npy", size, [(w, "")])


def _npy_facts(name: str, fmt: str, size: int, walks: list[tuple[pw.Walked, str]],
               notes: tuple[str, ...] = ()) -> CheckpointFacts:
    unsafe: tuple[UnsafeGlobal, ...] = ()
    unlisted = 0
    more: list[str] = list(notes)
    for w, entry in walks:
        unsafe += _unsafe(w, entry)
        unlisted += w.unlisted
        more.extend(_capped_note(w, f"the object array {entry or ''}".rstrip()))
        if w.error:
            more.append(f"the object array{' ' + entry if entry else ''}: its pickle is damaged ({w.error}); "
                        "its globals up to there were checked")
    listed, unlisted = _dedupe_unsafe(unsafe, unlisted)
    return CheckpointFacts(path=name, format=fmt, size=size, unsafe=listed, unsafe_unlisted=unlisted,
                           pickles_walked=len(walks), not_checked=tuple(more),
                           no_pickle="" if walks else "numpy arrays without objects: np.load runs no pickle",
                           scan_note="numpy arrays; not judged as weights")


def _read_npz(path: Path, zf: zipfile.ZipFile, mm: mmap.mmap, size: int, caps: Caps) -> CheckpointFacts:
    """np.savez: a ZIP of .npy entries; np.load gives each entry with the .npy magic to
    its .npy reader, which unpickles object arrays. Each such entry's pickle is walked."""
    walks: list[tuple[pw.Walked, str]] = []
    notes: list[str] = []
    cap = min(caps.max_pickle_mb, caps.max_inflate_mb) * MIB
    for info in zf.infolist()[:caps.max_tensors]:
        entry = info.filename
        data_off = _local_data_offset(mm, info.header_offset)
        try:
            if info.compress_type == zipfile.ZIP_STORED and data_off is not None \
                    and data_off + info.compress_size <= size:
                data: Any = mm
                at, stop = data_off, data_off + info.compress_size
            else:
                with zf.open(info) as fh:
                    data = fh.read(12 + _NPY_MAX_HEADER)
                    if not data.startswith(NPY_MAGIC):
                        continue
                    got0 = npy_header(data)
                    if isinstance(got0, tuple) and got0[1]:
                        data += fh.read(cap + 1 - len(data))
                        if len(data) > cap:
                            notes.append(f"entry {entry} inflates to more than {mib(cap)} (max_inflate_mb/"
                                         "max_pickle_mb): its object array's pickle was not walked")
                            continue
                at, stop = 0, len(data)
        except (zipfile.BadZipFile, zlib.error, OSError, NotImplementedError, EOFError) as e:
            notes.append(f"entry {entry} cannot be read ({e}); it was not checked")
            continue
        if bytes(data[at:at + 6]) != NPY_MAGIC:
            continue
        got = npy_header(data[at:min(stop, at + 12 + _NPY_MAX_HEADER)] if data is mm else data)
        if isinstance(got, str):
            notes.append(f"entry {entry}: {got}; whether np.load runs a pickle from it was not checked")
            continue
        data_at, holds = got
        if holds:
            walks.append((_walk(data, caps, at + data_at, stop=stop, base=0), f"npz entry {entry}"))
    if len(zf.infolist()) > caps.max_tensors:
        notes.append(f"the archive holds {len(zf.infolist())} entries, over the cap of {caps.max_tensors} "
                     "(max_tensors): entries after that were not checked")
    return _npy_facts(str(path), "npz", size, walks, tuple(notes))


# --- safetensors ----------------------------------------------------------------------------

# The most dimensions a tensor's shape may have here: numpy's own limit (NPY_MAXDIMS in
# numpy 2; safetensors' numpy loader refuses more), where real weights have a handful. A
# shape of 500k dimensions is an attack on the reader, not a tensor.
_MAX_DIMS = 64
_U64_MAX = 2**64 - 1


def _checked_numel(shape: tuple[int, ...]) -> int | None:
    """The element count as safetensors computes it (64-bit, checked in order: an
    overflow before a zero dimension is still an overflow), or None when it overflows."""
    n = 1
    for s in shape:
        if s > _U64_MAX:
            return None
        n *= s
        if n > _U64_MAX:
            return None
    return n


def _looks_like_safetensors(head: bytes, size: int) -> bool:
    if len(head) < 9:
        return False
    n, = struct.unpack_from("<Q", head, 0)
    return 2 <= n <= min(size - 8, _SAFETENSORS_MAX_HEADER) and head[8:9] == b"{"


def _read_safetensors(path: Path, mm: mmap.mmap, size: int, scan: bool, caps: Caps) -> CheckpointFacts:
    name = str(path)

    def bad(kind: str, message: str, offset: int, **evidence: Any) -> CheckpointFacts:
        return CheckpointFacts(path=name, format="safetensors", size=size, problems=(Problem(
            kind=kind, message=message, byte_offset=offset, evidence=evidence),),
            scan_note="the header could not be used; tensors not read")

    if size < 8:
        return bad("truncated", f"{size} bytes: shorter than the 8-byte header length; the save was cut off",
                   0, file_size=size)
    n, = struct.unpack_from("<Q", mm, 0)
    starts_json = mm[8:9] == b"{"
    if n > size - 8:
        if starts_json and n <= _SAFETENSORS_MAX_HEADER:
            return bad("truncated", f"header length says {n} bytes but only {size - 8} follow: "
                                    "the file was cut off inside its header", 8, header_length=n, file_size=size)
        return bad("bad-header", f"header length {n} is larger than the file ({size} bytes): not a "
                                 "valid safetensors header", 0, header_length=n, file_size=size)
    if not starts_json:
        return bad("bad-header", f"the {n}-byte header does not start with '{{' (first byte "
                                 f"{bytes(mm[8:9])!r}): not a safetensors JSON header", 8, header_length=n)
    raw = mm[8:8 + n]
    try:
        header = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        return bad("bad-header", f"header is not UTF-8 (byte {8 + e.start})", 8 + e.start, header_length=n)
    except json.JSONDecodeError as e:
        return bad("bad-header", f"header is not valid JSON at byte {8 + e.pos}: {e.msg}", 8 + e.pos,
                   header_length=n)
    except ValueError:
        # Python refuses to convert a number of more than 4300 digits (its bound against
        # quadratic int parsing); no tensor dimension or offset comes near that.
        return CheckpointFacts(path=name, format="safetensors", size=size, scan_note="header not read",
                               not_checked=("the safetensors header holds a number of more than 4300 digits, "
                                            "too long to convert: the header was not judged",))
    if not isinstance(header, dict):
        return bad("bad-header", "header is JSON but not an object", 8, header_length=n)
    data_start = 8 + n
    data_len = size - data_start
    if len(header) - ("__metadata__" in header) > caps.max_tensors:
        return CheckpointFacts(path=name, format="safetensors", size=size, scan_note="too many tensors",
                               not_checked=(f"the header lists {len(header) - ('__metadata__' in header)} "
                                            f"tensors, over the cap of {caps.max_tensors} (max_tensors): "
                                            "tensors were not checked",))
    entries = []
    for tname, spec in header.items():
        if tname == "__metadata__":
            continue
        if isinstance(spec, dict) and isinstance(spec.get("shape"), list) and len(spec["shape"]) > _MAX_DIMS:
            return CheckpointFacts(path=name, format="safetensors", size=size, scan_note="header not judged",
                                   not_checked=(f"tensor {str(tname)[:200]!r} has {len(spec['shape'])} dimensions, "
                                                f"over the cap of {_MAX_DIMS}: the header was not judged",))
        if not (isinstance(spec, dict) and isinstance(spec.get("dtype"), str)
                and isinstance(spec.get("shape"), list) and isinstance(spec.get("data_offsets"), list)
                and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in spec["shape"])
                and len(spec["data_offsets"]) == 2
                and all(isinstance(o, int) and not isinstance(o, bool) and o >= 0 for o in spec["data_offsets"])
                and spec["data_offsets"][0] <= spec["data_offsets"][1]):
            return bad("bad-header", f"tensor {tname!r}: entry is not {{dtype, shape, data_offsets}} "
                                     "with non-negative whole numbers", 8, tensor=str(tname))
        begin, end = spec["data_offsets"]
        shape = tuple(spec["shape"])
        numel = _checked_numel(shape)
        if numel is None or end > _U64_MAX:
            # safetensors computes sizes in 64 bits and refuses a file that overflows them.
            return bad("bad-header", f"tensor {tname!r}: its element count or data offsets overflow 64 bits; "
                                     "safetensors refuses the file", 8, tensor=str(tname))
        dtype = _SAFETENSORS_DTYPES.get(spec["dtype"], f"unknown:{spec['dtype']}")
        itemsize = ITEMSIZE.get(dtype)
        if itemsize is not None and end - begin != numel * itemsize:
            return bad("bad-header", f"tensor {tname!r}: {spec['dtype']} {list(shape)} needs "
                                     f"{numel * itemsize} bytes, data_offsets give {end - begin}",
                       8, tensor=str(tname))
        entries.append((begin, end, str(tname), dtype, shape))
    entries.sort()
    for (b1, e1, n1, _, _), (b2, _, n2, _, _) in zip(entries, entries[1:]):
        if b2 < e1:
            return bad("bad-header", f"tensors {n1!r} and {n2!r} overlap (bytes {b2}-{e1} of the data section)",
                       data_start + b2, tensor=n2)
    last = max((e for _, e, _, _, _ in entries), default=0)
    if last > data_len:
        cut = next(t for t in entries if t[1] > data_len)
        return bad("truncated", f"data section holds {data_len} bytes but the header places tensors up to "
                                f"byte {last} (first incomplete: {cut[2]}): the file was cut off",
                   data_start + data_len, data_bytes=data_len, header_bytes=last, tensor=cut[2])
    role = "optimizer" if _is_optimizer_file(path.name) else "weights"
    tensors = [TensorFacts(name=t, dtype=d, shape=s, numel=_numel(s), entry="", byte_offset=data_start + b,
                           role=role) for b, _, t, d, s in sorted(entries, key=lambda x: x[2])]
    facts = CheckpointFacts(path=name, format="safetensors", size=size, tensors=tuple(tensors))
    if not scan:
        return replace(facts, scan_note="content scan not requested")
    return _scan_all(facts, mm, "little")


# --- sharded index --------------------------------------------------------------------------

def _read_index(path: Path) -> CheckpointFacts:
    from ..core.model import ReadError

    name = str(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise CheckpointError(f"{name}: cannot read ({e.strerror or e})") from None
    if not data.strip():
        return CheckpointFacts(path=name, format="sharded-index", size=len(data), problems=(Problem(
            kind="empty", message="empty index file: the save was interrupted", byte_offset=0),))
    try:
        doc = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ReadError(f"{name}: not a readable JSON index ({getattr(e, 'msg', e)})") from None
    weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(weight_map, dict):
        raise ReadError(f"{name}: no weight_map object; not a sharded checkpoint index")
    index = ByteIndex(data)
    folder = path.parent
    problems: list[Problem] = []
    shards: dict[str, list[str]] = {}
    for tensor, shard in weight_map.items():
        if isinstance(shard, str):
            shards.setdefault(shard, []).append(str(tensor))
    wm_at = data.find(b'"weight_map"')
    for shard, names in shards.items():
        if (folder / shard).is_file():
            continue
        needle = json.dumps(shard).encode()
        at = data.find(needle, max(wm_at, 0))
        span = index.span(at, at + len(needle)) if at >= 0 else None
        problems.append(Problem(
            kind="missing", span=span,
            message=f"shard {shard} ({len(names)} tensor(s), e.g. {names[0]}) is named in the index "
                    f"but missing from {folder}",
            evidence={"shard": shard, "tensors": len(names), "first_tensor": names[0]}))
    tensors = tuple(TensorFacts(name=str(t), dtype="unknown", shape=(), numel=0, entry=str(s),
                                byte_offset=None, role="weights", note="listed in the index only")
                    for t, s in weight_map.items())
    return _with_hf_folder(path, CheckpointFacts(
        path=name, format="sharded-index", size=len(data), problems=tuple(problems), tensors=tensors,
        scan_note="an index holds no tensor data; its shards are judged as files of their own"))


# --- HF checkpoint folders --------------------------------------------------------------------

def _with_hf_folder(path: Path, facts: CheckpointFacts) -> CheckpointFacts:
    folder = path.parent
    if path.name not in _HF_MAIN_WEIGHTS or not _HF_CHECKPOINT_DIR.match(folder.name):
        return facts
    try:
        siblings = [p.name.lower() for p in folder.iterdir()]
    except OSError:
        return facts
    if "trainer_state.json" not in siblings:
        return facts
    # optimizer.pt (HF), optimizer.bin (accelerate), global_step*/ (DeepSpeed), optimizer_0/ (FSDP)
    if any("optim" in s or s.startswith("global_step") for s in siblings):
        return replace(facts, has_optimizer=True) if facts.has_optimizer is None else facts
    return replace(facts, hf_folder_without_optimizer=str(folder))


# --- tensor scans ---------------------------------------------------------------------------

def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides = []
    acc = 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(strides))


def _is_contiguous(shape: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    expected = _contiguous_strides(shape)
    return all(s == 1 or st == ex for s, st, ex in zip(shape, stride, expected))


# Non-contiguous views are gathered element by element; past this many elements the
# gather would dominate the run time, so such a view is left unscanned with a note.
_MAX_GATHER = 20_000_000


def _gather(view: memoryview, base: int, shape: tuple[int, ...], stride: tuple[int, ...], itemsize: int) -> bytes:
    out = bytearray()
    idx = [0] * len(shape)
    if not shape:
        return bytes(view[base:base + itemsize])
    # Walk the index space; the last dimension is copied in one slice when its stride is 1.
    last_contig = stride[-1] == 1
    while True:
        off = base + sum(i * st for i, st in zip(idx, stride)) * itemsize
        if last_contig:
            out += view[off:off + shape[-1] * itemsize]
            k = len(shape) - 2
        else:
            out += view[off:off + itemsize]
            k = len(shape) - 1
        while k >= 0:
            idx[k] += 1
            if idx[k] < shape[k]:
                break
            idx[k] = 0
            k -= 1
        if k < 0:
            return bytes(out)


def _numpy() -> Any:
    if os.environ.get("TRAINPROOF_NO_NUMPY"):
        return None
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def _scan_all(facts: CheckpointFacts, mm: mmap.mmap, byteorder: str) -> CheckpointFacts:
    np = _numpy()
    big = byteorder == "big"
    view = memoryview(mm)
    cache: dict[tuple[str, int, tuple[int, ...], tuple[int, ...], str], tuple[int, int, int | None, bool]] = {}
    out: list[TensorFacts] = []
    scanned_bytes = 0
    try:
        for t in facts.tensors:
            stride = t.stride or _contiguous_strides(t.shape)
            if t.note or t.byte_offset is None or t.dtype not in FLOATS or t.numel == 0:
                out.append(t)
                continue
            itemsize = ITEMSIZE[t.dtype]
            key = (t.entry, t.byte_offset, t.shape, stride, t.dtype)
            if key not in cache:
                if _is_contiguous(t.shape, stride):
                    buf: Any = view[t.byte_offset:t.byte_offset + t.numel * itemsize]
                elif t.numel <= _MAX_GATHER:
                    buf = _gather(view, t.byte_offset, t.shape, stride, itemsize)
                else:
                    out.append(replace(t, note=f"non-contiguous view of {t.numel} elements; not scanned"))
                    continue
                cache[key] = scan_floats(buf, t.dtype, big, np)
                scanned_bytes += t.numel * itemsize
                if isinstance(buf, memoryview):
                    buf.release()
            nan, inf, first, zero = cache[key]
            out.append(replace(t, scanned=True, nan=nan, inf=inf, first_bad=first, all_zero=zero))
    finally:
        view.release()
    return replace(facts, tensors=tuple(out), scanned=True, bytes_scanned=scanned_bytes,
                   numpy_used=np is not None)


# IEEE layouts: (byte of the value that holds the sign and the top exponent bits, that
# byte's exponent mask, the 16 top bits' exponent mask). A value is NaN/Inf exactly when
# all its exponent bits are set; the top byte having its exponent bits set is the cheap
# pre-filter (weights of ordinary magnitude never have it).
_LAYOUT = {
    "float64": (8, 0x7F, 0x7FF0),
    "float32": (4, 0x7F, 0x7F80),
    "float16": (2, 0x7C, 0x7C00),
    "bfloat16": (2, 0x7F, 0x7F80),
}
_STRUCT = {"float64": "d", "float32": "f", "float16": "e"}
_CHUNK = 1 << 22  # elements per numpy chunk: bounded temporaries on multi-GB tensors


def scan_floats(buf: Any, dtype: str, big_endian: bool, np: Any) -> tuple[int, int, int | None, bool]:
    """(NaN count, Inf count, index of the first NaN/Inf, every element is zero)."""
    if np is not None:
        return _scan_numpy(buf, dtype, big_endian, np)
    return _scan_bytes(buf, dtype, big_endian)


def _scan_numpy(buf: Any, dtype: str, big_endian: bool, np: Any) -> tuple[int, int, int | None, bool]:
    order = ">" if big_endian else "<"
    if dtype == "bfloat16":
        u = np.frombuffer(buf, dtype=order + "u2")
        nan = inf = 0
        first: int | None = None
        zero = True
        for start in range(0, len(u), _CHUNK):
            c = u[start:start + _CHUNK]
            if zero and np.count_nonzero(c & 0x7FFF):
                zero = False
            special = (c & 0x7F80) == 0x7F80
            k = int(np.count_nonzero(special))
            if k:
                mant = (c & 0x007F) != 0
                n_nan = int(np.count_nonzero(special & mant))
                nan += n_nan
                inf += k - n_nan
                if first is None:
                    first = start + int(np.argmax(special))
        return nan, inf, first, zero
    code = {"float64": "f8", "float32": "f4", "float16": "f2"}[dtype]
    a = np.frombuffer(buf, dtype=order + code)
    nan = inf = 0
    first = None
    zero = True
    acc = np.float32 if dtype == "float16" else None
    with np.errstate(all="ignore"):
        for start in range(0, len(a), _CHUNK):
            c = a[start:start + _CHUNK]
            if zero and np.count_nonzero(c):
                zero = False
            total = c.sum(dtype=acc)
            if math.isfinite(float(total)):
                continue
            bad = ~np.isfinite(c)
            k = int(np.count_nonzero(bad))
            if not k:
                continue  # the sum overflowed; every value is finite
            n_nan = int(np.count_nonzero(np.isnan(c)))
            nan += n_nan
            inf += k - n_nan
            if first is None:
                first = start + int(np.argmax(bad))
    return nan, inf, first, zero


_CANDIDATE_TABLES: dict[int, bytes] = {}


def _candidate_table(mask: int) -> bytes:
    table = _CANDIDATE_TABLES.get(mask)
    if table is None:
        table = bytes(1 if (b & mask) == mask else 0 for b in range(256))
        _CANDIDATE_TABLES[mask] = table
    return table


def _scan_bytes(buf: Any, dtype: str, big_endian: bool) -> tuple[int, int, int | None, bool]:
    """The no-numpy scan: slicing, translate and count all run in C."""
    itemsize, byte_mask, _ = _LAYOUT[dtype]
    raw = bytes(buf)
    hi_index = 0 if big_endian else itemsize - 1
    hi = raw[hi_index::itemsize]
    zero = raw.count(0) == len(raw) - hi.count(0x80)
    flags = hi.translate(_candidate_table(byte_mask))
    nan = inf = 0
    first: int | None = None
    at = flags.find(1)
    while at != -1:
        off = at * itemsize
        if dtype == "bfloat16":
            bits, = struct.unpack_from(">H" if big_endian else "<H", raw, off)
            special = (bits & 0x7F80) == 0x7F80
            is_nan = special and (bits & 0x7F) != 0
        else:
            value, = struct.unpack_from((">" if big_endian else "<") + _STRUCT[dtype], raw, off)
            special = not math.isfinite(value)
            is_nan = value != value
        if special:
            if first is None:
                first = at
            if is_nan:
                nan += 1
            else:
                inf += 1
        at = flags.find(1, at + 1)
    return nan, inf, first, zero
