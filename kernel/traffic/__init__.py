"""Users' own traffic: an uploaded sample of requests, read as a stream, checked line by line, normalised.

Six formats are detected from the content:
- ``openai-chat``: JSONL, one chat-completions request per line: ``{"messages": [{"role", "content"}...],
  "max_tokens"?, "category"?}``;
- ``vllm-custom``: JSONL as vLLM's benchmark client reads a custom dataset: ``{"prompt", "output_tokens"?,
  "category"?}`` (the two JSONL kinds may mix);
- ``sharegpt``: one JSON list of ``{"conversations": [{"from": "human"|"gpt"|"system", "value"}...], "category"?}``;
  the request is the conversation up to its last human turn;
- ``suite``: SpecHub's own suite JSON (workers/suites);
- ``speed-bench``: SPEED-Bench's records (JSONL or one JSON list): ``{"question_id", "category", "turns" | "messages",
  ...}``; only the first user turn is sent, as vLLM's loader does (`speed_bench`);
- ``text``: anything else, one prompt per line.

A workload's identity is the sha256 of its canonical form: the sorted digests of its distinct requests with
their counts, so the same requests in another order or another format are the same workload. Identical
requests are counted, not repeated. A sample larger than the limit is down-sampled by a seeded bottom-k
sketch, which keeps memory bounded by the sample and gives the same sample whatever the file's order.

Chat messages become prompts through the verifier's own chat template, which is hostile input: it renders in
Jinja's immutable sandbox, and any reach for Python internals is refused.

The modules: `requests` (the types), `formats` (reading), `sample` (counting and sampling), `templates`
(rendering) and `handoff` (the registry's sample as the worker reads it).
"""

from kernel.traffic.formats import read_workload
from kernel.traffic.handoff import REFERENCE, Sample, read_sample, workload_dir, workload_path, workload_run_of, write_sample
from kernel.traffic.requests import (
    CATEGORIES,
    CHUNK,
    CUSTOM,
    FORMATS,
    KINDS,
    UNSTORABLE,
    Limits,
    Request,
    StoredRequest,
    Workload,
    canonical,
    storable,
)
from kernel.traffic.templates import ChatTemplate, Encode, render, rendered

__all__ = [
    "CATEGORIES", "CHUNK", "CUSTOM", "FORMATS", "KINDS", "REFERENCE", "UNSTORABLE", "ChatTemplate", "Encode", "Limits",
    "Request", "Sample", "StoredRequest", "Workload", "canonical", "read_sample", "read_workload", "render", "rendered",
    "storable", "workload_dir", "workload_path", "workload_run_of", "write_sample",
]  # fmt: skip
