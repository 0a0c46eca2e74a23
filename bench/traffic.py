"""Benchmark: validating and normalising an uploaded workload (target: 10,000 requests in <= 2 s, memory bounded).

The file is read from disk in 64 KiB chunks, as an upload is, through kernel.traffic.read_workload. Memory is
the tracemalloc peak, for 10,000 short requests and for 10,000 requests ten times as long: it follows the count
of distinct requests (a digest each) and the sample, not the file's size. Rendering the sample with the toy
verifier's chat template and measuring it with its tokenizer is timed apart.
Run: `make bench` or `python -m bench.traffic [--repeats N]`.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

from kernel.traffic import CHUNK, ChatTemplate, Limits, Workload, read_workload, rendered

TARGET_SECONDS = 2.0
VERIFIER = Path(__file__).parents[1] / "zoo/models/spechub-toy/llama-verifier"
WORDS = [
    "the",
    "small",
    "tree",
    "sings",
    "near",
    "a",
    "quiet",
    "river",
    "while",
    "old",
    "ships",
    "wait",
    "in",
    "the",
    "bright",
    "city",
    "of",
    "Miravel",
]


def write_requests(path: Path, count: int, words: int = 30) -> int:
    """Write `count` chat requests of `words` words (about one in ten a repeat); return the file's size in bytes."""
    rng = random.Random(0)  # noqa: S311 - reproducible test data, not security
    with path.open("w") as out:
        for index in range(count):
            seed = index if rng.random() > 0.1 else rng.randrange(max(index, 1))
            asked = " ".join(random.Random(seed).choices(WORDS, k=words))  # noqa: S311 - test data
            messages = [{"role": "system", "content": "You answer briefly."}, {"role": "user", "content": f"{asked}?"}]
            out.write(json.dumps({"messages": messages, "max_tokens": 64, "category": "chat"}) + "\n")
    return path.stat().st_size


def read_file(path: Path, limits: Limits) -> Workload:
    with path.open("rb") as stream:
        return read_workload(iter(lambda: stream.read(CHUNK), b""), limits=limits)


def peak_bytes(path: Path, limits: Limits) -> int:
    tracemalloc.start()
    read_file(path, limits)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def render_seconds(workload: Workload) -> float:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(VERIFIER / "tokenizer.json"))
    template = ChatTemplate.from_tokenizer_config(json.loads((VERIFIER / "tokenizer_config.json").read_text()))
    started = time.perf_counter()
    rendered(workload, template, lambda text: len(tokenizer.encode(text).ids), 2048)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    repeats = parser.parse_args().repeats
    limits = Limits(max_bytes=100 * 1024 * 1024, max_requests=200_000)
    with tempfile.TemporaryDirectory() as folder:
        small, large = Path(folder) / "10k.jsonl", Path(folder) / "10k-long.jsonl"
        size = write_requests(small, 10_000)
        large_size = write_requests(large, 10_000, words=300)
        seconds = []
        for _ in range(repeats):
            started = time.perf_counter()
            workload = read_file(small, limits)
            seconds.append(time.perf_counter() - started)
        peaks = peak_bytes(small, limits), peak_bytes(large, limits)
    figure = statistics.median(seconds)
    print(f"W1 read and normalise {workload.total:,} requests ({size / 2**20:.1f} MiB, {workload.unique:,} distinct): "
          f"median {figure:.2f} s, max {max(seconds):.2f} s over {repeats} (target <= {TARGET_SECONDS:.1f} s): "
          f"{'OK' if figure <= TARGET_SECONDS else 'OVER TARGET'}")  # fmt: skip
    print(f"W2 peak memory for 10,000 requests: {peaks[0] / 2**20:.1f} MiB for a {size / 2**20:.1f} MiB file, "
          f"{peaks[1] / 2**20:.1f} MiB for a {large_size / 2**20:.1f} MiB one (streamed, never held whole)")  # fmt: skip
    seconds_rendering = render_seconds(workload)
    print(f"W3 render {workload.sampled} sampled requests with the verifier's template and tokenizer: {seconds_rendering:.2f} s")
    return 0 if figure <= TARGET_SECONDS else 1


if __name__ == "__main__":
    raise SystemExit(main())
