"""The token map against the real masking code: TRL 1.16's SFTTrainer / DPOTrainer
preparation and collators, and transformers' DataCollatorForLanguageModeling, build the
labels of the same rows with the same tokenizer (a tiny BPE made with `tokenizers`); the
map must mark exactly the tokens whose label is not -100, row for row. No training: only
the trainers' dataset preparation and the collators run (a model of a few hundred
parameters is built because the trainers ask for one).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from token_map_tokenizer import TEMPLATE_BOS, TEMPLATE_PLAIN, make_tokenizer
from trainproof_lsp.readers import token_map as tm

pytest.importorskip("tokenizers")
trl = pytest.importorskip("trl")
transformers = pytest.importorskip("transformers")
datasets = pytest.importorskip("datasets")

CHAT = [
    [{"role": "user", "content": "what is two plus two?"}, {"role": "assistant", "content": "it is four."}],
    [{"role": "system", "content": "the sea is wide"}, {"role": "user", "content": "write a poem about the sea."},
     {"role": "assistant", "content": "the sea is wide and deep"}],
    # a long prompt: with max_length 12 the assistant turn is cut away entirely
    [{"role": "user", "content": "the cat sat on the mat and the dog ran to the park " * 2},
     {"role": "assistant", "content": "four"}],
    [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hello there, how are you today?"},
     {"role": "user", "content": "i am fine"}, {"role": "assistant", "content": "thank you"}],
]
PROMPT_COMPLETION = [
    {"prompt": "what is two plus two?", "completion": " it is four."},
    {"prompt": "write a poem about the sea.", "completion": " the sea is wide and deep and the sky is blue"},
    {"prompt": "the cat sat on the mat and the dog ran to the park", "completion": " four"},
]
TEXT = [{"text": "the cat sat on the mat"}, {"text": "hello there, how are you today?"},
        {"text": "the sea is wide and deep and the sky is blue because of scattering"}]


@pytest.fixture(scope="module")
def tokdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tokenizer(tmp_path_factory.mktemp("tok") / "tok")


def _hf(folder: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder))


def _model(vocab: int) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    return LlamaForCausalLM(LlamaConfig(vocab_size=vocab, hidden_size=8, intermediate_size=8, num_hidden_layers=1,
                                        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256))


def trl_sft(folder: Path, rows: list[dict[str, Any]], tmp: Path, **config: Any) -> list[tuple[list[int], list[int]] | None]:
    """(input_ids, labels) of each row as TRL's SFTTrainer prepares it; None for a row it drops."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    tok = _hf(folder)
    args = SFTConfig(output_dir=str(tmp / "out"), report_to=[], bf16=False, use_cpu=True, **config)
    trainer = SFTTrainer(model=_model(len(tok)), args=args, processing_class=tok,
                         train_dataset=Dataset.from_list([{**r, "row": i} for i, r in enumerate(rows)]))
    out: list[tuple[list[int], list[int]] | None] = [None] * len(rows)
    for ex in trainer.train_dataset:
        out[ex["row"]] = (list(ex["input_ids"]), list(ex["labels"]))
    return out


def trained_positions(labels: list[int]) -> list[int]:
    return [i for i, v in enumerate(labels) if v != -100]


def map_positions(side: tm.SideMap) -> list[int]:
    return [i for i, v in enumerate(side.mask) if v]


def kept_ids(side: tm.SideMap) -> list[int]:
    return list(side.ids[side.kept[0]:side.kept[1]])


def _write(tmp: Path, rows: list[dict[str, Any]]) -> Path:
    path = tmp / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _file_map(tmp: Path, folder: Path, rows: list[dict[str, Any]], masking: tm.Masking) -> tm.TokenMap:
    path = _write(tmp, rows)
    return tm.map_tokens(path, tm.load_run_tokenizer(folder), masking, lines=len(rows), records=len(rows))


def _agree(folder: Path, rows: list[dict[str, Any]], masking: tm.Masking,
           trl_rows: list[tuple[list[int], list[int]] | None], tmp: Path) -> tm.TokenMap:
    """Row for row: the map keeps the trainer's ids and marks exactly its trained labels;
    a row the trainer drops (every label masked) has no trained token in the map."""
    tok = tm.load_run_tokenizer(folder)
    whole = _file_map(tmp, folder, rows, masking)
    for i, (row, got) in enumerate(zip(rows, trl_rows)):
        m = tm.map_row(row, tok, masking)
        assert m is not None and len(m.sides) == 1, i
        side = m.sides[0]
        if got is None:
            assert side.after == 0 and whole.trained[i] == 0, i
            continue
        ids, labels = got
        assert kept_ids(side) == ids, i
        assert map_positions(side) == trained_positions(labels), i
        assert whole.trained[i] == len(trained_positions(labels)) == side.after, i
        assert whole.tokens[i] == len(side.ids), i
    return whole


def test_assistant_only_loss_marks_the_generation_blocks_as_trl_does(tokdir: Path, tmp_path: Path) -> None:
    rows = [{"messages": c} for c in CHAT]
    masking = tm.Masking(max_len=24, assistant_only=True)
    got = trl_sft(tokdir, rows, tmp_path, max_length=24, assistant_only_loss=True)
    assert got[2] is None  # the prompt fills the context: TRL drops the row
    whole = _agree(tokdir, rows, masking, got, tmp_path)
    assert [whole.trained[i] for i in range(4)] == [len(trained_positions(g[1])) if g else 0 for g in got]
    tok = _hf(tokdir)
    answer = len(tok("four", add_special_tokens=False)["input_ids"]) + 1  # "four" and the EOS
    assert whole.trained[2] == 0 and whole.before[2] == answer  # cut away by truncation
    assert all(whole.flags[i] & tm.EOS_TRAINED for i in (0, 1, 3))


def test_every_token_trained_with_keep_end_truncation(tokdir: Path, tmp_path: Path) -> None:
    rows = [{"messages": c} for c in CHAT]
    masking = tm.Masking(max_len=10, truncation=tm.KEEP_END)
    got = trl_sft(tokdir, rows, tmp_path, max_length=10, truncation_mode="keep_end")
    whole = _agree(tokdir, rows, masking, got, tmp_path)
    assert all(whole.trained[i] == 10 for i in range(4))  # every row is longer than 10 and trains its last 10


def test_completion_only_loss_on_prompt_completion_rows(tokdir: Path, tmp_path: Path) -> None:
    masking = tm.Masking(max_len=12)  # completion_only_loss None: TRL's default for these rows
    got = trl_sft(tokdir, PROMPT_COMPLETION, tmp_path, max_length=12)
    assert got[2] is None  # the prompt alone is over 12 tokens
    whole = _agree(tokdir, PROMPT_COMPLETION, masking, got, tmp_path)
    assert whole.loss == tm.COMPLETION
    assert 0 < whole.trained[1] < whole.before[1]  # the completion is cut short


def test_conversational_prompt_completion_with_assistant_masks(tokdir: Path, tmp_path: Path) -> None:
    rows = [{"prompt": c[:-1], "completion": c[-1:]} for c in CHAT]
    masking = tm.Masking(max_len=30, assistant_only=True)
    got = trl_sft(tokdir, rows, tmp_path, max_length=30, assistant_only_loss=True)
    _agree(tokdir, rows, masking, got, tmp_path)


def test_all_tokens_of_text_rows_with_eos_appended(tokdir: Path, tmp_path: Path) -> None:
    masking = tm.Masking(max_len=64)
    got = trl_sft(tokdir, TEXT, tmp_path, max_length=64)
    whole = _agree(tokdir, TEXT, masking, got, tmp_path)
    assert all(whole.flags[i] & tm.EOS_TRAINED for i in range(3))


def test_pad_equal_to_eos_under_a_collator_that_masks_pad_by_id(tmp_path: Path) -> None:
    """transformers' DataCollatorForLanguageModeling sets labels equal to the pad id to
    -100: with pad == eos every EOS is masked and the model never learns to stop."""
    from transformers import DataCollatorForLanguageModeling

    folder = make_tokenizer(tmp_path / "tok", pad=None)
    hf = _hf(folder)
    hf.pad_token = hf.eos_token  # what scripts do when the tokenizer has none
    masking = tm.Masking(max_len=64, pad_masked=True)
    tok = tm.load_run_tokenizer(folder)
    whole = _file_map(tmp_path, folder, TEXT, masking)
    assert whole.pad_is_eos
    collate = DataCollatorForLanguageModeling(tokenizer=hf, mlm=False)
    for i, row in enumerate(TEXT):
        ids = hf(text=row["text"] + hf.eos_token)["input_ids"]
        labels = collate([{"input_ids": ids}])["labels"][0].tolist()
        side = tm.map_row(row, tok, masking).sides[0]  # type: ignore[union-attr]
        assert kept_ids(side) == ids
        assert map_positions(side) == trained_positions(labels)
        assert labels[-1] == -100 and ids[-1] == hf.eos_token_id
        assert not whole.flags[i] & tm.EOS_TRAINED
    # TRL's own collator pads labels with -100 instead: the EOS is trained there.
    plain = tm.Masking(max_len=64)
    got = trl_sft(folder, TEXT, tmp_path, max_length=64)
    whole = _agree(folder, TEXT, plain, got, tmp_path)
    assert all(whole.flags[i] & tm.EOS_TRAINED for i in range(3))


def test_assistant_only_without_generation_blocks_trains_nothing(tmp_path: Path) -> None:
    folder = make_tokenizer(tmp_path / "tok", template=TEMPLATE_PLAIN)
    rows = [{"messages": c} for c in CHAT]
    with pytest.raises((RuntimeError, ValueError), match="generation"):  # TRL refuses to start
        trl_sft(folder, rows, tmp_path, max_length=64, assistant_only_loss=True)
    whole = _file_map(tmp_path, folder, rows, tm.Masking(max_len=64, assistant_only=True))
    assert list(whole.trained) == [0, 0, 0, 0]
    assert not whole.generation_blocks


def test_double_bos_from_text_that_carries_its_own_bos(tokdir: Path, tmp_path: Path) -> None:
    rows = [{"text": "<s>the cat sat on the mat"}, {"text": "the dog ran"}]
    got = trl_sft(tokdir, rows, tmp_path, max_length=64)
    hf = _hf(tokdir)
    assert got[0] is not None and got[0][0][:2] == [hf.bos_token_id, hf.bos_token_id]
    whole = _agree(tokdir, rows, tm.Masking(max_len=64), got, tmp_path)
    assert whole.flags[0] & tm.DOUBLE_BOS and not whole.flags[1] & tm.DOUBLE_BOS


def test_template_writing_bos_is_not_doubled_by_apply_chat_template(tmp_path: Path) -> None:
    folder = make_tokenizer(tmp_path / "tok", template=TEMPLATE_BOS)
    rows = [{"messages": c} for c in CHAT[:2]]
    got = trl_sft(folder, rows, tmp_path, max_length=64)
    whole = _agree(folder, rows, tm.Masking(max_len=64), got, tmp_path)
    assert not any(whole.flags[i] & tm.DOUBLE_BOS for i in range(2))


# --- preference pairs: DPO's tokenisation and DataCollatorForPreference ----------------------


def trl_dpo(folder: Path, rows: list[dict[str, Any]], tmp: Path, max_length: int,
            truncation_mode: str = "keep_start") -> list[tuple[list[list[int]], list[list[int]]] | None]:
    """Per row: ([chosen ids, rejected ids], [chosen mask, rejected mask]) as DPO's
    DataCollatorForPreference builds them from DPOTrainer's prepared rows."""
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer
    from trl.trainer.dpo_trainer import DataCollatorForPreference

    tok = _hf(folder)
    args = DPOConfig(output_dir=str(tmp / "dpo"), report_to=[], bf16=False, use_cpu=True, max_length=max_length,
                     truncation_mode=truncation_mode)
    trainer = DPOTrainer(model=_model(len(tok)), ref_model=_model(len(tok)), args=args, processing_class=tok,
                         train_dataset=Dataset.from_list([{**r, "row": i} for i, r in enumerate(rows)]))
    collate = DataCollatorForPreference(pad_token_id=tok.pad_token_id, max_length=max_length,
                                        truncation_mode=truncation_mode)
    out: list[tuple[list[list[int]], list[list[int]]] | None] = [None] * len(rows)
    for ex in trainer.train_dataset:
        batch = collate([{k: ex[k] for k in ("prompt_ids", "chosen_ids", "rejected_ids")}])
        ids, att, mask = batch["input_ids"].tolist(), batch["attention_mask"].tolist(), batch["completion_mask"].tolist()
        keep = [[t for t, a in zip(r, at) if a] for r, at in zip(ids, att)]
        out[ex["row"]] = (keep, [m[:len(k)] for m, k in zip(mask, keep)])
    return out


PAIRS = [
    {"prompt": "what is two plus two?", "chosen": " it is four.", "rejected": " four, it is."},
    # the answers differ only after the first tokens: identical once cut to 8 tokens
    {"prompt": "write a poem", "chosen": " the sea is wide and deep", "rejected": " the sea is wide and blue"},
    {"prompt": "hello there, how are you today?", "chosen": " i am fine", "rejected": " go away"},
]


def test_dpo_pairs_against_the_preference_collator(tokdir: Path, tmp_path: Path) -> None:
    got = trl_dpo(tokdir, PAIRS, tmp_path, max_length=9)
    tok = tm.load_run_tokenizer(tokdir)
    masking = tm.Masking(max_len=9)
    whole = _file_map(tmp_path, tokdir, PAIRS, masking)
    for i, row in enumerate(PAIRS):
        m = tm.map_row(row, tok, masking)
        assert m is not None and len(m.sides) == 2
        g = got[i]
        if g is None:
            assert whole.trained[i] == 0
            continue
        for side, ids, mask in zip(m.sides, g[0], g[1]):
            assert kept_ids(side) == ids, i
            assert list(side.mask) == mask, i
        identical = g[0][0] == g[0][1]
        assert bool(whole.flags[i] & tm.PAIR_IDENTICAL) == identical, i
    assert got[1] is not None and got[1][0][0] == got[1][0][1]  # TRL trains on two identical sequences
    assert whole.flags[1] & tm.PAIR_IDENTICAL and not whole.flags[1] & tm.PAIR_IDENTICAL_BEFORE
    assert not whole.flags[0] & tm.PAIR_IDENTICAL


# --- the response template (the completion-only collator of older TRL) -------------------------


def test_response_template_found_in_context_masks_up_to_its_end(tokdir: Path, tmp_path: Path) -> None:
    """TRL 1.16 has no response-template collator any more; the map follows what
    DataCollatorForCompletionOnlyLM did: the template encoded alone (no special tokens),
    its last occurrence in the truncated ids, labels up to its end -100, pad ids -100."""
    tok = tm.load_run_tokenizer(tokdir)
    hf_tok = tok.tokenizer
    template = " answer:"
    rows = [{"text": "what is two plus two? it is four. answer: four"},  # " answer:" tokenises the same in context
            {"text": "### Answer: the sky is blue"}]  # no " answer:" here
    masking = tm.Masking(max_len=64, response_template=template)
    whole = _file_map(tmp_path, tokdir, rows, masking)
    ids = hf_tok.encode(rows[0]["text"] + "</s>").ids
    sub = hf_tok.encode(template, add_special_tokens=False).ids
    start = max(i for i in range(len(ids)) if ids[i:i + len(sub)] == sub)
    expected = [i for i in range(start + len(sub), len(ids)) if ids[i] != tok.pad_id]
    side = tm.map_row(rows[0], tok, masking).sides[0]  # type: ignore[union-attr]
    assert map_positions(side) == expected
    assert whole.trained[0] == len(expected) and not whole.flags[0] & tm.TEMPLATE_MISSING
    assert whole.trained[1] == 0 and whole.flags[1] & tm.TEMPLATE_MISSING


def test_response_template_tokenised_differently_in_context_is_not_found(tokdir: Path, tmp_path: Path) -> None:
    """"Could not find response key": the template alone starts without the space the
    text has before it, so its tokens differ from those in the row."""
    tok = tm.load_run_tokenizer(tokdir)
    rows = [{"text": "what is two plus two? it is four. answer: four"}]
    alone = tok.tokenizer.encode("answer:", add_special_tokens=False).ids
    in_row = tok.tokenizer.encode(rows[0]["text"]).ids
    assert not any(in_row[i:i + len(alone)] == alone for i in range(len(in_row)))
    whole = _file_map(tmp_path, tokdir, rows, tm.Masking(max_len=64, response_template="answer:"))
    assert whole.trained[0] == 0 and whole.flags[0] & tm.TEMPLATE_MISSING


def test_sample_maps_every_kth_row(tokdir: Path, tmp_path: Path) -> None:
    rows = TEXT * 4  # 12 rows
    path = _write(tmp_path, rows)
    whole = tm.map_tokens(path, tm.load_run_tokenizer(tokdir), tm.Masking(max_len=64), lines=12, records=12, sample=4)
    assert whole.stride == 3 and whole.rows == 4
    assert [i for i in range(12) if whole.trained[i] != tm.NOT_MAPPED] == [0, 3, 6, 9]


# --- the rules over the map, through preflight and the command line ----------------------------


def _preflight(tmp: Path, folder: Path, rows: list[dict[str, Any]], max_len: int | None = 64, **options: Any) -> Any:
    from trainproof_lsp.core.config import Config
    from trainproof_lsp.judge.preflight import preflight
    from trainproof_lsp.judge.token_map import MapOptions

    path = _write(tmp, rows)
    return preflight([path], Config(), tokenizer_dir=folder, max_len=max_len,
                     map_options=MapOptions(**options)).reports[0]


def _ids(report: Any) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for f in report.findings:
        out.setdefault(f.id, []).append(f.location.span.start_line + 1)
    return out


def test_completion_cut_to_nothing_fails_with_its_line_and_share(tokdir: Path, tmp_path: Path) -> None:
    r = _preflight(tmp_path, tokdir, PROMPT_COMPLETION, max_len=12)
    assert _ids(r) == {"TP-PRE-NO-TRAINABLE-TOKENS": [3], "TP-MAP-RESPONSE-CUT": [2], "TP-PRE-CONTEXT-OVERFLOW": [2],
                       "TP-MAP-LENGTHS": [1]}
    dead = next(f for f in r.findings if f.id == "TP-PRE-NO-TRAINABLE-TOKENS")
    assert r.verdict.value == "FAIL"
    assert dead.evidence["share"] == round(1 / 3, 6) and dead.evidence["rows_in_file"] == 1
    cut = next(f for f in r.findings if f.id == "TP-MAP-RESPONSE-CUT")
    assert cut.level.value == "WARN" and cut.evidence["rows"] == 1 and cut.evidence["share"] == round(1 / 3, 6)
    lengths = next(f for f in r.findings if f.id == "TP-MAP-LENGTHS")
    assert lengths.evidence["over_max_len"] == 2 and lengths.evidence["share_over_max_len"] == round(2 / 3, 6)
    assert "loss completion-only" in lengths.message and "max_len from --max-len" in lengths.message


def test_eos_never_trained_when_pad_is_eos_and_the_collator_masks_pad(tmp_path: Path) -> None:
    folder = make_tokenizer(tmp_path / "tok", pad=None)  # the pad falls back to the EOS, as TRL does
    r = _preflight(tmp_path, folder, TEXT, pad_masked=True)
    (eos,) = [f for f in r.findings if f.id == "TP-MAP-EOS-NEVER-TRAINED"]
    assert eos.level.value == "FAIL" and eos.evidence == {"rows_trained": 3, "pad_is_eos": True,
                                                          "pad_masked_by_id": True}
    assert "the pad token is the EOS ('</s>')" in eos.message
    quiet = _preflight(tmp_path, folder, TEXT)  # TRL's own collator pads labels with -100
    assert "TP-MAP-EOS-NEVER-TRAINED" not in _ids(quiet)


def test_the_script_says_pad_is_eos_and_masks_pad(tmp_path: Path) -> None:
    folder = make_tokenizer(tmp_path / "tok")
    script = tmp_path / "train.py"
    script.write_text("from transformers import DataCollatorForLanguageModeling\nfrom trl import SFTConfig\n"
                      "tok.pad_token = tok.eos_token\n"
                      "collator = DataCollatorForLanguageModeling(tokenizer=tok, mlm=False)\n"
                      "args = SFTConfig(output_dir='o', max_length=48, truncation_mode='keep_end')\n", encoding="utf-8")
    r = _preflight(tmp_path, folder, TEXT, max_len=None, train_config=script)
    assert "TP-MAP-EOS-NEVER-TRAINED" in _ids(r)
    info = next(f for f in r.findings if f.id == "TP-MAP-LENGTHS")
    assert info.evidence["max_len"] == 48
    assert "max_len from train.py:5 SFTConfig(max_length=48)" in info.message
    assert "truncation from train.py:5 SFTConfig(truncation_mode='keep_end')" in info.message
    assert "pad_masked from train.py:4 DataCollatorForLanguageModeling(...)" in info.message


def test_llama_factory_yaml_gives_cutoff_len_and_turn_masking(tokdir: Path, tmp_path: Path) -> None:
    from trainproof_lsp.judge.token_map import MapOptions, resolve_masking

    cfg = tmp_path / "sft.yaml"
    cfg.write_text("model_name_or_path: x\nstage: sft\ncutoff_len: 2048\ntemplate: llama3\n", encoding="utf-8")
    m = resolve_masking(MapOptions(train_config=cfg))
    assert not isinstance(m, str)
    assert (m.max_len, m.assistant_only, m.assistant_by) == (2048, True, tm.TURNS)
    ax = tmp_path / "ax.yml"
    ax.write_text("base_model: x\nsequence_len: 512\ntrain_on_inputs: true\nsample_packing: true\n", encoding="utf-8")
    m = resolve_masking(MapOptions(train_config=ax, max_len=256))
    assert not isinstance(m, str)
    assert (m.max_len, m.assistant_only, m.packing) == (256, False, True)  # the command line wins
    assert dict(m.sources)["max_len"] == "--max-len"


def test_response_template_missing_is_a_fail_per_row(tokdir: Path, tmp_path: Path) -> None:
    rows = [{"text": "what is two plus two? it is four. answer: four"}, {"text": "### Answer: the sky is blue"}]
    r = _preflight(tmp_path, tokdir, rows, response_template=" answer:")
    assert _ids(r)["TP-MAP-RESPONSE-TEMPLATE-MISSING"] == [2]
    assert "TP-PRE-NO-TRAINABLE-TOKENS" not in _ids(r)  # one fault, one finding
    (f,) = [f for f in r.findings if f.id == "TP-MAP-RESPONSE-TEMPLATE-MISSING"]
    assert f.evidence["share"] == 0.5 and f.evidence["rows_in_file"] == 1


def test_identical_pairs_after_truncation_fail(tokdir: Path, tmp_path: Path) -> None:
    r = _preflight(tmp_path, tokdir, PAIRS, max_len=9)
    assert _ids(r)["TP-MAP-PAIR-IDENTICAL"] == [2]
    (f,) = [f for f in r.findings if f.id == "TP-MAP-PAIR-IDENTICAL"]
    assert f.evidence["tokens"] == 9 and f.evidence["share"] == round(1 / 3, 6)


def test_double_bos_warns_once_for_the_file(tokdir: Path, tmp_path: Path) -> None:
    rows = [{"text": "<s>the cat sat on the mat"}, {"text": "the dog ran"}, {"text": "<s>hello there"}]
    r = _preflight(tmp_path, tokdir, rows)
    (f,) = [f for f in r.findings if f.id == "TP-MAP-DOUBLE-BOS"]
    assert f.level.value == "WARN" and f.location.span.start_line == 0
    assert f.evidence == {"rows": 2, "share": round(2 / 3, 6), "first_line": 1}


def test_assistant_only_without_generation_blocks_fails_every_row_with_the_cause(tmp_path: Path) -> None:
    folder = make_tokenizer(tmp_path / "tok", template=TEMPLATE_PLAIN)
    r = _preflight(tmp_path, folder, [{"messages": c} for c in CHAT], loss="assistant-only")
    (dead,) = [f for f in r.findings if f.id == "TP-PRE-NO-TRAINABLE-TOKENS"]  # one for the file, not one a row
    assert dead.location.span.start_line == 0 and dead.level.value == "FAIL"
    assert dead.evidence == {"line": 1, "rows": 4, "rows_in_file": 4, "share": 1.0, "max_len": 64}
    assert "no {% generation %} blocks" in dead.message and "lines 1, 2, 3, 4" in dead.message


def test_sample_is_stated_in_the_report(tokdir: Path, tmp_path: Path) -> None:
    r = _preflight(tmp_path, tokdir, TEXT * 4, sample=4)
    info = next(f for f in r.findings if f.id == "TP-MAP-LENGTHS")
    assert "a sample of 4 of 12 rows (--sample 4, every 3th row)" in info.message
    assert (info.evidence["sample"], info.evidence["stride"], info.evidence["rows"]) == (4, 3, 4)


def test_a_bad_train_config_is_not_checked_never_a_crash(tokdir: Path, tmp_path: Path, capsys: Any) -> None:
    from trainproof_lsp.cli import main

    path = _write(tmp_path, TEXT)
    code = main(["preflight", str(path), "--tokenizer", str(tokdir), "--train-config", str(tmp_path / "nope.py"),
                 "--max-len", "8", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 2 and doc["reports"][0]["verdict"] == "NOT-CHECKED"
    assert "--train-config" in doc["reports"][0]["findings"][0]["message"]


def test_cli_maps_with_the_command_line_masking(tokdir: Path, tmp_path: Path, capsys: Any) -> None:
    from trainproof_lsp.cli import main

    path = _write(tmp_path, PROMPT_COMPLETION)
    code = main(["preflight", str(path), "--tokenizer", str(tokdir), "--max-len", "12", "--loss", "all",
                 "--truncation", "left", "--json"])
    doc = json.loads(capsys.readouterr().out)
    ids = sorted(f["id"] for f in doc["reports"][0]["findings"])
    assert code == 0  # every token trained, the end kept: nothing trains on nothing
    assert ids == ["TP-MAP-LENGTHS", "TP-MAP-RESPONSE-CUT", "TP-PRE-CONTEXT-OVERFLOW", "TP-PRE-CONTEXT-OVERFLOW"]
    info = next(f for f in doc["reports"][0]["findings"] if f["id"] == "TP-MAP-LENGTHS")
    assert "loss all" in info["message"] and "(keep_end)" in info["message"]


def test_the_html_report_draws_the_length_histogram_with_the_max_length(tokdir: Path, tmp_path: Path) -> None:
    from trainproof_lsp.core.config import Config
    from trainproof_lsp.judge.preflight import preflight
    from trainproof_lsp.output.html import to_html

    path = _write(tmp_path, PROMPT_COMPLETION)
    page = to_html(preflight([path], Config(), tokenizer_dir=tokdir, max_len=12))
    assert page.count('<figure class="token-lengths">') == 1
    assert '<line class="max-len"' in page and ">max length 12</text>" in page
    assert page.count('<rect class="bar"') == 16  # rules/token_map.py HISTOGRAM_BINS


def test_span_bisection_agrees_with_transformers_single_pass() -> None:
    import random

    rng = random.Random(7)
    for _ in range(500):
        n = rng.randint(0, 30)
        cuts = sorted(rng.sample(range(1, 200), n * 2)) if n else []
        offsets = [(cuts[2 * i], cuts[2 * i + 1]) for i in range(n)]
        marks = sorted(rng.sample(range(0, 210), rng.choice((0, 2, 4, 6))))
        spans = [(marks[i], marks[i + 1]) for i in range(0, len(marks), 2)]
        assert tm._span_tokens(offsets, spans) == tm._merge(tm._span_tokens_pass(offsets, spans))


def test_an_unloadable_tokenizer_json_is_not_checked_with_its_reason(tmp_path: Path) -> None:
    folder = make_tokenizer(tmp_path / "tok")
    (folder / "tokenizer.json").write_text('{"not": "a tokenizer"}', encoding="utf-8")
    r = _preflight(tmp_path, folder, TEXT, sample=2)
    assert r.verdict.value == "NOT-CHECKED"
    (f,) = r.findings
    assert f.id == "TP-NOT-CHECKED" and "no token map: " in f.message and "`tokenizers` cannot load it" in f.message


def test_a_template_past_its_bounds_is_not_checked_never_a_hang(tmp_path: Path) -> None:
    folder = make_tokenizer(tmp_path / "tok", template="{% for i in range(10**6) %}{{ 'x' * 1000 }}{% endfor %}")
    r = _preflight(tmp_path, folder, [{"messages": c} for c in CHAT[:2]])
    assert r.verdict.value == "NOT-CHECKED"
    (f,) = [f for f in r.findings if f.id == "TP-NOT-CHECKED"]
    assert "chat template" in f.message and "\n" not in f.message
