"""Every command gives the whole verdict on what it is pointed at: doctor judges tokenizer
folders (alone or inside a run folder), env judges the whole script (foot-guns and
imports), paths mean what the user typed, and chat rows whose turns do not alternate are
judged with and without the run's chat template."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO, line_with
from trainproof_lsp.readers import chat_template as ct
from trainproof_lsp.core.config import Config
from trainproof_lsp.judge.engine import doctor
from trainproof_lsp.core.model import Level, Verdict
from trainproof_lsp.judge.preflight import judge_tokenizer, preflight

TOK = FIXTURES / "tokenizers"


def cli(*args: str | Path, cwd: Path) -> tuple[int, dict]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "trainproof_lsp", *map(str, args), "--json"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=180)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def findings_of(report) -> list[tuple[str, str, str, int]]:
    return [(f.id, f.level.value, Path(f.location.path).name, f.location.span.start_line if f.location.span else -1)
            for f in report.findings]


# --- 1. a tokenizer folder on its own -------------------------------------------------------

@pytest.mark.parametrize("folder,verdict,expected", [
    ("missing_eos", Verdict.FAIL, [("TP-PRE-MISSING-EOS-TOKEN", "FAIL", "tokenizer_config.json", 0)]),
    ("pad_equals_eos", Verdict.WARN, [("TP-PRE-PAD-EQUALS-EOS", "WARN", "tokenizer_config.json", 22)]),
    ("assistant_turn_no_eos", Verdict.FAIL, [("TP-TOK-TEMPLATE-NO-EOS", "FAIL", "tokenizer_config.json", 18)]),
    ("healthy_chatml", Verdict.PASS, []),
], ids=["eos-missing", "pad-is-eos", "assistant-turn-without-eos", "clean"])
def test_doctor_judges_a_tokenizer_folder_alone(folder, verdict, expected):
    outcome = doctor([TOK / folder], Config())
    # Beside the tokenizer's report, its folder's config.json and tokenizer checked together
    # (the bundle report, docs/bundle.md): nothing across them here.
    reports = {r.artefact.kind: r for r in outcome.reports}
    assert sorted(reports) == ["bundle", "tokenizer"] and reports["bundle"].findings == ()
    report = reports["tokenizer"]
    assert report.artefact.path == str(TOK / folder)
    assert report.verdict is verdict
    assert findings_of(report) == expected
    # Judged without a dataset: only the check that needs conversational data is skipped, with why.
    assert [(c.group, c.reason) for c in report.checks if not c.ran] == [
        ("TP-TOK-NO-CHAT-TEMPLATE", "no conversational dataset given with the tokenizer")]
    # The tokenizer files are judged, not "passed over".
    assert not [p for p in outcome.passed_over if "tokenizer" in Path(p.path).name]


def test_assistant_turn_without_eos_says_what_the_template_writes_after_the_answer():
    template = json.loads((TOK / "assistant_turn_no_eos" / "tokenizer_config.json").read_text())["chat_template"]
    (f,) = judge_tokenizer(TOK / "assistant_turn_no_eos", Config()).findings
    # markers: the eos <|im_end|> and the end-of-turn-like added token <|endoftext|>
    assert f.evidence == {"tail": "\n", "markers": 2, "rendered": True, "template_chars": len(template)}
    assert "ends the assistant's turn with '\\n'" in f.message
    # The same template ends user and system turns with <|im_end|>: a text search passes it.
    assert "<|im_end|>" in template


def test_preflight_with_only_a_tokenizer_judges_it(tmp_path):
    code, out = cli("preflight", "--tokenizer", TOK / "missing_eos", cwd=tmp_path)
    assert code == 1
    (report,) = out["reports"]
    assert report["artefact"]["kind"] == "tokenizer"
    assert [(f["id"], f["location"]["range"]["start"]["line"]) for f in report["findings"]] == [
        ("TP-PRE-MISSING-EOS-TOKEN", 0)]


def test_preflight_without_anything_to_judge_is_a_usage_error(tmp_path):
    code, out = cli("preflight", cwd=tmp_path)
    assert code == 2 and out["error"] == "preflight needs a DATASET, --eval EVAL or --tokenizer DIR"


def test_template_check_without_jinja2_is_not_checked_never_a_pass(monkeypatch):
    monkeypatch.setitem(sys.modules, "jinja2", None)  # not found: no render child is started
    # The template writes <|im_end|> somewhere: whether the assistant turn ends with it
    # cannot be told without rendering.
    report = judge_tokenizer(TOK / "assistant_turn_no_eos", Config())
    assert report.verdict is Verdict.NOT_CHECKED
    (f,) = report.findings
    assert f.id == "TP-NOT-CHECKED" and f.level is Level.NOT_CHECKED
    assert f.message.startswith("TP-TOK-TEMPLATE-NO-EOS not checked: jinja2 is not installed")
    assert f.location.span.start_line == 18
    # A template that writes no end marker anywhere is certain even as text.
    (g,) = judge_tokenizer(TOK / "template_no_eos", Config()).findings
    assert (g.id, g.level, g.evidence["rendered"]) == ("TP-TOK-TEMPLATE-NO-EOS", Level.FAIL, False)


@pytest.mark.parametrize("template,why", [
    ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "did not finish"),
    ("{{ 'a' * 1000000000 }}", "repetition of 1000000000"),
    ("{% set ns = namespace(s='ab') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
     "above 200000 characters"),
    ("{{ 'x'.ljust(1000000000) }}", "size argument 1000000000"),
    ("{{ ''.__class__.__mro__ }}", "unsafe"),
    ("{% for a in x %}" * 25 + "{% endfor %}" * 25, "nests too deeply"),
    ("{{ '%*s' % (100000000, 'a') }}", "format width"),
    ("{% macro f() %}{% for i in range(100000) %}{{ 'y' * 100000 }}{% endfor %}{% endmacro %}{{ f() }}",
     "work bound"),
], ids=["loop", "repeat", "doubling", "method", "internals", "nesting", "format-width", "work"])
def test_a_hostile_template_is_stopped_within_its_bounds(template, why):
    with pytest.raises(ct.TemplateUnusable) as e:
        ct.render(template, [{"role": "user", "content": "x"}], special={})
    assert why in str(e.value)


def test_a_template_that_cannot_be_rendered_leaves_the_check_not_checked(tmp_path):
    folder = tmp_path / "tok"
    shutil.copytree(TOK / "healthy_chatml", folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["chat_template"] = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    report = judge_tokenizer(folder, Config())
    assert report.verdict is Verdict.NOT_CHECKED
    (f,) = report.findings
    assert f.message == ("TP-TOK-TEMPLATE-NO-EOS not checked: the chat template could not render a "
                         f"user/assistant exchange: the chat template did not finish rendering within {ct.MAX_SECONDS:g} s")


# --- 1. an HF output folder: one report per artefact ----------------------------------------

def _safetensors(path: Path) -> None:
    header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + struct.pack("<2f", 0.5, -0.5))


def _hf_output(root: Path) -> Path:
    out = root / "output"
    ckpt = out / "checkpoint-20"
    ckpt.mkdir(parents=True)
    history = [{"step": s, "epoch": s / 20, "loss": 2.0 - s / 20, "learning_rate": 1e-4} for s in range(2, 22, 2)]
    (out / "trainer_state.json").write_text(json.dumps({"global_step": 20, "max_steps": 20, "log_history": history},
                                                       indent=2))
    _safetensors(ckpt / "model.safetensors")
    for name in ("tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"):
        shutil.copy(TOK / "healthy_chatml" / name, out / name)
        shutil.copy(TOK / "healthy_chatml" / name, ckpt / name)  # HF Trainer saves a copy per checkpoint
    return out


def test_doctor_on_an_hf_output_folder_reports_each_artefact(tmp_path):
    out = _hf_output(tmp_path)
    outcome = doctor([out], Config())
    assert [(Path(r.artefact.path).relative_to(tmp_path).as_posix(), r.artefact.kind, r.verdict)
            for r in outcome.reports] == [
        ("output", "tokenizer", Verdict.PASS),
        ("output/checkpoint-20", "bundle", Verdict.PASS),  # its config, tokenizer and weights together
        ("output/checkpoint-20/model.safetensors", "checkpoint", Verdict.PASS),
        ("output/trainer_state.json", "metrics", Verdict.PASS),
    ]
    # The checkpoint's copy of the tokenizer is the same settings: named, not judged twice.
    assert [(Path(p.path).name, p.reason) for p in outcome.passed_over] == [
        ("checkpoint-20", f"tokenizer files: the same settings as {out}'s, judged there")]


def test_a_checkpoint_tokenizer_that_differs_is_judged_on_its_own(tmp_path):
    out = _hf_output(tmp_path)
    shutil.copy(TOK / "missing_eos" / "tokenizer_config.json", out / "checkpoint-20" / "tokenizer_config.json")
    shutil.copy(TOK / "missing_eos" / "special_tokens_map.json", out / "checkpoint-20" / "special_tokens_map.json")
    reports = {Path(r.artefact.path).name: r for r in doctor([out], Config()).reports if r.artefact.kind == "tokenizer"}
    assert {k: r.verdict for k, r in reports.items()} == {"output": Verdict.PASS, "checkpoint-20": Verdict.FAIL}


def test_doctor_on_a_script_is_static_and_names_env_for_the_imports(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import no_such_module_tp\nargs = TrainingArguments(output_dir='o', learning_rate=0.0)\n")
    (report,) = doctor([script], Config()).reports
    assert [(f.id, f.location.span.start_line) for f in report.findings] == [("TP-SCRIPT-ZERO-LR", 1)]
    assert [c.reason for c in report.checks if c.group == "TP-ENV-IMPORT-FAIL"] == [
        "imports are checked by `trainproof-lsp env --entrypoint FILE` (in a child process); "
        "doctor reads the script with ast and never runs or imports it"]


# --- 3. env judges the whole script; paths as typed -------------------------------------------

SCRIPT = """\
import json
import no_such_module_tp

args = TrainingArguments(output_dir="out", learning_rate=0.0)
"""


def _env_findings(report: dict) -> list[tuple[str, str, str, int, int]]:
    return [(f["id"], f["level"], f["location"]["path"], f["location"]["range"]["start"]["line"],
             f["location"]["range"]["start"]["character"]) for f in report["findings"] if f["level"] != "INFO"]


def test_env_reports_foot_guns_and_import_failures_in_one_report(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    code, out = cli("env", "--entrypoint", "train.py", cwd=tmp_path)
    assert code == 1
    (report,) = out["reports"]
    assert report["artefact"]["path"] == "train.py" and report["verdict"] == "FAIL"
    assert _env_findings(report) == [
        ("TP-ENV-IMPORT-FAIL", "FAIL", "train.py", line_with(script, "import no_such_module_tp"), 0),
        ("TP-SCRIPT-ZERO-LR", "FAIL", "train.py", line_with(script, "learning_rate=0.0"),
         SCRIPT.splitlines()[3].index("0.0")),
    ]
    assert "TP-SCRIPT-ZERO-LR" in report["checks"]["ran"] and "TP-ENV-IMPORT-FAIL" in report["checks"]["ran"]


def test_env_reads_the_entrypoint_as_typed_and_cwd_as_where_the_run_launches(tmp_path):
    (tmp_path / "sub").mkdir()
    script = tmp_path / "sub" / "train.py"
    script.write_text(SCRIPT)
    (tmp_path / "sub" / "helper_mod_tp.py").write_text("X = 1\n")
    script.write_text(SCRIPT.replace("import json\n", "import helper_mod_tp\n"))
    code, out = cli("env", "--entrypoint", "sub/train.py", "--cwd", "sub", cwd=tmp_path)
    assert code == 1
    (report,) = out["reports"]
    assert report["artefact"]["path"] == "sub/train.py"
    # Judged: the script's folder's module imports, the missing one fails, the foot-gun is found.
    assert _env_findings(report) == [
        ("TP-ENV-IMPORT-FAIL", "FAIL", "sub/train.py", 1, 0),
        ("TP-SCRIPT-ZERO-LR", "FAIL", "sub/train.py", 3, SCRIPT.splitlines()[3].index("0.0")),
    ]
    assert not [f for f in report["findings"] if f["id"] == "TP-ENV-ENTRYPOINT-FROM-CWD"]


def test_an_entrypoint_found_only_relative_to_cwd_is_judged_with_a_note(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "train.py").write_text(SCRIPT)
    code, out = cli("env", "--entrypoint", "train.py", "--cwd", "sub", cwd=tmp_path)
    assert code == 1
    (report,) = out["reports"]
    assert [f["id"] for f in report["findings"] if f["level"] == "FAIL"] == ["TP-ENV-IMPORT-FAIL", "TP-SCRIPT-ZERO-LR"]
    (note,) = [f for f in report["findings"] if f["id"] == "TP-ENV-ENTRYPOINT-FROM-CWD"]
    assert note["level"] == "INFO"
    assert note["message"] == ("train.py is not in the current folder; judged "
                               f"{os.path.join('sub', 'train.py')} (relative to --cwd)")


def test_an_entrypoint_found_nowhere_is_not_checked(tmp_path):
    code, out = cli("env", "--entrypoint", "nowhere.py", "--cwd", ".", cwd=tmp_path)
    assert code == 2
    (report,) = out["reports"]
    assert report["verdict"] == "NOT-CHECKED" and "nowhere.py: no such file" in report["reason"]


# --- 4. turns that do not alternate; arrays in .jsonl ----------------------------------------

ROWS = [
    {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]},
    {"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"},
                  {"role": "assistant", "content": "c"}]},
    {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
                  {"role": "tool", "content": "t"}, {"role": "assistant", "content": "b"},
                  {"role": "assistant", "content": "again"}]},
]


@pytest.fixture
def chat(tmp_path) -> Path:
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return path


def test_turns_that_do_not_alternate_are_a_warn_without_a_tokenizer(chat):
    (report,) = preflight([chat], Config()).reports
    assert report.verdict is Verdict.WARN
    assert [(f.id, f.level.value, f.location.span.start_line, f.evidence) for f in report.findings] == [
        ("TP-PRE-TURNS-NOT-ALTERNATING", "WARN", 1, {"line": 2, "key": "messages", "turn": 1}),
        ("TP-PRE-TURNS-NOT-ALTERNATING", "WARN", 2, {"line": 3, "key": "messages", "turn": 4}),
    ]


def test_turns_that_do_not_alternate_fail_when_the_runs_template_refuses_them(chat):
    data, tokenizer = preflight([chat], Config(), tokenizer_dir=TOK / "roles_must_alternate").reports
    assert data.verdict is Verdict.FAIL and tokenizer.verdict is Verdict.PASS
    message = "the chat template raises: Conversation roles must alternate user/assistant/user/assistant/..."
    assert [(f.id, f.level.value, f.location.span.start_line, f.message) for f in data.findings] == [
        ("TP-PRE-CHAT-TEMPLATE-ERROR", "FAIL", 1, f"line 2: {message}"),
        ("TP-PRE-CHAT-TEMPLATE-ERROR", "FAIL", 2, f"line 3: {message}"),
    ]
    assert any(c.group == "TP-PRE-CHAT-TEMPLATE-ERROR" and c.ran for c in data.checks)


def test_turns_that_do_not_alternate_stay_a_warn_when_the_template_accepts_them(chat):
    data, _ = preflight([chat], Config(), tokenizer_dir=TOK / "healthy_chatml").reports
    assert data.verdict is Verdict.WARN
    assert [f.id for f in data.findings] == ["TP-PRE-TURNS-NOT-ALTERNATING"] * 2


def test_a_json_array_saved_as_jsonl_is_a_warn(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text('[{"text": "a"},\n {"text": "b"}]\n')
    (report,) = preflight([path], Config()).reports
    assert report.verdict is Verdict.WARN
    assert [(f.id, f.level.value, f.location.span.start_line, f.evidence) for f in report.findings] == [
        ("TP-PRE-JSON-ARRAY-IN-JSONL", "WARN", 0, {"records": 2, "lines": 2})]
    # The same array named .json is only a layout note.
    same = tmp_path / "data.json"
    same.write_text(path.read_text())
    (report,) = preflight([same], Config()).reports
    assert report.verdict is Verdict.PASS and [f.id for f in report.findings] == ["TP-PRE-FILE-LAYOUT"]


def test_rows_a_hostile_template_cannot_render_are_said_to_be_unjudged(chat, tmp_path):
    folder = tmp_path / "tok"
    shutil.copytree(TOK / "healthy_chatml", folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["chat_template"] = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    data, _ = preflight([chat], Config(), tokenizer_dir=folder).reports
    assert data.verdict is Verdict.WARN
    # findings in the one level order (core/model.py LEVEL_ORDER): WARN before NOT-CHECKED
    assert [(f.id, f.level.value) for f in data.findings] == [
        ("TP-PRE-TURNS-NOT-ALTERNATING", "WARN"), ("TP-PRE-TURNS-NOT-ALTERNATING", "WARN"),
        ("TP-NOT-CHECKED", "NOT-CHECKED")]
    assert data.findings[-1].message == (
        "TP-PRE-CHAT-TEMPLATE-ERROR not checked on every row whose turns do not alternate: "
        f"the chat template did not finish rendering within {ct.MAX_SECONDS:g} s")


def test_a_bare_tokenizers_library_file_is_passed_over_not_failed(tmp_path):
    shutil.copy(TOK / "healthy_chatml" / "tokenizer.json", tmp_path / "tokenizer.json")
    outcome = doctor([tmp_path], Config())
    assert [r.verdict for r in outcome.reports] == [Verdict.NOT_CHECKED]  # nothing else to judge there
    assert [(Path(p.path).name, p.reason) for p in outcome.passed_over] == [
        ("tokenizer.json", "tokenizer.json without tokenizer_config.json or special_tokens_map.json; "
                           "not judged as a tokenizer folder")]


# Template shapes of the common families (written here, reduced to what matters): each
# ends the assistant's turn with its stop marker, and each is rendered as transformers
# renders it (loop controls, the generation tag, raise_exception, a leading system turn).
FAMILIES = {
    "inst-eos": ("{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}[INST] {{ m['content'] }} [/INST]"
                 "{% else %}{{ m['content'] }}{{ eos_token }}{% endif %}{% endfor %}", "</s>", ["</s>"]),
    "turn-tags": ("{% for m in messages %}{% set role = 'model' if m['role'] == 'assistant' else m['role'] %}"
                  "<start_of_turn>{{ role }}\n{{ m['content'] | trim }}<end_of_turn>\n{% endfor %}",
                  "<end_of_turn>", ["<end_of_turn>", "<eos>"]),
    "header-eot": ("{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' + "
                   "m['content'] | trim + '<|eot_id|>' }}{% endfor %}", "<|eot_id|>", ["<|eot_id|>", "<|end_of_text|>"]),
    "generation-tag": ("{% for m in messages %}{% if m['role'] == 'assistant' %}<|assistant|>\n{% generation %}"
                       "{{ m['content'] }}<|end|>{% endgeneration %}\n{% else %}<|{{ m['role'] }}|>\n{{ m['content'] }}"
                       "<|end|>\n{% endif %}{% if loop.index > 50 %}{% break %}{% endif %}{% endfor %}",
                       "<|end|>", ["<|end|>", "<|endoftext|>"]),
    "needs-system": ("{% if messages[0]['role'] != 'system' %}{{ raise_exception('a system turn must come first') }}"
                     "{% endif %}{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                     "{% endfor %}", "<|im_end|>", ["<|im_end|>"]),
}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_common_template_shapes_end_the_assistant_turn(family):
    template, marker, markers = FAMILIES[family]
    end = ct.assistant_end(template, special={"bos_token": "<s>", "eos_token": "</s>"}, markers=markers)
    assert end.marker == marker
    assert end.system is (family == "needs-system")
