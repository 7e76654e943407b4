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
OrderedDict, the numpy helpers in `rng_state*.pth`). Everything else is reported with
the byte offset of the opcode that names it.

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

import io
import pickletools
from dataclasses import dataclass, field
from typing import Any, Iterator

# The unpickler maps Python 2 names for protocols < 3 (torch.save writes protocol 2, so
# `builtins.set` arrives as `__builtin__ set`); check what it would actually import.
try:  # pragma: no branch - present in every CPython 3
    from _compat_pickle import IMPORT_MAPPING, NAME_MAPPING
except ImportError:  # pragma: no cover
    IMPORT_MAPPING, NAME_MAPPING = {}, {}


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
    for mod, what in _DANGER_MODULES.items():
        if module == mod or module.startswith(mod + "."):
            return what
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
    items: list = field(default_factory=list)


@dataclass(eq=False)
class Persistent:
    pid: Any


@dataclass(eq=False)
class TensorRef:
    storage: Any  # a Persistent whose pid is ('storage', storage_type, key, location, numel)
    offset: int
    size: tuple
    stride: tuple
    dtype: str | None = None  # _rebuild_tensor_v3 names the dtype; otherwise the storage does


@dataclass(eq=False)
class SymDict:
    items: list = field(default_factory=list)


@dataclass(eq=False)
class SymList:
    items: list = field(default_factory=list)


@dataclass(eq=False)
class SymSet:
    items: list = field(default_factory=list)


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
    """What one pickle would build: the root value and every global it names."""

    root: Any
    globals: list[GlobalUse]
    end: int  # byte offset just past STOP
    error: str = ""  # the walk stopped early (truncated, malformed): why


class WalkError(Exception):
    pass


_REBUILD_V2 = {("torch._utils", "_rebuild_tensor_v2"), ("torch._utils", "_rebuild_tensor"),
               ("torch._utils", "_rebuild_tensor_v3")}
_REBUILD_PASSTHROUGH = {("torch._utils", "_rebuild_parameter"),
                        ("torch._utils", "_rebuild_parameter_with_state")}


def _as_tuple(v: Any) -> tuple:
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


def walk(data: bytes, start: int = 0, base: int = 0) -> Walked:
    """Replay the one pickle that starts at data[start]. Never imports, never calls.

    Opcode positions count from data[0]; `base` is added so reported offsets are file
    offsets (data may be one ZIP entry of the file).
    """
    stream = io.BytesIO(data)
    stream.seek(start)
    stack: list[Any] = []
    marks: list[list[Any]] = []
    memo: dict[Any, Any] = {}
    used: list[GlobalUse] = []
    end = 0
    error = ""

    def pop_mark() -> list[Any]:
        nonlocal stack
        items = stack
        stack = marks.pop() if marks else []
        return items

    def note_global(module: str, name: str, pos: int) -> Global:
        mod, nm = canonical(module, name)
        allowed = is_allowed(mod, nm)
        used.append(GlobalUse(module=mod, name=nm, offset=base + pos, allowed=allowed,
                              danger="" if allowed else danger_of(mod, nm)))
        return Global(mod, nm, base + pos)

    try:
        for op, arg, pos in pickletools.genops(stream):
            name = op.name
            if name in ("PROTO", "FRAME"):
                continue
            if name == "STOP":
                end = pos + 1
                break
            if name == "MARK":
                marks.append(stack)
                stack = []
            elif name in ("NONE",):
                stack.append(None)
            elif name == "NEWTRUE":
                stack.append(True)
            elif name == "NEWFALSE":
                stack.append(False)
            elif name in ("INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4",
                          "FLOAT", "BINFLOAT", "STRING", "BINSTRING", "SHORT_BINSTRING",
                          "BINBYTES", "SHORT_BINBYTES", "BINBYTES8", "UNICODE",
                          "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "BYTEARRAY8"):
                stack.append(arg)
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
            elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
                memo[arg] = stack[-1]
            elif name == "MEMOIZE":
                memo[len(memo)] = stack[-1]
            elif name in ("GET", "BINGET", "LONG_BINGET"):
                stack.append(memo.get(arg, Opaque()))
            elif name == "GLOBAL":
                module, _, gname = str(arg).partition(" ")
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
            elif name == "INST":
                module, _, gname = str(arg).partition(" ")
                cls = note_global(module, gname, pos)
                items = pop_mark()
                stack.append(_call(cls, tuple(items)))
            elif name == "OBJ":
                items = pop_mark()
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
                stack.append(_call(func, args))
            elif name == "BUILD":
                state = stack.pop()
                target = stack[-1]
                if isinstance(target, Call):
                    target.state = state
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
    except (IndexError, KeyError, TypeError, AttributeError, WalkError) as e:
        error = f"malformed pickle ({type(e).__name__} at a stack operation)"
    root = stack[-1] if stack and not error else (stack[-1] if stack else None)
    return Walked(root=root, globals=used, end=end, error=error)


def _extend(target: Any, items: list) -> None:
    if isinstance(target, (SymList, SymSet)):
        target.items.extend(items)
    elif isinstance(target, Call):
        target.items.extend(items)


def _setitems(target: Any, pairs: list) -> None:
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
