"""An output folder judged as one bundle (readers/bundle.py, rules/bundle.py, judge/bundle.py).

Every folder is made by the real writers (tests/bundle_folders.py): transformers
save_pretrained of a tiny Llama, PEFT adapters saved from it, tokenizers built with the
`tokenizers` library. One test per rule firing, and the folder beside it that keeps it quiet.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from bundle_folders import build
from conftest import line_with, start_line
from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import Level, Report, Verdict
from trainproof_lsp.judge.bundle import judge_bundle
from trainproof_lsp.judge.engine import doctor
from trainproof_lsp.judge.preflight import judge_tokenizer
from trainproof_lsp.readers.bundle import encodes_rendered_text, is_bundle, read_bundle

BUNDLE_IDS = ["TP-BUNDLE-STOP-TOKEN", "TP-BUNDLE-SPECIAL-ID-MISMATCH", "TP-BUNDLE-VOCAB-BEYOND-EMBEDDINGS",
              "TP-BUNDLE-NEW-TOKENS-NOT-SAVED", "TP-BUNDLE-ADAPTER-TARGETS-NONE", "TP-BUNDLE-ADAPTER-TARGETS-PARTIAL",
              "TP-BUNDLE-LORA-B-ZERO", "TP-BUNDLE-LORA-RANK-MISMATCH", "TP-BUNDLE-INDEX-MISMATCH",
              "TP-BUNDLE-ZERO-ELEMENT-TENSORS", "TP-BUNDLE-NO-LM-HEAD"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build(tmp_path_factory.mktemp("bundles"))


def judged(folders: dict[str, Path], name: str) -> Report:
    return judge_bundle(folders[name], Config())


def where(f) -> tuple[str, int | None]:
    loc = f.location
    return Path(loc.path).name, loc.span.start_line if loc.span is not None else loc.byte_offset


def facts(report: Report) -> list[tuple[str, str, str, int | None]]:
    return [(f.id, f.level.value, *where(f)) for f in report.findings]


def ran(report: Report) -> set[str]:
    return {c.group for c in report.checks if c.ran}


def first_line_with(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines()) if needle in line)


def tensor_offset(path: Path, name: str) -> int:
    """Where a tensor's data starts in a safetensors file (8-byte length, header, data)."""
    data = path.read_bytes()
    (n,) = struct.unpack_from("<Q", data, 0)
    return 8 + n + json.loads(data[8:8 + n])[name]["data_offsets"][0]


def test_every_bundle_rule_is_registered_in_its_family():
    from trainproof_lsp.rules import rules_of
    from trainproof_lsp.rules.bundle import BUNDLE

    assert [r.id for r in rules_of(BUNDLE)] == BUNDLE_IDS


def test_a_healthy_model_folder_passes_with_its_cross_file_checks_named(folders):
    r = judged(folders, "healthy")
    assert r.verdict is Verdict.PASS and r.findings == ()
    assert r.artefact.kind == "bundle"
    assert [Path(s).name for s in r.artefact.sources] == [
        "chat_template.jinja", "config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
        "tokenizer_config.json"]
    assert ran(r) == {"TP-BUNDLE-STOP-TOKEN", "TP-BUNDLE-SPECIAL-ID-MISMATCH", "TP-BUNDLE-VOCAB-BEYOND-EMBEDDINGS",
                      "TP-BUNDLE-ZERO-ELEMENT-TENSORS", "TP-BUNDLE-NO-LM-HEAD"}
    skipped = {c.group: c.reason for c in r.checks if not c.ran}
    assert skipped["TP-BUNDLE-LORA-B-ZERO"] == "no adapter_model.safetensors in the folder"
    assert skipped["TP-BUNDLE-INDEX-MISMATCH"] == "no sharded index (*.safetensors.index.json) in the folder"


# --- stop tokens and special ids ------------------------------------------------------------------

def test_turn_end_token_missing_from_generation_stop_ids_fails_on_both_files(folders):
    r = judged(folders, "stop_missing")
    assert facts(r) == [("TP-BUNDLE-STOP-TOKEN", "FAIL", "chat_template.jinja", 0)]
    (f,) = r.findings
    assert f.evidence == {"marker": "<|eot|>", "marker_id": 63, "stop_ids": "61", "stop_file": "generation_config.json"}
    (rel,) = f.related
    gen = folders["stop_missing"] / "generation_config.json"
    assert rel.location.path == str(gen) and start_line(rel) == line_with(gen, '"eos_token_id"')


def test_turn_end_token_listed_beside_eos_is_quiet(folders):
    r = judged(folders, "healthy")
    assert "TP-BUNDLE-STOP-TOKEN" in ran(r) and r.findings == ()
    assert json.loads((folders["healthy"] / "generation_config.json").read_text())["eos_token_id"] == [61, 63]


def test_pad_id_differing_between_tokenizer_and_generation_config_warns(folders):
    r = judged(folders, "pad_mismatch")
    folder = folders["pad_mismatch"]
    assert facts(r) == [("TP-BUNDLE-SPECIAL-ID-MISMATCH", "WARN", "tokenizer_config.json",
                         line_with(folder / "tokenizer_config.json", '"pad_token"'))]
    (f,) = r.findings
    assert f.evidence == {"token": "pad", "tokenizer_id": 62, "model_ids": "0", "model_file": "generation_config.json"}
    assert start_line(f.related[0]) == line_with(folder / "generation_config.json", '"pad_token_id"')


# --- vocabulary and embeddings ---------------------------------------------------------------------

def test_added_tokens_without_resized_embeddings_fail(folders):
    folder = folders["added_no_resize"]
    r = judged(folders, "added_no_resize")
    assert facts(r) == [("TP-BUNDLE-VOCAB-BEYOND-EMBEDDINGS", "FAIL", "tokenizer.json",
                         line_with(folder / "tokenizer.json", '"added_tokens"'))]
    (f,) = r.findings
    assert f.evidence == {"tokenizer_size": 66, "embedding_rows": 64, "beyond": 2}
    (rel,) = f.related
    assert Path(rel.location.path).name == "model.safetensors"
    assert rel.location.byte_offset == tensor_offset(folder / "model.safetensors", "model.embed_tokens.weight")


def test_added_tokens_with_resized_embeddings_are_quiet(folders):
    r = judged(folders, "added_resized")
    assert r.findings == () and "TP-BUNDLE-VOCAB-BEYOND-EMBEDDINGS" in ran(r)


def test_lora_with_new_tokens_that_saves_no_embedding_warns(folders):
    folder = folders["adapter_new_tokens"]
    r = judged(folders, "adapter_new_tokens")
    assert facts(r) == [("TP-BUNDLE-NEW-TOKENS-NOT-SAVED", "WARN", "tokenizer.json",
                         line_with(folder / "tokenizer.json", '"added_tokens"'))]
    (f,) = r.findings
    assert f.evidence == {"tokenizer_size": 66, "base_rows": 64, "new_tokens": 2}
    cfg, base = f.related
    assert start_line(cfg) == line_with(folder / "adapter_config.json", '"modules_to_save"')
    assert base.location.path == str(folders["base"] / "model.safetensors")
    assert str(folders["base"] / "model.safetensors") in r.artefact.sources


def test_lora_with_new_tokens_saving_the_embeddings_is_quiet(folders):
    r = judged(folders, "adapter_new_tokens_saved")
    assert r.findings == ()
    assert {"TP-BUNDLE-NEW-TOKENS-NOT-SAVED", "TP-BUNDLE-VOCAB-BEYOND-EMBEDDINGS"} <= ran(r)


# --- adapters -------------------------------------------------------------------------------------------

def test_target_modules_of_another_architecture_match_nothing(folders):
    folder = folders["adapter_other_model"]
    r = judged(folders, "adapter_other_model")
    assert facts(r) == [("TP-BUNDLE-ADAPTER-TARGETS-NONE", "FAIL", "adapter_config.json",
                         line_with(folder / "adapter_config.json", '"target_modules"'))]
    (f,) = r.findings
    # 2 layers x 7 projections + the embedding + lm_head
    assert f.evidence == {"modules": 16, "matched": 0, "target_modules": "['c_attn']"}
    assert f.related[0].location.path == str(folders["base"] / "model.safetensors")


def test_a_trained_adapter_on_every_layer_is_quiet(folders):
    r = judged(folders, "adapter_trained")
    assert r.findings == ()
    assert {"TP-BUNDLE-ADAPTER-TARGETS-NONE", "TP-BUNDLE-ADAPTER-TARGETS-PARTIAL", "TP-BUNDLE-LORA-B-ZERO",
            "TP-BUNDLE-LORA-RANK-MISMATCH"} <= ran(r)


def test_target_regex_reaching_one_of_two_layers_warns_with_the_counts(folders):
    folder = folders["adapter_one_layer"]
    r = judged(folders, "adapter_one_layer")
    assert facts(r) == [("TP-BUNDLE-ADAPTER-TARGETS-PARTIAL", "WARN", "adapter_config.json",
                         line_with(folder / "adapter_config.json", '"target_modules"'))]
    assert r.findings[0].evidence == {"layers": 2, "layers_matched": 1, "modules_matched": 1}


def test_an_untouched_adapter_whose_lora_b_is_all_zero_fails(folders):
    folder = folders["adapter_untrained"]
    weights = folder / "adapter_model.safetensors"
    first = "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"
    r = judged(folders, "adapter_untrained")
    assert facts(r) == [("TP-BUNDLE-LORA-B-ZERO", "FAIL", "adapter_model.safetensors", tensor_offset(weights, first))]
    (f,) = r.findings
    assert f.evidence == {"lora_b_tensors": 4, "zero": 4}
    assert start_line(f.related[0]) == line_with(folder / "adapter_config.json", '"r"')


def test_a_config_whose_r_the_shapes_contradict_fails(folders):
    folder = folders["adapter_rank_edited"]
    r = judged(folders, "adapter_rank_edited")
    assert facts(r) == [("TP-BUNDLE-LORA-RANK-MISMATCH", "FAIL", "adapter_config.json",
                         line_with(folder / "adapter_config.json", '"r"'))]
    assert r.findings[0].evidence == {"tensors": 8, "wrong": 8, "rank": 4, "r": 8}
    assert Path(r.findings[0].related[0].location.path).name == "adapter_model.safetensors"


# --- saved weights ----------------------------------------------------------------------------------------

def test_index_placing_a_tensor_in_a_shard_that_lacks_it_fails(folders):
    folder = folders["sharded_rewritten"]
    dropped = str(folders["dropped_tensor"])
    r = judged(folders, "sharded_rewritten")
    index = folder / "model.safetensors.index.json"
    assert facts(r) == [("TP-BUNDLE-INDEX-MISMATCH", "FAIL", index.name, line_with(index, f'"{dropped}"'))]
    (f,) = r.findings
    assert f.evidence == {"misplaced": 1, "first_tensor": dropped, "shard": "model-00001-of-00003.safetensors"}
    assert Path(f.related[0].location.path).name == "model-00001-of-00003.safetensors"


def test_a_sharded_save_whose_index_and_shards_agree_is_quiet(folders):
    r = judged(folders, "sharded")
    assert r.findings == () and "TP-BUNDLE-INDEX-MISMATCH" in ran(r)


def test_doctor_names_the_missing_shard_at_its_index_line_and_the_bundle_compares_the_rest(folders):
    folder = folders["sharded_missing"]
    missing = str(folders["missing_shard_name"])
    out = doctor([folder], Config())
    index = folder / "model.safetensors.index.json"
    by_path = {(r.artefact.kind, Path(r.artefact.path).name): r for r in out.reports}
    idx = by_path[("checkpoint", index.name)]
    assert [(f.id, f.level, start_line(f)) for f in idx.findings if f.id == "TP-ENV-CKPT-MISSING"] == [
        ("TP-ENV-CKPT-MISSING", Level.FAIL, first_line_with(index, f'"{missing}"'))]
    b = by_path[("bundle", folder.name)]
    assert b.findings == () and "TP-BUNDLE-INDEX-MISMATCH" in ran(b)


def test_a_zero3_save_without_gathered_parameters_fails(folders):
    folder = folders["zero3_empty"]
    r = judged(folders, "zero3_empty")
    weights = folder / "model.safetensors"
    assert facts(r) == [("TP-BUNDLE-ZERO-ELEMENT-TENSORS", "FAIL", "model.safetensors",
                         tensor_offset(weights, "lm_head.weight"))]
    (f,) = r.findings
    assert f.evidence == {"tensors": 21, "empty": 21, "first_tensor": "lm_head.weight"}
    assert start_line(f.related[0]) == line_with(folder / "config.json", '"model_type"')


def test_a_merged_model_saved_without_its_head_fails_when_untied(folders):
    folder = folders["no_head"]
    r = judged(folders, "no_head")
    assert facts(r) == [("TP-BUNDLE-NO-LM-HEAD", "FAIL", "config.json",
                         line_with(folder / "config.json", '"tie_word_embeddings"'))]
    (f,) = r.findings
    assert f.evidence == {"tensors": 20, "tie_word_embeddings": False}
    assert f.related[0].location.byte_offset == tensor_offset(folder / "model.safetensors", "model.embed_tokens.weight")


def test_a_full_save_with_its_head_is_quiet(folders):
    r = judged(folders, "healthy")
    assert "TP-BUNDLE-NO-LM-HEAD" in ran(r) and "TP-BUNDLE-ZERO-ELEMENT-TENSORS" in ran(r) and r.findings == ()


# --- three families as they ship: PASS, with INFO only ----------------------------------------------------

FAMILIES = {
    "llama3_shape": [("TP-TOK-DOUBLE-BOS-IF-REENCODED", "INFO", "chat_template.jinja", 0),
                     ("TP-TOK-MAX-LENGTH-SENTINEL", "INFO", "tokenizer_config.json", None)],
    "gemma3_shape": [("TP-TOK-DOUBLE-BOS-IF-REENCODED", "INFO", "chat_template.jinja", 0),
                     ("TP-TOK-MAX-LENGTH-SENTINEL", "INFO", "tokenizer_config.json", None)],
    "deepseek_shape": [("TP-TOK-DOUBLE-BOS-IF-REENCODED", "INFO", "chat_template.jinja", 0)],
}


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_tokenizer_folders_shaped_as_three_families_ship_them_pass(folders, name):
    folder = folders[name]
    out = doctor([folder], Config())
    reports = {r.artefact.kind: r for r in out.reports}
    tok, bundle = reports["tokenizer"], reports["bundle"]
    assert tok.verdict is Verdict.PASS and bundle.verdict is Verdict.PASS and bundle.findings == ()
    expected = [(i, lvl, file, line if line is not None else line_with(folder / file, '"model_max_length"'))
                for i, lvl, file, line in FAMILIES[name]]
    assert facts(tok) == expected
    assert {"TP-BUNDLE-STOP-TOKEN", "TP-BUNDLE-SPECIAL-ID-MISMATCH"} <= ran(bundle)


def test_the_family_end_of_turn_tokens_are_found_by_rendering(folders):
    ends = {n: read_bundle(folders[n]).template_end for n in FAMILIES}
    assert {n: e.marker for n, e in ends.items() if e is not None} == {
        "llama3_shape": "<|eot_id|>", "gemma3_shape": "<end_of_turn>", "deepseek_shape": "<｜end▁of▁sentence｜>"}


# --- TP-TOK-DOUBLE-BOS and TP-TOK-MAX-LENGTH-UNSET: the run beside the tokenizer -----------------------

RENDER_THEN_ENCODE = """\
from transformers import AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained(".")


def encode(example):
    text = tokenizer.apply_chat_template(example["messages"], tokenize=False)
    return tokenizer(text, truncation=True{extra})
"""


def _copy(folders: dict[str, Path], name: str, tmp_path: Path) -> Path:
    dst = tmp_path / name
    shutil.copytree(folders[name], dst)
    return dst


def test_double_bos_warns_when_a_script_encodes_rendered_text_with_special_tokens(folders, tmp_path):
    folder = _copy(folders, "gemma3_shape", tmp_path)
    (folder / "train.py").write_text(RENDER_THEN_ENCODE.format(extra=""))
    r = judge_tokenizer(folder, Config())
    (f,) = [f for f in r.findings if f.id.startswith("TP-TOK-DOUBLE-BOS")]
    assert (f.id, f.level, *where(f)) == ("TP-TOK-DOUBLE-BOS", Level.WARN, "chat_template.jinja", 0)
    assert f.evidence == {"bos": "<bos>", "script_line": 8}
    adder, script = f.related
    assert start_line(adder) == line_with(folder / "tokenizer_config.json", '"add_bos_token"')
    assert script.location.path == str(folder / "train.py") and start_line(script) == 7
    assert r.verdict is Verdict.WARN


def test_double_bos_stays_info_when_the_script_encodes_without_special_tokens(folders, tmp_path):
    folder = _copy(folders, "gemma3_shape", tmp_path)
    (folder / "train.py").write_text(RENDER_THEN_ENCODE.format(extra=", add_special_tokens=False"))
    r = judge_tokenizer(folder, Config())
    assert [f.id for f in r.findings if f.level is not Level.INFO] == []
    assert "TP-TOK-DOUBLE-BOS-IF-REENCODED" in [f.id for f in r.findings]


def test_the_script_is_read_statically_and_never_run(tmp_path):
    script = tmp_path / "train.py"
    source = "raise SystemExit('ran')\n" + RENDER_THEN_ENCODE.format(extra="")
    got = encodes_rendered_text(script, source)
    assert got is not None and got.line == 8 and "tokenizer(...)" in got.value


def _training_args(path: Path, max_length: int | None) -> None:
    import torch
    from trl import SFTConfig

    args = SFTConfig(output_dir=str(path.parent / "out"), max_length=max_length, report_to=[], use_cpu=True,
                     bf16=False)
    torch.save(args, path)  # how Trainer writes training_args.bin


def test_sentinel_max_length_warns_when_the_run_sets_none_either(folders, tmp_path):
    folder = _copy(folders, "gemma3_shape", tmp_path)
    _training_args(folder / "training_args.bin", None)
    r = judge_tokenizer(folder, Config())
    line = line_with(folder / "tokenizer_config.json", '"model_max_length"')
    assert [(f.id, f.level.value, *where(f)) for f in r.findings if f.id.startswith("TP-TOK-MAX-LENGTH")] == [
        ("TP-TOK-MAX-LENGTH-UNSET", "WARN", "tokenizer_config.json", line)]
    (f,) = [f for f in r.findings if f.id == "TP-TOK-MAX-LENGTH-UNSET"]
    assert f.evidence == {"model_max_length": 1e30, "fields": 1}
    assert f.related[0].location.path == str(folder / "training_args.bin")
    assert "SFTConfig sets max_length=None" in f.message


def test_sentinel_max_length_is_info_when_the_run_sets_its_own(folders, tmp_path):
    folder = _copy(folders, "gemma3_shape", tmp_path)
    _training_args(folder / "training_args.bin", 512)
    r = judge_tokenizer(folder, Config())
    (f,) = [f for f in r.findings if f.id.startswith("TP-TOK-MAX-LENGTH")]
    assert (f.id, f.level) == ("TP-TOK-MAX-LENGTH-SENTINEL", Level.INFO)
    assert "SFTConfig in training_args.bin sets max_length=512" in f.message
    assert "TP-TOK-MAX-LENGTH-UNSET" in ran(r)


# --- doctor and bad input ----------------------------------------------------------------------------------

def test_doctor_gives_one_bundle_report_a_folder_beside_the_per_file_reports(folders):
    folder = folders["stop_missing"]
    out = doctor([folder], Config())
    kinds = sorted((r.artefact.kind, Path(r.artefact.path).name) for r in out.reports)
    assert kinds == [("bundle", "stop_missing"), ("checkpoint", "model.safetensors"), ("tokenizer", "stop_missing")]
    (b,) = [r for r in out.reports if r.artefact.kind == "bundle"]
    assert b.verdict is Verdict.FAIL and [f.id for f in b.findings] == ["TP-BUNDLE-STOP-TOKEN"]


def run_cli(*argv: str) -> tuple[int, str]:
    import contextlib
    import io

    from trainproof_lsp.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(list(argv))
    return code, buf.getvalue()


HEALTHY_FILES = ["chat_template.jinja", "config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                 "tokenizer_config.json"]


def test_doctor_json_lists_the_bundle_files_and_the_checks_across_them(folders):
    code, out = run_cli("doctor", str(folders["healthy"]), "--json")
    assert code == 0
    (b,) = [r for r in json.loads(out)["reports"] if r["artefact"]["kind"] == "bundle"]
    assert [Path(s).name for s in b["artefact"]["sources"]] == HEALTHY_FILES
    assert "TP-BUNDLE-STOP-TOKEN" in json.dumps(b)


def test_doctor_text_names_the_bundle_files_and_what_was_checked_across_them(folders):
    folder = folders["adapter_untrained"]
    code, out = run_cli("doctor", str(folders["healthy"]), str(folder))
    assert code == 1
    lines = out.splitlines()
    healthy = lines.index(f"== {folders['healthy']} (bundle: {', '.join(HEALTHY_FILES)}): PASS — 0 finding(s); "
                          "5 check(s) ran, 6 skipped")
    assert lines[healthy + 1] == ("   across files: TP-BUNDLE-STOP-TOKEN, TP-BUNDLE-SPECIAL-ID-MISMATCH, "
                                  "TP-BUNDLE-VOCAB-BEYOND-EMBEDDINGS, TP-BUNDLE-ZERO-ELEMENT-TENSORS, "
                                  "TP-BUNDLE-NO-LM-HEAD; 6 skipped (-v says why)")
    # an adapter's bundle names the local base model's files it was checked against
    assert (f"== {folder} (bundle: adapter_config.json, adapter_model.safetensors, ../base/config.json, "
            "../base/model.safetensors): FAIL — 1 finding(s); 5 check(s) ran, 6 skipped") in lines


def test_a_broken_config_is_not_checked_never_a_crash_or_a_fail(folders, tmp_path):
    folder = _copy(folders, "healthy", tmp_path)
    (folder / "generation_config.json").write_text('{"eos_token_id": [61, 63')
    r = judge_bundle(folder, Config())
    assert r.verdict is Verdict.NOT_CHECKED
    (f,) = r.findings
    assert f.id == "TP-NOT-CHECKED" and "generation_config.json:1: invalid JSON" in f.message
    # config.json alone says eos 61: judging the stop token from it would be a false FAIL
    skipped = {c.group: c.reason for c in r.checks if not c.ran}
    assert skipped["TP-BUNDLE-STOP-TOKEN"] == "generation_config.json could not be read (see the NOT-CHECKED finding)"


def test_a_lone_file_is_no_bundle(tmp_path):
    (tmp_path / "config.json").write_text('{"vocab_size": 8}')
    assert not is_bundle(tmp_path)
    assert judge_bundle(tmp_path / "missing", Config()).verdict is Verdict.NOT_CHECKED


def test_a_zero_adapter_after_logged_steps_names_the_run_that_stepped(folders, tmp_path):
    from transformers import TrainerState

    folder = _copy(folders, "adapter_untrained", tmp_path)
    TrainerState(global_step=30, max_steps=30).save_to_json(str(folder / "trainer_state.json"))
    r = judge_bundle(folder, Config())
    (f,) = r.findings
    assert (f.id, f.evidence) == ("TP-BUNDLE-LORA-B-ZERO", {"lora_b_tensors": 4, "zero": 4, "global_step": 30})
    assert "after 30 logged optimizer step(s)" in f.message
    state = f.related[1]
    assert state.location.path == str(folder / "trainer_state.json")
    assert start_line(state) == line_with(folder / "trainer_state.json", '"global_step"')


def test_the_lora_b_read_stops_at_its_cap_and_says_so(folders, monkeypatch):
    import trainproof_lsp.readers.bundle as reader

    monkeypatch.setattr(reader, "MAX_LORA_B_BYTES", 100)  # one [16, 4] float32 lora_B is 256 bytes
    r = judged(folders, "adapter_untrained")
    assert r.findings == ()
    skipped = {c.group: c.reason for c in r.checks if not c.ran}
    assert skipped["TP-BUNDLE-LORA-B-ZERO"] == ("lora_B read 0 of 4 tensors, all zero so far: stopped after 0 "
                                                "tensor(s): the 0 MiB read cap")


def test_a_fifo_in_a_bundle_files_place_is_never_opened(folders, tmp_path):
    import os

    folder = _copy(folders, "healthy", tmp_path)
    (folder / "generation_config.json").unlink()
    os.mkfifo(folder / "generation_config.json")  # an open() would block forever
    b = read_bundle(folder)
    assert "generation_config.json" not in b.files and b.unread == ("generation_config.json",)
    r = judge_bundle(folder, Config())
    # Said, and the stop token is not judged from config.json's eos alone (61: a false FAIL).
    assert r.verdict is Verdict.NOT_CHECKED
    assert [f.message for f in r.findings] == [f"bundle: {folder / 'generation_config.json'}: not a regular file; "
                                               "not read"]
    skipped = {c.group: c.reason for c in r.checks if not c.ran}
    assert skipped["TP-BUNDLE-STOP-TOKEN"] == "generation_config.json could not be read (see the NOT-CHECKED finding)"


def test_a_template_rendered_once_is_not_an_answer_once_jinja2_is_gone(folders, monkeypatch):
    import sys

    folder = folders["stop_missing"]
    assert read_bundle(folder).template_end.marker == "<|eot|>"  # rendered (and remembered)
    monkeypatch.setitem(sys.modules, "jinja2", None)
    b = read_bundle(folder)
    assert b.template_end is None and b.template_note.startswith("the chat template could not be rendered: jinja2")
    r = judge_bundle(folder, Config())
    assert r.findings == () and {c.group: c.reason for c in r.checks if not c.ran}["TP-BUNDLE-STOP-TOKEN"] == \
        b.template_note


def test_targets_reaching_every_layer_that_holds_the_module_are_not_partial():
    """A hybrid model (attention in one layer of four, as Jamba interleaves them): a regex
    that reaches that layer's q_proj reaches every q_proj there is."""
    from trainproof_lsp.readers.bundle import Adapter, BundleFacts, Tensor, Weights
    from trainproof_lsp.readers.tokenizer import Sourced
    from trainproof_lsp.rules.bundle import BundleContext, check_targets_partial
    from trainproof_lsp.rules.base import NoLimits

    names = [f"model.layers.{i}.mamba.in_proj.weight" for i in range(4)] + ["model.layers.3.self_attn.q_proj.weight"]
    base = Weights(files=("/b/model.safetensors",), tensors=tuple(
        Tensor(name=n, dtype="float32", shape=(8, 8), path="/b/model.safetensors") for n in names))

    def bundle(target: str) -> BundleFacts:
        ad = Adapter(config_path="/a/adapter_config.json",
                     settings={"target_modules": Sourced(value=target, path="/a/adapter_config.json", line=3)})
        return BundleFacts(folder="/a", files=("adapter_config.json",), adapter=ad, base=base)

    assert list(check_targets_partial(bundle(r".*self_attn\.q_proj"), NoLimits(), BundleContext())) == []
    (hit,) = check_targets_partial(bundle(r"model\.layers\.[01]\.mamba\.in_proj"), NoLimits(), BundleContext())
    assert hit.evidence == {"layers": 4, "layers_matched": 2, "modules_matched": 2}
    assert "2 of the 4 layers of the base weights that hold in_proj" in hit.message


LFS_POINTER = b"version https://git-lfs.github.com/spec/v1\noid sha256:" + b"ab" * 32 + b"\nsize 31088\n"


def test_a_weights_pointer_is_left_to_its_own_report_and_the_checks_needing_it_stand_down(folders, tmp_path):
    folder = _copy(folders, "added_no_resize", tmp_path)
    (folder / "model.safetensors").write_bytes(LFS_POINTER)  # checked out without `git lfs pull`
    out = doctor([folder], Config())
    (b,) = [r for r in out.reports if r.artefact.kind == "bundle"]
    assert "model.safetensors" not in [Path(s).name for s in b.artefact.sources]
    pointer_lines = [f for r in out.reports for f in r.findings if "Git LFS pointer" in f.message]
    assert [(Path(f.location.path).name, f.id) for f in pointer_lines] == [("model.safetensors", "TP-NOT-CHECKED")]
    # without the weights, 66 ids are judged against config.json's vocab_size 64: the tokenizer
    # report's TP-TOK-ADDED-TOKENS-BEYOND-VOCAB names them, the bundle stays quiet
    assert b.findings == () and "TP-BUNDLE-VOCAB-BEYOND-EMBEDDINGS" in ran(b)


def test_a_settings_pointer_is_said_by_the_bundle(folders, tmp_path):
    folder = _copy(folders, "healthy", tmp_path)
    (folder / "generation_config.json").write_bytes(LFS_POINTER)
    r = judge_bundle(folder, Config())
    assert [f.message for f in r.findings] == [
        f"bundle: {folder / 'generation_config.json'}: Git LFS pointer to a 31,088-byte file, not downloaded: "
        "run `git lfs pull`"]
    assert {c.group: c.reason for c in r.checks if not c.ran}["TP-BUNDLE-STOP-TOKEN"] == \
        "generation_config.json could not be read (see the NOT-CHECKED finding)"


def test_a_file_given_alone_is_judged_alone(folders):
    out = doctor([folders["stop_missing"] / "model.safetensors"], Config())
    assert [r.artefact.kind for r in out.reports] == ["checkpoint"]
