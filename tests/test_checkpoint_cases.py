"""The checkpoint rules (rules/checkpoint.py) on facts built here, field by field: every
finding asserted whole (message, evidence, location, related places), every skip by its
exact reason, each limit met exactly and passed by one, several tensors, problems and
globals in one input (a rule that stopped at the first would miss the second), and each
place a fact may come from (a byte offset or a line of an index, a ZIP entry or a bare
pickle, a container key, a wrapper prefix).

The facts are what readers/checkpoint.read_checkpoint returns; building them directly
proves the rules and nothing in front of them (tests/test_checkpoint.py and
tests/rule_cases/checkpoint.py read real files). A few cases at the end write a tiny
safetensors file and read it, to show the facts built by hand are the reader's. Nothing
here is ever unpickled.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from trainproof_lsp.core.model import Hit, Location, Related, Span
from trainproof_lsp.readers.checkpoint import CheckpointFacts, Problem, TensorFacts, UnsafeGlobal, read_checkpoint
from trainproof_lsp.rules.base import Context, NoLimits, Skip
from trainproof_lsp.rules.checkpoint import (BAD_HEADER_RULE, CORRUPT_RULE, DEAD_RULE, EMPTY_RULE, KEYS_RULE,
                                             LEGACY_RULE, MISSING_RULE, MIXED_RULE, NO_OPT_RULE, NONFINITE_RULE,
                                             SHAPE_RULE, TRUNCATED_RULE, UNREADABLE_RULE, UNSAFE_RULE, DeadLimits,
                                             canonical_weights)

PATH = "/run/ckpt/model.pt"
REF = "/run/base/model.pt"


def ckpt(**kw: Any) -> CheckpointFacts:
    kw.setdefault("path", PATH)
    kw.setdefault("format", "torch-zip")
    kw.setdefault("size", 4096)
    return CheckpointFacts(**kw)


def tensor(name: str, shape: tuple[int, ...] = (4, 4), *, dtype: str = "float32", role: str = "weights",
           offset: int | None = 64, entry: str = "archive/data/0", **kw: Any) -> TensorFacts:
    numel = 1
    for d in shape:
        numel *= d
    kw.setdefault("scanned", True)
    return TensorFacts(name=name, dtype=dtype, shape=shape, numel=kw.pop("numel", numel), entry=entry,
                       byte_offset=offset, role=role, **kw)


def run(rule: Any, facts: CheckpointFacts, limits: Any = None) -> list[Hit]:
    return list(rule.check(facts, limits if limits is not None else rule.limits(), Context()))


def skip(rule: Any, facts: CheckpointFacts, limits: Any = None) -> str:
    with pytest.raises(Skip) as e:
        run(rule, facts, limits)
    return str(e.value)


def at(offset: int | None, path: str = PATH) -> Location:
    return Location(path=path, byte_offset=offset)


# --- the container: each problem kind is its own rule -----------------------------------------

KINDS = {"empty": EMPTY_RULE, "truncated": TRUNCATED_RULE, "corrupt": CORRUPT_RULE, "legacy": LEGACY_RULE,
         "unreadable": UNREADABLE_RULE, "missing": MISSING_RULE, "bad-header": BAD_HEADER_RULE}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_problem_kind_is_reported_by_its_rule_only_every_one_of_them(kind):
    # Two problems of each kind: one at a byte offset, one at a span (an index's line),
    # whose byte offset is then not used; each rule takes its own kind, both of them.
    problems = []
    for k in sorted(KINDS):
        problems.append(Problem(kind=k, message=f"{k} first", byte_offset=10, evidence={"kind": k, "n": 1}))
        problems.append(Problem(kind=k, message=f"{k} second", byte_offset=99, span=Span(3, 4, 3, 20),
                                evidence={"entry": f"{k}/e"}))
    got = run(KINDS[kind], ckpt(problems=tuple(problems)))
    assert got == [Hit(message=f"{kind} first", evidence={"kind": kind, "n": 1}, location=at(10)),
                   Hit(message=f"{kind} second", evidence={"entry": f"{kind}/e"},
                       location=Location(path=PATH, span=Span(3, 4, 3, 20)))]


def test_a_problem_without_a_place_sits_at_the_file():
    got = run(EMPTY_RULE, ckpt(problems=(Problem(kind="empty", message="0 bytes"),)))
    assert got == [Hit(message="0 bytes", evidence={}, location=Location(path=PATH))]


def test_no_problem_is_quiet():
    assert all(run(rule, ckpt()) == [] for rule in KINDS.values())


def test_the_container_rules_levels_and_security():
    assert [(r.id, r.level.name, r.security, r.origin) for r in KINDS.values()] == [
        ("TP-ENV-CKPT-EMPTY", "FAIL", False, "trainproof"), ("TP-ENV-CKPT-TRUNCATED", "FAIL", False, "trainproof"),
        ("TP-ENV-CKPT-CORRUPT", "FAIL", False, "trainproof"),
        ("TP-ENV-CKPT-LEGACY", "NOT_CHECKED", False, "trainproof"),
        ("TP-ENV-CKPT-UNREADABLE", "NOT_CHECKED", True, "trainproof"),
        ("TP-ENV-CKPT-MISSING", "FAIL", False, "trainproof"), ("TP-CKPT-BAD-HEADER", "FAIL", True, "new")]


# --- TP-CKPT-UNSAFE-PICKLE ----------------------------------------------------------------------

def test_unsafe_no_pickle_walked_is_not_judged_with_the_reason():
    assert skip(UNSAFE_RULE, ckpt(format="torch-legacy")) == "no pickle in this file"
    assert skip(UNSAFE_RULE, ckpt(format="safetensors")) == "no pickle in this file (safetensors holds no code)"


def test_unsafe_a_file_no_loader_unpickles_is_quiet_not_skipped():
    assert run(UNSAFE_RULE, ckpt(format="npy", no_pickle="an .npy array without objects")) == []


def test_unsafe_every_global_whole_in_an_entry_and_in_a_bare_pickle():
    g1 = UnsafeGlobal(module="os", name="system", danger="runs a shell command", byte_offset=120,
                      entry="archive/data.pkl")
    g2 = UnsafeGlobal(module="mylib.models", name="Net", danger="", byte_offset=0, entry="")
    got = run(UNSAFE_RULE, ckpt(pickles_walked=2, unsafe=(g1, g2)))
    assert got == [
        Hit(message="pickle archive/data.pkl would import and call os.system (runs a shell command) when loaded with "
                    "torch.load(weights_only=False) or pickle; it is outside the tensor allow-list. Not executed here",
            evidence={"global": "os.system", "module": "os", "name": "system", "entry": "archive/data.pkl",
                      "danger": "runs a shell command"},
            location=at(120)),
        Hit(message="the pickle would import and call mylib.models.Net when loaded with torch.load(weights_only=False) "
                    "or pickle; it is outside the tensor allow-list. Not executed here",
            evidence={"global": "mylib.models.Net", "module": "mylib.models", "name": "Net", "entry": "",
                      "danger": ""},
            location=at(0)),
    ]


def test_unsafe_globals_past_the_listed_ones_are_counted_in_one_more_finding():
    g = UnsafeGlobal(module="builtins", name="exec", danger="runs code", byte_offset=7, entry="")
    got = run(UNSAFE_RULE, ckpt(pickles_walked=1, unsafe=(g, g), unsafe_unlisted=5))
    assert got[2:] == [Hit(message="5 more global(s) outside the tensor allow-list are named after the 2 listed; a "
                                   "pickle naming this many is built to be loaded, not read. Not executed here",
                           evidence={"unlisted": 5, "listed": 2}, location=at(0))]
    assert len(got) == 3


def test_unsafe_a_walked_clean_pickle_is_quiet():
    assert run(UNSAFE_RULE, ckpt(pickles_walked=1)) == []


# --- TP-CKPT-NONFINITE --------------------------------------------------------------------------

def test_nonfinite_unscanned_bytes_are_not_judged_with_the_note_or_the_default():
    assert skip(NONFINITE_RULE, ckpt(scan_note="over the 2 GiB scan cap")) == "over the 2 GiB scan cap"
    assert skip(NONFINITE_RULE, ckpt()) == "tensor bytes were not read"


def test_nonfinite_every_bad_weight_and_optimizer_tensor_whole_at_its_element():
    # A weight with NaN (its first at element 3 of float32: 64 + 3 * 4), optimizer state
    # with Inf only (bfloat16: 2 bytes an element), a strided view (at its start), a tensor
    # without an offset; callback state with Inf, an unscanned tensor and a clean one are not findings.
    w = tensor("fc.weight", (2, 5), nan=2, first_bad=3)
    clean = tensor("fc.bias", (5,), offset=200)
    cb = tensor("callbacks.kth_value", (1,), role="other", inf=1, first_bad=0, offset=300)
    unscanned = tensor("big.weight", (8, 8), scanned=False, nan=1, first_bad=0, offset=400)
    opt = tensor("optimizer.state.0.exp_avg", (2, 5), dtype="bfloat16", role="optimizer", inf=1, first_bad=4,
                 offset=500, entry="archive/data/3")
    view = tensor("fc.weight_t", (5, 2), stride=(1, 5), nan=1, inf=1, first_bad=2, offset=600)
    nowhere = tensor("head.weight", (3,), nan=3, first_bad=0, offset=None, entry="")
    odd = tensor("q.weight", (4,), dtype="unknown:QStorage", nan=1, first_bad=2, offset=700)
    got = run(NONFINITE_RULE, ckpt(scanned=True, tensors=(w, clean, cb, unscanned, opt, view, nowhere, odd)))
    assert got == [
        Hit(message="tensor fc.weight (float32 [2, 5]) holds 2 NaN and 0 Inf of 10 values (20.0%); first at element 3",
            evidence={"tensor": "fc.weight", "entry": "archive/data/0", "dtype": "float32", "nan": 2, "inf": 0,
                      "numel": 10, "first_index": 3, "role": "weights"},
            location=at(76)),
        Hit(message="tensor optimizer.state.0.exp_avg (bfloat16 [2, 5]) holds 0 NaN and 1 Inf of 10 values (10.0%); "
                    "first at element 4",
            evidence={"tensor": "optimizer.state.0.exp_avg", "entry": "archive/data/3", "dtype": "bfloat16", "nan": 0,
                      "inf": 1, "numel": 10, "first_index": 4, "role": "optimizer"},
            location=at(508)),
        Hit(message="tensor fc.weight_t (float32 [5, 2]) holds 1 NaN and 1 Inf of 10 values (20.0%); first at element 2",
            evidence={"tensor": "fc.weight_t", "entry": "archive/data/0", "dtype": "float32", "nan": 1, "inf": 1,
                      "numel": 10, "first_index": 2, "role": "weights"},
            location=at(600)),
        Hit(message="tensor head.weight (float32 [3]) holds 3 NaN and 0 Inf of 3 values (100.0%); first at element 0",
            evidence={"tensor": "head.weight", "entry": "", "dtype": "float32", "nan": 3, "inf": 0, "numel": 3,
                      "first_index": 0, "role": "weights"},
            location=at(None)),
        Hit(message="tensor q.weight (unknown:QStorage [4]) holds 1 NaN and 0 Inf of 4 values (25.0%); first at "
                    "element 2",
            evidence={"tensor": "q.weight", "entry": "archive/data/0", "dtype": "unknown:QStorage", "nan": 1,
                      "inf": 0, "numel": 4, "first_index": 2, "role": "weights"},
            location=at(702)),
    ]


def test_nonfinite_without_a_first_index_points_at_the_tensor():
    t = tensor("fc.weight", (4,), nan=1, first_bad=None, offset=80)
    assert [h.location for h in run(NONFINITE_RULE, ckpt(scanned=True, tensors=(t,)))] == [at(80)]


def test_nonfinite_clean_tensors_are_quiet():
    assert run(NONFINITE_RULE, ckpt(scanned=True, tensors=(tensor("a"), tensor("b", role="optimizer")))) == []


# --- TP-CKPT-DEAD-TENSOR ------------------------------------------------------------------------

def test_dead_unscanned_bytes_are_not_judged():
    assert skip(DEAD_RULE, ckpt(scan_note="numpy missing")) == "numpy missing"


def test_dead_without_scanned_weights_is_not_judged():
    reason = "no model weights were read in this file"
    assert skip(DEAD_RULE, ckpt(scanned=True)) == reason
    only = (tensor("exp_avg", role="optimizer", all_zero=True), tensor("w", scanned=False, all_zero=True))
    assert skip(DEAD_RULE, ckpt(scanned=True, tensors=only)) == reason


def test_dead_every_all_zero_matrix_whole_and_each_limit_on_both_sides():
    # 16 values in 2 dimensions: the limits met exactly (two of them: every one is found);
    # 15 values, or 16 in 1 dimension, are not judged dead; a nonzero matrix is not.
    a = tensor("l1.weight", (4, 4), all_zero=True, offset=100)
    small = tensor("l2.weight", (3, 5), all_zero=True, offset=200)
    flat = tensor("l3.bias", (16,), all_zero=True, offset=300)
    live = tensor("l4.weight", (8, 8), offset=400)
    b = tensor("l5.weight", (2, 2, 4), dtype="float16", all_zero=True, offset=500, entry="archive/data/7")
    got = run(DEAD_RULE, ckpt(scanned=True, tensors=(a, small, flat, live, b)))
    assert got == [
        Hit(message="tensor l1.weight (float32 [4, 4]) is all zeros: 16 values (judged from 16 values and 2 dimensions)",
            evidence={"tensor": "l1.weight", "entry": "archive/data/0", "dtype": "float32", "numel": 16, "ndim": 2},
            location=at(100)),
        Hit(message="tensor l5.weight (float16 [2, 2, 4]) is all zeros: 16 values (judged from 16 values and 2 "
                    "dimensions)",
            evidence={"tensor": "l5.weight", "entry": "archive/data/7", "dtype": "float16", "numel": 16, "ndim": 3},
            location=at(500)),
    ]
    lim = DeadLimits(min_ndim=1, min_elements=15)
    got = run(DEAD_RULE, ckpt(scanned=True, tensors=(a, small, flat, live, b)), lim)
    assert [h.evidence["tensor"] for h in got] == ["l1.weight", "l2.weight", "l3.bias", "l5.weight"]
    assert got[1].message == ("tensor l2.weight (float32 [3, 5]) is all zeros: 15 values (judged from 15 values and 1 "
                              "dimensions)")
    assert run(DEAD_RULE, ckpt(scanned=True, tensors=(a, b)), DeadLimits(min_ndim=3, min_elements=17)) == []
    assert [h.evidence["tensor"] for h in run(DEAD_RULE, ckpt(scanned=True, tensors=(a, b)),
                                                DeadLimits(min_ndim=3))] == ["l5.weight"]


def test_dead_quiet_on_unscanned_and_non_weight_tensors_beside_a_read_one():
    ts = (tensor("w", all_zero=True, scanned=False), tensor("m", role="optimizer", all_zero=True), tensor("ok"))
    assert run(DEAD_RULE, ckpt(scanned=True, tensors=ts)) == []


# --- TP-CKPT-MIXED-DTYPE ------------------------------------------------------------------------

def test_mixed_without_floating_point_weights_is_not_judged():
    reason = "no floating-point model weights in this file"
    assert skip(MIXED_RULE, ckpt()) == reason
    ts = (tensor("ids", dtype="int64"), tensor("exp_avg", dtype="float16", role="optimizer"))
    assert skip(MIXED_RULE, ckpt(tensors=ts)) == reason


def test_mixed_one_dtype_is_quiet_even_beside_other_roles_and_integers():
    ts = (tensor("a"), tensor("b"), tensor("pos", dtype="int64"), tensor("m", dtype="bfloat16", role="optimizer"))
    assert run(MIXED_RULE, ckpt(tensors=ts)) == []


def test_mixed_counts_every_float_dtype_and_names_the_first_tensor_of_the_rarest():
    ts = (tensor("a", dtype="bfloat16", offset=10), tensor("b", dtype="float32", offset=20),
          tensor("c", dtype="bfloat16", offset=30), tensor("d", dtype="float16", offset=40),
          tensor("e", dtype="float64", offset=50), tensor("f", dtype="float16", offset=60),
          tensor("g", dtype="bfloat16", offset=70), tensor("h", dtype="float64", offset=80),
          tensor("ids", dtype="int64", offset=90))
    got = run(MIXED_RULE, ckpt(tensors=ts))
    assert got == [Hit(message="weights mix dtypes: 3 bfloat16, 2 float16, 2 float64, 1 float32 tensors; first float32 "
                               "tensor is b",
                       evidence={"count_bfloat16": 3, "count_float32": 1, "count_float16": 2, "count_float64": 2,
                                 "rare_dtype": "float32", "first_rare_tensor": "b"},
                       location=at(20))]


def test_mixed_a_tie_for_the_rarest_is_the_first_dtype_by_name_and_its_first_tensor():
    ts = (tensor("x", dtype="float32", offset=10), tensor("y", dtype="float16", offset=20),
          tensor("z", dtype="float16", offset=30), tensor("w", dtype="float32", offset=40))
    got = run(MIXED_RULE, ckpt(tensors=ts))
    assert got == [Hit(message="weights mix dtypes: 2 float16, 2 float32 tensors; first float16 tensor is y",
                       evidence={"count_float32": 2, "count_float16": 2, "rare_dtype": "float16",
                                 "first_rare_tensor": "y"},
                       location=at(20))]


# --- TP-CKPT-NO-OPTIMIZER -----------------------------------------------------------------------

def test_no_optimizer_an_hf_folder_without_optimizer_pt():
    got = run(NO_OPT_RULE, ckpt(hf_folder_without_optimizer="checkpoint-500", has_optimizer=False,
                                progress_keys=("epoch",)))
    assert got == [Hit(message="checkpoint-500 holds weights and trainer_state.json but no optimizer state "
                               "(optimizer.pt): resume_from_checkpoint would restart the optimizer",
                       evidence={"folder": "checkpoint-500"}, location=at(None))]


def test_no_optimizer_not_a_resume_checkpoint_is_not_judged():
    assert skip(NO_OPT_RULE, ckpt()) == "not a resume checkpoint (no epoch/global_step beside model weights)"


def test_no_optimizer_a_resume_dict_without_it_lists_its_first_twelve_keys():
    keys = tuple(f"k{i}" for i in range(14))
    got = run(NO_OPT_RULE, ckpt(has_optimizer=False, progress_keys=("epoch", "global_step"), top_keys=keys))
    assert got == [Hit(message="resume checkpoint (epoch, global_step beside the weights) has no optimizer state; "
                               "keys: k0, k1, k2, k3, k4, k5, k6, k7, k8, k9, k10, k11",
                       evidence={"progress_keys": "epoch, global_step", "top_keys": ", ".join(keys)},
                       location=at(0))]


def test_no_optimizer_a_resume_dict_with_it_is_quiet():
    assert run(NO_OPT_RULE, ckpt(has_optimizer=True, progress_keys=("epoch",), top_keys=("epoch",))) == []


# --- canonical names ----------------------------------------------------------------------------

def test_canonical_weights_strip_a_container_key_that_is_a_top_key_once_and_every_wrapper():
    ts = (tensor("state_dict.module._orig_mod.module.fc.weight"), tensor("model.enc.weight"),
          tensor("state_dict.model.x"), tensor("optimizer.state.0"), tensor("module.fc.weight", offset=999),
          tensor("ema_state_dict.layer.w"))
    got = canonical_weights(ckpt(tensors=ts, top_keys=("state_dict", "optimizer")))
    assert {k: v.name for k, v in got.items()} == {
        "fc.weight": "state_dict.module._orig_mod.module.fc.weight",  # the first of two with one name
        "model.enc.weight": "model.enc.weight",  # `model` is not a top key here: kept
        "model.x": "state_dict.model.x",  # one container stripped, not two
        "optimizer.state.0": "optimizer.state.0",
        "ema_state_dict.layer.w": "ema_state_dict.layer.w",
    }
    got = canonical_weights(ckpt(tensors=(tensor("model.enc.weight"), tensor("ema_state_dict.layer.w"),
                                          tensor("exp_avg", role="optimizer")),
                                 top_keys=("model", "ema_state_dict")))
    assert list(got) == ["enc.weight", "layer.w"]


def test_canonical_weights_each_container_key():
    for key in ("state_dict", "model_state_dict", "model", "module", "ema_state_dict"):
        got = canonical_weights(ckpt(tensors=(tensor(f"{key}.fc.weight"),), top_keys=(key,)))
        assert list(got) == ["fc.weight"], key


# --- TP-CKPT-SHAPE-DRIFT ------------------------------------------------------------------------

def ref(*tensors: TensorFacts, **kw: Any) -> CheckpointFacts:
    kw.setdefault("format", "torch-zip")
    return CheckpointFacts(path=REF, size=100, tensors=tensors, **kw)


def test_shape_and_keys_without_a_usable_reference_are_not_judged():
    for rule in (SHAPE_RULE, KEYS_RULE):
        assert skip(rule, ckpt(tensors=(tensor("a"),))) == "no --reference checkpoint given"
        assert skip(rule, ckpt(tensors=(tensor("a"),), reference=ref())) == (
            f"the reference {REF} has no readable tensors")


def test_shape_of_a_sharded_index_on_either_side_is_not_judged():
    reason = "a sharded index lists tensor names only, not shapes"
    assert skip(SHAPE_RULE, ckpt(format="sharded-index", tensors=(tensor("a"),),
                                 reference=ref(tensor("a", (2, 2))))) == reason
    assert skip(SHAPE_RULE, ckpt(tensors=(tensor("a"),), reference=ref(tensor("a", (2, 2)),
                                                                        format="sharded-index"))) == reason


def test_shape_every_differing_tensor_whole_with_the_reference_related():
    mine = (tensor("module.emb.weight", (32, 8), offset=10, entry="archive/data/1"), tensor("fc.weight", (4, 4)),
            tensor("head.weight", (3, 8), offset=30), tensor("only.here", (1,)))
    theirs = (tensor("head.weight", (2, 8), offset=300), tensor("emb.weight", (30, 8), offset=100),
              tensor("fc.weight", (4, 4)), tensor("only.there", (1,)))
    got = run(SHAPE_RULE, ckpt(tensors=mine, reference=ref(*theirs)))
    assert got == [
        Hit(message=f"tensor module.emb.weight is [32, 8] here but [30, 8] in the reference {REF}",
            evidence={"tensor": "module.emb.weight", "shape": "[32, 8]", "reference_shape": "[30, 8]",
                      "reference": REF, "entry": "archive/data/1"},
            location=at(10),
            related=(Related(location=at(100, REF), message="emb.weight [30, 8] in the reference"),)),
        Hit(message=f"tensor head.weight is [3, 8] here but [2, 8] in the reference {REF}",
            evidence={"tensor": "head.weight", "shape": "[3, 8]", "reference_shape": "[2, 8]", "reference": REF,
                      "entry": "archive/data/0"},
            location=at(30),
            related=(Related(location=at(300, REF), message="head.weight [2, 8] in the reference"),)),
    ]


def test_shape_across_a_lightning_model_prefix_on_either_side():
    # No name shared: a first component every name of one side has is dropped.
    plain = (tensor("enc.weight", (4, 4)), tensor("dec.weight", (4, 2)))
    prefixed = (tensor("model.enc.weight", (4, 4)), tensor("model.dec.weight", (4, 3)))
    got = run(SHAPE_RULE, ckpt(tensors=prefixed, reference=ref(*plain)))
    assert [h.evidence["tensor"] for h in got] == ["model.dec.weight"]
    got = run(SHAPE_RULE, ckpt(tensors=plain, reference=ref(*prefixed)))
    assert [h.evidence["tensor"] for h in got] == ["dec.weight"]
    # Both sides prefixed differently: both dropped.
    other = (tensor("net.enc.weight", (4, 4)), tensor("net.dec.weight", (4, 2)))
    got = run(SHAPE_RULE, ckpt(tensors=prefixed, reference=ref(*other)))
    assert [h.evidence["tensor"] for h in got] == ["model.dec.weight"]


def test_shape_prefixes_are_not_dropped_when_a_name_is_shared_or_the_heads_differ():
    # A shared name: nothing dropped, so `model.dec.weight` meets nothing.
    mine = (tensor("enc.weight", (4, 4)), tensor("model.dec.weight", (4, 3)))
    theirs = (tensor("enc.weight", (4, 4)), tensor("dec.weight", (4, 2)))
    assert run(SHAPE_RULE, ckpt(tensors=mine, reference=ref(*theirs))) == []
    # Two heads on one side, or a name without a dot: not a prefix of every name.
    two = (tensor("a.dec.weight", (4, 3)), tensor("b.enc.weight", (4, 4)))
    assert run(SHAPE_RULE, ckpt(tensors=two, reference=ref(tensor("dec.weight", (4, 2))))) == []
    nodot = (tensor("model.dec.weight", (4, 3)), tensor("model", (1,)))
    assert run(SHAPE_RULE, ckpt(tensors=nodot, reference=ref(tensor("dec.weight", (4, 2))))) == []
    got = run(KEYS_RULE, ckpt(tensors=nodot, reference=ref(tensor("dec.weight", (4, 2)))))
    assert got[0].evidence == {"missing": 1, "extra": 2, "first_missing": "dec.weight",
                               "first_extra": "model.dec.weight", "reference": REF}


def test_shape_same_shapes_are_quiet():
    assert run(SHAPE_RULE, ckpt(tensors=(tensor("a"), tensor("b", (2,))),
                                reference=ref(tensor("b", (2,)), tensor("a")))) == []


# --- TP-CKPT-KEY-DRIFT --------------------------------------------------------------------------

def test_keys_without_weights_here_are_not_judged():
    assert skip(KEYS_RULE, ckpt(tensors=(tensor("m", role="optimizer"),), reference=ref(tensor("a")))) == (
        "no model weights in this file")


def test_keys_missing_and_extra_names_first_three_of_each_whole():
    mine = tuple(tensor(n) for n in ("shared", "x1", "x2", "x3", "x4"))
    theirs = tuple(tensor(n) for n in ("m1", "shared", "m2", "m3", "m4", "m5"))
    got = run(KEYS_RULE, ckpt(tensors=mine, reference=ref(*theirs)))
    assert got == [Hit(message="5 reference tensor(s) missing here (first: m1, m2, m3); 4 tensor(s) not in the "
                               f"reference (first: x1, x2, x3); reference {REF}",
                       evidence={"missing": 5, "extra": 4, "first_missing": "m1", "first_extra": "x1",
                                 "reference": REF},
                       location=at(0))]


def test_keys_only_missing_or_only_extra():
    got = run(KEYS_RULE, ckpt(tensors=(tensor("a"),), reference=ref(tensor("a"), tensor("b"))))
    assert got == [Hit(message=f"1 reference tensor(s) missing here (first: b); reference {REF}",
                       evidence={"missing": 1, "extra": 0, "first_missing": "b", "first_extra": "", "reference": REF},
                       location=at(0))]
    got = run(KEYS_RULE, ckpt(tensors=(tensor("a"), tensor("c")), reference=ref(tensor("a"))))
    assert got == [Hit(message=f"1 tensor(s) not in the reference (first: c); reference {REF}",
                       evidence={"missing": 0, "extra": 1, "first_missing": "", "first_extra": "c", "reference": REF},
                       location=at(0))]


def test_keys_the_same_names_after_prefixes_are_quiet():
    mine = (tensor("state_dict.module.a"), tensor("state_dict.b"))
    assert run(KEYS_RULE, ckpt(tensors=mine, top_keys=("state_dict",), reference=ref(tensor("b"), tensor("a")))) == []


# --- the facts built by hand are the reader's -----------------------------------------------------

def safetensors_bytes(tensors: dict[str, tuple[str, tuple[int, ...], bytes]]) -> bytes:
    header: dict[str, Any] = {}
    data = b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    return struct.pack("<Q", len(head)) + head + data


def test_a_safetensors_file_written_here_is_read_into_the_facts_the_rules_judge(tmp_path: Path):
    nan = struct.pack("<f", float("nan"))
    raw = {"fc.weight": ("F32", (2, 2), struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)[:8] + nan + struct.pack("<f", 1.0)),
           "dead.weight": ("F32", (4, 4), b"\0" * 64),
           "half.weight": ("F16", (2,), b"\0\x3c\0\x3c")}
    path = tmp_path / "model.safetensors"
    path.write_bytes(safetensors_bytes(raw))
    facts = read_checkpoint(path)
    header = 8 + int.from_bytes(path.read_bytes()[:8], "little")
    nonfinite = run(NONFINITE_RULE, facts)
    assert [(h.evidence["tensor"], h.evidence["nan"], h.evidence["first_index"], h.location) for h in nonfinite] == [
        ("fc.weight", 1, 2, Location(path=str(path), byte_offset=header + 8))]
    assert [h.evidence["tensor"] for h in run(DEAD_RULE, facts)] == ["dead.weight"]
    assert [h.message for h in run(MIXED_RULE, facts)] == [
        "weights mix dtypes: 2 float32, 1 float16 tensors; first float16 tensor is half.weight"]
    assert skip(UNSAFE_RULE, facts) == "no pickle in this file (safetensors holds no code)"
    assert skip(NO_OPT_RULE, facts) == "not a resume checkpoint (no epoch/global_step beside model weights)"
    assert run(BAD_HEADER_RULE, facts) == []


def test_a_cut_safetensors_file_written_here_is_truncated(tmp_path: Path):
    path = tmp_path / "model.safetensors"
    path.write_bytes(safetensors_bytes({"w": ("F32", (4, 4), b"\0" * 64)})[:-10])
    got = run(TRUNCATED_RULE, read_checkpoint(path))
    assert len(got) == 1 and got[0].location.path == str(path)


def test_canonical_weights_pass_over_tensors_of_other_roles_before_the_weights():
    ts = (tensor("optimizer.state.0.exp_avg", role="optimizer"), tensor("rng", role="rng"), tensor("fc.weight"))
    assert list(canonical_weights(ckpt(tensors=ts))) == ["fc.weight"]


def test_keys_a_shared_name_keeps_every_prefix_even_when_stripping_would_share_more():
    # `model.a` is on both sides: names are compared as they are, though dropping `model.`
    # here would also make `a` meet.
    mine = (tensor("model.a"), tensor("model.b"))
    got = run(KEYS_RULE, ckpt(tensors=mine, reference=ref(tensor("model.a"), tensor("a"))))
    assert got[0].evidence == {"missing": 1, "extra": 1, "first_missing": "a", "first_extra": "model.b",
                               "reference": REF}
