"""The pickle walker against the real unpickler: whatever `pickle.load` would import, the
walker names.

Random opcode streams (mostly well-formed, often not) are run through CPython's own
unpickler with a find_class that records each (module, name) and returns a harmless
stand-in (nothing is imported, nothing real is called); every name it records before it
stops must be among the walker's globals. Real files written by torch.save, joblib.dump,
np.save and pickle.dump (protocols 0-5) of random objects are checked the same way, with
each library's own unpickler. Bounded: a few hundred examples, no deadline per example
(the machine is shared).
"""

from __future__ import annotations

import collections
import datetime
import fractions
import io
import pickle
import struct
import zipfile
from pathlib import Path
from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from trainproof_lsp.readers import pickle_walk as pw  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:TypedStorage is deprecated:UserWarning")

FUZZ = settings(max_examples=300, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
FILES = settings(max_examples=40, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


# --- the real unpickler, recording ----------------------------------------------------------------

class _Stand:
    """What the recording unpickler returns for every global: callable with anything, any
    state accepted, never anything real."""

    def __new__(cls, *args: Any, **kwargs: Any) -> "_Stand":
        return object.__new__(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> "_Stand":
        return _Stand()

    def __setstate__(self, state: Any) -> None:
        pass


class Recording(pickle.Unpickler):
    """CPython's unpickler, imports replaced by a record (never imported)."""

    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data))
        self.imported: list[tuple[str, str]] = []

    def find_class(self, module: str, name: str) -> Any:
        self.imported.append((module, name))
        return _Stand

    def persistent_load(self, pid: Any) -> Any:
        return _Stand()


class RealRecording(pickle.Unpickler):
    """CPython's unpickler with its real imports, each recorded: only for files this test
    wrote itself. Tensor storages (persistent ids) are made empty, as torch.load makes them."""

    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data))
        self.imported: list[tuple[str, str]] = []

    def find_class(self, module: str, name: str) -> Any:
        self.imported.append((module, name))
        return super().find_class(module, name)

    def persistent_load(self, pid: Any) -> Any:
        import torch

        return torch.storage.TypedStorage(pid[4], dtype=pid[1].dtype)


def own_file_imports(data: bytes) -> list[tuple[str, str]]:
    """What pickle.load of a file this test wrote imports (it must load completely)."""
    u = RealRecording(data)
    u.load()
    return u.imported


def real_imports(data: bytes) -> list[tuple[str, str]]:
    """What pickle.load of `data` imports before it returns or fails."""
    u = Recording(data)
    try:
        u.load()
    except Exception:  # a random stream fails somewhere: what was imported before counts
        pass
    return u.imported


def walker_names(data: bytes, start: int = 0) -> set[tuple[str, str]]:
    return {(g.module, g.name) for g in pw.walk(data, start).globals}


def assert_walker_names(imported: list[tuple[str, str]], named: set[tuple[str, str]], data: bytes) -> None:
    # The unpickler maps Python 2 names (__builtin__, copy_reg) for protocols < 3 inside
    # find_class; the walker names what that mapping gives. Under protocol 3+ an
    # unmapped __builtin__ import fails, so naming the mapped one is stricter, not looser.
    missing = [g for g in imported if pw.canonical(*g) not in named]
    assert not missing, f"the unpickler imports {missing} the walker does not name; stream {data!r}"


# --- random opcode streams ------------------------------------------------------------------------

_NAMES = [("os", "system"), ("builtins", "open"), ("__builtin__", "eval"), ("collections", "OrderedDict"),
          ("torch._utils", "_rebuild_tensor_v2"), ("copy_reg", "_reconstructor"), ("numpy", "dtype"),
          ("subprocess", "Popen"), ("my.pkg", "Model"), ("posix", "system")]


def _text(s: str) -> bytes:
    raw = s.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def _short(s: str) -> bytes:
    raw = s.encode()
    return b"\x8c" + bytes([len(raw)]) + raw


_PIECES = st.one_of(
    st.sampled_from(_NAMES).map(lambda g: b"c" + g[0].encode() + b"\n" + g[1].encode() + b"\n"),  # GLOBAL
    st.sampled_from(_NAMES).map(lambda g: _short(g[0]) + _short(g[1]) + b"\x93"),  # STACK_GLOBAL
    st.sampled_from(_NAMES).map(lambda g: _text(g[0]) + b"\x94" + _text(g[1]) + b"\x93"),  # via the memo
    st.sampled_from(_NAMES).map(lambda g: b"i" + g[0].encode() + b"\n" + g[1].encode() + b"\n"),  # INST
    st.sampled_from([b"(", b")", b"t", b"\x85", b"\x86", b"\x87", b"]", b"a", b"e", b"}", b"s", b"u",
                     b"R", b"b", b"\x81", b"o", b"0", b"1", b"2", b"N", b"\x88", b"\x89", b"\x8f",
                     b"\x90", b"\x91", b"\x94", b"l", b"d", b"Q"]),
    st.integers(0, 5).map(lambda i: b"q" + bytes([i])),  # BINPUT
    st.integers(0, 5).map(lambda i: b"h" + bytes([i])),  # BINGET
    st.integers(0, 300).map(lambda i: b"K" + bytes([i % 256])),  # BININT1
    st.text("abc .", max_size=6).map(_text),  # BINUNICODE
    st.text("abc", max_size=4).map(lambda s: b"S'" + s.encode() + b"'\n"),  # STRING
    st.integers(2, 5).map(lambda p: b"\x80" + bytes([p])),  # PROTO
    st.just(b"P0\n"),  # PERSID
)

streams = st.lists(_PIECES, min_size=1, max_size=40).map(lambda ps: b"".join(ps) + b".")


@FUZZ
@given(streams)
def test_every_import_of_a_random_opcode_stream_is_named_by_the_walker(data):
    assert_walker_names(real_imports(data), walker_names(data), data)


@FUZZ
@given(st.binary(max_size=200))
def test_every_import_of_random_bytes_is_named_by_the_walker(data):
    assert_walker_names(real_imports(data), walker_names(data), data)


def test_the_recorder_sees_what_pickle_would_import():
    # The control: the recorder is not blind (a stream that imports two names, one mapped).
    data = b"\x80\x02c__builtin__\neval\n" + _short("os") + _short("system") + b"\x93\x86."
    assert real_imports(data) == [("__builtin__", "eval"), ("os", "system")]
    assert walker_names(data) == {("builtins", "eval"), ("os", "system")}


# --- real files, random objects ---------------------------------------------------------------------

class Custom:
    """A user class: pickling it names this module, which the walker must report."""

    def __init__(self, x: Any) -> None:
        self.x = x

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Custom) and other.x == self.x


_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False), st.text(max_size=8),
    st.binary(max_size=8), st.complex_numbers(allow_nan=False, allow_infinity=False),
    st.fractions().map(fractions.Fraction), st.dates().map(lambda d: datetime.datetime(d.year, d.month, d.day)),
    st.integers(0, 9).map(Custom),
)
objects = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple), st.frozensets(st.integers(0, 9), max_size=3),
        st.dictionaries(st.text(max_size=3), inner, max_size=3).map(collections.OrderedDict),
        st.lists(st.integers(0, 5), max_size=4).map(collections.Counter),
    ),
    max_leaves=12,
)


@FILES
@given(objects, st.integers(0, 5))
def test_pickle_dump_of_random_objects_every_protocol(obj, protocol):
    data = pickle.dumps(obj, protocol=protocol)
    imported = own_file_imports(data)
    assert_walker_names(imported, walker_names(data), data)
    w = pw.walk(data)
    assert (w.error, w.capped, w.end) == ("", "", len(data))


@FILES
@given(objects)
def test_torch_save_of_random_objects(tmp_path_factory, obj):
    torch = pytest.importorskip("torch")
    path = tmp_path_factory.mktemp("torch") / "x.pt"
    torch.save({"w": torch.arange(6.0).reshape(2, 3), "obj": obj, "t": [torch.zeros(2, dtype=torch.int8)]}, path)
    with zipfile.ZipFile(path) as zf:
        data = zf.read(next(n for n in zf.namelist() if n.endswith("data.pkl")))
    imported = own_file_imports(data)
    assert ("torch._utils", "_rebuild_tensor_v2") in imported
    assert_walker_names(imported, walker_names(data), data)


_DTYPES = ["float64", "float32", "float16", "int8", "int64", "uint16", "bool", "complex128",
           "datetime64[ns]", "timedelta64[s]", "S3", "U4", "object"]


@FILES
@given(st.lists(st.tuples(st.sampled_from(_DTYPES), st.integers(0, 5)), min_size=1, max_size=4), objects)
def test_joblib_dump_of_random_arrays_and_objects(tmp_path_factory, arrays, obj):
    np = pytest.importorskip("numpy")
    joblib = pytest.importorskip("joblib")
    from joblib.numpy_pickle import NumpyUnpickler

    path = tmp_path_factory.mktemp("joblib") / "x.joblib"
    value = {f"a{i}": (np.array([Custom(1)] * n, dtype=object) if dt == "object" else np.zeros(n, dtype=dt))
             for i, (dt, n) in enumerate(arrays)}
    value["obj"] = obj
    joblib.dump(value, path)
    data = path.read_bytes()
    imported: list[tuple[str, str]] = []

    class Recorder(NumpyUnpickler):
        # joblib's own unpickler (our own file: the imports are real), each import recorded
        def find_class(self, module: str, name: str) -> Any:
            imported.append((module, name))
            return super().find_class(module, name)

    with path.open("rb") as fh:
        Recorder(str(path), fh, ensure_native_byte_order=False).load()
    w = pw.walk(data)
    assert (w.error, w.capped) == ("", ""), w.error
    assert_walker_names(imported, {(g.module, g.name) for g in w.globals}, data)


@FILES
@given(objects)
def test_np_save_of_random_object_arrays(tmp_path_factory, obj):
    np = pytest.importorskip("numpy")
    from trainproof_lsp.readers.checkpoint import npy_header

    path = tmp_path_factory.mktemp("npy") / "x.npy"
    array = np.empty(2, dtype=object)
    array[0], array[1] = obj, Custom(2)
    np.save(path, array, allow_pickle=True)
    data = path.read_bytes()
    got = npy_header(data)
    assert isinstance(got, tuple) and got[1]
    start = got[0]
    imported = own_file_imports(data[start:])
    assert (Custom.__module__, "Custom") in imported
    assert_walker_names(imported, walker_names(data, start), data[start:])


def test_real_file_fixtures_dir_is_untouched():
    # nothing above writes outside pytest's own tmp folders
    assert not (Path(__file__).parent / "x.pt").exists()
