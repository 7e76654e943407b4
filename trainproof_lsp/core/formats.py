"""The one table of formats: which files the project reads, by name; which of them a
training run writes while it trains (watched); which folders are never searched; what
marks a run folder.

Every front end reads this table and nothing else: the engine's folder walk (`doctor`),
`watch`, the language server's file watchers and document kinds, and, checked by
tests/test_formats.py, the VS Code manifest and client and the Neovim setup. docs/formats.md
is generated from it (`python -m trainproof_lsp.core.formats > docs/formats.md`).

A name decides only the candidates: what a `.json` or `.jsonl` file holds (a metric log,
a dataset, records of neither) is decided from its first bytes by readers/detect.py.
"""

from __future__ import annotations

import io
import pickletools
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path, PurePath
from typing import Iterable, Literal

Kind = Literal["metrics", "dataset", "checkpoint", "script", "config", "resident"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Format:
    """One format the project knows by its file name."""

    kind: Kind
    name: str  # as detection reports it (Detected.format)
    suffixes: tuple[str, ...] = ()  # lower case, with the dot; ".index.json" is a suffix too
    names: tuple[str, ...] = ()  # exact file names
    patterns: tuple[str, ...] = ()  # file-name globs (`*` only), e.g. "events.out.tfevents.*"
    # A training run writes it while it trains: `watch` tails it (metric logs) and the
    # editors re-judge it from disk when it changes, open or not.
    watched: bool = False
    # An editor sends its buffer to the server, which judges it as it is typed.
    opened: bool = False
    about: str
    # The writer (and its version) whose output the tests read, for a format a tool writes.
    tested: str = ""

    def matches(self, file_name: str) -> bool:
        lower = file_name.lower()
        return (file_name in self.names or any(lower.endswith(s) for s in self.suffixes)
                or any(fnmatchcase(file_name, p) for p in self.patterns))

    @property
    def globs(self) -> tuple[str, ...]:
        """Workspace globs for this format's files (`**/` + name, pattern or `*` + suffix)."""
        return tuple(f"**/{n}" for n in (*self.names, *self.patterns)) + tuple(f"**/*{s}" for s in self.suffixes)


_PICKLE = "a pickle: its opcodes are walked, never loaded"

FORMATS: tuple[Format, ...] = (
    # --- metric logs ---------------------------------------------------------------
    Format(kind="metrics", name="hf-trainer-state", names=("trainer_state.json",), watched=True, opened=True,
           about="HF Trainer state (`log_history`), also any `.json` holding `log_history`; "
                 "`checkpoint-N/` copies are prefixes of their run",
           tested="transformers 5.25 Trainer (fixtures/hf_runs)"),
    Format(kind="metrics", name="tfevents", patterns=("events.out.tfevents.*",), watched=True,
           about="TensorBoard event file (HF, Lightning, Keras, Coqui), read from the wire format",
           tested="torch 2.13 `torch.utils.tensorboard.SummaryWriter`"),
    Format(kind="metrics", name="metrics-csv", suffixes=(".csv", ".tsv"), watched=True, opened=True,
           about="metric table: Lightning/Keras CSVLogger, W&B history export (`_step`, `train/loss`, ... "
                 "columns; a NaN loss is an empty cell there, as pandas writes it, so only the run file shows it; "
                 "a chart panel's export, `<run> - train/loss` columns, is not read)",
           tested="lightning 2.6 CSVLogger"),
    Format(kind="metrics", name="metrics-jsonl", suffixes=(".jsonl", ".ndjson"), watched=True, opened=True,
           about="one metric record per line (a loss or step key in the first records)"),
    Format(kind="metrics", name="metrics-json", suffixes=(".json",), watched=True, opened=True,
           about="a JSON array of metric records"),
    # Coqui writes a plain text log; the editors do not send every .txt/.log they open
    # (most are not training logs), the log is re-judged from disk when it changes.
    Format(kind="metrics", name="coqui-log", suffixes=(".txt", ".log"), watched=True,
           about="Coqui TTS trainer text log (train and EVAL blocks), recognised by its first bytes"),
    # Fine-tuning stacks' own logs: told from other metric JSONL / text logs by their first
    # bytes (their files are matched by the `.jsonl` and `.txt`/`.log` rows above).
    Format(kind="metrics", name="llamafactory-log",
           about="LLaMA-Factory `trainer_log.jsonl` (`current_steps` is the step; `loss`, `eval_loss`, "
                 "`lr`/`learning_rate`, `epoch`, `throughput`); with the folder's `trainer_state.json` "
                 "it is one run. `all_results.json`/`train_results.json` are the run's summary: passed over",
           tested="LLaMA-Factory 0.9.5's LogCallback (`make setup`: .venv/writers)"),
    Format(kind="metrics", name="swift-log",
           about="ms-swift `logging.jsonl` (`global_step/max_steps` \"N/M\" is the step; `loss`, "
                 "`eval_loss`, `learning_rate`, `grad_norm`, `train_speed(iter/s)` or `train_speed(s/it)`, "
                 "`epoch`; `memory(GiB)` not read); `num_labels` of a `seq_cls` run from the folder's `args.json`",
           tested="ms-swift 4.6.0's ProgressCallbackNew and save_args (`make setup`: .venv/writers); "
                  "older releases' `train_speed(iter/s)` rows in their shape"),
    Format(kind="metrics", name="torchtune-log",
           about="torchtune DiskLogger text log (`log_<time>.txt`, lines `Step N | loss:… lr:…`; "
                 "`tokens_per_second_per_gpu` is the throughput, `grad_norm` read; memory not read); "
                 "`num_classes`/`vocab_size` from `torchtune_config.yaml` beside it or above its `logs/`",
           tested="torchtune 0.6.1's DiskLogger and save_config (`make setup`: .venv/writers)"),
    # Training stdout captured to a file: `.out` here (nohup.out, slurm-<job>.out), `.log`
    # and `.txt` by the Coqui row above (watched there). Read as one when its name is
    # nohup.out or slurm-*.out or its first bytes hold a line the reader reads
    # (readers/stdout_log.py), else passed over. Not watched by suffix: `.out` is too
    # common a suffix to start the editors on or to tail every such file.
    Format(kind="metrics", name="stdout-log", suffixes=(".out",),
           about="training stdout captured to a file (`train.log`, `nohup.out`, `slurm-*.out`, `*.log`): "
                 "HF Trainer `{'loss': …}` dicts (x axis: the dict's ordinal, the Trainer prints no step), "
                 "Megatron `iteration N/M | lm loss: … | loss scale: … | grad norm: …` and `validation loss at "
                 "iteration N`, nanoGPT `iter N: loss …, time …ms` / `step N: … val loss …`, DeepSpeed "
                 "`OVERFLOW! … Attempted loss scale: X, reducing to Y` and `Current loss scale already at minimum`; "
                 "other lines counted and passed over. Not read: HF `train_runtime` summaries, nanoGPT's train-loss "
                 "estimate on `step` lines, Megatron's skipped/nan iteration counts",
           tested="transformers 5.25 Trainer's printed dicts; DeepSpeed 0.19.8's DynamicLossScaler through its "
                  "logger (`make setup`: .venv/writers); Megatron-LM and nanoGPT lines in their writers' f-string shapes"),
    # W&B offline runs: a binary record log the SDK appends to while the run trains.
    Format(kind="metrics", name="wandb-offline", suffixes=(".wandb",), watched=True,
           about="W&B run file (`wandb/offline-run-*/run-<id>.wandb` of `wandb.init(mode=\"offline\")`, and the "
                 "local copy an online run keeps in `wandb/run-*/`): its "
                 "record log read from the wire format (no `wandb` needed), CRCs checked; the history records "
                 "(`wandb.log`) are the rows (`train/loss`, `train/global_step`, `_step`...), the run's config gives "
                 "`max_steps`, `logging_steps` and `vocab_size`/`num_labels`. A file cut short or damaged is read up to "
                 "there and is NOT-CHECKED beyond. Not read: media, tables, histograms, system stats; "
                 "`files/config.yaml` and `wandb-summary.json` (the run's config is in the record log)",
           tested="wandb 0.31, `wandb.init(mode=\"offline\")` + `wandb.log`"),
    Format(kind="metrics", name="mlflow",
           about="MLflow file-store run folder (`meta.yaml` + `metrics/`, one file per metric)"),
    # --- datasets --------------------------------------------------------------------
    Format(kind="dataset", name="dataset-jsonl", suffixes=(".jsonl", ".ndjson"), opened=True,
           about="training dataset, one record per line (text, prompt/completion, messages, "
                 "conversations, alpaca, preference pairs)"),
    Format(kind="dataset", name="dataset-json", suffixes=(".json",), opened=True,
           about="training dataset as a JSON array of records"),
    # --- checkpoints: read without running (never unpickled). Watched: a checkpoint a run
    # has just saved is judged (cut off? unsafe pickle?) without anyone opening it.
    Format(kind="checkpoint", name="pt", watched=True, suffixes=(".pt",), about="torch.save archive"),
    Format(kind="checkpoint", name="pth", watched=True, suffixes=(".pth",), about="torch.save archive"),
    Format(kind="checkpoint", name="ckpt", watched=True, suffixes=(".ckpt",), about="Lightning checkpoint"),
    Format(kind="checkpoint", name="bin", watched=True, suffixes=(".bin",),
           about="torch.save archive (`pytorch_model.bin`); `training_args.bin` is " + _PICKLE),
    Format(kind="checkpoint", name="safetensors", watched=True, suffixes=(".safetensors",),
           about="safetensors header and tensors"),
    Format(kind="checkpoint", name="sharded-index", watched=True, suffixes=(".index.json",),
           about="index of a sharded checkpoint"),
    Format(kind="checkpoint", name="tar", watched=True, suffixes=(".tar",),
           about="a torch.save archive under a tar name (`checkpoint.tar`, `model_best.pth.tar`), or a "
                 "tar archive: every member torch.load reads from its legacy tar format is walked"),
    Format(kind="checkpoint", name="pkl", watched=True, suffixes=(".pkl",), about=_PICKLE),
    Format(kind="checkpoint", name="pickle", watched=True, suffixes=(".pickle",), about=_PICKLE),
    Format(kind="checkpoint", name="joblib", watched=True, suffixes=(".joblib",), about=_PICKLE),
    Format(kind="checkpoint", name="npy", suffixes=(".npy",),
           about="numpy array: an object array is a pickle `np.load(allow_pickle=True)` runs, walked"),
    Format(kind="checkpoint", name="npz", suffixes=(".npz",),
           about="numpy archive of `.npy` arrays: each object array's pickle is walked"),
    # --- training scripts and configs ------------------------------------------------
    Format(kind="script", name="python", suffixes=(".py",), opened=True,
           about="training script, read with `ast` (a TrainingArguments-family call, or a "
                 "training-framework import for the editor's lenses)"),
    # Judged with their folder; the chat template's findings land on whichever file holds it.
    Format(kind="config", name="tokenizer",
           names=("tokenizer_config.json", "special_tokens_map.json", "tokenizer.json",
                  "chat_template.jinja", "chat_template.json"), opened=True,
           about="tokenizer folder files, read as JSON (no transformers needed)"),
    Format(kind="config", name="model-config", names=("config.json", "generation_config.json", "adapter_config.json"),
           opened=True, about="model/generation/adapter settings; `vocab_size`/`num_labels` read from `config.json`"),
    Format(kind="resident", name="run-resident",
           names=("vocab.json", "added_tokens.json", "preprocessor_config.json", "hparams.yaml", "run_meta.json",
                  # HF Trainer's save_metrics: the run's summary, its numbers from the run's log
                  "all_results.json", "train_results.json", "eval_results.json"),
           about="ordinary residents of a run folder: known by name, never judged"),
)

# Folders never searched by `doctor`, `watch` or the server's watchers: version control,
# tool caches and installed packages hold no run of the user's (a venv's site-packages has
# thousands of .json/.py files). Any folder whose name starts with "." is skipped too.
SKIPPED_FOLDERS = frozenset({".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache",
                             ".pytest_cache", ".tox", ".ruff_cache", "wandb-cache",
                             "site-packages", "dist-packages"})

# What marks a folder as a training run's output: one entry by these names, prefixes or
# suffixes (HF output_dir, Lightning version_N/, TensorBoard, checkpoints).
RUN_MARKER_NAMES = ("trainer_state.json", "metrics.csv", "metrics.jsonl", "hparams.yaml")
RUN_MARKER_PREFIXES = ("checkpoint-", "events.out.tfevents.", "version_")
RUN_MARKER_SUFFIXES = (".ckpt", ".safetensors")

# HF Trainer's checkpoint-<step>/ folder: a copy of its run at that step, never a run of its own.
_CHECKPOINT_FOLDER = re.compile(r"checkpoint-(\d+)$")


# --- content: what a file is whatever its name ----------------------------------------------

# A pickle's first opcode when it starts with PROTO (protocols 2-5: torch.save, joblib,
# pickle.dump's default).
_PICKLE_PROTO = re.compile(rb"\x80[\x02-\x05]")
# numpy's .npy magic: np.load unpickles an object array in it.
NPY_MAGIC = b"\x93NUMPY"
# A protocol 0/1 pickle names a global first (`c` module NL name NL) or marks first; told
# apart from text by decoding the head to a STOP (text stops at its first space).
_OLD_PICKLE_START = re.compile(rb"\(?c[A-Za-z_][\w.]{0,200}\n[A-Za-z_][\w.]{0,200}\n")


def sniff_checkpoint(head: bytes) -> str | None:
    """The checkpoint format a file's first bytes show, whatever its name, or None.

    torch.load and pickle.load do not look at a name: a torch.save archive named
    `checkpoint.tar` or `weights` is one. "pt" for a ZIP whose entries (within the head)
    include torch's data.pkl, "tar" for a tar archive (torch's legacy format, or not),
    "npy" for a numpy array, "pkl" for a pickle."""
    if head[:4] == b"PK\x03\x04":
        return "pt" if _zip_head_names_data_pkl(head) else None
    if head[:6] == NPY_MAGIC:
        return "npy"
    if len(head) >= 512 and tar_checksum_ok(head[:512]):
        return "tar"
    if _PICKLE_PROTO.match(head):
        return "pkl"
    if _OLD_PICKLE_START.match(head) and _decodes_to_stop(head):
        return "pkl"
    return None


def _zip_head_names_data_pkl(head: bytes) -> bool:
    # Local file headers: signature, ..., name length at +26, extra length at +28, name at
    # +30. torch.save writes `<archive>/data.pkl` first.
    pos = 0
    while pos + 30 <= len(head) and head[pos:pos + 4] == b"PK\x03\x04":
        nlen = int.from_bytes(head[pos + 26:pos + 28], "little")
        elen = int.from_bytes(head[pos + 28:pos + 30], "little")
        csize = int.from_bytes(head[pos + 18:pos + 22], "little")
        entry = head[pos + 30:pos + 30 + nlen]
        if entry.endswith(b"data.pkl"):
            return True
        flags = int.from_bytes(head[pos + 6:pos + 8], "little")
        if flags & 0x08:  # sizes in a descriptor after the data: the next header is not findable cheaply
            return False
        pos += 30 + nlen + elen + csize
    return False


def tar_checksum_ok(block: bytes) -> bool:
    # tarfile's own test of a header: the octal checksum at bytes 148-155 equals the sum of
    # the 512 bytes with that field read as spaces (unsigned, or signed as old tars wrote).
    if block.count(0) == len(block):
        return False
    field = block[148:156].split(b"\0", 1)[0].strip()
    if not field or not all(48 <= c <= 55 for c in field):
        return False
    rest = block[:148] + b" " * 8 + block[156:512]
    return int(field, 8) in (sum(rest), sum(b - 256 if b > 127 else b for b in rest))


def _decodes_to_stop(head: bytes) -> bool:
    try:
        for op, _, _ in pickletools.genops(io.BytesIO(head)):
            if op.name == "STOP":
                return True
    except Exception:  # genops on arbitrary bytes: any decoding error means "not a pickle"
        return False
    return False


def by_name(name: str) -> Format:
    """The table's entry for a format name (KeyError for a name it does not hold)."""
    for f in FORMATS:
        if f.name == name:
            return f
    raise KeyError(name)


def formats_of(kind: Kind) -> tuple[Format, ...]:
    return tuple(f for f in FORMATS if f.kind == kind)


def suffixes(formats: Iterable[Format]) -> frozenset[str]:
    return frozenset(s for f in formats for s in f.suffixes)


def file_names(formats: Iterable[Format]) -> frozenset[str]:
    return frozenset(n for f in formats for n in f.names)


def globs(formats: Iterable[Format]) -> tuple[str, ...]:
    """The formats' globs, each once, in table order; a suffix another one covers
    (`.index.json` under `.json`) adds no glob of its own."""
    chosen = tuple(formats)
    every = suffixes(chosen)
    covered = {s for s in every if any(t != s and s.endswith(t) for t in every)}
    return tuple(dict.fromkeys(g for f in chosen for g in f.globs
                               if not any(g == f"**/*{s}" for s in covered)))


def watched_globs() -> tuple[str, ...]:
    """What the editors watch: every file a run writes while it trains."""
    return globs(f for f in FORMATS if f.watched)


def opened_extensions() -> frozenset[str]:
    """Extensions (without the dot) of the files an editor sends to the server when opened."""
    return frozenset(x.rsplit(".", 1)[-1] for f in FORMATS if f.opened for x in (*f.names, *f.suffixes))


def is_watched_log(file_name: str) -> bool:
    """A metric log `watch` tails."""
    return any(f.matches(file_name) for f in FORMATS if f.watched and f.kind == "metrics")


def is_candidate(file_name: str) -> bool:
    """A file `doctor` looks at in a folder: any format the table names by suffix or
    pattern (named residents are listed as passed over)."""
    return any(f.matches(file_name) for f in FORMATS if f.suffixes or f.patterns)


def is_skipped_folder(name: str) -> bool:
    return name in SKIPPED_FOLDERS or name.startswith(".")


def in_skipped_folder(relative: PurePath) -> bool:
    """A path (relative to the folder searched) lies inside a folder that is never searched."""
    return any(is_skipped_folder(part) for part in relative.parts[:-1])


def checkpoint_step(folder_name: str) -> int | None:
    """The step of HF's checkpoint-<step>/ folder; None for any other name."""
    m = _CHECKPOINT_FOLDER.match(folder_name)
    return int(m.group(1)) if m else None


def run_root(log_path: Path) -> Path:
    """The output_dir of a log: a checkpoint-N/ copy belongs to its parent's run."""
    parent = log_path.parent
    return parent.parent if checkpoint_step(parent.name) is not None else parent


def is_run_marker(entry_name: str) -> bool:
    """A folder entry that makes its folder a training run's output."""
    return (entry_name in RUN_MARKER_NAMES or entry_name.startswith(RUN_MARKER_PREFIXES)
            or entry_name.endswith(RUN_MARKER_SUFFIXES))


def markdown() -> str:
    """docs/formats.md: the table as a reader of the docs wants it."""
    def cell(items: Iterable[str]) -> str:
        return ", ".join(f"`{i}`" for i in items) or "—"

    lines = [
        "<!-- Generated from trainproof_lsp/core/formats.py by "
        "`python -m trainproof_lsp.core.formats > docs/formats.md` (`make docs`); "
        "tests/test_formats.py fails when it drifts. -->",
        "# Formats",
        "",
        "What trainproof-lsp reads, by file name. One table in `trainproof_lsp/core/formats.py` decides "
        "it for `doctor`, `watch`, the language server and the editors; where a name fits several "
        "formats (`.json`, `.jsonl`), the file's first bytes decide.",
        "",
        "**Watched**: a training run writes it while it trains — `watch` tails the metric logs among "
        "them, and the editors re-judge it when it changes on disk, open or not. "
        "**Opened**: an editor sends the open file to the language server, which judges it as you type.",
        "",
        "**Tested against**: the writer (and its version) whose output the tests read.",
        "",
        "| kind | format | file names | watched | opened | what it is | tested against |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in FORMATS:
        named = cell((*f.names, *f.patterns, *(f"*{s}" for s in f.suffixes)))
        lines.append(f"| {f.kind} | `{f.name}` | {named} | {'yes' if f.watched else ''} | "
                     f"{'yes' if f.opened else ''} | {f.about} | {f.tested or '—'} |")
    lines += [
        "",
        f"**Folders never searched** (by `doctor`, `watch` and the server's file watchers): "
        f"{cell(sorted(SKIPPED_FOLDERS))}, and every folder whose name starts with `.`. `doctor` still "
        "searches them for checkpoints: judged in a dot-folder (`.models/`) or `wandb-cache`, named as "
        "passed over inside installed packages (`venv`, `.venv`, `site-packages`, `dist-packages`, "
        "`node_modules`, `.tox`).",
        "",
        "**By content**: in a folder holding a run marker or a checkpoint, a file no name above claims "
        "is judged as a checkpoint when its first bytes are a torch.save archive, a pickle, a tar archive "
        "or a numpy array (`checkpoint.tar`, `weights`): torch.load and pickle.load do not look at names.",
        "",
        "**Git LFS pointers**: a file whose bytes are a Git LFS pointer (at most 1 KiB: `version "
        "https://git-lfs.github.com/spec/v1`, `oid sha256:…`, `size N`), whatever its name, is what a checkout "
        "without `git lfs pull` leaves in place of the file: one NOT-CHECKED per file from `doctor`, `epoch`, "
        "`preflight` and the checkpoint reader — \"Git LFS pointer to a 267,832,560-byte "
        "file, not downloaded: run `git lfs pull`\" — never read as the checkpoint, dataset or log its name "
        "says. In a run folder a pointer of any name is found by the walk. In CI: docs/ci.md.",
        "",
        "**Parts of a composite loss**: in a metric table (CSV, JSONL, a JSON array, a W&B export) and "
        "in trainer_state.json, a column or key with the word `loss` in it that is not the loss, an eval "
        "loss or the fp16 loss scale (`recon_loss`, `train/loss_ce`, `aux_loss`, `mel_loss`), or a KL or "
        "likelihood term (`train_kld`, `nll`), is read as a named part of the loss; a smoothed, total or "
        "per-epoch copy of one is not. TP-LOSS-PART-STALLED judges the parts against the total.",
        "",
        "**Not read yet**: W&B chart-panel CSV exports (`Step`, `<run> - train/loss`, `__MIN`/`__MAX` "
        "columns); Comet, Neptune, ClearML and Aim offline stores; DeepSpeed's `csv_monitor` files (one file a "
        "metric); LLaMA-Factory's `training_args.yaml` (it names no class or vocabulary count); planned steps and "
        "precision from the stacks' saved arguments (`args.json`, `torchtune_config.yaml`): the logs' own "
        "N/M and `total_steps` give the planned steps. Point `--column loss=NAME` at a table whose loss column "
        "the readers do not know.",
        "",
        f"**A run folder** (the editor offers *Doctor* on it) holds an entry named {cell(RUN_MARKER_NAMES)}, "
        f"or starting with {cell(RUN_MARKER_PREFIXES)}, or ending with {cell(RUN_MARKER_SUFFIXES)}. "
        "A `checkpoint-<step>/` folder belongs to its parent's run.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(), end="")
