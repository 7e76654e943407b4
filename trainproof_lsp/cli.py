"""Command line: `trainproof-lsp doctor|epoch|compare|preflight|env|watch|rules|serve`.

Each subcommand is one row of COMMANDS: a function that builds its parser and a function
that runs it. The judging ones share one path (`_judging`): settings loaded (file, then
flags), the judge called, anything it cannot judge as asked -> a one-line NOT-CHECKED
error, then text or --json printed, --sarif/--html written and the exit code returned.

Exit codes (CONTRACTS.md): 1 if anything FAILs; else 2 if anything could not be
judged; else 0. This module is the only place that turns outcomes into exit codes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence, TypeAlias

from . import TOOL_NAME, __version__
from .core.config import Config, ConfigError, keep_security, with_columns, with_fields, with_ignored, with_vocab
from .core.model import Level, Outcome, ReadError, Run, Verdict
from .core.text import printable
from .judge import compare, engine
from .judge.settings import discover, load_file
from .output import render
from .rules import BY_ID, REGISTRY, SECURITY_IDS

EXIT_OK, EXIT_FAIL, EXIT_NOT_CHECKED = 0, 1, 2


def exit_code(outcome: Outcome) -> int:
    if any(r.verdict is Verdict.FAIL for r in outcome.reports):
        return EXIT_FAIL
    # CONTRACTS.md §1: exit 0 only when everything was judged. A NOT-CHECKED report beside
    # a WARN one, or a check asked for that could not run inside a WARN report (a
    # TP-NOT-CHECKED finding: `--max-len` without transformers), still exits 2; the worst
    # verdict, WARN, would hide both.
    if outcome.error or outcome.not_judged or any(
            r.verdict is Verdict.NOT_CHECKED or any(f.level is Level.NOT_CHECKED for f in r.findings)
            for r in outcome.reports):
        return EXIT_NOT_CHECKED
    return EXIT_OK


def _path_or_url(s: str) -> Path | str:
    """A dataset argument: a path, or an fsspec URL kept as typed (Path would fold `//`)."""
    return s if "://" in s else Path(s)


def _settings(p: argparse.ArgumentParser) -> None:
    """Where the settings come from, and the rules the command line turns off."""
    source = p.add_mutually_exclusive_group()
    source.add_argument("--config", metavar="FILE", type=Path,
                        help="settings file (TOML with [tool.trainproof]); default: nearest pyproject.toml")
    source.add_argument("--no-config", action="store_true",
                        help="use no settings file: every rule with its default limits (CI on a tree it does "
                             "not trust: docs/ci.md)")
    p.add_argument("--ignore", metavar="ID", action="append", default=None,
                   help="turn rule ID off (repeatable); security rules too, unlike the settings file's ignore")
    p.add_argument("--allow-config-to-disable-security", action="store_true",
                   help="let the settings file's ignore/select turn security rules off (TP-CKPT-UNSAFE-PICKLE, "
                        "...); without it they run anyway, with a notice on stderr")


# Where --json's document is described: a file the wheel ships (package data), so the
# help names something every install has.
JSON_SCHEMA = "trainproof_lsp/output/outcome.schema.json"


def _output(p: argparse.ArgumentParser) -> None:
    """The output options every judging subcommand has, and its settings."""
    p.add_argument("--json", action="store_true",
                   help=f"print the JSON envelope instead of text (its JSON Schema: {JSON_SCHEMA} in the "
                        "installed package)")
    p.add_argument("--sarif", metavar="PATH", help="also write SARIF 2.1.0 to PATH")
    _settings(p)
    p.add_argument("-v", "--verbose", action="store_true",
                   help="also list the checks that ran, each skipped check with its reason, INFO findings "
                        "and files passed over")


def _common(p: argparse.ArgumentParser) -> None:
    """_output, and the run facts the log rules use (doctor, compare, epoch)."""
    _output(p)
    p.add_argument("--vocab-size", metavar="N", type=int,
                   help="number of output classes (LM vocabulary or labels) for TP-LOSS-ABOVE-UNIFORM")
    p.add_argument("--column", metavar="SERIES=NAME", action="append", default=None,
                   help="read the log's column (key, tag) NAME as SERIES (loss, eval_loss, lr, grad_norm, "
                        "step, ...) when its name is not one the readers know; repeatable")
    _field_option(p)
    p.add_argument("--num-classes", metavar="C", type=int,
                   help="number of labels of a classifier (the same bound as --vocab-size) for "
                        "TP-AT-CHANCE and TP-LOSS-ABOVE-UNIFORM")


def _field_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--field", metavar="FIELD=KEY", action="append", default=None,
                   help="read a dataset's KEY as the training field FIELD (text, messages, prompt, completion, "
                        "chosen, rejected, ...), e.g. --field text=content; repeatable")


def _html_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--html", metavar="PATH",
                   help="also write a self-contained HTML page with each run's curves and findings to PATH")


# --- one parser builder per subcommand -----------------------------------------------------

SubParsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"  # what add_subparsers gives


def _doctor_parser(sub: SubParsers) -> argparse.ArgumentParser:
    doctor = sub.add_parser("doctor", help="judge whatever is at PATH (files or folders; default: .)")
    doctor.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                        help="files or folders to judge (default: .); after `--`, a name starting with - is a path")
    doctor.add_argument("--baseline", metavar="B", type=Path,
                        help="also compare each run with this known-good run (default: baseline in the config)")
    doctor.add_argument("--reference", metavar="CKPT", type=Path,
                        help="compare checkpoints' tensor names and shapes with this checkpoint")
    _common(doctor)
    _html_option(doctor)
    return doctor


def _compare_parser(sub: SubParsers) -> argparse.ArgumentParser:
    compare_ = sub.add_parser("compare", help="judge runs against a known-good baseline run")
    compare_.add_argument("baseline", type=Path, metavar="BASELINE",
                          help="the known-good run's log or folder (omit to use baseline in the config)")
    compare_.add_argument("runs", nargs="*", type=Path, metavar="RUN", help="runs' logs or folders")
    _common(compare_)
    _html_option(compare_)
    return compare_


def _epoch_parser(sub: SubParsers) -> argparse.ArgumentParser:
    epoch = sub.add_parser("epoch", help="judge one training log")
    epoch.add_argument("log", type=Path, metavar="LOG",
                       help="the log file (trainer_state.json, metrics CSV/JSONL, event file); a run folder: doctor")
    _common(epoch)
    return epoch


def _env_parser(sub: SubParsers) -> argparse.ArgumentParser:
    env = sub.add_parser("env", help="can this machine start the run? the script's foot-guns and imports "
                                     "(in a child process), RAM, disk")
    target = env.add_mutually_exclusive_group()
    target.add_argument("--entrypoint", metavar="FILE", type=Path, help="the training script (never run)")
    target.add_argument("--module", metavar="M", help="the training module (`python -m M`; never run)")
    env.add_argument("--cwd", metavar="DIR", type=Path,
                     help="folder the run launches from (default: .); --entrypoint is still read as typed")
    env.add_argument("--python", metavar="EXE", help="interpreter the run uses (default: this one)")
    env.add_argument("--timeout", metavar="S", type=float,
                     help="seconds per import before it counts as hung (default: TP-ENV-IMPORT-TIMEOUT's timeout_s)")
    env.add_argument("--run-entrypoint", action="store_true",
                     help="also import the script itself, running its top-level code (off by default)")
    env.add_argument("--required-gb", metavar="N", type=float, help="system RAM the run needs")
    env.add_argument("--checkpoint-gb", metavar="N", type=float, help="size of one checkpoint")
    env.add_argument("--keep", metavar="K", type=int, default=1, help="checkpoints kept on disk (default 1)")
    env.add_argument("--output-dir", metavar="D", type=Path, help="where checkpoints will be written")
    env.add_argument("--checkpoint", metavar="CKPT", type=Path,
                     help="the checkpoint the run resumes from (read, never unpickled)")
    _output(env)
    return env


def _preflight_parser(sub: SubParsers) -> argparse.ArgumentParser:
    pre = sub.add_parser("preflight", help="check datasets and/or their tokenizer before training")
    pre.add_argument("datasets", nargs="*", type=_path_or_url, metavar="DATASET",
                     help="JSONL (or JSON array) files, folders of shards, globs, or (with --dask) "
                          "fsspec URLs (none: judge --tokenizer DIR alone)")
    pre.add_argument("--eval", metavar="EVAL", type=_path_or_url,
                     help="eval file: also checked for overlap with DATASETs")
    pre.add_argument("--tokenizer", metavar="DIR", type=Path, help="tokenizer folder (read as JSON)")
    pre.add_argument("--max-len", metavar="N", type=int,
                     help="context length for token-length checks and the token map (tokenizer.json read with "
                          "`tokenizers`; without one, counted with transformers: pip install 'trainproof-lsp[tokens]')")
    # The token map (docs/token-map.md): the run's masking, when it is not read from --train-config.
    pre.add_argument("--train-config", metavar="FILE", type=Path,
                     help="training script or YAML config (TRL, LLaMA-Factory, axolotl) to read the masking, max "
                          "length and truncation from")
    pre.add_argument("--loss", choices=("all", "assistant-only", "completion-only"),
                     help="which tokens carry loss (default: the config's, else TRL's)")
    pre.add_argument("--truncation", choices=("keep_start", "keep_end", "right", "left"),
                     help="which end of a row too long is kept (default: the config's, else keep_start)")
    pre.add_argument("--response-template", metavar="TEXT",
                     help="completion-only collator: loss after this text's tokens only")
    pre.add_argument("--collator-masks-pad", action="store_true", default=None,
                     help="the collator masks labels equal to the pad id (transformers' DataCollatorForLanguageModeling)")
    pre.add_argument("--sample", metavar="N", type=int, help="map about N rows, evenly spread (a quick look)")
    pre.add_argument("--batch", metavar="FILE", type=Path,
                     help="one saved batch (.safetensors, .npz or .json with input_ids/labels) for the label checks; "
                          "a .pt is never unpickled")
    pre.add_argument("--jobs", metavar="N", type=int,
                     help="worker processes for the scan (default: the cores available)")
    pre.add_argument("--dask", metavar="ADDRESS",
                     help="scan on the Dask cluster at ADDRESS (tcp://host:8786); needs the `dask` extra")
    _field_option(pre)
    _output(pre)
    return pre


def _rules_parser(sub: SubParsers) -> argparse.ArgumentParser:
    rules = sub.add_parser("rules", help="show the rule docs (all, or one ID)")
    rules.add_argument("rule_id", nargs="?", metavar="ID", help="one rule's full doc (default: list every rule)")
    rules.add_argument("--markdown", action="store_true", help="print docs/rules.md")
    rules.add_argument("--contracts", action="store_true",
                       help="print CONTRACTS.md's generated rule list (the block between its markers)")
    rules.add_argument("--json", action="store_true", help="rule metadata as JSON")
    return rules


def _watch_parser(sub: SubParsers) -> argparse.ArgumentParser:
    watch = sub.add_parser("watch", help="tail a growing log (or a run folder) and print each verdict change; "
                           "waits for a log that does not exist yet")
    watch.add_argument("target", type=Path, metavar="LOG_OR_DIR",
                       help="the log to tail, or the run folder whose log to tail (may not exist yet)")
    watch.add_argument("--interval", type=float, default=2.0, metavar="S", help="seconds between polls (default 2)")
    watch.add_argument("--until-fail", action="store_true", help="exit 1 once a FAIL is confirmed")
    watch.add_argument("--stall-timeout", type=float, metavar="S",
                       help="report a log that has not grown for S seconds")
    watch.add_argument("--confirm", type=int, metavar="N",
                       help="records a FAIL must stand before --until-fail exits (default: "
                            "TP-LOSS-SPIKE-UNRECOVERED's recover_within, 10)")
    watch.add_argument("--json", action="store_true", help="print verdict-stream objects (docs/guardian.md)")
    watch.add_argument("--config", metavar="FILE", type=Path,
                       help="settings file (TOML with [tool.trainproof]); default: nearest pyproject.toml")
    watch.add_argument("--vocab-size", metavar="N", type=int,
                       help="number of output classes (LM vocabulary or labels) for TP-LOSS-ABOVE-UNIFORM")
    watch.add_argument("--num-classes", metavar="C", type=int,
                       help="number of labels of a classifier (the same bound as --vocab-size)")
    watch.add_argument("--column", metavar="SERIES=NAME", action="append", default=None,
                       help="read the log's column NAME as SERIES (loss, eval_loss, lr, step, ...); repeatable")
    return watch


def _serve_parser(sub: SubParsers) -> argparse.ArgumentParser:
    serve_ = sub.add_parser("serve", help="run the language server on stdio")
    # vscode-languageclient appends --stdio for TransportKind.stdio; stdio is the only transport.
    serve_.add_argument("--stdio", action="store_true", help=argparse.SUPPRESS)
    return serve_


# --- the shared path: settings, judge, output, exit code -------------------------------------

class Refused(Exception):
    """A request that cannot be judged as given: its one-line reason becomes the outcome's
    error (NOT-CHECKED, exit 2), printed the way --json or text asks."""


# What a judging subcommand hands back: the outcome, and the runs behind it (run path ->
# Run) when --html is to draw their curves.
Judged: TypeAlias = "tuple[Outcome, Mapping[str, Run] | None]"


def _config(args: argparse.Namespace, anchor: Path) -> Config:
    """The settings file (--config, else the nearest pyproject.toml from `anchor`) with the
    flags on top; a setting that cannot be used is Refused."""
    try:
        if getattr(args, "no_config", False):
            config = Config()
        else:
            config = load_file(args.config) if args.config else discover(anchor.resolve())
        ignored = getattr(args, "ignore", None) or []
        if not getattr(args, "allow_config_to_disable_security", False):
            config, kept = keep_security(config, SECURITY_IDS)
            kept = tuple(i for i in kept if i not in ignored)  # the command line's --ignore decides those
            if kept:  # said on stderr: --json's stdout stays one document
                print(printable(f"{TOOL_NAME}: {config.source} turns off security rule(s) {', '.join(kept)}; "
                                "they run anyway (a settings file cannot turn them off: "
                                "--ignore ID or --allow-config-to-disable-security on the command line can)"),
                      file=sys.stderr)
        if ignored:
            unknown = sorted(set(ignored) - set(BY_ID))
            if unknown:
                raise ConfigError(f"--ignore: unknown rule(s) {', '.join(unknown)} (see `{TOOL_NAME} rules`)")
            config = with_ignored(config, ignored)
        vocab_size = getattr(args, "vocab_size", None)  # the log subcommands' run facts only
        if vocab_size is not None and vocab_size < 2:
            raise ConfigError("--vocab-size must be at least 2")
        num_classes = getattr(args, "num_classes", None)
        if num_classes is not None:
            if num_classes < 2:
                raise ConfigError("--num-classes must be at least 2")
            if vocab_size is not None:
                raise ConfigError("give --vocab-size or --num-classes, not both (they set the same bound)")
            config = with_vocab(config, num_classes, source="--num-classes")
        else:
            config = with_vocab(config, vocab_size)
        config = with_fields(config, getattr(args, "field", None), "--field")
        return with_columns(config, getattr(args, "column", None), "--column")
    except ConfigError as e:
        raise Refused(f"configuration: {e}") from None


def _emit(outcome: Outcome, args: argparse.Namespace, runs: Mapping[str, Run] | None = None) -> int:
    """Print the outcome; write --sarif and --html files. `runs` (run path -> Run) are the
    curves --html draws."""
    if getattr(args, "sarif", None):
        Path(args.sarif).write_text(render.to_sarif(outcome), encoding="utf-8")
    if getattr(args, "html", None):
        from .output.html import to_html  # start-up: only --html needs the page's renderer

        Path(args.html).write_text(to_html(outcome, runs), encoding="utf-8")
    verbose = getattr(args, "verbose", False)
    sys.stdout.write(render.to_json(outcome) if args.json else render.to_text(outcome, verbose=verbose))
    return exit_code(outcome)


def _judging(judge: Callable[[argparse.Namespace, Config], Judged],
             anchor: Callable[[argparse.Namespace], Path],
             check: Callable[[argparse.Namespace], None] = lambda args: None) -> Callable[[argparse.Namespace], int]:
    """The run of a judging subcommand: `check` the arguments, load the settings from
    `anchor`, `judge`; a Refused request is an outcome with its error."""

    def run(args: argparse.Namespace) -> int:
        try:
            check(args)
            config = _config(args, anchor(args))
            outcome, runs = judge(args, config)
        except Refused as e:
            return _emit(Outcome(reports=(), error=str(e)), args)
        if any(r.artefact.kind == "dataset" for r in outcome.reports):
            # start-up: only a dataset's report needs it (the rows' text: drop a duplicate, map the fields)
            from .judge.dataset_fixes import with_fixes

            outcome = with_fixes(outcome, config)
        return _emit(outcome, args, runs)

    return run


# --- the judging subcommands ------------------------------------------------------------------

def _doctor(args: argparse.Namespace, config: Config) -> Judged:
    paths = args.paths or [Path(".")]
    baseline = args.baseline or (Path(config.baseline) if config.baseline else None)
    if baseline is not None:
        if args.html:
            return compare.doctor_with_runs(paths, config, baseline)
        return compare.doctor(paths, config, baseline), None
    reference = None
    if args.reference is not None:
        try:
            reference = engine.read_reference(args.reference)
        except ReadError as e:
            raise Refused(str(e)) from None
    if args.html:
        return compare.doctor_with_runs(paths, config, reference=reference)
    return engine.doctor(paths, config, reference=reference), None


def _compare(args: argparse.Namespace, config: Config) -> Judged:
    if args.runs:
        baseline, runs = args.baseline, args.runs
    elif config.baseline:  # `compare RUN` with the baseline from the config
        baseline, runs = Path(config.baseline), [args.baseline]
    else:
        raise Refused("compare needs a BASELINE and at least one RUN (or baseline = \"...\" under [tool.trainproof])")
    if args.html:
        return compare.compare_with_runs(baseline, runs, config)
    return compare.compare(baseline, runs, config), None


def _epoch(args: argparse.Namespace, config: Config) -> Judged:
    if args.log.is_dir():  # a run folder: doctor finds its log (and judges the rest)
        raise Refused(f"{args.log} is a folder; epoch judges one log file: `{TOOL_NAME} doctor {args.log}` "
                      "judges a run folder")
    return engine.epoch(args.log, config), None


def _preflight_inputs(args: argparse.Namespace) -> None:
    if not args.datasets and args.tokenizer is None and args.eval is None and args.batch is None:
        raise Refused("preflight needs a DATASET, --eval EVAL or --tokenizer DIR")
    from .judge import parallel  # start-up: only preflight spreads work over processes

    args.datasets = parallel.expand_shards(args.datasets)  # folders and globs of shards


def _local_anchor(args: argparse.Namespace) -> Path:
    """preflight's settings are looked for beside its first local input (not a URL)."""
    return next((Path(p) for p in [*args.datasets, args.eval, args.tokenizer]
                 if p is not None and "://" not in str(p)), Path("."))


def _preflight(args: argparse.Namespace, config: Config) -> Judged:
    if args.max_len is not None and args.max_len < 1:
        raise Refused("--max-len must be at least 1")
    if args.sample is not None and args.sample < 1:
        raise Refused("--sample must be at least 1")
    from .judge import parallel  # start-up: only preflight spreads work over processes
    from .judge.token_map import MapOptions

    options = MapOptions(truncation=args.truncation, loss=args.loss, response_template=args.response_template,
                         train_config=args.train_config, sample=args.sample, pad_masked=args.collator_masks_pad)
    if args.dask is not None:
        from .judge.dask_preflight import preflight_dask  # start-up: only --dask needs it

        return preflight_dask(args.datasets, config, address=args.dask, eval_path=args.eval,
                              tokenizer_dir=args.tokenizer, max_len=args.max_len, progress=parallel.Progress,
                              map_options=options), None
    return parallel.run_preflight(args.datasets, config, eval_path=args.eval, tokenizer_dir=args.tokenizer,
                                  max_len=args.max_len, jobs=args.jobs, map_options=options, batch=args.batch), None


def _env(args: argparse.Namespace, config: Config) -> Judged:
    timeout = args.timeout if args.timeout is not None else \
        config.limits_for(BY_ID["TP-ENV-IMPORT-TIMEOUT"]).timeout_s
    if timeout <= 0 or args.keep < 1:
        raise Refused("--timeout must be > 0 and --keep >= 1")
    from .readers.envcheck import EnvRequest  # start-up: only env probes an interpreter

    entrypoint, from_cwd = _entrypoint_as_typed(args.entrypoint, args.cwd)
    request = EnvRequest(entrypoint=entrypoint, module=args.module, cwd=args.cwd, python=args.python,
                         timeout_s=timeout, run_entrypoint=args.run_entrypoint, required_gb=args.required_gb,
                         checkpoint_gb=args.checkpoint_gb, keep=args.keep, output_dir=args.output_dir)
    shown = str(args.entrypoint) if args.entrypoint is not None else None
    return engine.env(request, config, checkpoint=args.checkpoint, shown=shown, found_from_cwd=from_cwd), None


# --- the subcommands with a run of their own ----------------------------------------------------

def _rules(args: argparse.Namespace) -> int:
    if args.rule_id:
        rule = BY_ID.get(args.rule_id.upper())
        if rule is None:
            print(f"{TOOL_NAME}: unknown rule {args.rule_id!r}; `{TOOL_NAME} rules` lists them", file=sys.stderr)
            return EXIT_NOT_CHECKED
        print(render.rule_markdown(rule))
        return EXIT_OK
    if args.markdown:
        sys.stdout.write(render.rules_markdown())
    elif args.contracts:
        sys.stdout.write(render.contracts_rule_list())
    elif args.json:
        print(json.dumps([render.sarif_rule(r) for r in REGISTRY], indent=2, sort_keys=True))
    else:
        for r in REGISTRY:
            print(f"{r.id:<28} {r.level.value:<12} {r.summary}")
    return EXIT_OK


def _watch(args: argparse.Namespace) -> int:
    if args.interval <= 0 or (args.stall_timeout is not None and args.stall_timeout <= 0) or \
            (args.confirm is not None and args.confirm < 0):
        print(f"{TOOL_NAME} watch: --interval and --stall-timeout must be positive, --confirm >= 0",
              file=sys.stderr)
        return EXIT_NOT_CHECKED
    try:
        config = _config(args, args.target)
    except Refused as e:
        return _emit(Outcome(reports=(), error=str(e)), args)
    from .guardian.watch import Watch, WatchOptions  # start-up: only watch tails logs

    options = WatchOptions(interval=args.interval, until_fail=args.until_fail,
                           stall_timeout=args.stall_timeout, json=args.json, confirm=args.confirm)
    outcome = Watch(args.target, config, options).run()
    if not args.json:
        # The watch printed every change as it came; close with the last verdicts.
        for r in outcome.reports:
            reason = f": {r.reason}" if r.reason else ""
            print(printable(f"== {r.artefact.path}: {r.verdict.value}{reason}"))
    return exit_code(outcome)


def _serve(args: argparse.Namespace) -> int:
    from .server import serve  # start-up: the server's modules load only to serve

    return serve()


# --- the table --------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Subcommand:
    parser: Callable[[SubParsers], argparse.ArgumentParser]  # adds the subcommand's parser
    run: Callable[[argparse.Namespace], int]  # runs it; returns the exit code


def _first_path(*names: str) -> Callable[[argparse.Namespace], Path]:
    """Where the settings are looked for: the first of these arguments given (a list
    argument by its first item), else the working folder."""
    def anchor(args: argparse.Namespace) -> Path:
        for name in names:
            value = getattr(args, name)
            if isinstance(value, list):
                value = value[0] if value else None
            if value is not None:
                return Path(value)
        return Path(".")
    return anchor


# In the order `--help` lists them.
COMMANDS: dict[str, Subcommand] = {
    "doctor": Subcommand(parser=_doctor_parser, run=_judging(_doctor, _first_path("paths"))),
    "compare": Subcommand(parser=_compare_parser, run=_judging(_compare, _first_path("runs", "baseline"))),
    "epoch": Subcommand(parser=_epoch_parser, run=_judging(_epoch, _first_path("log"))),
    "env": Subcommand(parser=_env_parser, run=_judging(_env, _first_path("cwd", "entrypoint"))),
    "preflight": Subcommand(parser=_preflight_parser, run=_judging(
        _preflight, _local_anchor, check=_preflight_inputs)),
    "rules": Subcommand(parser=_rules_parser, run=_rules),
    "watch": Subcommand(parser=_watch_parser, run=_watch),
    "serve": Subcommand(parser=_serve_parser, run=_serve),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=TOOL_NAME,
        description="A deterministic linter for ML training runs. Exit: 0 pass/warn, 1 fail, 2 not checked.",
    )
    parser.add_argument("--version", action="version", version=f"{TOOL_NAME} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND",
                                help="what to do; `trainproof-lsp COMMAND --help` for its options")
    for command in COMMANDS.values():
        command.parser(sub)
    return parser


def run(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_NOT_CHECKED
    return COMMANDS[args.command].run(args)


def _entrypoint_as_typed(typed: Path | None, cwd: Path | None) -> tuple[Path | None, bool]:
    """The entrypoint as the user typed it, from the shell's working folder (absolute, so
    `--cwd` cannot change what it means); when it is not there but is relative to --cwd,
    that one, with True (the report says so). A path found nowhere is passed on as typed:
    the report says it is missing."""
    if typed is None or typed.is_absolute():
        return typed, False
    if typed.exists():
        return typed.resolve(), False
    if cwd is not None and (cwd / typed).exists():
        return (cwd / typed).resolve(), True
    return typed, False


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return run(argv)
    except KeyboardInterrupt:
        print(f"{TOOL_NAME}: interrupted", file=sys.stderr)
        return EXIT_NOT_CHECKED
    except BrokenPipeError:
        return EXIT_OK
    except Exception as e:  # never a traceback for the user; TRAINPROOF_DEBUG=1 shows it
        if os.environ.get("TRAINPROOF_DEBUG"):
            raise
        print(printable(f"{TOOL_NAME}: internal error: {type(e).__name__}: {e} "
                        "(NOT-CHECKED; set TRAINPROOF_DEBUG=1 for details)"), file=sys.stderr)
        return EXIT_NOT_CHECKED
