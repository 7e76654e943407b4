"""Command line: `trainproof-lsp doctor|epoch|rules ...`. Text, --json, --sarif.

Exit codes (CONTRACTS.md): 1 if anything FAILs; else 2 if anything could not be
judged; else 0. This module is the only place that turns outcomes into exit codes.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from . import TOOL_NAME, __version__
from .core.config import Config, ConfigError, discover, load_file, with_columns, with_vocab
from .core.model import Level, Outcome, ReadError, Verdict

if TYPE_CHECKING:
    from .core.model import Run

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


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the JSON envelope (CONTRACTS.md)")
    p.add_argument("--sarif", metavar="PATH", help="also write SARIF 2.1.0 to PATH")
    p.add_argument("--config", metavar="FILE", type=Path,
                   help="settings file (TOML with [tool.trainproof]); default: nearest pyproject.toml")
    p.add_argument("--vocab-size", metavar="N", type=int,
                   help="number of output classes (LM vocabulary or labels) for TP-LOSS-ABOVE-UNIFORM")
    p.add_argument("--column", metavar="SERIES=NAME", action="append", default=None,
                   help="read the log's column (key, tag) NAME as SERIES (loss, eval_loss, lr, grad_norm, "
                        "step, ...) when its name is not one the readers know; repeatable")
    p.add_argument("--num-classes", metavar="C", type=int,
                   help="number of labels of a classifier (the same bound as --vocab-size) for "
                        "TP-AT-CHANCE and TP-LOSS-ABOVE-UNIFORM")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="also list the checks that ran, each skipped check with its reason, INFO findings "
                        "and files passed over")


def _html_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--html", metavar="PATH",
                   help="also write a self-contained HTML page with each run's curves and findings to PATH")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=TOOL_NAME,
        description="A deterministic linter for ML training runs. Exit: 0 pass/warn, 1 fail, 2 not checked.",
    )
    parser.add_argument("--version", action="version", version=f"{TOOL_NAME} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    doctor = sub.add_parser("doctor", help="judge whatever is at PATH (files or folders; default: .)")
    doctor.add_argument("paths", nargs="*", type=Path, metavar="PATH")
    doctor.add_argument("--baseline", metavar="B", type=Path,
                        help="also compare each run with this known-good run (default: baseline in the config)")
    doctor.add_argument("--reference", metavar="CKPT", type=Path,
                        help="compare checkpoints' tensor names and shapes with this checkpoint")
    _common(doctor)
    _html_option(doctor)
    compare = sub.add_parser("compare", help="judge runs against a known-good baseline run")
    compare.add_argument("baseline", type=Path, metavar="BASELINE",
                         help="the known-good run's log or folder (omit to use baseline in the config)")
    compare.add_argument("runs", nargs="*", type=Path, metavar="RUN", help="runs' logs or folders")
    _common(compare)
    _html_option(compare)
    epoch = sub.add_parser("epoch", help="judge one training log")
    epoch.add_argument("log", type=Path, metavar="LOG")
    _common(epoch)
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
    _common(env)
    preflight = sub.add_parser("preflight", help="check datasets and/or their tokenizer before training")
    preflight.add_argument("datasets", nargs="*", type=_path_or_url, metavar="DATASET",
                           help="JSONL (or JSON array) files, folders of shards, globs, or (with --dask) "
                                "fsspec URLs (none: judge --tokenizer DIR alone)")
    preflight.add_argument("--eval", metavar="EVAL", type=_path_or_url,
                           help="eval file: also checked for overlap with DATASETs")
    preflight.add_argument("--tokenizer", metavar="DIR", type=Path, help="tokenizer folder (read as JSON)")
    preflight.add_argument("--max-len", metavar="N", type=int, help="context length for token-length checks")
    preflight.add_argument("--jobs", metavar="N", type=int,
                           help="worker processes for the scan (default: the cores available)")
    preflight.add_argument("--dask", metavar="ADDRESS",
                           help="scan on the Dask cluster at ADDRESS (tcp://host:8786); needs the `dask` extra")
    _common(preflight)
    rules = sub.add_parser("rules", help="show the rule docs (all, or one ID)")
    rules.add_argument("rule_id", nargs="?", metavar="ID")
    rules.add_argument("--markdown", action="store_true", help="print docs/rules.md")
    rules.add_argument("--json", action="store_true", help="rule metadata as JSON")
    watch = sub.add_parser("watch", help="tail a growing log (or a run folder) and print each verdict change; "
                           "waits for a log that does not exist yet")
    watch.add_argument("target", type=Path, metavar="LOG_OR_DIR")
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
    serve = sub.add_parser("serve", help="run the language server on stdio")
    # vscode-languageclient appends --stdio for TransportKind.stdio; stdio is the only transport.
    serve.add_argument("--stdio", action="store_true", help=argparse.SUPPRESS)
    return parser


def _config(args: argparse.Namespace, anchor: Path) -> Config:
    config = load_file(args.config) if args.config else discover(anchor.resolve())
    if args.vocab_size is not None and args.vocab_size < 2:
        raise ConfigError("--vocab-size must be at least 2")
    num_classes = getattr(args, "num_classes", None)
    if num_classes is not None:
        if num_classes < 2:
            raise ConfigError("--num-classes must be at least 2")
        if args.vocab_size is not None:
            raise ConfigError("give --vocab-size or --num-classes, not both (they set the same bound)")
        config = with_vocab(config, num_classes, source="--num-classes")
    else:
        config = with_vocab(config, args.vocab_size)
    return with_columns(config, getattr(args, "column", None), "--column")


def _emit(outcome: Outcome, args: argparse.Namespace, runs: "Mapping[str, Run] | None" = None) -> int:
    """Print the outcome; write --sarif and --html files. `runs` (run path -> Run) are the
    curves --html draws."""
    from .output import render

    if args.sarif:
        Path(args.sarif).write_text(render.to_sarif(outcome), encoding="utf-8")
    if getattr(args, "html", None):
        from .output.html import to_html

        Path(args.html).write_text(to_html(outcome, runs), encoding="utf-8")
    sys.stdout.write(render.to_json(outcome) if args.json else render.to_text(outcome, verbose=args.verbose))
    return exit_code(outcome)


def _rules(args: argparse.Namespace) -> int:
    import json

    from .output import render
    from .rules import BY_ID, REGISTRY

    if args.rule_id:
        rule = BY_ID.get(args.rule_id.upper())
        if rule is None:
            print(f"{TOOL_NAME}: unknown rule {args.rule_id!r}; `{TOOL_NAME} rules` lists them", file=sys.stderr)
            return EXIT_NOT_CHECKED
        print(render.rule_markdown(rule))
        return EXIT_OK
    if args.markdown:
        sys.stdout.write(render.rules_markdown())
    elif args.json:
        print(json.dumps([render.sarif_rule(r) for r in REGISTRY], indent=2, sort_keys=True))
    else:
        for r in REGISTRY:
            print(f"{r.id:<28} {r.level.value:<12} {r.summary}")
    return EXIT_OK


def _watch(args: argparse.Namespace) -> int:
    from .guardian.watch import Watch, WatchOptions

    args.sarif, args.verbose = None, False  # not offered by watch; _emit reads them
    if args.interval <= 0 or (args.stall_timeout is not None and args.stall_timeout <= 0) or \
            (args.confirm is not None and args.confirm < 0):
        print(f"{TOOL_NAME} watch: --interval and --stall-timeout must be positive, --confirm >= 0",
              file=sys.stderr)
        return EXIT_NOT_CHECKED
    try:
        config = _config(args, args.target)
    except ConfigError as e:
        return _emit(Outcome(reports=(), error=f"configuration: {e}"), args)
    options = WatchOptions(interval=args.interval, until_fail=args.until_fail,
                           stall_timeout=args.stall_timeout, json=args.json, confirm=args.confirm)
    outcome = Watch(args.target, config, options).run()
    if not args.json:
        # The watch printed every change as it came; close with the last verdicts.
        for r in outcome.reports:
            reason = f": {r.reason}" if r.reason else ""
            print(f"== {r.artefact.path}: {r.verdict.value}{reason}")
    return exit_code(outcome)


def run(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_NOT_CHECKED
    if args.command == "rules":
        return _rules(args)
    if args.command == "watch":
        return _watch(args)
    if args.command == "serve":
        from .server import serve

        return serve()
    from .judge import engine

    if args.command == "doctor":
        paths = args.paths or [Path(".")]
        try:
            config = _config(args, paths[0])
        except ConfigError as e:
            return _emit(Outcome(reports=(), error=f"configuration: {e}"), args)
        baseline = args.baseline or (Path(config.baseline) if config.baseline else None)
        if baseline is not None:
            from .judge import compare

            if args.html:
                outcome, found = compare.doctor_with_runs(paths, config, baseline)
                return _emit(outcome, args, found)
            return _emit(compare.doctor(paths, config, baseline), args)
        reference = None
        if args.reference is not None:
            try:
                reference = engine.read_reference(args.reference)
            except ReadError as e:
                return _emit(Outcome(reports=(), error=str(e)), args)
        if args.html:
            from .output.html import doctor_with_runs

            outcome, found = doctor_with_runs(paths, config, reference=reference)
            return _emit(outcome, args, found)
        return _emit(engine.doctor(paths, config, reference=reference), args)
    if args.command == "compare":
        from .judge import compare

        try:
            config = _config(args, (args.runs or [args.baseline])[0])
        except ConfigError as e:
            return _emit(Outcome(reports=(), error=f"configuration: {e}"), args)
        if args.runs:
            baseline, runs = args.baseline, args.runs
        elif config.baseline:  # `compare RUN` with the baseline from the config
            baseline, runs = Path(config.baseline), [args.baseline]
        else:
            return _emit(Outcome(reports=(), error="compare needs a BASELINE and at least one RUN "
                                                   "(or baseline = \"...\" under [tool.trainproof])"), args)
        if args.html:
            outcome, found = compare.compare_with_runs(baseline, runs, config)
            return _emit(outcome, args, found)
        return _emit(compare.compare(baseline, runs, config), args)
    if args.command == "preflight":
        from .judge import parallel

        if not args.datasets and args.tokenizer is None and args.eval is None:
            return _emit(Outcome(reports=(), error="preflight needs a DATASET, --eval EVAL or --tokenizer DIR"), args)
        args.datasets = parallel.expand_shards(args.datasets)
        try:
            config = _config(args, next((Path(p) for p in [*args.datasets, args.eval, args.tokenizer]
                                         if p is not None and "://" not in str(p)), Path(".")))
        except ConfigError as e:
            return _emit(Outcome(reports=(), error=f"configuration: {e}"), args)
        if args.max_len is not None and args.max_len < 1:
            return _emit(Outcome(reports=(), error="--max-len must be at least 1"), args)
        return _emit(parallel.run_preflight(args.datasets, config, eval_path=args.eval, tokenizer_dir=args.tokenizer,
                                            max_len=args.max_len, jobs=args.jobs, dask=args.dask), args)
    if args.command == "env":
        return _env(args)
    if args.command == "epoch":
        try:
            config = _config(args, args.log)
        except ConfigError as e:
            return _emit(Outcome(reports=(), error=f"configuration: {e}"), args)
        return _emit(engine.epoch(args.log, config), args)
    parser.error(f"unknown command {args.command}")
    return EXIT_NOT_CHECKED


def _env(args: argparse.Namespace) -> int:
    from .judge import engine
    from .readers.envcheck import EnvRequest
    from .rules import BY_ID

    try:
        config = _config(args, args.cwd or args.entrypoint or Path("."))
    except ConfigError as e:
        return _emit(Outcome(reports=(), error=f"configuration: {e}"), args)
    timeout = args.timeout if args.timeout is not None else \
        config.limits_for(BY_ID["TP-ENV-IMPORT-TIMEOUT"]).timeout_s
    if timeout <= 0 or args.keep < 1:
        return _emit(Outcome(reports=(), error="--timeout must be > 0 and --keep >= 1"), args)
    entrypoint, from_cwd = _entrypoint_as_typed(args.entrypoint, args.cwd)
    request = EnvRequest(entrypoint=entrypoint, module=args.module, cwd=args.cwd, python=args.python,
                         timeout_s=timeout, run_entrypoint=args.run_entrypoint, required_gb=args.required_gb,
                         checkpoint_gb=args.checkpoint_gb, keep=args.keep, output_dir=args.output_dir)
    shown = str(args.entrypoint) if args.entrypoint is not None else None
    return _emit(engine.env(request, config, checkpoint=args.checkpoint, shown=shown, found_from_cwd=from_cwd),
                 args)


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
        print(f"{TOOL_NAME}: internal error: {type(e).__name__}: {e} "
              "(NOT-CHECKED; set TRAINPROOF_DEBUG=1 for details)", file=sys.stderr)
        return EXIT_NOT_CHECKED
