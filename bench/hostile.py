"""Benchmark: what an anonymous hostile request may cost (issue 61 §1; target: each answer, refusal or not, in <= 2 s).

Each reproduction of the probe is timed as the web tier meets it:
- the judge endpoint (`POST /api/v1/judge/`, Django's test client: the multipart parse, the read, the refusal) with
  16 MiB files of the shapes that cost most to parse: a result a line, a million lists, /metrics text, a list of
  8 million numbers;
- a verifier's chat template read for its switches (the compatibility check) with constant expressions that Jinja's
  optimizer would fold: `'a' * 300000000` and a tower of `**`;
- a workload's sample rendered with a template whose loops multiply (10^10 iterations) or whose strings grow past
  memory: refused when the bounded child spends its budget;
- the quantized comparison's AL change over 20,000 prompts a side (the jackknife, now linear).
Each figure is the worst of `--repeats` runs, in seconds, beside the CPU's name.
Run: `make bench` or `python -m bench.hostile [--repeats N]`.
"""

from __future__ import annotations

import argparse
import logging
import platform
import time
from collections.abc import Callable

from bench.live import setup

TARGET_SECONDS = 2.0
MIB16 = 16 * 2**20 - 64


def judge_shapes() -> dict[str, bytes]:
    return {
        "judge: a result a line (5.6 M `{}`)": b"{}\n" * (MIB16 // 3),
        "judge: 5.6 M nested lists": b"[" + b"[]," * (MIB16 // 3 - 1) + b"[]]",
        "judge: 16 MiB of /metrics": b"vllm:spec_decode_num_drafts_total 1\n" * (MIB16 // 37),
        "judge: 8 M numbers in one field": b'{"a": [' + b"1," * (MIB16 // 2 - 8) + b"1]}",
    }


def setup_django() -> None:
    setup("hostile")
    from django.conf import settings

    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_CLASSES": []}  # timing, not the rate
    logging.getLogger("django.request").setLevel(logging.ERROR)  # each 422 is the answer timed, not news


def judged(data: bytes) -> Callable[[], str]:
    def post() -> str:
        from django.core.files.uploadedfile import SimpleUploadedFile
        from django.test import Client

        sent = {"verifier": "bench/verifier", "draft": "bench/draft", "file": SimpleUploadedFile("r.json", data)}
        answer = Client().post("/api/v1/judge/", sent)
        return f"{answer.status_code} {answer.json()['error']['code']}"

    return post


def switches_read(source: str) -> Callable[[], str]:
    def read() -> str:
        from kernel.traffic.templates import ChatTemplate, switches

        return f"switches {sorted(switches(ChatTemplate(source)).names)}"

    return read


def sample_rendered(source: str) -> Callable[[], str]:
    def render() -> str:
        from kernel.errors import UserError
        from kernel.traffic.requests import Request
        from kernel.traffic.templates import ChatTemplate, rendered_texts

        chats = [Request(line, "chat", messages=(("user", "hi"),)) for line in range(1, 201)]
        try:
            rendered_texts(chats, ChatTemplate(source))
        except UserError as refused:
            return refused.code
        return "rendered"

    return render


def quantized_change() -> str:
    from kernel.quantized import al_change

    base = [{"drafts": 10 + i % 7, "accepted": 15 + i % 11} for i in range(20_000)]
    ours = [{"drafts": 10 + i % 7, "accepted": 14 + i % 11} for i in range(20_000)]
    return f"change {al_change(base, ours)['change']:+.3f}"  # type: ignore[arg-type]


def cases() -> dict[str, Callable[[], str]]:
    found: dict[str, Callable[[], str]] = {name: judged(data) for name, data in judge_shapes().items()}
    found["switches: {{ 'a' * 300000000 }}"] = switches_read("{{ 'a' * 300000000 }}{{ enable_thinking }}")
    found["switches: a tower of **"] = switches_read("{{ " + "**".join(["2"] * 40) + " }}{{ thinking }}")
    loops = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    found["render: 10^10 loop iterations"] = sample_rendered(loops)
    found["render: a 1 GB string"] = sample_rendered("{{ 'a' * 1000000000 }}")
    found["quantized: 20,000 prompts a side"] = quantized_change
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    setup_django()
    print(f"hostile requests, worst of {args.repeats} (target <= {TARGET_SECONDS:g} s) on {cpu_name()}")
    missed = 0
    for name, case in cases().items():
        worst, said = 0.0, ""
        for _ in range(args.repeats):
            started = time.perf_counter()
            said = case()
            worst = max(worst, time.perf_counter() - started)
        missed += worst > TARGET_SECONDS
        print(f"  {name:<40} {worst:6.2f} s  {'ok' if worst <= TARGET_SECONDS else 'MISSED'}  ({said})")
    print(f"{missed} of {len(cases())} over the target")


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
            return next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "an unnamed CPU"


if __name__ == "__main__":
    main()
