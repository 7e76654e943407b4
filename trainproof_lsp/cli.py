"""Command line: `trainproof-lsp doctor|epoch|rules ...`. Text, --json, --sarif.

Exit codes (CONTRACTS.md): 1 if anything FAILs; else 2 if anything could not be
judged; else 0. This module is the only place that turns outcomes into exit codes.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Sequence

from . import TOOL_NAME, __version__
from .config import Config, ConfigError, discover, load_file, with_vocab
from .model import Outcome, Verdict

EXIT_OK, EXIT_FAIL, EXIT_NOT_CHECKED = 0, 1, 2


def exit_code(outcome: Outcome) -> int:
    if any(r.verdict is Verdict.FAIL for r in outcome.reports):
        return EXIT_FAIL
    if outcome.worst_verdict is Verdict.NOT_CHECKED or outcome.error:
        return EXIT_NOT_CHECKED
    return EXIT_OK


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the JSON envelope (CONTRACTS.md)")
    p.add_argument("--sarif", metavar="PATH", help="also write SARIF 2.1.0 to PATH")
    p.add_argument("--config", metavar="FILE", type=Path,
                   help="settings file (TOML with [tool.trainproof]); default: nearest pyproject.toml")
    p.add_argument("--vocab-size", metavar="N", type=int,
                   help="number of output classes (LM vocabulary or labels) for TP-LOSS-ABOVE-UNIFORM")
    p.add_argument("-v", "--verbose", action="store_true", help="list checks that ran and files passed over")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=TOOL_NAME,
        description="A deterministic linter for ML training runs. Exit: 0 pass/warn, 1 fail, 2 not checked.",
    )
    parser.add_argument("--version", action="version", version=f"{TOOL_NAME} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    doctor = sub.add_parser("doctor", help="judge whatever is at PATH (files or folders; default: .)")
    doctor.add_argument("paths", nargs="*", type=Path, metavar="PATH")
    _common(doctor)
    epoch = sub.add_parser("epoch", help="judge one training log")
    epoch.add_argument("log", type=Path, metavar="LOG")
    _common(epoch)
    rules = sub.add_parser("rules", help="show the rule docs (all, or one ID)")
    rules.add_argument("rule_id", nargs="?", metavar="ID")
    rules.add_argument("--markdown", action="store_true", help="print docs/rules.md")
    rules.add_argument("--json", action="store_true", help="rule metadata as JSON")
    return parser


def _config(args: argparse.Namespace, anchor: Path) -> Config:
    config = load_file(args.config) if args.config else discover(anchor.resolve())
    if args.vocab_size is not None and args.vocab_size < 2:
        raise ConfigError("--vocab-size must be at least 2")
    return with_vocab(config, args.vocab_size)


def _emit(outcome: Outcome, args: argparse.Namespace) -> int:
    from . import render

    if args.sarif:
        Path(args.sarif).write_text(render.to_sarif(outcome), encoding="utf-8")
    sys.stdout.write(render.to_json(outcome) if args.json else render.to_text(outcome, verbose=args.verbose))
    return exit_code(outcome)


def _rules(args: argparse.Namespace) -> int:
    import json

    from . import render
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


def run(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_NOT_CHECKED
    if args.command == "rules":
        return _rules(args)
    from . import engine

    if args.command == "doctor":
        paths = args.paths or [Path(".")]
        try:
            config = _config(args, paths[0])
        except ConfigError as e:
            return _emit(Outcome(reports=(), error=f"configuration: {e}"), args)
        return _emit(engine.doctor(paths, config), args)
    if args.command == "epoch":
        try:
            config = _config(args, args.log)
        except ConfigError as e:
            return _emit(Outcome(reports=(), error=f"configuration: {e}"), args)
        return _emit(engine.epoch(args.log, config), args)
    parser.error(f"unknown command {args.command}")
    return EXIT_NOT_CHECKED


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
