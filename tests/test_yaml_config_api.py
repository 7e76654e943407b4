"""A LLaMA-Factory training YAML against the installed llamafactory's argument classes, and an
axolotl config against the installed axolotl's schema.

`env --entrypoint config.yaml` binds each top-level key to the fields of the five classes
LLaMA-Factory's parser reads a training config into, in the probe child of the run's
interpreter. Each case is first run through LLaMA-Factory's own parser (in a child of this
interpreter: its HfArgumentParser over those classes, the YAML loaded as
`llamafactory-cli train` loads it), which proves the config really is refused there, or
really accepted; each axolotl case through axolotl's own schema, which proves a misspelt key
is accepted and dropped (the setting never taken), or that every key is kept."""

from __future__ import annotations

import importlib.util
import json
import os
import stat
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from conftest import run_cli
from writers import REQUIRED, WRITERS_DIR
from trainproof_lsp.core.model import Span
from trainproof_lsp.readers.yaml_api import read_yaml_config

KEYWORD = "TP-SCRIPT-API-UNKNOWN-KEYWORD"
VALUE = "TP-SCRIPT-API-BAD-VALUE"

GOOD = """\
### model
model_name_or_path: Qwen/Qwen2.5-0.5B

### method
stage: sft
do_train: true
finetuning_type: lora
lora_target: all
lora_rank: 8

### dataset
dataset: alpaca_en_demo
template: qwen
cutoff_len: 1024

### output
output_dir: saves/qwen-lora   # where the adapter goes
eval_strategy: "steps"
"""
# line 9 (0-based 8): a misspelt key; line 7 (0-based 6): a fine-tuning method that does not exist
BAD_KEY = GOOD.replace("lora_rank: 8", "lora_rnak: 8")
BAD_VALUE = GOOD.replace("finetuning_type: lora", "finetuning_type: lroa")
BAD = BAD_KEY.replace("finetuning_type: lora", "finetuning_type: lroa")

# LLaMA-Factory's own reading of a config file (hparams/parser.py read_args + _parse_train_args),
# each file in turn: "ok", or the exception it raised.
_LF_PARSE = """
import json, sys
results = {}
for path in sys.argv[1:]:
    sys.argv = ["llamafactory-cli", path]
    from llamafactory.hparams.parser import _parse_train_args
    try:
        _parse_train_args()
        results[path] = "ok"
    except BaseException as e:
        results[path] = type(e).__name__ + ": " + str(e)
print("RESULTS " + json.dumps(results))
"""


def _lf_path() -> list[str] | None:
    """Where the run's interpreter finds llamafactory and omegaconf: this venv ([]), or the
    stacks' folder of `make writers` (.venv/writers, --no-deps beside the suite's newer
    transformers); None when neither has them."""
    if all(importlib.util.find_spec(name) is not None for name in ("llamafactory", "omegaconf")):
        return []
    if all((WRITERS_DIR / name).is_dir() for name in ("llamafactory", "omegaconf")):
        return [str(WRITERS_DIR)]
    return None


def _lf_version() -> str:
    path = _lf_path()
    dists = metadata.distributions(name="llamafactory", path=path) if path else [metadata.distribution("llamafactory")]
    return next(iter(dists)).version


def _lf_environ() -> dict[str, str]:
    """The environment of a run whose interpreter has llamafactory: LLaMA-Factory 0.9.5 refuses
    to import beside a transformers newer than it knows unless told not to check."""
    env = {"DISABLE_VERSION_CHECK": "1"}
    path = _lf_path()
    if path:
        env["PYTHONPATH"] = os.pathsep.join(path + [p for p in [os.environ.get("PYTHONPATH")] if p])
    return env


def _require_llamafactory() -> None:
    if _lf_path() is None:
        why = (f"llamafactory and omegaconf are in neither this venv nor {WRITERS_DIR} (`make writers` puts them "
               "there)")
        if REQUIRED:
            pytest.fail(f"TP_WRITERS=required but {why}")
        pytest.skip(why)


@pytest.fixture
def lf_env(monkeypatch, tmp_path_factory):
    _require_llamafactory()
    # the probe child inherits this environment, as the run would; from a folder outside the
    # repository, whose tree (the workspace, .venv/writers included) the signature probe
    # keeps off its PYTHONPATH
    for key, value in _lf_environ().items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))
    monkeypatch.delenv("ALLOW_EXTRA_ARGS", raising=False)


def _llamafactory_parses(*paths: Path) -> dict[str, str]:
    env = {**os.environ, **_lf_environ()}
    env.pop("ALLOW_EXTRA_ARGS", None)
    done = subprocess.run([sys.executable, "-c", _LF_PARSE, *map(str, paths)], capture_output=True, text=True,
                          env=env, cwd=paths[0].parent, timeout=600)
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULTS "))
    return json.loads(line[len("RESULTS "):])


@pytest.fixture(scope="module")
def configs(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """The cases written once, and LLaMA-Factory's verdict on each (one import of it)."""
    _require_llamafactory()
    folder = tmp_path_factory.mktemp("configs")
    for name, text in (("good.yaml", GOOD), ("bad_key.yaml", BAD_KEY), ("bad_value.yaml", BAD_VALUE),
                       ("bad.yaml", BAD)):
        (folder / name).write_text(text, encoding="utf-8")
    parsed = _llamafactory_parses(folder / "good.yaml", folder / "bad_key.yaml", folder / "bad_value.yaml")
    return folder, {Path(k).name: v for k, v in parsed.items()}


def _env(path: Path) -> tuple[int, dict]:
    code, out, _ = run_cli("env", "--entrypoint", str(path), "--json")
    (report,) = json.loads(out)["reports"]
    return code, report


def _span(f: dict) -> tuple[int, int, int, int]:
    r = f["location"]["range"]
    return r["start"]["line"], r["start"]["character"], r["end"]["line"], r["end"]["character"]


def test_llamafactorys_parser_refuses_the_key_and_the_value_and_the_tool_fails_each_at_its_line(configs, lf_env):
    tmp_path, parsed = configs
    assert parsed["good.yaml"] == "ok"
    assert parsed["bad_key.yaml"] == "ValueError: Some keys are not used by the HfArgumentParser: ['lora_rnak']"
    assert parsed["bad_value.yaml"].startswith("AssertionError")

    version = _lf_version()
    code, report = _env(tmp_path / "bad.yaml")
    assert code == 1 and report["verdict"] == "FAIL"
    found = {f["id"]: f for f in report["findings"] if f["id"] in (KEYWORD, VALUE)}
    assert sorted(found) == [VALUE, KEYWORD]
    key = found[KEYWORD]
    assert _span(key) == (8, 0, 8, len("lora_rnak"))
    assert key["evidence"] == {"keyword": "lora_rnak", "class": "llamafactory.hparams (ModelArguments, DataArguments, "
                               "TrainingArguments, FinetuningArguments, GeneratingArguments)",
                               "library": "llamafactory", "version": version, "replacement": "lora_rank"}
    assert key["message"].startswith(f"bad.yaml: 'lora_rnak' is no argument of llamafactory {version}'s training "
                                     "arguments") and "(did you mean lora_rank?)" in key["message"]
    assert key["fix"]["title"] == "rename lora_rnak to lora_rank"
    value = found[VALUE]
    assert _span(value) == (6, len("finetuning_type: "), 6, len("finetuning_type: lroa"))
    assert value["evidence"]["closest"] == "lora" and value["evidence"]["value"] == "lroa"

    # the rename applied to bad_key.yaml gives good.yaml, which LLaMA-Factory's parser takes
    (edit,) = key["fix"]["edits"]
    lines = BAD_KEY.split("\n")
    r = edit["range"]
    lines[r["start"]["line"]] = lines[r["start"]["line"]][:r["start"]["character"]] + edit["new_text"] + \
        lines[r["start"]["line"]][r["end"]["character"]:]
    assert "\n".join(lines) == GOOD


def test_a_config_llamafactory_accepts_passes_both_checks(configs, lf_env):
    folder, parsed = configs
    path = folder / "good.yaml"
    assert parsed["good.yaml"] == "ok"
    code, report = _env(path)
    assert code == 0 and report["verdict"] == "PASS"
    assert not [f for f in report["findings"] if f["id"] in (KEYWORD, VALUE) or f["level"] != "INFO"]
    assert {KEYWORD, VALUE} <= set(report["checks"]["ran"])


def test_allow_extra_args_lets_llamafactory_take_any_key_and_the_tool_says_nothing_of_it(tmp_path, lf_env,
                                                                                      monkeypatch):
    monkeypatch.setenv("ALLOW_EXTRA_ARGS", "1")
    path = tmp_path / "bad_key.yaml"
    path.write_text(BAD_KEY, encoding="utf-8")
    code, report = _env(path)
    assert not [f for f in report["findings"] if f["id"] == KEYWORD]


def test_without_llamafactory_in_the_runs_interpreter_the_config_is_not_checked(tmp_path, monkeypatch):
    # an interpreter without site-packages: llamafactory cannot be imported by it
    python = tmp_path / "python-nosite"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n', encoding="utf-8")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    path = tmp_path / "bad_key.yaml"
    path.write_text(BAD_KEY, encoding="utf-8")
    code, out, _ = run_cli("env", "--entrypoint", str(path), "--python", str(python), "--json")
    (report,) = json.loads(out)["reports"]
    assert code == 2 and report["verdict"] == "NOT-CHECKED"
    (nc,) = [f for f in report["findings"] if f["level"] == "NOT-CHECKED"]
    assert nc["message"].startswith("the config's keys were not checked: llamafactory's argument classes cannot be "
                                    f"imported by {python} (ModuleNotFoundError: No module named 'llamafactory'")
    assert not [f for f in report["findings"] if f["id"] in (KEYWORD, VALUE)]


# --- axolotl -----------------------------------------------------------------------------------

IGNORED = "TP-CONFIG-KEY-IGNORED"

AX_GOOD = """\
base_model: NousResearch/Llama-2-7b-hf
model_type: LlamaForCausalLM
adapter: lora
lora_r: 8
lora_alpha: 16
datasets:
  - path: mhenrichsen/alpaca_2k_test
    type: alpaca
micro_batch_size: 1
gradient_accumulation_steps: 1
learning_rate: 0.0001
num_epochs: 1
output_dir: ./outputs/lora-out
"""
# line 5 (0-based 4): a misspelt key; model_type (line 2) is the alias of a field (type_of_model)
AX_BAD = AX_GOOD.replace("lora_alpha: 16", "lora_alhpa: 16")

# axolotl's own schema over each config file, as validate_config ends
# (axolotl/utils/config/__init__.py: the model built from the loaded YAML, dumped without its
# None fields): the validated config's keys, or the exception the schema raised.
_AX_VALIDATE = """
import json, sys, yaml
from axolotl.utils.schemas.config import AxolotlInputConfig
results = {}
for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as f:
        cfg = yaml.safe_load(f)
    try:
        results[path] = AxolotlInputConfig(**cfg).model_dump(exclude_none=True, mode="json")
    except BaseException as e:
        results[path] = type(e).__name__ + ": " + str(e)
print("RESULTS " + json.dumps(results))
"""


def _ax_path() -> list[str] | None:
    """Where the run's interpreter finds axolotl: this venv ([]), or .venv/writers (`make
    writers` installs it there --no-deps); None when neither has it."""
    if importlib.util.find_spec("axolotl") is not None:
        return []
    if (WRITERS_DIR / "axolotl").is_dir():
        return [str(WRITERS_DIR)]
    return None


def _ax_version() -> str:
    path = _ax_path()
    dists = metadata.distributions(name="axolotl", path=path) if path else [metadata.distribution("axolotl")]
    return next(iter(dists)).version


def _ax_environ() -> dict[str, str]:
    path = _ax_path()
    return {"PYTHONPATH": os.pathsep.join(path + [p for p in [os.environ.get("PYTHONPATH")] if p])} if path else {}


@pytest.fixture
def ax_env(monkeypatch, tmp_path_factory):
    if _ax_path() is None:
        why = f"axolotl is in neither this venv nor {WRITERS_DIR} (`make writers` puts it there)"
        if REQUIRED:
            pytest.fail(f"TP_WRITERS=required but {why}")
        pytest.skip(why)
    for key, value in _ax_environ().items():  # the probe child inherits this environment, as the run would
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))  # outside the repository (see lf_env)


def _axolotl_validates(*paths: Path) -> dict[str, dict | str]:
    env = {**os.environ, **_ax_environ()}
    done = subprocess.run([sys.executable, "-c", _AX_VALIDATE, *map(str, paths)], capture_output=True, text=True,
                          env=env, cwd=paths[0].parent, timeout=600)
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULTS ")), None)
    assert line is not None, done.stderr[-2000:]
    return json.loads(line[len("RESULTS "):])


def test_axolotl_accepts_and_drops_a_misspelt_key_and_the_tool_warns_at_its_line(tmp_path, ax_env):
    good, bad = tmp_path / "good.yml", tmp_path / "bad.yml"
    good.write_text(AX_GOOD, encoding="utf-8")
    bad.write_text(AX_BAD, encoding="utf-8")
    validated = _axolotl_validates(good, bad)
    # axolotl's schema takes both; the misspelt key is dropped, and lora_alpha is left unset
    assert isinstance(validated[str(good)], dict) and isinstance(validated[str(bad)], dict)
    assert validated[str(good)]["lora_alpha"] == 16
    assert "lora_alhpa" not in validated[str(bad)] and "lora_alpha" not in validated[str(bad)]

    version = _ax_version()
    code, report = _env(bad)
    assert code == 0 and report["verdict"] == "WARN"
    (hit,) = [f for f in report["findings"] if f["level"] != "INFO"]
    assert hit["id"] == IGNORED and hit["level"] == "WARN"
    assert _span(hit) == (4, 0, 4, len("lora_alhpa"))
    assert hit["message"] == (f"bad.yml: 'lora_alhpa' is no key of axolotl {version}'s config schema (did you mean "
                              "lora_alpha?); axolotl ignores it, so the setting never takes effect")
    assert hit["evidence"] == {"key": "lora_alhpa", "schema": "axolotl.utils.schemas.config.AxolotlInputConfig",
                               "library": "axolotl", "version": version, "closest": "lora_alpha"}
    assert hit["fix"]["title"] == "rename lora_alhpa to lora_alpha" and hit["fix"]["safe"] is False
    # the rename applied to bad.yml gives good.yml
    (edit,) = hit["fix"]["edits"]
    lines = AX_BAD.split("\n")
    r = edit["range"]
    row = lines[r["start"]["line"]]
    lines[r["start"]["line"]] = row[:r["start"]["character"]] + edit["new_text"] + row[r["end"]["character"]:]
    assert "\n".join(lines) == AX_GOOD


def test_a_config_axolotl_takes_whole_passes_with_an_alias_among_its_keys(tmp_path, ax_env):
    path = tmp_path / "good.yml"
    path.write_text(AX_GOOD, encoding="utf-8")
    dumped = _axolotl_validates(path)[str(path)]
    assert isinstance(dumped, dict)
    # every key of the config is kept by axolotl (model_type under its field's name)
    assert {"type_of_model", "lora_alpha", "lora_r", "datasets", "output_dir"} <= set(dumped)
    code, report = _env(path)
    assert code == 0 and report["verdict"] == "PASS"
    assert not [f for f in report["findings"] if f["level"] != "INFO"]
    assert IGNORED in report["checks"]["ran"]
    # the LLaMA-Factory rules say why they did not judge this config
    skipped = {c["id"]: c["reason"] for c in report["checks"]["skipped"]}
    why = "an axolotl config: its keys are TP-CONFIG-KEY-IGNORED's (axolotl ignores unknown keys)"
    assert skipped[KEYWORD] == skipped[VALUE] == why


def test_without_axolotl_in_the_runs_interpreter_the_axolotl_config_is_not_checked(tmp_path):
    python = tmp_path / "python-nosite"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n', encoding="utf-8")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    path = tmp_path / "axolotl.yml"
    path.write_text(AX_BAD, encoding="utf-8")
    code, out, _ = run_cli("env", "--entrypoint", str(path), "--python", str(python), "--json")
    (report,) = json.loads(out)["reports"]
    assert code == 2 and report["verdict"] == "NOT-CHECKED"
    (nc,) = [f for f in report["findings"] if f["level"] == "NOT-CHECKED"]
    assert nc["message"].startswith("the config's keys were not checked: axolotl's config schema "
                                    "(axolotl.utils.schemas.config.AxolotlInputConfig) cannot be imported by "
                                    f"{python} (ModuleNotFoundError: No module named 'axolotl'")
    assert not [f for f in report["findings"] if f["id"] == IGNORED]


def test_an_axolotl_config_with_plugins_is_not_checked_and_says_why(tmp_path):
    path = tmp_path / "axolotl.yml"
    path.write_text(AX_BAD + "plugins:\n  - axolotl.integrations.liger.LigerPlugin\n", encoding="utf-8")
    code, out, _ = run_cli("env", "--entrypoint", str(path), "--json")
    (report,) = json.loads(out)["reports"]
    assert code == 2
    (nc,) = [f for f in report["findings"] if f["level"] == "NOT-CHECKED"]
    assert nc["message"] == (f"the config's keys were not checked: {path} names plugins, which add their own keys "
                             "to axolotl's schema when axolotl loads them")
    assert not [f for f in report["findings"] if f["id"] == IGNORED]


@pytest.mark.parametrize("text,kind", [
    (GOOD, "llama-factory"),
    ("model_name_or_path: m\nstage: sft\ndataset: d\n", "llama-factory"),
    ("model_name_or_path: m\ndataset: d\noutput_dir: o\n", "yaml"),  # nothing only LLaMA-Factory says
    ("base_model: m\nsequence_len: 2048\n", "axolotl"),
    ("stage: build\n", "yaml"),  # a CI file, not a training config
])
def test_a_llamafactory_config_is_told_by_its_own_keys(tmp_path, text, kind):
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    assert read_yaml_config(path).kind == kind


def test_keys_values_and_their_spans_are_read_from_the_top_level_only(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text('stage: sft  # comment\n"template": \'qwen\'\nlora_target:\n  - q_proj\n  nested: 1\n'
                    "learning_rate: 1.0e-4\nrun_name: ${oc.env:USER}\n", encoding="utf-8")
    keys = {k.name: k for k in read_yaml_config(path).keys}
    assert list(keys) == ["stage", "template", "lora_target", "learning_rate", "run_name"]
    assert keys["stage"].value.value == "sft" and keys["stage"].value.span == Span(0, 7, 0, 10)
    assert keys["template"].name_span == Span(1, 1, 1, 9) and keys["template"].value.value == "qwen"
    assert keys["lora_target"].value.known is False  # a block below it
    assert keys["learning_rate"].value.value == 1.0e-4
    assert keys["run_name"].value.known is False  # an OmegaConf interpolation


def test_the_rules_word_a_yaml_key_and_value_as_llamafactory_refuses_them(tmp_path):
    """The rules over a YAML config bound to a merged signature (as collect_yaml builds it),
    without llamafactory: the wording, the line and the fixes of the YAML branch."""
    from trainproof_lsp.readers.envcheck import ApiProbe, EnvFacts, Signature
    from trainproof_lsp.readers.script import ApiCall
    from trainproof_lsp.readers.yaml_api import ATTR, MODULE
    from trainproof_lsp.rules import Context
    from trainproof_lsp.rules.base import NoLimits
    from trainproof_lsp.rules.script_api import check_keywords, check_values

    path = tmp_path / "bad.yaml"
    path.write_text(BAD.replace("lora_target: all", "evaluation_strategy: steps"), encoding="utf-8")
    config = read_yaml_config(path)
    signature = Signature(outcome="ok", library="llamafactory", version="0.9.5", qualname=f"{MODULE} (...)",
                          params=("model_name_or_path", "stage", "do_train", "finetuning_type", "lora_rank",
                                  "dataset", "template", "cutoff_len", "output_dir", "eval_strategy"),
                          choices=(("finetuning_type", ("lora", "oft", "freeze", "full"), False),))
    call = ApiCall(written="bad.yaml", module=MODULE, attr=ATTR, span=Span(0, 0, 0, 0), keywords=config.keys)
    facts = EnvFacts(path="bad.yaml", python="python3", imports_requested=True,
                     api=(ApiProbe(call=call, path="bad.yaml", signature=signature),))
    keys = list(check_keywords(facts, NoLimits(), Context()))
    assert [(h.location.span.start_line, h.evidence["keyword"], h.evidence["replacement"]) for h in keys] == [
        (7, "evaluation_strategy", "eval_strategy"), (8, "lora_rnak", "lora_rank")]
    # transformers' rename, named; no fix, since the config gives eval_strategy already
    assert "(renamed eval_strategy)" in keys[0].message and keys[0].fix is None
    assert keys[1].message == ("bad.yaml: 'lora_rnak' is no argument of llamafactory 0.9.5's training arguments "
                               "(ModelArguments, DataArguments, TrainingArguments, FinetuningArguments, "
                               "GeneratingArguments) (did you mean lora_rank?); `llamafactory-cli train` raises "
                               "ValueError (keys not used by the HfArgumentParser) before training starts")
    assert keys[1].fix is not None and keys[1].fix.edits[0].span == Span(8, 0, 8, 9)
    (value,) = check_values(facts, NoLimits(), Context())
    assert value.message == ("bad.yaml: finetuning_type: lroa: llamafactory 0.9.5 accepts 'lora', 'oft', 'freeze', "
                             "'full' for finetuning_type (closest: 'lora'); the run stops on it before training starts")
    assert value.location.span == Span(6, 17, 6, 21) and value.fix is not None
    assert value.fix.edits[0].new_text == "'lora'"
