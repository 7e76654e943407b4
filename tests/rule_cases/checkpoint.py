"""Cases for the checkpoint family: files written here (safetensors by the safetensors
library, torch.save archives by torch, pickles by pickle, an index and its shards), read
by the reader (readers/checkpoint.read_checkpoint) into the facts the rules judge. Nothing
written here is ever loaded."""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import pickle
import re
import shutil
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from trainproof_lsp.readers.checkpoint import CheckpointFacts, read_checkpoint
from trainproof_lsp.rules import Context

from . import Expect, FamilyCases, Fires, Quiet, RuleCases, straddle


@cache
def _folder() -> Path:
    path = Path(tempfile.mkdtemp(prefix="rule-cases-"))
    atexit.register(shutil.rmtree, path, True)
    return path


def written(name: str, data: bytes) -> Path:
    """`data` as the file `name` of a fresh folder (so a case's neighbours never show)."""
    folder = Path(tempfile.mkdtemp(dir=_folder()))
    path = folder / name
    path.write_bytes(data)
    return path


def read(name: str, data: bytes) -> CheckpointFacts:
    return read_checkpoint(written(name, data))


def safetensors(tensors: dict[str, Any], name: str = "model.safetensors") -> CheckpointFacts:
    from safetensors.numpy import save
    return read(name, save({k: np.ascontiguousarray(v) for k, v in tensors.items()}))


def weights(**extra: Any) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    return {"fc.weight": rng.normal(size=(4, 4)).astype(np.float32), "fc.bias": np.ones(4, np.float32), **extra}


def torch_saved(obj: Any, name: str = "ckpt.pt", legacy: bool = False) -> bytes:
    import io

    import torch
    buf = io.BytesIO()
    torch.save(obj, buf, _use_new_zipfile_serialization=not legacy)
    return buf.getvalue()


def torch_weights() -> dict[str, Any]:
    import torch
    torch.manual_seed(0)
    return {"fc.weight": torch.randn(4, 4), "fc.bias": torch.ones(4)}


def corrupted() -> CheckpointFacts:
    """A torch.save archive with one byte of a tensor's stored data flipped (its CRC no
    longer matches)."""
    import torch
    data = bytearray(torch_saved({"w": torch.full((64,), 3.0)}))
    at = data.index(np.full(64, 3.0, np.float32).tobytes())
    data[at + 5] ^= 0xFF
    return read("ckpt.pt", bytes(data))


class _Runs:
    """Pickled, it names os.system: what a loader would call. Never unpickled here."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, ("echo never run",))


def sharded(missing: bool) -> CheckpointFacts:
    folder = Path(tempfile.mkdtemp(dir=_folder()))
    from safetensors.numpy import save
    (folder / "model-00001-of-00002.safetensors").write_bytes(save(weights()))
    if not missing:
        (folder / "model-00002-of-00002.safetensors").write_bytes(save({"head.weight": np.ones((2, 2), np.float32)}))
    index = {"metadata": {}, "weight_map": {"fc.weight": "model-00001-of-00002.safetensors",
                                            "fc.bias": "model-00001-of-00002.safetensors",
                                            "head.weight": "model-00002-of-00002.safetensors"}}
    path = folder / "model.safetensors.index.json"
    path.write_text(json.dumps(index, indent=1))
    return read_checkpoint(path)


def against(facts: CheckpointFacts, reference: CheckpointFacts) -> CheckpointFacts:
    return dataclasses.replace(facts, reference=reference)


def zeros(shape: tuple[int, ...]) -> CheckpointFacts:
    return safetensors(weights(**{"dead.weight": np.zeros(shape, np.float32)}))


def context(_: CheckpointFacts) -> Context:
    return Context()


def normalize(text: str) -> str:
    """The folder a case's files were written to, as <tmp>."""
    return re.sub(re.escape(str(_folder())) + r"/[^/\s]+", "<tmp>", text)


CASES: dict[str, RuleCases] = {
    "TP-ENV-CKPT-EMPTY": RuleCases(
        fires=Fires(subject=lambda: read("model.safetensors", b""), hits=(Expect(message='zero-byte file: the save was interrupted before writing anything',
                           evidence={}, line=None),),
                    family=('TP-ENV-CKPT-EMPTY',)),
        quiet=Quiet(subject=lambda: safetensors(weights())),
    ),
    "TP-ENV-CKPT-TRUNCATED": RuleCases(
        fires=Fires(subject=lambda: read("ckpt.pt", torch_saved(torch_weights())[:-300]), hits=(Expect(message="cut off mid-write: the ZIP has no central directory; 8 complete entries (archive/data.pkl, archive/.format_version, archive/.storage_alignment, archive/byteorder, ...), entry '(central directory)' incomplete from byte 1208; file ends at byte 1529",
                           evidence={'complete_entries': 8, 'incomplete_entry': '(central directory)', 'file_size': 1529, 'cut_at': 1208}, line=None),),
                    family=('TP-ENV-CKPT-TRUNCATED',)),
        quiet=Quiet(subject=lambda: read("ckpt.pt", torch_saved(torch_weights()))),
    ),
    "TP-ENV-CKPT-CORRUPT": RuleCases(
        fires=Fires(subject=corrupted, hits=(Expect(message='entry archive/data/0 fails its CRC-32 check (recorded eca74a1a, data gives 9525df05)',
                           evidence={'entry': 'archive/data/0', 'crc_recorded': 'eca74a1a', 'crc_actual': '9525df05'}, line=None),),
                    family=('TP-ENV-CKPT-CORRUPT',)),
        quiet=Quiet(subject=lambda: read("ckpt.pt", torch_saved(torch_weights()))),
    ),
    "TP-ENV-CKPT-LEGACY": RuleCases(
        fires=Fires(subject=lambda: read("ckpt.pt", torch_saved(torch_weights(), legacy=True)), hits=(Expect(message="pre-1.6 torch.save format (a bare pickle followed by raw storages): its tensors are not read by this version, so weights were not checked; the pickle's globals were checked without running it. Re-save with torch >= 1.6 to have it judged",
                           evidence={'pickles_walked': 5}, line=None),),
                    family=('TP-ENV-CKPT-LEGACY',)),
        quiet=Quiet(subject=lambda: read("ckpt.pt", torch_saved(torch_weights()))),
    ),
    "TP-ENV-CKPT-UNREADABLE": RuleCases(
        fires=Fires(subject=lambda: read("ckpt.pt", b"this is a text file, not a checkpoint\n" * 4), hits=(Expect(message='a pickle not walked to its end (malformed pickle (IndexError at a stack operation); stopped at byte 4); its globals up to there were checked without running it',
                           evidence={}, line=None),),
                    family=('TP-ENV-CKPT-UNREADABLE',)),
        quiet=Quiet(subject=lambda: safetensors(weights())),
    ),
    "TP-ENV-CKPT-MISSING": RuleCases(
        fires=Fires(subject=lambda: sharded(missing=True), hits=(Expect(message='shard model-00002-of-00002.safetensors (1 tensor(s), e.g. head.weight) is named in the index but missing from <tmp>',
                           evidence={'shard': 'model-00002-of-00002.safetensors', 'tensors': 1, 'first_tensor': 'head.weight'}, line=5),),
                    family=('TP-ENV-CKPT-MISSING',)),
        quiet=Quiet(subject=lambda: sharded(missing=False)),
    ),
    "TP-CKPT-BAD-HEADER": RuleCases(
        fires=Fires(subject=lambda: read("model.safetensors", (20).to_bytes(8, "little") + b'{"fc.weight": [1, 2' + b" " + b"\0" * 16),
                    hits=(Expect(message="header is not valid JSON at byte 28: Expecting ',' delimiter",
                           evidence={'header_length': 20}, line=None),),
                    family=('TP-CKPT-BAD-HEADER',)),
        quiet=Quiet(subject=lambda: safetensors(weights())),
    ),
    "TP-CKPT-UNSAFE-PICKLE": RuleCases(
        fires=Fires(subject=lambda: read("model.pkl", pickle.dumps({"step": 3, "hook": _Runs()}, protocol=2)), hits=(Expect(message='the pickle would import and call posix.system (runs a shell command) when loaded with torch.load(weights_only=False) or pickle; it is outside the tensor allow-list. Not executed here',
                           evidence={'global': 'posix.system', 'module': 'posix', 'name': 'system', 'entry': '', 'danger': 'runs a shell command'}, line=None),),
                    family=('TP-CKPT-UNSAFE-PICKLE',)),
        quiet=(Quiet(subject=lambda: read("model.pkl", pickle.dumps({"step": 3, "lr": [1e-4, 2e-4]}, protocol=2))),
               Quiet(subject=lambda: safetensors(weights()), skip="safetensors holds no code")),
    ),
    "TP-CKPT-NONFINITE": RuleCases(
        fires=Fires(subject=lambda: safetensors(weights(**{"head.weight": np.array([[1.0, np.nan], [np.inf, np.nan]], np.float32)})),
                    hits=(Expect(message='tensor head.weight (float32 [2, 2]) holds 2 NaN and 1 Inf of 4 values (75.0%); first at element 1',
                           evidence={'tensor': 'head.weight', 'entry': '', 'dtype': 'float32', 'nan': 2, 'inf': 1, 'numel': 4, 'first_index': 1, 'role': 'weights'}, line=None),),
                    family=('TP-CKPT-NONFINITE',)),
        quiet=Quiet(subject=lambda: safetensors(weights())),
    ),
    "TP-CKPT-DEAD-TENSOR": RuleCases(
        fires=Fires(subject=lambda: zeros((8, 4)), hits=(Expect(message='tensor dead.weight (float32 [8, 4]) is all zeros: 32 values (judged from 16 values and 2 dimensions)',
                           evidence={'tensor': 'dead.weight', 'entry': '', 'dtype': 'float32', 'numel': 32, 'ndim': 2}, line=None),),
                    family=('TP-CKPT-DEAD-TENSOR',)),
        quiet=(Quiet(subject=lambda: safetensors(weights(**{"fc.bias": np.zeros(32, np.float32)}))),
               Quiet(subject=lambda: read("ckpt.pt", torch_saved(torch_weights(), legacy=True)), skip="pre-1.6 torch format")),
        straddles=(straddle("min_elements", 16, lambda n: zeros((int(n) // 4, 4) if int(n) % 4 == 0 else (int(n) // 3, 3)),
                            fire=16, quiet=15),
                   straddle("min_ndim", 2, lambda d: zeros((4, 8) if int(d) == 2 else (32,)), fire=2, quiet=1)),
    ),
    "TP-CKPT-MIXED-DTYPE": RuleCases(
        fires=Fires(subject=lambda: safetensors(weights(**{"head.weight": np.ones((2, 2), np.float16)})), hits=(Expect(message='weights mix dtypes: 2 float32, 1 float16 tensors; first float16 tensor is head.weight',
                           evidence={'count_float32': 2, 'count_float16': 1, 'rare_dtype': 'float16', 'first_rare_tensor': 'head.weight'}, line=None),),
                    family=('TP-CKPT-MIXED-DTYPE',)),
        quiet=Quiet(subject=lambda: safetensors(weights())),
    ),
    "TP-CKPT-NO-OPTIMIZER": RuleCases(
        fires=Fires(subject=lambda: read("last.ckpt", torch_saved({"epoch": 3, "global_step": 300, "state_dict": torch_weights()})),
                    hits=(Expect(message='resume checkpoint (epoch, global_step beside the weights) has no optimizer state; keys: epoch, global_step, state_dict',
                           evidence={'progress_keys': 'epoch, global_step', 'top_keys': 'epoch, global_step, state_dict'}, line=None),),
                    family=('TP-CKPT-NO-OPTIMIZER',)),
        quiet=(Quiet(subject=lambda: read("last.ckpt", torch_saved({"epoch": 3, "global_step": 300, "state_dict": torch_weights(),
                                                                    "optimizer_states": [{"state": {}, "param_groups": []}]}))),
               Quiet(subject=lambda: safetensors(weights()), skip="not a resume checkpoint")),
    ),
    "TP-CKPT-SHAPE-DRIFT": RuleCases(
        fires=Fires(subject=lambda: against(safetensors(weights()), safetensors(weights(**{"fc.weight": np.ones((4, 8), np.float32)}))),
                    hits=(Expect(message='tensor fc.weight is [4, 4] here but [4, 8] in the reference <tmp>/model.safetensors',
                           evidence={'tensor': 'fc.weight', 'shape': '[4, 4]', 'reference_shape': '[4, 8]', 'reference': '<tmp>/model.safetensors', 'entry': ''}, line=None),),
                    family=('TP-CKPT-SHAPE-DRIFT',)),
        quiet=(Quiet(subject=lambda: against(safetensors(weights()), safetensors(weights()))),
               Quiet(subject=lambda: safetensors(weights()), skip="no --reference")),
    ),
    "TP-CKPT-KEY-DRIFT": RuleCases(
        fires=Fires(subject=lambda: against(safetensors(weights(**{"extra.weight": np.ones((2, 2), np.float32)})),
                                            safetensors({"fc.weight": weights()["fc.weight"], "head.weight": np.ones((2, 2), np.float32)})),
                    hits=(Expect(message='1 reference tensor(s) missing here (first: head.weight); 2 tensor(s) not in the reference (first: extra.weight, fc.bias); reference <tmp>/model.safetensors',
                           evidence={'missing': 1, 'extra': 2, 'first_missing': 'head.weight', 'first_extra': 'extra.weight', 'reference': '<tmp>/model.safetensors'}, line=None),),
                    family=('TP-CKPT-KEY-DRIFT',)),
        quiet=Quiet(subject=lambda: against(safetensors(weights()), safetensors(weights()))),
    ),
}

FAMILY = FamilyCases(cases=CASES, context=context, normalize=normalize)
