"""Walk a pickle's opcodes without executing them: what it would build, and what it would
import and call.

`pickle.load` (and so `torch.load(weights_only=False)`) imports any `module.name` a
pickle names and calls it with arguments the pickle supplies: a checkpoint can run
`os.system`. Here `pickletools.genops` only *decodes* opcodes; a small stack machine
replays them symbolically: strings, numbers, tuples, lists and dicts are built as data;
a global is a `Global(module, name)` record (never imported); a call (REDUCE, NEWOBJ,
INST, OBJ) is a `Call` record (never made), except that torch's tensor-rebuild calls
become `TensorRef`s naming their storage, offset, shape and stride.

Every global is checked against an allow-list of what torch, HF Trainer and Lightning
checkpoints legitimately reference (tensor rebuild functions, storage classes, dtypes,
OrderedDict, the numpy helpers in `rng_state*.pth`, TrainingArguments' enums); classes in
NEW_ONLY_GLOBALS (TrainingArguments and friends) only when created without a call.
Everything else is reported with the byte offset of the opcode that names it.

A walk is bounded for hostile input: bytes (`max_bytes`, read through a window that never
allocates an opcode's claimed length past it), opcodes (`max_ops`) and distinct globals
kept (`_MAX_DISTINCT_GLOBALS`); where it stops, `Walked.capped` says so. joblib's raw array
bytes, written straight into the stream after a NumpyArrayWrapper's BUILD, are skipped by
the shape and dtype the wrapper records.

The shape of a torch.save `data.pkl` (protocol 2):

    GLOBAL 'collections OrderedDict'; EMPTY_TUPLE; REDUCE          -> the state dict
    MARK
      BINUNICODE '0.weight'
      GLOBAL 'torch._utils _rebuild_tensor_v2'
      ( ( 'storage', GLOBAL 'torch FloatStorage', '0', 'cpu', 12 ) BINPERSID   -> storage
        0, (3, 4), (4, 1), False, OrderedDict() ) REDUCE                        -> tensor
      ...
    SETITEMS
"""

from __future__ import annotations

import codecs
import pickletools
import re
from dataclasses import dataclass, field
from typing import Any, Iterator

# The unpickler maps Python 2 names for protocols < 3 (torch.save writes protocol 2, so
# `builtins.set` arrives as `__builtin__ set`); check what it would actually import.
# (_compat_pickle is part of every CPython 3 and PyPy 3: pickle itself imports it.)
from _compat_pickle import IMPORT_MAPPING, NAME_MAPPING


# --- the allow-list ----------------------------------------------------------------------

_TORCH_DTYPES = frozenset({
    "float64", "float32", "float16", "bfloat16", "double", "float", "half", "int64", "int32",
    "int16", "int8", "uint8", "uint16", "uint32", "uint64", "bool", "long", "int", "short",
    "complex64", "complex128", "cfloat", "cdouble", "complex32", "chalf",
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu",
    "qint8", "quint8", "qint32", "quint4x2", "quint2x4",
})
_TORCH_LAYOUTS = frozenset({"strided", "sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr",
                            "sparse_bsc", "_mkldnn"})
_STORAGE_NAMES = frozenset({
    "DoubleStorage", "FloatStorage", "HalfStorage", "BFloat16Storage", "LongStorage",
    "IntStorage", "ShortStorage", "CharStorage", "ByteStorage", "BoolStorage",
    "ComplexFloatStorage", "ComplexDoubleStorage", "QInt8Storage", "QUInt8Storage",
    "QInt32Storage", "QUInt4x2Storage", "QUInt2x4Storage", "UntypedStorage",
    "Float8_e4m3fnStorage", "Float8_e5m2Storage", "Float8_e4m3fnuzStorage",
    "Float8_e5m2fnuzStorage", "UInt16Storage", "UInt32Storage", "UInt64Storage",
})

# (module, name) pairs a checkpoint may name. Each is a constructor of plain data: calling
# it with pickle-supplied arguments builds a tensor, a container or a number and runs
# nothing else.
SAFE_GLOBALS: frozenset[tuple[str, str]] = frozenset({
    # torch tensor rebuilders (torch/_utils.py) and friends
    ("torch._utils", "_rebuild_tensor"),
    ("torch._utils", "_rebuild_tensor_v2"),
    ("torch._utils", "_rebuild_tensor_v3"),
    ("torch._utils", "_rebuild_parameter"),
    ("torch._utils", "_rebuild_parameter_with_state"),
    ("torch._utils", "_rebuild_sparse_tensor"),
    ("torch._utils", "_rebuild_meta_tensor_no_storage"),
    ("torch._utils", "_rebuild_qtensor"),
    ("torch._utils", "_rebuild_nested_tensor"),
    ("torch._tensor", "_rebuild_from_type_v2"),
    ("torch.nn.parameter", "Parameter"),
    ("torch.storage", "UntypedStorage"),
    ("torch.storage", "TypedStorage"),
    ("torch", "Size"),
    ("torch", "device"),
    ("torch", "Tensor"),
    ("torch.serialization", "_get_layout"),
    ("torch.torch_version", "TorchVersion"),
    # containers
    ("collections", "OrderedDict"),
    ("collections", "defaultdict"),
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("builtins", "complex"),
    ("builtins", "bytearray"),
    ("builtins", "slice"),
    ("builtins", "range"),
    ("builtins", "int"),
    ("builtins", "float"),
    ("builtins", "bool"),
    ("builtins", "str"),
    ("builtins", "bytes"),
    ("builtins", "tuple"),
    ("builtins", "list"),
    ("builtins", "dict"),
    # bytes under protocol 2 are pickled as _codecs.encode(str, 'latin1'); numpy arrays
    # in HF's rng_state.pth carry their buffer that way
    ("_codecs", "encode"),
    # numpy arrays and scalars (np.random.get_state() in rng_state*.pth, metrics)
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy.dtypes", "UInt32DType"),
    ("numpy.dtypes", "Float64DType"),
    ("numpy.dtypes", "Float32DType"),
    ("numpy.dtypes", "Int64DType"),
    ("numpy.random._pickle", "__randomstate_ctor"),
    ("numpy.random._pickle", "__bit_generator_ctor"),
    ("numpy.random._pickle", "__generator_ctor"),
    # np.random.Generator / BitGenerator state (rng files of numpy >= 1.17 code)
    ("numpy.random._pcg64", "PCG64"),
    ("numpy.random._mt19937", "MT19937"),
    ("numpy.random._philox", "Philox"),
    ("numpy.random._sfc64", "SFC64"),
    ("numpy.random.bit_generator", "SeedSequence"),
    ("numpy.random.bit_generator", "__pyx_unpickle_SeedSequence"),
    # The enums of TrainingArguments' fields (training_args.bin): calling an Enum class
    # with a value only looks the member up.
    ("transformers.trainer_utils", "SchedulerType"),
    ("transformers.trainer_utils", "IntervalStrategy"),
    ("transformers.trainer_utils", "SaveStrategy"),
    ("transformers.trainer_utils", "HubStrategy"),
    ("transformers.trainer_utils", "FSDPOption"),
    ("transformers.trainer_utils", "HPSearchBackend"),
    ("transformers.training_args", "OptimizerNames"),
    ("transformers.training_args", "ParallelMode"),
    ("transformers.debug_utils", "DebugOption"),
    ("accelerate.utils.dataclasses", "DistributedType"),
})

# Classes that HF `training_args.bin` (a pickled TrainingArguments, torch.save'd by the
# Trainer) and its relatives hold. The unpickler creates each with `cls.__new__` (NEWOBJ)
# and fills its __dict__ (BUILD; none of them defines __setstate__): no method of theirs
# runs. Calling one (REDUCE/INST/OBJ) would run its __init__/__post_init__ with arguments
# from the file, so that use is flagged. Checked against files transformers 5.24 and
# accelerate 1.16 write; the TRL configs are TrainingArguments subclasses by TRL's module
# layout.
NEW_ONLY_GLOBALS: frozenset[tuple[str, str]] = frozenset({
    ("transformers.training_args", "TrainingArguments"),
    ("transformers.training_args_seq2seq", "Seq2SeqTrainingArguments"),
    ("transformers.trainer_pt_utils", "AcceleratorConfig"),
    ("accelerate.state", "PartialState"),
    ("trl.trainer.sft_config", "SFTConfig"),
    ("trl.trainer.dpo_config", "DPOConfig"),
    ("trl.trainer.grpo_config", "GRPOConfig"),
    ("trl.trainer.reward_config", "RewardConfig"),
    ("trl.trainer.kto_config", "KTOConfig"),
    ("trl.trainer.orpo_config", "ORPOConfig"),
    ("trl.trainer.cpo_config", "CPOConfig"),
    ("trl.trainer.ppo_config", "PPOConfig"),
    # joblib.dump's array holder: created empty, its state set, the array bytes follow
    ("joblib.numpy_pickle", "NumpyArrayWrapper"),
})

# Globals known to run code, with what they would do: named in the finding's message.
_DANGER = {
    ("posix", "system"): "runs a shell command",
    ("nt", "system"): "runs a shell command",
    ("os", "system"): "runs a shell command",
    ("os", "popen"): "runs a shell command",
    ("os", "execv"): "replaces the process with another program",
    ("os", "execve"): "replaces the process with another program",
    ("os", "remove"): "deletes a file",
    ("os", "unlink"): "deletes a file",
    ("builtins", "exec"): "executes Python source",
    ("builtins", "eval"): "evaluates a Python expression",
    ("builtins", "compile"): "compiles Python source",
    ("builtins", "__import__"): "imports any module",
    ("builtins", "getattr"): "reaches any attribute (a stepping stone to any call)",
    ("builtins", "open"): "opens a file for writing or reading",
    ("io", "open"): "opens a file for writing or reading",
    ("_io", "open"): "opens a file for writing or reading",
    ("builtins", "breakpoint"): "starts a debugger",
    ("importlib", "import_module"): "imports any module",
    ("runpy", "run_path"): "runs a Python file",
    ("runpy", "run_module"): "runs a Python module",
    ("shutil", "rmtree"): "deletes a folder tree",
    ("webbrowser", "open"): "opens a URL",
    ("pty", "spawn"): "starts a shell",
    ("ctypes", "CDLL"): "loads a native library",
    ("pickle", "loads"): "unpickles more data (nested payload)",
    ("marshal", "loads"): "loads code objects",
    ("types", "FunctionType"): "builds a function from a code object",
    ("types", "CodeType"): "builds a code object",
    ("functools", "partial"): "wraps any callable with arguments",
    ("operator", "attrgetter"): "reaches any attribute (a stepping stone to any call)",
    ("operator", "methodcaller"): "calls any method",
    ("code", "InteractiveInterpreter"): "executes Python source",
}
_DANGER_MODULES = {
    "subprocess": "starts another program",
    "os": "calls into the operating system",
    "posix": "calls into the operating system",
    "nt": "calls into the operating system",
    "socket": "opens network connections",
    "urllib.request": "fetches URLs",
    "requests": "fetches URLs",
    "http.client": "opens network connections",
    "sys": "changes the interpreter",
    "ctypes": "calls native code",
    "shutil": "copies or deletes files",
    "runpy": "runs Python code",
    "importlib": "imports modules",
    "pickle": "unpickles more data",
    "_pickle": "unpickles more data",
    "dill": "unpickles more data",
    "torch.hub": "downloads and runs code",
}


def canonical(module: str, name: str) -> tuple[str, str]:
    """The (module, name) the unpickler would import for a GLOBAL under protocol < 3."""
    if (module, name) in NAME_MAPPING:
        return NAME_MAPPING[(module, name)]
    return IMPORT_MAPPING.get(module, module), name


def is_allowed(module: str, name: str) -> bool:
    if (module, name) in SAFE_GLOBALS:
        return True
    if module == "torch" and (name in _STORAGE_NAMES or name in _TORCH_DTYPES or name in _TORCH_LAYOUTS):
        return True
    return False


def danger_of(module: str, name: str) -> str:
    """What calling this global does, in a few words ("" when nothing specific is known)."""
    if (module, name) in _DANGER:
        return _DANGER[(module, name)]
    # "a.b.c" is dangerous when "a", "a.b" or "a.b.c" is: one lookup per dotted prefix.
    at = -1
    while True:
        at = module.find(".", at + 1)
        what = _DANGER_MODULES.get(module if at < 0 else module[:at])
        if what is not None:
            return what
        if at < 0:
            return ""


# --- symbolic values ---------------------------------------------------------------------

@dataclass(eq=False)
class Global:
    module: str
    name: str
    offset: int  # opcode position in the pickle

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.name}"


@dataclass(eq=False)
class Call:
    """A call the unpickler would make (never made here)."""

    func: Any
    args: Any
    state: Any = None
    items: list[Any] = field(default_factory=list)


@dataclass(eq=False)
class Persistent:
    pid: Any


@dataclass(eq=False)
class TensorRef:
    storage: Any  # a Persistent whose pid is ('storage', storage_type, key, location, numel)
    offset: int
    size: tuple[Any, ...]
    stride: tuple[Any, ...]
    dtype: str | None = None  # _rebuild_tensor_v3 names the dtype; otherwise the storage does


@dataclass(eq=False)
class SymDict:
    items: list[Any] = field(default_factory=list)


@dataclass(eq=False)
class SymList:
    items: list[Any] = field(default_factory=list)


@dataclass(eq=False)
class SymSet:
    items: list[Any] = field(default_factory=list)


class Opaque:
    """A value this walker does not model (an out-of-band buffer, a broken stack)."""


_MARK = object()


@dataclass(frozen=True, slots=True, kw_only=True)
class GlobalUse:
    module: str  # as the unpickler would import it
    name: str
    offset: int  # opcode position in the pickle
    allowed: bool
    danger: str


@dataclass
class Walked:
    """What one pickle would build: the root value and every global it names (each
    (module, name) once, at its first opcode)."""

    root: Any
    globals: list[GlobalUse]
    end: int  # byte offset just past STOP
    error: str = ""  # the walk stopped early (truncated, malformed): why
    capped: str = ""  # the walk stopped at a size cap: which, and how far it got
    ops: int = 0  # opcodes replayed
    stopped_at: int = 0  # byte offset (from data[0]) where the walk ended or stopped
    unlisted: int = 0  # distinct globals named past the first _MAX_DISTINCT_GLOBALS


# A real checkpoint names a dozen distinct globals; a pickle naming millions is an attack
# on the reader's memory. Past this many the rest are counted, not kept.
_MAX_DISTINCT_GLOBALS = 10_000


class WalkError(Exception):
    pass


class _Bounded:
    """A read-only stream over data[:limit] that never reads (or allocates) past the
    limit: `pickletools.genops` reads an opcode's argument with one read(n), and n comes
    from the file (BINBYTES8 may claim 2**60 bytes)."""

    def __init__(self, data: Any, limit: int) -> None:
        self._data = data
        self._limit = min(limit, len(data))
        self._pos = 0

    def seek(self, pos: int, whence: int = 0) -> int:
        self._pos = max(0, min(pos if whence == 0 else self._pos + pos, self._limit))
        return self._pos

    def tell(self) -> int:
        return self._pos

    def read(self, n: int = -1) -> bytes:
        pos, limit = self._pos, self._limit
        end = limit if n < 0 or pos + n > limit else pos + n
        out = self._data[pos:end]  # bytes from bytes and mmap; a memoryview's slice is copied below
        self._pos = end
        return out if type(out) is bytes else bytes(out)

    def readline(self) -> bytes:
        at = self._data.find(b"\n", self._pos, self._limit)
        return self.read((at + 1 - self._pos) if at >= 0 else -1)


_CODE2OP = {op.code: op for op in pickletools.opcodes}
_GLOBAL = _CODE2OP["c"]


def _stringnl(line: bytes) -> str:
    """pickletools' `read_stringnl` without quotes stripped (GLOBAL's two lines), given the
    line read: a line with no backslash decodes as itself, without codecs.escape_decode."""
    if not line.endswith(b"\n"):
        raise ValueError("no newline found when trying to read stringnl")
    data = line[:-1]
    if b"\\" in data:
        data = codecs.escape_decode(data)[0]
    return str(data.decode("ascii"))


def _genops(stream: Any) -> Iterator[tuple[Any, Any, int]]:
    """`pickletools.genops` over a stream with tell(), opcode for opcode and error for
    error, except that GLOBAL's argument is (module, name), read in place: a pickle of a
    million GLOBALs is walked within the command's time budget (genops' generic readers
    cost twice as much a GLOBAL). Over a _Bounded stream the opcode byte and a GLOBAL's two
    lines are cut straight from the data, without stream calls (they were half the walk's
    time in such a pickle); a line with a backslash or without its newline takes the
    stream's path, and its error."""
    tell, read, readline = stream.tell, stream.read, stream.readline
    direct = isinstance(stream, _Bounded)
    data: Any = stream._data if direct else b""
    limit = stream._limit if direct else 0
    while True:
        if direct:
            pos = stream._pos
            code = data[pos:pos + 1] if pos < limit else b""
            if code == b"c":
                first = data.find(b"\n", pos + 1, limit)
                second = data.find(b"\n", first + 1, limit) if first >= 0 else -1
                if second >= 0:
                    module, name = data[pos + 1:first], data[first + 1:second]
                    if b"\\" not in module and b"\\" not in name:
                        stream._pos = second + 1
                        yield _GLOBAL, (str(module.decode("ascii")), str(name.decode("ascii"))), pos
                        continue
            stream._pos = pos + len(code)
        else:
            pos = tell()
            code = read(1)
        if code == b"c":
            module = _stringnl(readline())
            yield _GLOBAL, (module, _stringnl(readline())), pos
            continue
        op = _CODE2OP.get(code.decode("latin-1"))
        if op is None:
            if code == b"":
                raise ValueError("pickle exhausted before seeing STOP")
            raise ValueError(f"at position {pos}, opcode {code!r} unknown")
        yield op, (None if op.arg is None else op.arg.reader(stream)), pos
        if code == b".":
            return


_REBUILD_V2 = {("torch._utils", "_rebuild_tensor_v2"), ("torch._utils", "_rebuild_tensor"),
               ("torch._utils", "_rebuild_tensor_v3")}
_REBUILD_PASSTHROUGH = {("torch._utils", "_rebuild_parameter"),
                        ("torch._utils", "_rebuild_parameter_with_state")}
_JOBLIB_ARRAY = ("joblib.numpy_pickle", "NumpyArrayWrapper")
# numpy dtype codes as joblib pickles them (`numpy.dtype('f8', False, True)`) whose item
# size numpy fixes on every platform, checked against numpy 2.4's `dtype.itemsize`. Only
# these are sized: a code's digits are not its size in general (numpy resolves
# 'float64' to 8 bytes an item, 'U5' to 20, 'f16' to the platform's long double), and a
# walker that sizes an array wrongly skips over the opcodes joblib then runs.
_FIXED_ITEMSIZE = {
    "b1": 1, "i1": 1, "u1": 1, "i2": 2, "u2": 2, "i4": 4, "u4": 4, "i8": 8, "u8": 8,
    "f2": 2, "f4": 4, "f8": 8, "c8": 8, "c16": 16, "M8": 8, "m8": 8,
}
# An object array (numpy writes 'O8'; 'O4' on 32-bit builds): joblib pickles it whole
# with a nested pickle.dump, walked in place.
_OBJECT_CODES = {"O8", "O4"}
# 'S<n>' and 'U<n>' take their item size from the elsize of the dtype's pickled state
# (numpy's __setstate__ sets it for these flexible types; without a state, S<n> is n
# bytes and U<n> n UCS-4 characters).
_FLEXIBLE = re.compile(r"([SU])(\d{1,9})")


def _as_tuple(v: Any) -> tuple[Any, ...]:
    if isinstance(v, tuple):
        return v
    if isinstance(v, SymList):
        return tuple(v.items)
    return ()


def _call(func: Any, args: Any) -> Any:
    """Model a call: tensor rebuilders become TensorRefs, containers become containers."""
    if isinstance(func, Global):
        key = (func.module, func.name)
        a = _as_tuple(args)
        if key in _REBUILD_V2 and len(a) >= 4:
            dtype = None
            if key[1] == "_rebuild_tensor_v3" and len(a) >= 7 and isinstance(a[6], Global):
                dtype = a[6].name
            size, stride = _as_tuple(a[2]), _as_tuple(a[3])
            offset = a[1] if isinstance(a[1], int) else 0
            return TensorRef(storage=a[0], offset=offset, size=size, stride=stride, dtype=dtype)
        if key in _REBUILD_PASSTHROUGH and a:
            return a[0]
        if key == ("torch._tensor", "_rebuild_from_type_v2") and len(a) >= 3:
            return _call(a[0], a[2])
        if key == ("collections", "OrderedDict") or key == ("builtins", "dict"):
            return SymDict()
        if key == ("collections", "defaultdict"):
            return SymDict()
        if key in (("builtins", "set"), ("builtins", "frozenset")):
            return SymSet(list(_as_tuple(a[0])) if a else [])
        if key == ("torch", "Size") and a:
            return _as_tuple(a[0])
    return Call(func=func, args=args)


def _dtype_itemsize(dtype: Any) -> tuple[int, bool] | str:
    """(item size, object dtype) of a pickled numpy dtype exactly as numpy would size it,
    or why it is not understood."""
    if not (isinstance(dtype, Call) and isinstance(dtype.func, Global)
            and (dtype.func.module, dtype.func.name) == ("numpy", "dtype")
            and isinstance(dtype.args, tuple) and dtype.args and isinstance(dtype.args[0], str)):
        return "its dtype is not a numpy.dtype(code, ...) call"
    code = dtype.args[0]
    state = dtype.state
    elsize: int | None = None
    if state is not None:
        # numpy's dtype state: (version, byte order, subarray, names, fields, elsize,
        # alignment, flags[, metadata]). A subarray or fields change what an item is.
        if not (isinstance(state, tuple) and len(state) in (8, 9) and state[0] in (3, 4)):
            return f"its dtype {code!r} has a state that is not numpy's"
        if state[2] is not None or state[3] is not None or state[4] is not None:
            return (f"its dtype {code!r} has fields or a subarray (a structured dtype, perhaps "
                    "with object fields)")
        if isinstance(state[5], int) and not isinstance(state[5], bool):
            elsize = state[5]
    if code in _OBJECT_CODES:
        return 0, True
    if code in _FIXED_ITEMSIZE:
        return _FIXED_ITEMSIZE[code], False
    m = _FLEXIBLE.fullmatch(code)
    if m:
        if elsize is not None and elsize >= 0:
            return elsize, False
        if state is None:
            return int(m.group(2)) * (4 if m.group(1) == "U" else 1), False
    return f"its dtype code {code!r} is not one whose item size is known without numpy"


def _joblib_array_bytes(state: Any) -> tuple[int, bool, bool] | str:
    """(bytes of raw array data that follow the BUILD, aligned, object dtype) for a joblib
    NumpyArrayWrapper's state, or why the state is not understood.

    joblib.dump writes an array's bytes straight into the pickle stream right after the
    wrapper's BUILD: [one padding-length byte, padding] when the state has
    numpy_array_alignment_bytes, then shape x itemsize bytes; an object array is a nested
    pickle there instead."""
    if not isinstance(state, SymDict):
        return "its state is not a dict"
    fields = {k: v for k, v in state.items if isinstance(k, str)}
    shape = fields.get("shape")
    if not isinstance(shape, tuple) or not all(isinstance(s, int) and s >= 0 for s in shape):
        return "its shape is not a tuple of whole numbers"
    sized = _dtype_itemsize(fields.get("dtype"))
    if isinstance(sized, str):
        return sized
    itemsize, nested = sized
    aligned = fields.get("numpy_array_alignment_bytes") is not None
    count = 1
    for s in shape:
        count *= s
        if count > _MAX_ARRAY_ELEMENTS:  # numpy's count is an int64: past it, sizes disagree
            return f"its shape {shape[:8]!r} holds more than {_MAX_ARRAY_ELEMENTS} elements"
    return count * itemsize, aligned, nested


# np.multiply.reduce(shape) (joblib's element count) wraps past int64: a bigger count is
# not sized the way joblib sizes it.
_MAX_ARRAY_ELEMENTS = 2**62


def walk(data: Any, start: int = 0, base: int = 0, *, stop: int | None = None,
         max_bytes: int | None = None, max_ops: int | None = None) -> Walked:
    """Replay the one pickle that starts at data[start] (and ends by data[stop]). Never
    imports, never calls.

    `data` is bytes or an mmap; at most `max_bytes` of it (from `start`) are read and at
    most `max_ops` opcodes replayed — past either the walk stops with `capped` saying so.
    Opcode positions count from data[0]; `base` is added so reported offsets are file
    offsets (data may be one ZIP entry of the file).
    """
    region_end = len(data) if stop is None else min(stop, len(data))
    limit = region_end if max_bytes is None else min(region_end, start + max_bytes)
    stream = _Bounded(data, limit)  # bytes or an mmap; reads copy only what they return
    stream.seek(start)
    stack: list[Any] = []
    marks: list[list[Any]] = []
    memo: dict[Any, Any] = {}
    used: list[GlobalUse] = []
    first_use: dict[tuple[str, str], int] = {}  # (module, name) -> index in `used`
    new_only: dict[int, tuple[str, str]] = {}  # id(Global) of a construct-only class
    end = 0
    error = ""
    capped = ""
    ops = 0
    unlisted = 0  # distinct globals past _MAX_DISTINCT_GLOBALS: counted, not listed
    # joblib object arrays: a nested pickle.load with its own stack, marks and memo, whose
    # STOP is not ours; the outer pickle's are kept here and come back at that STOP.
    outer: list[tuple[list[Any], list[list[Any]], dict[Any, Any]]] = []
    pos = start

    def pop_mark() -> list[Any]:
        nonlocal stack
        items = stack
        stack = marks.pop() if marks else []
        return items

    def note_global(module: str, name: str, at: int) -> Global:
        mod, nm = canonical(module, name)
        g = Global(mod, nm, base + at)
        key = (mod, nm)
        if key in NEW_ONLY_GLOBALS:
            new_only[id(g)] = key
        if key not in first_use:
            if len(used) >= _MAX_DISTINCT_GLOBALS:
                nonlocal unlisted
                unlisted += 1
                return g
            allowed = is_allowed(mod, nm) or key in NEW_ONLY_GLOBALS
            first_use[key] = len(used)
            used.append(GlobalUse(module=mod, name=nm, offset=base + at, allowed=allowed,
                                  danger="" if allowed else danger_of(mod, nm)))
        return g

    def calling(func: Any) -> None:
        """`func(*args)` is called (REDUCE, INST, OBJ): a construct-only class is not safe
        to call, since its __init__ would run with arguments from the file."""
        key = new_only.get(id(func)) if isinstance(func, Global) else None
        if key is None:
            return
        i = first_use[key]
        if used[i].allowed:
            used[i] = GlobalUse(module=key[0], name=key[1], offset=func.offset, allowed=False,
                                danger="calls the class with arguments from the file (runs its "
                                       "__init__); files of this kind only create it without a call")

    resume = False  # set at a nested pickle's STOP: genops ends there, the stream goes on

    def opcodes() -> Iterator[tuple[Any, Any, int | None]]:
        nonlocal resume
        while True:
            yield from _genops(stream)
            if not resume:
                return
            resume = False

    try:
        for op, arg, at in opcodes():
            # genops gives no position only for a stream without tell(); both streams here
            # have one, so `at` is always an offset.
            pos = at if at is not None else pos
            ops += 1
            if max_ops is not None and ops > max_ops:
                capped = f"stopped after {max_ops} opcodes (cap max_pickle_ops) at byte {base + pos}"
                break
            name = op.name
            if name in ("BINPUT", "LONG_BINPUT", "PUT"):
                memo[arg] = stack[-1]
            elif name == "MEMOIZE":
                memo[len(memo)] = stack[-1]
            elif name in ("BINGET", "LONG_BINGET", "GET"):
                stack.append(memo.get(arg, Opaque()))
            elif name in ("SHORT_BINUNICODE", "BINUNICODE", "BININT", "BININT1", "BININT2",
                          "BINFLOAT", "LONG1", "SHORT_BINSTRING", "SHORT_BINBYTES", "BINSTRING",
                          "BINBYTES", "INT", "LONG", "LONG4", "FLOAT", "STRING", "BINBYTES8",
                          "UNICODE", "BINUNICODE8", "BYTEARRAY8"):
                stack.append(arg)
            elif name == "MARK":
                marks.append(stack)
                stack = []
            elif name == "GLOBAL":
                module, gname = arg  # (module, name): _genops reads GLOBAL's two lines
                stack.append(note_global(module, gname, pos))
            elif name == "STACK_GLOBAL":
                gname = stack.pop()
                module = stack.pop()
                if not isinstance(module, str) or not isinstance(gname, str):
                    # A global whose name is computed: cannot be allow-listed.
                    used.append(GlobalUse(module=repr(module)[:60], name=repr(gname)[:60],
                                          offset=base + pos, allowed=False,
                                          danger="a global whose name is computed at load time"))
                    stack.append(Opaque())
                else:
                    stack.append(note_global(module, gname, pos))
            elif name in ("PROTO", "FRAME"):
                continue
            elif name == "STOP":
                if outer:  # a joblib object array's own pickle ends here
                    stack, marks, memo = outer.pop()
                    resume = True
                    continue
                end = pos + 1
                break
            elif name == "NONE":
                stack.append(None)
            elif name == "NEWTRUE":
                stack.append(True)
            elif name == "NEWFALSE":
                stack.append(False)
            elif name == "EMPTY_TUPLE":
                stack.append(())
            elif name == "TUPLE1":
                stack[-1:] = [tuple(stack[-1:])]
            elif name == "TUPLE2":
                stack[-2:] = [tuple(stack[-2:])]
            elif name == "TUPLE3":
                stack[-3:] = [tuple(stack[-3:])]
            elif name == "TUPLE":
                items = pop_mark()
                stack.append(tuple(items))
            elif name == "EMPTY_LIST":
                stack.append(SymList())
            elif name == "LIST":
                items = pop_mark()  # before `stack` is read: pop_mark rebinds it
                stack.append(SymList(items))
            elif name == "APPEND":
                v = stack.pop()
                _extend(stack[-1], [v])
            elif name == "APPENDS":
                items = pop_mark()
                _extend(stack[-1], items)
            elif name == "EMPTY_DICT":
                stack.append(SymDict())
            elif name == "DICT":
                items = pop_mark()
                stack.append(SymDict(list(zip(items[0::2], items[1::2]))))
            elif name == "SETITEM":
                v = stack.pop()
                k = stack.pop()
                _setitems(stack[-1], [(k, v)])
            elif name == "SETITEMS":
                items = pop_mark()
                _setitems(stack[-1], list(zip(items[0::2], items[1::2])))
            elif name == "EMPTY_SET":
                stack.append(SymSet())
            elif name == "ADDITEMS":
                items = pop_mark()
                _extend(stack[-1], items)
            elif name == "FROZENSET":
                items = pop_mark()
                stack.append(SymSet(items))
            elif name == "POP":
                if stack:
                    stack.pop()
                else:
                    pop_mark()
            elif name == "POP_MARK":
                pop_mark()
            elif name == "DUP":
                stack.append(stack[-1])
            elif name == "INST":
                module, _, gname = str(arg).partition(" ")
                cls = note_global(module, gname, pos)
                items = pop_mark()
                calling(cls)
                stack.append(_call(cls, tuple(items)))
            elif name == "OBJ":
                items = pop_mark()
                if items:
                    calling(items[0])
                stack.append(_call(items[0], tuple(items[1:])) if items else Opaque())
            elif name == "NEWOBJ":
                args = stack.pop()
                cls = stack.pop()
                stack.append(_call(cls, args))
            elif name == "NEWOBJ_EX":
                stack.pop()  # kwargs
                args = stack.pop()
                cls = stack.pop()
                stack.append(_call(cls, args))
            elif name == "REDUCE":
                args = stack.pop()
                func = stack.pop()
                calling(func)
                stack.append(_call(func, args))
            elif name == "BUILD":
                state = stack.pop()
                target = stack[-1]
                if isinstance(target, Call):
                    target.state = state
                    if isinstance(target.func, Global) and (target.func.module, target.func.name) == _JOBLIB_ARRAY:
                        raw = _joblib_array_bytes(state)
                        if isinstance(raw, str):
                            raise WalkError(f"a joblib array at byte {base + pos} is not understood "
                                            f"({raw}): where its raw bytes end, and so the opcodes "
                                            "joblib reads after them, is not known")
                        nbytes, aligned, nested = raw
                        if nested:
                            outer.append((stack, marks, memo))
                            stack, marks, memo = [], [], {}
                        else:
                            skip = stream.tell()
                            if aligned:
                                padding = stream.read(1)
                                skip += 1 + (padding[0] if padding else 0)
                            stream.seek(skip + nbytes)
                            if skip + nbytes > limit:
                                raise ValueError(f"joblib array data runs past byte {limit}")
            elif name == "PERSID":
                stack.append(Persistent(arg))
            elif name == "BINPERSID":
                stack.append(Persistent(stack.pop()))
            elif name in ("EXT1", "EXT2", "EXT4"):
                # The copyreg extension registry maps a code to any global: unknowable here.
                used.append(GlobalUse(module="copyreg", name=f"extension code {arg}",
                                      offset=base + pos, allowed=False,
                                      danger="a global named through the copyreg extension registry"))
                stack.append(Opaque())
            elif name in ("NEXT_BUFFER", "READONLY_BUFFER"):
                stack.append(Opaque())
            else:  # pragma: no cover - every opcode of protocols 0-5 is handled above
                raise WalkError(f"unhandled opcode {name}")
        else:
            error = "pickle ends without STOP (truncated)"
    except ValueError as e:  # genops: truncated data or an unknown opcode
        error = str(e).splitlines()[0] if str(e) else "malformed pickle"
    except WalkError as e:
        error = str(e)
    except (IndexError, KeyError, TypeError, AttributeError) as e:
        error = f"malformed pickle ({type(e).__name__} at a stack operation)"
    stopped = stream.tell()
    if error and limit < region_end and stopped >= limit - 1:
        # Not damage: the walk reached the byte cap before the pickle ended.
        error, capped = "", f"stopped at the byte cap of {limit - start} bytes (cap max_pickle_mb)"
    root = stack[-1] if stack else None
    return Walked(root=root, globals=used, end=end, error=error, capped=capped, ops=ops,
                  stopped_at=base + stopped, unlisted=unlisted)


def _extend(target: Any, items: list[Any]) -> None:
    if isinstance(target, (SymList, SymSet)):
        target.items.extend(items)
    elif isinstance(target, Call):
        target.items.extend(items)


def _setitems(target: Any, pairs: list[Any]) -> None:
    if isinstance(target, SymDict):
        target.items.extend(pairs)
    elif isinstance(target, Call):
        target.items.extend(pairs)


# --- naming the tensors -------------------------------------------------------------------

def _key_text(k: Any) -> str | None:
    if isinstance(k, str):
        return k
    if isinstance(k, (int, bool)):
        return str(int(k))
    return None


def tensors_by_path(root: Any, max_nodes: int = 2_000_000) -> Iterator[tuple[str, TensorRef]]:
    """Every TensorRef under root with its dotted path ("state_dict.fc.weight",
    "state.0.exp_avg"), first path wins for shared tensors. Iterative: nesting depth is
    the pickle's, not Python's recursion limit."""
    seen: set[int] = set()
    todo: list[tuple[str, Any]] = [("", root)]
    nodes = 0
    while todo and nodes < max_nodes:
        path, v = todo.pop()
        nodes += 1
        if isinstance(v, TensorRef):
            if id(v) not in seen:
                seen.add(id(v))
                yield path, v
            continue
        if isinstance(v, (str, bytes, int, float, bool)) or v is None:
            continue
        if id(v) in seen:
            continue
        seen.add(id(v))
        children: list[tuple[str, Any]] = []
        if isinstance(v, SymDict) or (isinstance(v, Call) and v.items and isinstance(v.items[0], tuple)
                                      and len(v.items[0]) == 2):
            for k, child in v.items:
                text = _key_text(k)
                children.append((text if text is not None else "?", child))
        elif isinstance(v, (SymList, SymSet)):
            children = [(str(i), c) for i, c in enumerate(v.items)]
        elif isinstance(v, tuple):
            children = [(str(i), c) for i, c in enumerate(v)]
        elif isinstance(v, Call):
            children = [("", v.args), ("", v.state)]
        for key, child in reversed(children):
            todo.append((f"{path}.{key}" if path and key else (key or path), child))


def top_keys(root: Any) -> tuple[str, ...]:
    """The string keys of a root dict (empty for anything else)."""
    if isinstance(root, SymDict):
        return tuple(k for k, _ in root.items if isinstance(k, str))
    return ()


def value_at(root: Any, key: str) -> Any:
    if isinstance(root, SymDict):
        for k, v in root.items:
            if k == key:
                return v
    return None
