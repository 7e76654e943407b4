"""The table of formats (trainproof_lsp/core/formats.py) is the one definition of which
files are read, watched and opened, which folders are never searched and what marks a run
folder: detection, `doctor`, `watch`, the server, the VS Code manifest and client, the
Neovim setup and docs/formats.md all follow it."""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePath

import pytest

from trainproof_lsp.core import formats
from trainproof_lsp.core.formats import FORMATS, SKIPPED_FOLDERS, by_name
from trainproof_lsp.core.model import LEVEL_ORDER, Finding, Level, Location, Span, Verdict, worst
from trainproof_lsp.guardian.watch import _candidates
from trainproof_lsp.judge.engine import finding_order, verdict_of, walk
from trainproof_lsp.readers.detect import RESIDENTS, detect

ROOT = Path(__file__).resolve().parent.parent
VSCODE = ROOT / "editors" / "vscode"
NEOVIM = ROOT / "editors" / "neovim"

# How each editor names the language of an extension the table says is opened. A
# `*.jinja` file is opened as the tokenizer's chat_template.jinja, which VS Code's manifest
# activates on by name.
VSCODE_LANGUAGE = {"json": "json", "jsonl": "jsonl", "ndjson": "jsonl", "csv": "csv", "tsv": "tsv",
                   "py": "python", "jinja": None}
NEOVIM_FILETYPE = {"json": "json", "jsonl": "jsonl", "ndjson": "jsonl", "csv": "csv", "tsv": "tsv",
                   "py": "python", "jinja": "jinja"}


# --- the table itself -------------------------------------------------------------------

def test_format_names_are_unique_and_suffixes_are_lower_case_with_a_dot():
    names = [f.name for f in FORMATS]
    assert len(names) == len(set(names))
    for f in FORMATS:
        assert all(s.startswith(".") and s == s.lower() for s in f.suffixes), f.name
        assert f.about and not f.about.endswith(".")


def test_a_dataset_is_told_from_a_metric_log_by_content_not_by_name():
    assert formats.suffixes(formats.formats_of("dataset")) <= formats.suffixes(formats.formats_of("metrics"))


@pytest.mark.parametrize("name, head, kind, fmt", [
    ("trainer_state.json", b'{"log_history": []}', "metrics", "hf-trainer-state"),
    ("events.out.tfevents.1700000000.host", b"", "metrics", "tfevents"),
    ("metrics.csv", b"step,loss\n", "metrics", "metrics-csv"),
    ("metrics.tsv", b"step\tloss\n", "metrics", "metrics-csv"),
    ("log.jsonl", b'{"step": 1, "loss": 2.0}\n', "metrics", "metrics-jsonl"),
    ("log.ndjson", b'{"step": 1, "loss": 2.0}\n', "metrics", "metrics-jsonl"),
    ("train.jsonl", b'{"text": "hello"}\n', "dataset", "dataset-jsonl"),
    ("train.json", b'[{"text": "hello"}]', "dataset", "dataset-json"),
    ("history.json", b'[{"step": 1, "loss": 2.0}]', "metrics", "metrics-json"),
    ("model.pt", b"PK", "checkpoint", "pt"),
    ("model.pth", b"PK", "checkpoint", "pth"),
    ("last.ckpt", b"PK", "checkpoint", "ckpt"),
    ("pytorch_model.bin", b"PK", "checkpoint", "bin"),
    ("model.safetensors", b"", "checkpoint", "safetensors"),
    ("model.safetensors.index.json", b"{}", "checkpoint", "sharded-index"),
    ("model_best.pth.tar", b"PK", "checkpoint", "tar"),
    ("state.pkl", b"\x80\x04", "checkpoint", "pkl"),
    ("state.pickle", b"\x80\x04", "checkpoint", "pickle"),
    ("scaler.joblib", b"\x80\x04", "checkpoint", "joblib"),
    ("train.py", b"args = TrainingArguments(output_dir='out')\n", "script", "python"),
])
def test_detection_names_every_format_as_the_table_does(name, head, kind, fmt):
    got = detect(Path(name), head)
    assert (got.kind, got.format) == (kind, fmt)
    entry = by_name(fmt)
    assert entry.kind == kind and entry.matches(name)


def test_every_format_known_by_name_is_detected_as_that_format_or_passed_over_as_a_resident():
    # (suffix-only formats are the cases above; a chat template is read with its tokenizer folder)
    for f in FORMATS:
        for name in f.names:
            got = detect(Path(name), b"")
            want = "other" if name.startswith("chat_template.") else f.kind if f.kind == "metrics" else "resident"
            assert got.kind == want, (name, got)


def test_residents_passed_over_by_name_are_the_tables_configs_and_residents():
    named = formats.file_names(f for f in FORMATS if f.kind in ("config", "resident"))
    # a chat template is judged with its tokenizer folder, never passed over by doctor
    assert set(RESIDENTS) == named - {"chat_template.jinja", "chat_template.json"}


# --- the one level order ------------------------------------------------------------------

def _finding(level: Level, line: int) -> Finding:
    return Finding(id="TP-X", level=level, message="m", evidence={},
                   location=Location(path="log.jsonl", span=Span(line, 0, line, 1)))


def test_level_order_has_every_level_once_and_agrees_with_the_verdict_severity():
    assert sorted(LEVEL_ORDER, key=lambda lv: lv.value) == sorted(Level, key=lambda lv: lv.value)
    verdict_levels = [lv for lv in LEVEL_ORDER if lv is not Level.INFO]
    assert sorted(verdict_levels, key=lambda lv: -Verdict(lv.value).severity) == verdict_levels
    for levels in ([Level.WARN, Level.NOT_CHECKED], [Level.INFO], [Level.FAIL, Level.INFO, Level.WARN], []):
        got = verdict_of([_finding(lv, 0) for lv in levels])
        assert got == worst([Verdict(lv.value) for lv in levels if lv is not Level.INFO])


def test_a_report_and_the_editor_list_a_warn_before_a_not_checked():
    # The engine used to list NOT-CHECKED before WARN while the editor sorted WARN first.
    from trainproof_lsp.server.diagnostics import _sort_key

    findings = [_finding(Level.INFO, 0), _finding(Level.NOT_CHECKED, 1), _finding(Level.WARN, 2),
                _finding(Level.FAIL, 3)]
    want = [Level.FAIL, Level.WARN, Level.NOT_CHECKED, Level.INFO]
    assert [f.level for f in sorted(findings, key=finding_order)] == want
    assert [f.level for f in sorted(findings, key=_sort_key)] == want


# --- skipped folders: doctor, watch and the server alike ------------------------------------

def _tree(root: Path) -> dict[Path, Path]:
    """A metric log in a plain folder and one in every folder that is never searched."""
    line = json.dumps({"step": 1, "loss": 2.0}) + "\n"
    logs = {}
    for folder in ("run", *sorted(SKIPPED_FOLDERS), ".cache", "lib/site-packages/pkg"):
        path = root / folder / "log.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(line)
        logs[Path(folder)] = path
    return logs


def test_doctor_watch_and_the_server_skip_the_same_folders(tmp_path):
    from trainproof_lsp.server.watching import skipped

    logs = _tree(tmp_path)
    by_doctor = set(walk(tmp_path))
    by_watch = {p for p, _ in _candidates(tmp_path).values()}
    by_server = {p for p in logs.values() if not skipped(p, [tmp_path])}
    assert by_doctor == by_watch == by_server == {tmp_path / "run" / "log.jsonl"}


def test_watch_no_longer_tails_logs_inside_installed_packages(tmp_path):
    # `watch` skipped fewer folders than doctor: a venv's site-packages, .mypy_cache or
    # wandb-cache was searched for logs to tail.
    for folder in ("env/lib/site-packages/pkg", "wandb-cache", "run"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "metrics.csv").write_text("step,loss\n1,2.0\n")
    assert sorted(_candidates(tmp_path)) == [str(tmp_path / "run" / "metrics.csv")]


def test_the_server_judges_skipped_folders_below_the_workspace_not_above_it(tmp_path):
    from trainproof_lsp.server.watching import skipped

    workspace = tmp_path / ".cache" / "project"  # a workspace inside a dot-folder is still watched
    assert not skipped(workspace / "run" / "trainer_state.json", [workspace])
    assert skipped(workspace / "node_modules" / "x" / "trainer_state.json", [workspace])
    assert skipped(workspace / ".venv" / "pyproject.toml", [workspace])
    assert not skipped(tmp_path / "elsewhere" / ".git" / "log.jsonl", [workspace])  # not below a root


# --- run folders ----------------------------------------------------------------------------

def test_a_checkpoint_folder_belongs_to_its_parents_run():
    assert formats.checkpoint_step("checkpoint-30") == 30
    assert formats.checkpoint_step("checkpoint-") is None
    assert formats.checkpoint_step("checkpoint-best") is None
    assert formats.checkpoint_step("old-checkpoint-3") is None
    assert formats.run_root(Path("out/checkpoint-30/trainer_state.json")) == Path("out")
    assert formats.run_root(Path("out/trainer_state.json")) == Path("out")
    assert formats.run_root(Path("out/checkpoint-best/trainer_state.json")) == Path("out/checkpoint-best")


def test_watch_takes_the_newest_checkpoints_state_for_an_output_dir_without_its_own(tmp_path):
    for step in (5, 40, 100):
        d = tmp_path / f"checkpoint-{step}"
        d.mkdir()
        (d / "trainer_state.json").write_text('{"log_history": []}')
    (tmp_path / "checkpoint-best").mkdir()
    (tmp_path / "checkpoint-best" / "trainer_state.json").write_text('{"log_history": []}')
    found = _candidates(tmp_path)
    assert found[str(tmp_path / "trainer_state.json")] == (tmp_path / "checkpoint-100" / "trainer_state.json",
                                                           "hf-trainer-state")
    # checkpoint-best is no checkpoint-<step>/ copy: a run folder of its own
    assert found[str(tmp_path / "checkpoint-best" / "trainer_state.json")][0].parent.name == "checkpoint-best"


@pytest.mark.parametrize("entry, marks", [
    ("trainer_state.json", True), ("metrics.csv", True), ("hparams.yaml", True), ("checkpoint-10", True),
    ("events.out.tfevents.1.host", True), ("version_0", True), ("last.ckpt", True),
    ("model.safetensors", True), ("notes.txt", False), ("config.json", False), ("train.py", False),
])
def test_run_folder_markers(entry, marks, tmp_path):
    from trainproof_lsp.server.lenses import adjacent_run_folders

    assert formats.is_run_marker(entry) is marks
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / entry).write_text("")
    script = tmp_path / "train.py"
    script.write_text("import torch\n")
    assert adjacent_run_folders(script) == ([tmp_path / "out"] if marks else [])


def test_lenses_pass_over_run_markers_inside_skipped_folders(tmp_path):
    from trainproof_lsp.server.lenses import adjacent_run_folders

    for folder in ("venv", "node_modules", "out"):
        (tmp_path / folder / "version_0").mkdir(parents=True)
    assert adjacent_run_folders(tmp_path / "train.py") == [tmp_path / "out"]


# --- front ends follow the table --------------------------------------------------------------

def test_the_server_watches_what_the_table_says_a_run_writes():
    from trainproof_lsp.server import watching

    assert watching.GLOBS == (*formats.watched_globs(), "**/pyproject.toml")
    assert "**/*.index.json" not in watching.GLOBS  # covered by **/*.json
    for glob in ("**/trainer_state.json", "**/events.out.tfevents.*", "**/*.ckpt", "**/*.jsonl", "**/*.log"):
        assert glob in watching.GLOBS


def test_the_servers_document_kinds_follow_the_table():
    from trainproof_lsp.server.kinds import MODEL_CONFIGS, TOKENIZER_FILES, kind_of

    assert MODEL_CONFIGS == set(by_name("model-config").names)
    assert TOKENIZER_FILES == set(by_name("tokenizer").names)
    for name in (*MODEL_CONFIGS, *TOKENIZER_FILES):
        assert kind_of(Path(name), b"{}").kind == "config"


def _ts_array(source: str, name: str) -> list[str]:
    body = re.search(rf"export const {name}: readonly string\[\] = \[(.*?)\];", source, re.S)
    assert body, name
    return re.findall(r"'([^']*)'", body.group(1))


def test_vscode_client_watches_and_opens_what_the_table_says():
    source = (VSCODE / "src" / "common" / "constants.ts").read_text(encoding="utf-8")
    stream = re.search(r"export const VERDICT_STREAM_GLOB = '([^']*)';", source).group(1)
    watched = _ts_array(source, "WATCHED_GLOBS")
    assert watched == [*formats.watched_globs(), stream], \
        "editors/vscode/src/common/constants.ts WATCHED_GLOBS drifted from core/formats.py"
    pattern = re.search(r"export const DOCUMENT_PATTERN = '\*\*/\*\.\{([^}]*)\}';", source).group(1)
    assert set(pattern.split(",")) == formats.opened_extensions(), \
        "editors/vscode/src/common/constants.ts DOCUMENT_PATTERN drifted from core/formats.py"


def test_vscode_manifest_activates_on_the_tables_artefacts_never_on_every_json_or_python_file():
    from test_vscode_activation import artefact_globs

    manifest = json.loads((VSCODE / "package.json").read_text(encoding="utf-8"))
    assert manifest["activationEvents"] == [*(f"workspaceContains:{g}" for g in artefact_globs()),
                                            "onLanguage:jsonl", "onLanguage:trainproof-log"]
    for f in FORMATS:
        if f.watched and f.kind == "metrics":
            for glob in (f"**/{n}" for n in (*f.names, *f.patterns)):
                assert glob in artefact_globs(), glob
    languages = {lang["id"]: lang for lang in manifest["contributes"]["languages"]}
    assert {e.lstrip(".") for e in languages["jsonl"]["extensions"]} == \
        {e for e, lang in VSCODE_LANGUAGE.items() if lang == "jsonl"}
    assert set(languages["trainproof-log"]["filenames"]) <= formats.file_names(formats.formats_of("metrics"))


def _lua_list(source: str, key: str) -> list[list[str]]:
    return [re.findall(r"'([^']*)'", m) for m in re.findall(rf"\b{key}\s*=\s*\{{([^}}]*)\}}", source)]


def test_neovim_filetypes_are_the_tables_opened_extensions():
    want = {NEOVIM_FILETYPE[e] for e in formats.opened_extensions()}
    for path in (NEOVIM / "lua" / "trainproof" / "init.lua", NEOVIM / "lsp" / "trainproof.lua", NEOVIM / "README.md"):
        found = _lua_list(path.read_text(encoding="utf-8"), "filetypes")
        assert found and all(set(f) == want for f in found), f"{path.name}: {found} != {sorted(want)}"
    # filetypes the setup assigns itself (older Neovims know no jsonl/tsv) are opened extensions
    init = (NEOVIM / "lua" / "trainproof" / "init.lua").read_text(encoding="utf-8")
    patterns = [p for ps in _lua_list(init, "pattern") for p in ps if p.startswith("*.")]
    assert patterns and {PurePath(p).suffix.lstrip(".") for p in patterns} <= formats.opened_extensions()


def test_docs_formats_md_is_generated_from_the_table():
    on_disk = (ROOT / "docs" / "formats.md").read_text(encoding="utf-8")
    assert on_disk == formats.markdown(), \
        "docs/formats.md drifted from the table: run `python -m trainproof_lsp.core.formats > docs/formats.md`"
    for f in FORMATS:
        assert f"`{f.name}`" in on_disk
