"""What rendering chat templates in a bounded child costs, against rendering in process.

    python benchmarks/bench_template_child.py [N]      (default N = 15 rounds)

One normal ChatML template (the healthy fixture's), the tokenizer check's work: a
user/assistant exchange rendered and its tail read (chat_template.assistant_end).

1. in process: the sandbox of readers/template_child.py compiled and rendered here, the
   way the server rendered before (jinja2 already imported, a fresh compile each round);
2. in a child: assistant_end as the server and the command line now run it — a
   `python -I template_child.py` started, limited, fed the template, answered, killed.

Rounds alternate (in process, child) so a busy machine slows both alike. Prints the median
and best wall time of each, the added latency (child - in process) and the child's CPU
time per round (RUSAGE_CHILDREN), which a loaded machine does not inflate; then the
per-render cost once the child is up (Renderer.render_many on 200 conversations), which is
what each further row of a file costs.
"""

from __future__ import annotations

import json
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainproof_lsp.readers import chat_template as ct
from trainproof_lsp.readers import template_child

TEMPLATE = json.loads((ROOT / "fixtures" / "tokenizers" / "healthy_chatml" / "tokenizer_config.json")
                      .read_text())["chat_template"]
SPECIAL = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
TURNS = [{"role": "user", "content": ct.USER_TEXT}, {"role": "assistant", "content": ct.ASSISTANT_TEXT}]


def in_process() -> str:
    template_child._environment()  # jinja2 imported once, as the server process had it
    compiled = template_child.compile_template(TEMPLATE)
    return template_child.render_sandboxed(compiled, TURNS, SPECIAL)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main(rounds: int) -> None:
    in_process()  # warm: jinja2 imported in this process
    here: list[float] = []
    child: list[float] = []
    child_cpu: list[float] = []
    for _ in range(rounds):
        t = time.perf_counter()
        text = in_process()
        here.append(time.perf_counter() - t)
        cpu = children_cpu()
        t = time.perf_counter()
        end = ct.assistant_end(TEMPLATE, special=SPECIAL, markers=["<|im_end|>"])
        child.append(time.perf_counter() - t)
        child_cpu.append(children_cpu() - cpu)
        assert text.endswith(end.tail) and end.marker == "<|im_end|>"
    ms = lambda xs: f"median {statistics.median(xs) * 1e3:7.1f} ms   best {min(xs) * 1e3:7.1f} ms"  # noqa: E731
    print(f"normal template, {rounds} rounds (ChatML, user + assistant):")
    print(f"  in process (sandbox, compile + render)      {ms(here)}")
    print(f"  child (start, limits, compile, render, kill) {ms(child)}")
    print(f"  added latency                               median "
          f"{(statistics.median(child) - statistics.median(here)) * 1e3:7.1f} ms   best "
          f"{(min(child) - min(here)) * 1e3:7.1f} ms")
    print(f"  child CPU time per round                    median {statistics.median(child_cpu) * 1e3:7.1f} ms")

    rows = [[{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
            for i in range(200)]
    with ct.Renderer(TEMPLATE, variables=SPECIAL) as renderer:
        renderer.render(TURNS)  # started
        t = time.perf_counter()
        renderer.render_many((r, False) for r in rows)
        per_child = (time.perf_counter() - t) / len(rows)
    compiled = template_child.compile_template(TEMPLATE)
    t = time.perf_counter()
    for r in rows:
        template_child.render_sandboxed(compiled, r, SPECIAL)
    per_here = (time.perf_counter() - t) / len(rows)
    print(f"per further render ({len(rows)} rows): in process {per_here * 1e6:6.0f} us   "
          f"in the running child {per_child * 1e6:6.0f} us")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
