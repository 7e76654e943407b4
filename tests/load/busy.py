#!/usr/bin/env python3
"""Run a command (the test suite) several times in a row while CPU burners keep every
core busy, and say how each run went.

    python tests/load/busy.py --runs 3 -- make test      # (`make test-under-load`)

One burner process per core (`--burners N` to change) spins in a tight loop at normal
priority, as a training job or a parallel build beside the tests would. The burners are
this script's own children and are stopped when it ends, however it ends. Exit code: 0
when every run passed, else the first failing run's exit code.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time


def burn() -> None:  # pragma: no cover - runs in the burner processes
    x = 0
    while True:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="how many times to run the command (default 3)")
    parser.add_argument("--burners", type=int, default=os.cpu_count() or 1,
                        help="CPU burner processes (default: one per core)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (put it after --)")
    burners = [subprocess.Popen([sys.executable, "-c", "from busy import burn; burn()"],
                                cwd=os.path.dirname(os.path.abspath(__file__)))
               for _ in range(args.burners)]
    print(f"busy.py: {len(burners)} CPU burner(s) running (pids {' '.join(str(b.pid) for b in burners)})",
          flush=True)
    results: list[tuple[int, float]] = []
    try:
        for run in range(1, args.runs + 1):
            print(f"busy.py: run {run}/{args.runs}: {' '.join(command)}", flush=True)
            start = time.monotonic()
            code = subprocess.call(command)
            results.append((code, time.monotonic() - start))
            print(f"busy.py: run {run}/{args.runs} exited {code} after {results[-1][1]:.0f} s", flush=True)
    finally:
        for b in burners:
            b.send_signal(signal.SIGTERM)
        for b in burners:
            b.wait()
    passed = sum(1 for code, _ in results if code == 0)
    print(f"busy.py: {passed} of {args.runs} run(s) passed beside {len(burners)} CPU burner(s): "
          + ", ".join(f"exit {code} in {secs:.0f} s" for code, secs in results), flush=True)
    return next((code for code, _ in results if code != 0), 0)


if __name__ == "__main__":
    raise SystemExit(main())
