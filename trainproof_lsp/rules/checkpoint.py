"""Checkpoint rules: the container (empty, cut off, CRC, header), the pickle (code it
would run) and the tensors (NaN/Inf, dead layers, dtypes, optimizer state, shapes).

Every rule reads `CheckpointFacts` (readers/checkpoint.py); none reads the file. Findings
in binary files are located by byte offset; the ZIP entry and tensor name are evidence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ..core.model import Hit, Level, Location, Related
from ..readers.checkpoint import ITEMSIZE, CheckpointFacts, Problem, TensorFacts
from .base import Context, Family, NoLimits, Rule, Skip

# Every rule here judges one checkpoint's facts (readers/checkpoint.py).
CHECKPOINT: Family[CheckpointFacts, Context] = Family("checkpoint")


def _at(facts: CheckpointFacts, offset: int | None) -> Location:
    return Location(path=facts.path, byte_offset=offset)


def _problem_hit(facts: CheckpointFacts, p: Problem) -> Hit:
    loc = Location(path=facts.path, span=p.span, byte_offset=p.byte_offset if p.span is None else None)
    return Hit(message=p.message, evidence=dict(p.evidence), location=loc)


def _problems(kind: str) -> Callable[[CheckpointFacts, Any, Context], Iterator[Hit]]:
    def check(facts: CheckpointFacts, limits: Any, ctx: Context) -> Iterator[Hit]:
        for p in facts.problems:
            if p.kind == kind:
                yield _problem_hit(facts, p)
    return check


def _rule(**kw: Any) -> Rule[CheckpointFacts, Context]:
    return Rule(family=CHECKPOINT, **kw)


# --- the container ---------------------------------------------------------------------

EMPTY_DOC = """The checkpoint file is empty (zero bytes).

What it flags: a checkpoint file (or sharded index) of zero bytes.
Why it matters: the save was interrupted before it wrote anything (a killed job, a full
disk); resuming or evaluating from it fails.
What it does not mean: that earlier checkpoints of the run are damaged.
"""
EMPTY_RULE = _rule(id="TP-ENV-CKPT-EMPTY", name="checkpoint-empty", level=Level.FAIL, doc=EMPTY_DOC,
                   check=_problems("empty"), origin="trainproof")

TRUNCATED_DOC = """The checkpoint was cut off mid-write.

What it flags: a torch ZIP archive with local entries but no central directory (the
directory is written last), or a safetensors file whose data section is shorter than its
header says; the message names the complete entries and where the file ends.
Why it matters: the save never finished (killed, preempted, out of disk); `torch.load`
or `load_file` fails on it. Resume from the previous checkpoint.
What it does not mean: that the tensors written before the cut are bad.
"""
TRUNCATED_RULE = _rule(id="TP-ENV-CKPT-TRUNCATED", name="checkpoint-truncated", level=Level.FAIL,
                       doc=TRUNCATED_DOC, check=_problems("truncated"), origin="trainproof")

CORRUPT_DOC = """The checkpoint archive fails its own integrity checks.

What it flags: a ZIP entry whose CRC-32 does not match its bytes (the entry is named), a
damaged local header, or a data.pkl that names storages or sizes the archive does not hold.
Why it matters: bytes changed after the save (disk, copy or transfer error); a load
either fails or silently reads wrong weights.
What it does not mean: that the other entries are damaged — each bad entry is reported.
"""
CORRUPT_RULE = _rule(id="TP-ENV-CKPT-CORRUPT", name="checkpoint-corrupt", level=Level.FAIL,
                     doc=CORRUPT_DOC, check=_problems("corrupt"), origin="trainproof")

LEGACY_DOC = """The checkpoint uses the pre-1.6 torch format; its weights are not read.

What it flags: a torch.save file that is a bare pickle followed by raw storages (torch
< 1.6 or `_use_new_zipfile_serialization=False`).
Why it matters: this version reads tensors only from ZIP archives and safetensors, so
NaN, dead-layer and shape checks did not run (NOT-CHECKED, exit 2). Its pickle is still
walked, without running it, and code it would run is reported.
What it does not mean: that the file is broken; re-save it with a current torch to have
it judged.
"""
LEGACY_RULE = _rule(id="TP-ENV-CKPT-LEGACY", name="checkpoint-legacy-format", level=Level.NOT_CHECKED,
                    doc=LEGACY_DOC, check=_problems("legacy"), origin="trainproof")

UNREADABLE_DOC = """The file is not a checkpoint this version can read.

What it flags: a checkpoint-named file that is neither a torch ZIP archive, a torch
pickle nor safetensors; a ZIP without data.pkl; a TorchScript archive; a bare pickle that
torch.save did not write. The message says which.
Why it matters: nothing about the weights was judged (NOT-CHECKED, exit 2). The published
trainproof reports this ID as FAIL; here a file that cannot be read is never a failure.
What it does not mean: that the run is broken. Code a bare pickle would run is still
reported by TP-CKPT-UNSAFE-PICKLE.
"""
UNREADABLE_RULE = _rule(id="TP-ENV-CKPT-UNREADABLE", name="checkpoint-unreadable",
                        level=Level.NOT_CHECKED, doc=UNREADABLE_DOC,
                        check=_problems("unreadable"), origin="trainproof", security=True)

MISSING_DOC = """A checkpoint the run needs does not exist.

What it flags: a shard named in a sharded index (`*.index.json`) that is not beside it
(located on the index line naming it), or the checkpoint given to `env --checkpoint`.
Why it matters: `from_pretrained` / resume fails with the shard or file missing — often
an upload or copy that stopped early.
What it does not mean: that the shards that are present are damaged.
"""
MISSING_RULE = _rule(id="TP-ENV-CKPT-MISSING", name="checkpoint-missing", level=Level.FAIL,
                     doc=MISSING_DOC, check=_problems("missing"), origin="trainproof")

BAD_HEADER_DOC = """The safetensors header is invalid.

What it flags: a header length larger than the file, a header that is not JSON or not an
object, an entry without dtype/shape/data_offsets, offsets that do not match dtype x
shape, or tensors whose byte ranges overlap.
Why it matters: `safetensors.load_file` refuses the file; the weights cannot be loaded.
What it does not mean: a truncated file (TP-ENV-CKPT-TRUNCATED) — the header itself is
wrong here.
"""
BAD_HEADER_RULE = _rule(id="TP-CKPT-BAD-HEADER", name="safetensors-bad-header", level=Level.FAIL,
                        doc=BAD_HEADER_DOC, check=_problems("bad-header"), security=True)


# --- the pickle ------------------------------------------------------------------------

UNSAFE_DOC = """The checkpoint's pickle would import and call code outside the tensor allow-list.

What it flags: every global a pickle names (GLOBAL, STACK_GLOBAL, INST, copyreg
extensions) that is not on the allow-list of tensor-rebuild functions, storage classes,
dtypes, containers and the numpy helpers of rng_state files — `os.system`,
`builtins.exec`, `subprocess.*` and anything else; located at the opcode's byte offset.
Why it matters: `torch.load(weights_only=False)` and `pickle.load` import the global and
call it with arguments from the file: the checkpoint runs code on whoever loads it. It
was never run here: opcodes were decoded, not executed. Every pickle-bearing file of a
run folder is walked: `*.pt/.pth/.bin/.ckpt`, `*.pkl/.pickle/.joblib`, `*.pth.tar`, any
tar (torch's legacy format: every member torch.load reads), `.npy`/`.npz` object arrays,
HF's `training_args.bin`, `optimizer.pt`, `scheduler.pt`, `rng_state*.pth`, and any file
whose first bytes are a torch archive or a pickle whatever its name; a file under any
name but `*.safetensors` that also reads as safetensors or a tar is walked from byte 0
too. The classes those files legitimately hold (TrainingArguments and its enums, numpy
random-state helpers, joblib's array holder) are allowed; TrainingArguments-like classes
only when created without a call (NEWOBJ), as the Trainer writes them.
What it does not mean: that the code is malicious — a checkpoint that pickled a custom
class is flagged too, because loading it runs that class's module.
"""


def check_unsafe(facts: CheckpointFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    if facts.pickles_walked == 0:
        if facts.no_pickle:  # read far enough to know no loader unpickles anything from it
            return
        raise Skip("no pickle in this file" + (" (safetensors holds no code)"
                                                if facts.format == "safetensors" else ""))
    for g in facts.unsafe:
        what = f" ({g.danger})" if g.danger else ""
        where = f"pickle {g.entry}" if g.entry else "the pickle"
        yield Hit(
            message=(f"{where} would import and call {g.module}.{g.name}{what} when loaded with "
                     f"torch.load(weights_only=False) or pickle; it is outside the tensor allow-list. "
                     "Not executed here"),
            evidence={"global": f"{g.module}.{g.name}", "module": g.module, "name": g.name,
                      "entry": g.entry, "danger": g.danger},
            location=_at(facts, g.byte_offset),
        )
    if facts.unsafe_unlisted:
        yield Hit(
            message=(f"{facts.unsafe_unlisted} more global(s) outside the tensor allow-list are named "
                     f"after the {len(facts.unsafe)} listed; a pickle naming this many is built to "
                     "be loaded, not read. Not executed here"),
            evidence={"unlisted": facts.unsafe_unlisted, "listed": len(facts.unsafe)},
            location=_at(facts, 0),
        )


UNSAFE_RULE = _rule(id="TP-CKPT-UNSAFE-PICKLE", name="unsafe-pickle", level=Level.FAIL, doc=UNSAFE_DOC,
                    check=check_unsafe, security=True)


# --- the tensors -------------------------------------------------------------------------

def _scanned(facts: CheckpointFacts) -> None:
    if not facts.scanned:
        raise Skip(facts.scan_note or "tensor bytes were not read")


def _elem_offset(t: TensorFacts, index: int | None) -> int | None:
    if t.byte_offset is None:
        return None
    if index is None or t.stride:  # a strided view: point at the tensor's start
        return t.byte_offset
    return t.byte_offset + index * ITEMSIZE.get(t.dtype, 1)


def _shape(t: TensorFacts) -> str:
    return "[" + ", ".join(map(str, t.shape)) + "]"


NONFINITE_DOC = """A checkpoint holds NaN or Inf values in its tensors.

What it flags: every floating-point tensor of the model weights or optimizer state with
at least one NaN or Inf, read straight from the storage bytes; the message names the
tensor, how many values and the first one, located at that element's byte offset.
Why it matters: a NaN weight poisons every forward pass that touches it; a NaN Adam
moment poisons the next update. Resuming from this checkpoint resumes a dead run.
What it does not mean: that earlier checkpoints are affected — find the last clean one.
Callback and loop state (e.g. Lightning's `kth_value = inf` before the first evaluation)
is not judged.
"""


def check_nonfinite(facts: CheckpointFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    _scanned(facts)
    for t in facts.tensors:
        # Weights and optimizer state only: Lightning stores inf on purpose in callback state
        # (ModelCheckpoint's kth_value / best_model_score before the first evaluation).
        if not t.scanned or not (t.nan or t.inf) or t.role not in ("weights", "optimizer"):
            continue
        bad = t.nan + t.inf
        yield Hit(
            message=(f"tensor {t.name} ({t.dtype} {_shape(t)}) holds {t.nan} NaN and {t.inf} Inf "
                     f"of {t.numel} values ({bad / t.numel:.1%}); first at element {t.first_bad}"),
            evidence={"tensor": t.name, "entry": t.entry, "dtype": t.dtype, "nan": t.nan, "inf": t.inf,
                      "numel": t.numel, "first_index": t.first_bad, "role": t.role},
            location=_at(facts, _elem_offset(t, t.first_bad)),
        )


NONFINITE_RULE = _rule(id="TP-CKPT-NONFINITE", name="checkpoint-nonfinite", level=Level.FAIL,
                       doc=NONFINITE_DOC, check=check_nonfinite)


@dataclass(frozen=True, kw_only=True)
class DeadLimits:
    # Biases, norm offsets and other 1-D parameters start at exactly zero by design; a
    # weight matrix (2-D or more) that is all zeros is a layer that passes nothing on.
    min_ndim: int = 2
    # A handful of zeros can be a deliberate gate or a tiny head; from 16 values on an
    # all-zero matrix is not chance.
    min_elements: int = 16


DEAD_DOC = """A weight matrix is all zeros: a dead layer.

What it flags: a model-weight tensor with at least `min_ndim` dimensions and
`min_elements` values, every one exactly 0 (or -0), located at its first byte.
Why it matters: an all-zero matrix passes nothing forward and, behind most activations,
gets no gradient: the layer never trains. Typical causes are a bad init, a weight
zeroed by a bad load, or an adapter whose training never touched it.
What it does not mean: a bug in a freshly initialised adapter — LoRA B matrices start at
zero by design; only a trained checkpoint with zeros there is suspicious. Biases and
optimizer state are not judged.
"""


def check_dead(facts: CheckpointFacts, limits: DeadLimits, ctx: Context) -> Iterator[Hit]:
    _scanned(facts)
    weights = [t for t in facts.tensors if t.role == "weights" and t.scanned]
    if not weights:
        raise Skip("no model weights were read in this file")
    for t in weights:
        if t.all_zero and len(t.shape) >= limits.min_ndim and t.numel >= limits.min_elements:
            yield Hit(
                message=(f"tensor {t.name} ({t.dtype} {_shape(t)}) is all zeros: {t.numel} values "
                         f"(judged from {limits.min_elements} values and {limits.min_ndim} dimensions)"),
                evidence={"tensor": t.name, "entry": t.entry, "dtype": t.dtype, "numel": t.numel,
                          "ndim": len(t.shape)},
                location=_at(facts, t.byte_offset),
            )


DEAD_RULE = _rule(id="TP-CKPT-DEAD-TENSOR", name="dead-layer", level=Level.WARN, doc=DEAD_DOC,
                  limits=DeadLimits, check=check_dead)

MIXED_DOC = """The model weights mix floating-point dtypes.

What it flags: floating-point weight tensors of more than one dtype (e.g. float32 and
bfloat16) in one file; the message counts them and names the first tensor of the rarer
dtype.
Why it matters: often a half-finished cast (`model.half()` after some weights were
saved, an adapter merged in another precision), which changes memory use and numerics
on reload.
What it does not mean: a fault by itself — some architectures keep norms or a few
layers in float32 on purpose, so this is INFO and never changes a verdict.
"""


def check_mixed(facts: CheckpointFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    weights = [t for t in facts.tensors if t.role == "weights" and t.dtype in ("float64", "float32", "float16",
                                                                              "bfloat16")]
    if not weights:
        raise Skip("no floating-point model weights in this file")
    counts: dict[str, int] = {}
    for t in weights:
        counts[t.dtype] = counts.get(t.dtype, 0) + 1
    if len(counts) < 2:
        return
    rare = min(sorted(counts), key=lambda d: counts[d])
    first = next(t for t in weights if t.dtype == rare)
    listed = ", ".join(f"{n} {d}" for d, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    yield Hit(
        message=f"weights mix dtypes: {listed} tensors; first {rare} tensor is {first.name}",
        evidence={**{f"count_{d}": n for d, n in counts.items()}, "rare_dtype": rare,
                  "first_rare_tensor": first.name},
        location=_at(facts, first.byte_offset),
    )


MIXED_RULE = _rule(id="TP-CKPT-MIXED-DTYPE", name="mixed-dtypes", level=Level.INFO, doc=MIXED_DOC,
                   check=check_mixed)

NO_OPT_DOC = """A resume checkpoint carries no optimizer state.

What it flags: a checkpoint dict with training progress (`epoch`, `global_step`, ...)
and model weights but no optimizer state (no `optimizer*` key, or Lightning's
`optimizer_states` empty), and an HF `checkpoint-<step>/` folder with weights and
trainer_state.json but no optimizer.pt (or DeepSpeed/FSDP optimizer state).
Why it matters: resuming from it restarts Adam's moments from zero (HF silently,
Lightning with an error): the loss jumps and the run is not the run it continues.
What it does not mean: a problem for inference or fine-tuning from these weights —
`save_only_model` / `save_weights_only` write exactly this on purpose.
"""


def check_no_optimizer(facts: CheckpointFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    if facts.hf_folder_without_optimizer:
        yield Hit(
            message=(f"{facts.hf_folder_without_optimizer} holds weights and trainer_state.json but no "
                     "optimizer state (optimizer.pt): resume_from_checkpoint would restart the optimizer"),
            evidence={"folder": facts.hf_folder_without_optimizer},
            location=_at(facts, None),
        )
        return
    if facts.has_optimizer is None:
        raise Skip("not a resume checkpoint (no epoch/global_step beside model weights)")
    if not facts.has_optimizer:
        progress = ", ".join(facts.progress_keys)
        yield Hit(
            message=(f"resume checkpoint ({progress} beside the weights) has no optimizer state; "
                     f"keys: {', '.join(facts.top_keys[:12])}"),
            evidence={"progress_keys": progress, "top_keys": ", ".join(facts.top_keys)},
            location=_at(facts, 0),
        )


NO_OPT_RULE = _rule(id="TP-CKPT-NO-OPTIMIZER", name="resume-without-optimizer", level=Level.WARN,
                    doc=NO_OPT_DOC, check=check_no_optimizer)


# --- against a reference checkpoint ------------------------------------------------------------

_CONTAINERS = ("state_dict.", "model_state_dict.", "model.", "module.", "ema_state_dict.")
_WRAPPERS = ("module.", "_orig_mod.")


def canonical_weights(facts: CheckpointFacts) -> dict[str, TensorFacts]:
    """Weight tensors by name, without the container key (Lightning's `state_dict.`) and
    wrapper prefixes (DDP's `module.`, torch.compile's `_orig_mod.`)."""
    out: dict[str, TensorFacts] = {}
    for t in facts.tensors:
        if t.role != "weights":
            continue
        name = t.name
        for prefix in _CONTAINERS:
            if name.startswith(prefix) and prefix[:-1] in facts.top_keys:
                name = name[len(prefix):]
                break
        stripped = True
        while stripped:
            stripped = False
            for w in _WRAPPERS:
                if name.startswith(w):
                    name, stripped = name[len(w):], True
        out.setdefault(name, t)
    return out


def _aligned(mine: dict[str, TensorFacts], theirs: dict[str, TensorFacts]
             ) -> tuple[dict[str, TensorFacts], dict[str, TensorFacts]]:
    """When no name is shared, drop a first component every name of one side has
    (Lightning's `model.` attribute prefix against a plain state dict)."""
    if not mine or not theirs or set(mine) & set(theirs):
        return mine, theirs

    def strip(side: dict[str, TensorFacts]) -> dict[str, TensorFacts]:
        heads = {n.split(".", 1)[0] for n in side}
        if len(heads) == 1 and all("." in n for n in side):
            return {n.split(".", 1)[1]: t for n, t in side.items()}
        return side

    for a, b in ((strip(mine), theirs), (mine, strip(theirs)), (strip(mine), strip(theirs))):
        if set(a) & set(b):
            return a, b
    return mine, theirs


def _reference(facts: CheckpointFacts) -> CheckpointFacts:
    ref = facts.reference
    if ref is None:
        raise Skip("no --reference checkpoint given")
    if not ref.tensors:
        raise Skip(f"the reference {ref.path} has no readable tensors")
    return ref


SHAPE_DOC = """A tensor's shape differs from the reference checkpoint's.

What it flags: with `--reference CKPT`, every model weight present in both whose shape
differs (names compared without `state_dict.` / `module.` / `_orig_mod.` prefixes),
located at the tensor here, with the reference tensor as related location.
Why it matters: `load_state_dict` refuses the checkpoint (size mismatch), or a resized
vocabulary / head went unnoticed and the model is not the one you meant to resume.
What it does not mean: anything about tensors only one side has (TP-CKPT-KEY-DRIFT).
"""


def check_shape(facts: CheckpointFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    ref = _reference(facts)
    mine, theirs = _aligned(canonical_weights(facts), canonical_weights(ref))
    if facts.format == "sharded-index" or ref.format == "sharded-index":
        raise Skip("a sharded index lists tensor names only, not shapes")
    for name, t in mine.items():
        r = theirs.get(name)
        if r is None or r.shape == t.shape:
            continue
        yield Hit(
            message=f"tensor {t.name} is {_shape(t)} here but {_shape(r)} in the reference {ref.path}",
            evidence={"tensor": t.name, "shape": _shape(t), "reference_shape": _shape(r),
                      "reference": ref.path, "entry": t.entry},
            location=_at(facts, t.byte_offset),
            related=(Related(location=Location(path=ref.path, byte_offset=r.byte_offset),
                             message=f"{r.name} {_shape(r)} in the reference"),),
        )


SHAPE_RULE = _rule(id="TP-CKPT-SHAPE-DRIFT", name="shape-drift", level=Level.FAIL, doc=SHAPE_DOC,
                   check=check_shape)

KEYS_DOC = """The checkpoint's weight names differ from the reference checkpoint's.

What it flags: with `--reference CKPT`, model weights the reference has and this file
lacks, or the other way round (names compared without container and wrapper prefixes);
one finding with the counts and the first few names.
Why it matters: a strict `load_state_dict` fails; a non-strict one silently leaves the
missing layers at their initial values.
What it does not mean: a problem when the difference is intended (a new head, a removed
adapter) — compare against the right reference.
"""


def check_keys(facts: CheckpointFacts, limits: NoLimits, ctx: Context) -> Iterator[Hit]:
    ref = _reference(facts)
    mine, theirs = _aligned(canonical_weights(facts), canonical_weights(ref))
    if not mine:
        raise Skip("no model weights in this file")
    missing = [n for n in theirs if n not in mine]
    extra = [n for n in mine if n not in theirs]
    if not missing and not extra:
        return
    parts = []
    if missing:
        parts.append(f"{len(missing)} reference tensor(s) missing here (first: {', '.join(missing[:3])})")
    if extra:
        parts.append(f"{len(extra)} tensor(s) not in the reference (first: {', '.join(extra[:3])})")
    yield Hit(
        message="; ".join(parts) + f"; reference {ref.path}",
        evidence={"missing": len(missing), "extra": len(extra), "first_missing": missing[0] if missing else "",
                  "first_extra": extra[0] if extra else "", "reference": ref.path},
        location=_at(facts, 0),
    )


KEYS_RULE = _rule(id="TP-CKPT-KEY-DRIFT", name="key-drift", level=Level.WARN, doc=KEYS_DOC,
                  check=check_keys)


RULES: tuple[Rule[CheckpointFacts, Context], ...] = (
    EMPTY_RULE, TRUNCATED_RULE, CORRUPT_RULE, LEGACY_RULE, UNREADABLE_RULE, MISSING_RULE,
    BAD_HEADER_RULE, UNSAFE_RULE, NONFINITE_RULE, DEAD_RULE, MIXED_RULE, NO_OPT_RULE, SHAPE_RULE,
    KEYS_RULE,
)
