"""Users' own traffic: an uploaded sample of requests, read as a stream, checked line by line, normalised.

Five formats are detected from the content:
- ``openai-chat``: JSONL, one chat-completions request per line: ``{"messages": [{"role", "content"}...],
  "max_tokens"?, "category"?}``;
- ``vllm-custom``: JSONL as vLLM's benchmark client reads a custom dataset: ``{"prompt", "output_tokens"?,
  "category"?}`` (the two JSONL kinds may mix);
- ``sharegpt``: one JSON list of ``{"conversations": [{"from": "human"|"gpt"|"system", "value"}...], "category"?}``;
  the request is the conversation up to its last human turn;
- ``suite``: SpecHub's own suite JSON (workers/workloads);
- ``text``: anything else, one prompt per line.

A workload's identity is the sha256 of its canonical form: the sorted digests of its distinct requests with
their counts, so the same requests in another order or another format are the same workload. Identical
requests are counted, not repeated. A sample larger than the limit is down-sampled by a seeded bottom-k
sketch, which keeps memory bounded by the sample and gives the same sample whatever the file's order.

Chat messages become prompts through the verifier's own chat template, which is hostile input: it renders in
Jinja's immutable sandbox, and any reach for Python internals is refused.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kernel.errors import UserError
from kernel.paths import var_dir

CATEGORIES = ("code", "translation", "summarization", "chat", "math", "qa", "rag")
CUSTOM = "custom"
KINDS = (*CATEGORIES, CUSTOM)
FORMATS = ("openai-chat", "vllm-custom", "sharegpt", "suite", "text")
ROLES = ("system", "user", "assistant")
SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system"}
CHUNK = 1 << 16  # how an upload is read: a stream of chunks this size

# A run spec names a registry workload by its hash; the prompts travel to the worker beside the spec, never in it.
REFERENCE = re.compile(r"sha256:([0-9a-f]{64})")


def workload_dir() -> Path:
    """Where the certify task leaves a registry workload for the worker measuring it (the registry and workers agree)."""
    return Path(os.environ.get("SPECHUB_WORKLOAD_DIR") or var_dir() / "workloads")


def workload_path(sha256: str, run_id: int) -> Path:
    """Run `run_id`'s copy of a registry workload: one file a run, so a run ending never removes another's."""
    return workload_dir() / f"{sha256}.run{run_id}.jsonl"


def workload_run_of(path: Path) -> int | None:
    """The run a file in workload_dir belongs to (its copy, or the copy being written), or None for another file."""
    found = re.fullmatch(r"[0-9a-f]{64}\.run(\d+)\.(?:jsonl|part)", path.name)
    return int(found[1]) if found else None


Message = tuple[str, str]  # (role, content)


@dataclass(frozen=True)
class Limits:
    """What an upload may hold; the registry fills it from settings, the worker CLI takes the defaults."""

    max_bytes: int = 20 * 1024 * 1024
    max_requests: int = 100_000
    max_prompt_chars: int = 100_000
    sample_size: int = 200
    seed: int = 0
    default_max_tokens: int = 32
    max_output_tokens: int = 256


@dataclass(frozen=True)
class Request:
    """One distinct request: a plain prompt or chat messages, first seen at `line`, seen `count` times."""

    line: int
    category: str
    prompt: str | None = None
    messages: tuple[Message, ...] | None = None
    max_tokens: int = 32
    count: int = 1
    text: str | None = None  # the prompt the engine sees, once rendered
    tokens: int | None = None  # its length under the verifier's tokenizer

    @classmethod
    def from_dict(cls, stored: dict[str, Any]) -> Request:
        messages = stored.get("messages")
        return cls(
            line=stored["line"],
            category=stored["category"],
            prompt=stored.get("prompt"),
            messages=tuple((m[0], m[1]) for m in messages) if messages is not None else None,
            max_tokens=stored["max_tokens"],
            count=stored.get("count", 1),
            text=stored.get("text"),
            tokens=stored.get("tokens"),
        )

    def as_line(self) -> dict[str, Any]:
        """The request as one JSONL line this module reads back (the chat or the vLLM custom form)."""
        if self.messages is None:
            return {"prompt": self.prompt, "output_tokens": self.max_tokens, "category": self.category}
        messages = [{"role": role, "content": content} for role, content in self.messages]
        return {"messages": messages, "max_tokens": self.max_tokens, "category": self.category}

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"line": self.line, "category": self.category, "max_tokens": self.max_tokens, "count": self.count}
        body.update({"prompt": self.prompt} if self.messages is None else {"messages": [list(m) for m in self.messages]})
        return body | {"text": self.text, "tokens": self.tokens}


@dataclass(frozen=True)
class Workload:
    """A normalised upload: its identity, its counts, and the seeded sample that is measured."""

    format: str
    sha256: str
    total: int
    unique: int
    seed: int
    sample: tuple[Request, ...]
    categories: dict[str, int] = field(default_factory=dict)  # requests per category in the sample

    @property
    def sampled(self) -> int:
        return len(self.sample)

    @property
    def max_tokens(self) -> int:
        return max((r.max_tokens for r in self.sample), default=0)


def canonical(request: Request) -> str:
    """The canonical JSON of what a request asks; line, count and rendering are not part of it."""
    asked: dict[str, Any] = {"c": request.category, "n": request.max_tokens}
    asked.update({"p": request.prompt} if request.messages is None else {"m": [list(m) for m in request.messages]})
    return json.dumps(asked, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# NUL, which PostgreSQL stores in no text or JSON column, and lone UTF-16 halves, which are no text at all: a JSON
# escape (\\u0000, \\ud800) makes either of them from valid UTF-8.
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(request: Request) -> Request:
    """Return `request`, or refuse it when its text holds a character no database stores, naming it."""
    texts = [request.category, request.prompt or "", *(part for message in request.messages or () for part in message)]
    for text in texts:
        if found := UNSTORABLE.search(text):
            what = "a NUL character" if found.group() == "\x00" else "half of a UTF-16 surrogate pair"
            raise refuse(request.line, f"the text holds {what} (U+{ord(found.group()):04X}), which cannot be stored; remove it")
    return request


def refuse(line: int, what: str) -> UserError:
    return UserError("workload:invalid", f"line {line}: {what}.")


# --- reading -----------------------------------------------------------------------------------------


def read_workload(chunks: Iterable[bytes], *, limits: Limits = Limits()) -> Workload:
    """Return the workload in `chunks` (a file's bytes, streamed); every refusal names its line and field."""
    lines = _bounded_lines(chunks, limits.max_bytes)
    first = _first_content(lines)
    if first is None:
        raise UserError("workload:invalid", "The file holds no requests.")
    number, head = first
    stripped = head.lstrip()
    if stripped.startswith("{") and _is_request_line(stripped):
        kind = "openai-chat" if '"messages"' in stripped else "vllm-custom"  # named by its first line; the two may mix
        return _collect(kind, _jsonl(number, head, lines, limits), limits)
    if stripped.startswith(("{", "[")):
        document = _json_document(number, head, lines)
        if isinstance(document, list):
            return _collect("sharegpt", _sharegpt(document, limits), limits)
        return _collect("suite", _suite(document, limits), limits)
    return _collect("text", _text(number, head, lines, limits), limits)


def _bounded_lines(chunks: Iterable[bytes], max_bytes: int) -> Iterator[tuple[int, str]]:
    """Yield (line number, text) from byte chunks, refusing once more than `max_bytes` came in."""
    seen, pending, number = 0, b"", 0
    for chunk in chunks:
        seen += len(chunk)
        if seen > max_bytes:
            raise UserError("workload:too-large", f"line {number + 1}: the upload passes {max_bytes:,} bytes, the limit.")
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for raw in complete:
            number += 1
            yield number, _decode(number, raw)
    if pending:
        yield number + 1, _decode(number + 1, pending)


def _decode(number: int, raw: bytes) -> str:
    try:
        return raw.decode("utf-8").rstrip("\r")
    except UnicodeDecodeError as exc:
        raise refuse(number, f"the bytes are not UTF-8 ({exc.reason} at byte {exc.start})") from None


def _first_content(lines: Iterator[tuple[int, str]]) -> tuple[int, str] | None:
    for number, text in lines:
        if text.strip():
            return number, text.lstrip("\ufeff")
    return None


def _is_request_line(text: str) -> bool:
    """A first line that is a whole JSON object starts JSONL, unless it is a one-line suite document."""
    try:
        item = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return isinstance(item, dict) and not ("categories" in item and "messages" not in item and "prompt" not in item)


def _loads(number: int, text: str) -> Any:
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise refuse(number, "the JSON is nested too deeply") from None
    except ValueError as exc:
        raise refuse(number, f"not valid JSON ({exc})") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _jsonl(number: int, head: str, lines: Iterator[tuple[int, str]], limits: Limits) -> Iterator[Request]:
    for at, text in _chain([(number, head)], lines):
        if not text.strip():
            continue
        item = _loads(at, text)
        if not isinstance(item, dict):
            raise refuse(at, "each line must be a JSON object, with `messages` or `prompt`")
        yield _jsonl_request(at, item, limits)


def _chain(first: list[tuple[int, str]], rest: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    yield from first
    yield from rest


def _jsonl_request(at: int, item: dict[str, Any], limits: Limits) -> Request:
    category = _category(at, item.get("category"))
    if "messages" in item:
        messages = _messages(at, item["messages"], "messages", limits)
        return Request(at, category, messages=messages, max_tokens=_max_tokens(at, item, "max_tokens", limits))
    if "prompt" in item:
        prompt = _prompt(at, item["prompt"], "prompt", limits)
        return Request(at, category, prompt=prompt, max_tokens=_max_tokens(at, item, "output_tokens", limits))
    raise refuse(at, "the object has neither `messages` (a chat request) nor `prompt` (a vLLM custom dataset line)")


def _category(at: int, value: object) -> str:
    if value is None:
        return CUSTOM
    if not isinstance(value, str) or value not in KINDS:
        raise refuse(at, f"`category` must be one of {list(KINDS)}, not {str(value)[:40]!r}")
    return value


def _max_tokens(at: int, item: dict[str, Any], name: str, limits: Limits) -> int:
    value = item.get(name, limits.default_max_tokens)
    if type(value) is not int or not 1 <= value <= limits.max_output_tokens:
        raise refuse(at, f"`{name}` must be an integer from 1 to {limits.max_output_tokens}, not {str(value)[:40]!r}")
    return value


def _prompt(at: int, value: object, where: str, limits: Limits) -> str:
    if not isinstance(value, str):
        raise refuse(at, f"`{where}` is not a string")
    if not value.strip():
        raise refuse(at, f"`{where}` is empty")
    if len(value) > limits.max_prompt_chars:
        raise UserError(
            "workload:too-long", f"line {at}: `{where}` has {len(value):,} characters; the limit is {limits.max_prompt_chars:,}."
        )
    return value


def _messages(at: int, value: object, where: str, limits: Limits) -> tuple[Message, ...]:
    if not isinstance(value, list) or not value:
        raise refuse(at, f"`{where}` must be a non-empty list of messages")
    messages = []
    for index, message in enumerate(value):
        if not isinstance(message, dict):
            raise refuse(at, f"`{where}[{index}]` is not an object with `role` and `content`")
        role = message.get("role")
        if role not in ROLES:
            raise refuse(at, f"`{where}[{index}].role` must be one of {list(ROLES)}, not {str(role)[:40]!r}")
        messages.append((str(role), _prompt(at, message.get("content"), f"{where}[{index}].content", limits)))
    if messages[-1][0] == "assistant":
        raise refuse(at, f"`{where}` ends with an assistant message; the request is what comes after the last user turn")
    return tuple(messages)


def _json_document(number: int, head: str, lines: Iterator[tuple[int, str]]) -> Any:
    """A whole-file JSON document (ShareGPT or a suite); its size is already bounded by the byte limit."""
    text = "\n".join([head, *(t for _, t in lines)])
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise refuse(number, "the JSON is nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise refuse(number + exc.lineno - 1, f"not valid JSON ({exc.msg}, column {exc.colno})") from None
    except ValueError as exc:
        raise refuse(number, f"not valid JSON ({exc})") from None


def _sharegpt(document: list[Any], limits: Limits) -> Iterator[Request]:
    for index, item in enumerate(document, start=1):
        if not isinstance(item, dict) or not isinstance(item.get("conversations"), list):
            raise refuse(index, "each ShareGPT item must be an object with a `conversations` list (item numbers count as lines)")
        turns = item["conversations"]
        last_human = max(
            (i for i, t in enumerate(turns) if isinstance(t, dict) and t.get("from") in ("human", "user")), default=-1
        )
        if last_human < 0:
            raise refuse(index, "`conversations` has no human turn to answer")
        messages = [_sharegpt_turn(index, i, turn) for i, turn in enumerate(turns[: last_human + 1])]
        category = _category(index, item.get("category"))
        yield Request(
            index, category, messages=_messages(index, messages, "conversations", limits), max_tokens=limits.default_max_tokens
        )


def _sharegpt_turn(index: int, position: int, turn: object) -> dict[str, object]:
    if not isinstance(turn, dict) or turn.get("from") not in SHAREGPT_ROLES:
        raise refuse(index, f"`conversations[{position}].from` must be one of {list(SHAREGPT_ROLES)}")
    return {"role": SHAREGPT_ROLES[str(turn["from"])], "content": turn.get("value")}


def _suite(document: Any, limits: Limits) -> Iterator[Request]:
    if not isinstance(document, dict) or not isinstance(document.get("categories"), dict):
        raise refuse(1, "a JSON object must be a SpecHub suite, with `categories`; for JSONL, put one request per line")
    max_tokens = _max_tokens(1, document, "max_tokens", limits)
    for category, prompts in document["categories"].items():
        kind = _category(1, category)
        if not isinstance(prompts, list):
            raise refuse(1, f"`categories.{kind}` is not a list of prompts")
        for index, prompt in enumerate(prompts):
            yield Request(1, kind, prompt=_prompt(1, prompt, f"categories.{kind}[{index}]", limits), max_tokens=max_tokens)


def _text(number: int, head: str, lines: Iterator[tuple[int, str]], limits: Limits) -> Iterator[Request]:
    for at, text in _chain([(number, head)], lines):
        if text.strip():
            yield Request(at, CUSTOM, prompt=_prompt(at, text, "the prompt", limits), max_tokens=limits.default_max_tokens)


# --- normalising ---------------------------------------------------------------------------------------


def _collect(kind: str, requests: Iterator[Request], limits: Limits) -> Workload:
    """Count distinct requests, keep the seeded bottom-k sample, and digest the whole."""
    counts: dict[bytes, int] = {}  # raw digests: memory follows the distinct requests, never their length
    kept: list[tuple[int, bytes, Request]] = []  # a max-heap on the sketch key, as (-key, digest, request)
    total = 0
    for request in requests:
        total += 1
        if total > limits.max_requests:
            raise UserError("workload:too-large", f"line {request.line}: more than {limits.max_requests:,} requests, the limit.")
        digest = hashlib.sha256(canonical(storable(request)).encode()).digest()
        if digest in counts:
            counts[digest] += 1
            continue
        counts[digest] = 1
        _keep(kept, _sketch_key(limits.seed, digest), digest, request, limits.sample_size)
    if not counts:
        raise UserError("workload:invalid", "The file holds no requests.")
    sample = tuple(sorted((replace(r, count=counts[d]) for _, d, r in kept), key=lambda r: r.line))
    return Workload(kind, _identity(counts), total, len(counts), limits.seed, sample, _per_category(sample))


def _sketch_key(seed: int, digest: bytes) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{digest.hex()}".encode()).digest()[:8], "big")


def _keep(kept: list[tuple[int, bytes, Request]], key: int, digest: bytes, request: Request, size: int) -> None:
    if len(kept) < size:
        heapq.heappush(kept, (-key, digest, request))
    elif -kept[0][0] > key:
        heapq.heapreplace(kept, (-key, digest, request))


def _identity(counts: dict[bytes, int]) -> str:
    whole = hashlib.sha256()
    for digest in sorted(counts):
        whole.update(f"{digest.hex()} {counts[digest]}\n".encode())
    return whole.hexdigest()


def _per_category(sample: Iterable[Request]) -> dict[str, int]:
    found: dict[str, int] = {}
    for request in sample:
        found[request.category] = found.get(request.category, 0) + 1
    return {kind: found[kind] for kind in KINDS if kind in found}


# --- rendering -----------------------------------------------------------------------------------------

Encode = Callable[[str], int]


@dataclass(frozen=True)
class ChatTemplate:
    """The verifier's chat template and the special tokens it may name; rendered only in the sandbox."""

    source: str
    bos_token: str = ""
    eos_token: str = ""

    @classmethod
    def from_tokenizer_config(cls, config: dict[str, Any] | None) -> ChatTemplate | None:
        template = (config or {}).get("chat_template")
        if isinstance(template, list):  # the Hub's named-template list: take "default"
            template = next((t.get("template") for t in template if isinstance(t, dict) and t.get("name") == "default"), None)
        if not isinstance(template, str):
            return None
        return cls(template, _token(config, "bos_token"), _token(config, "eos_token"))


def _token(config: dict[str, Any] | None, name: str) -> str:
    value = (config or {}).get(name)
    if isinstance(value, dict):  # an AddedToken as JSON
        value = value.get("content")
    return value if isinstance(value, str) else ""


def render(request: Request, template: ChatTemplate | None) -> str:
    """Return the prompt text the engine sees for `request`."""
    if request.messages is None:
        return request.prompt or ""
    if template is None:
        raise refuse(request.line, "`messages` needs the verifier's chat template, and its tokenizer_config.json has none")
    return _sandboxed(template, request)


def _sandboxed(template: ChatTemplate, request: Request) -> str:
    from jinja2 import TemplateError
    from jinja2.exceptions import SecurityError

    messages = [{"role": role, "content": content} for role, content in request.messages or ()]
    try:
        compiled = _environment().from_string(template.source)
        text: str = compiled.render(
            messages=messages, add_generation_prompt=True, bos_token=template.bos_token, eos_token=template.eos_token
        )
        return text
    except SecurityError as exc:
        raise UserError("workload:template-unsafe", f"line {request.line}: {str(exc).rstrip('.')}.") from None
    except (TemplateError, TypeError, ValueError, ArithmeticError, LookupError, RecursionError) as exc:
        raise UserError("workload:template-invalid", f"line {request.line}: {type(exc).__name__}: {exc}.") from None


def _environment() -> Any:
    from jinja2.exceptions import SecurityError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Refusing(ImmutableSandboxedEnvironment):
        """Jinja's sandbox answers an unsafe attribute with an undefined that prints as ''; refuse at once instead."""

        def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
            raise SecurityError(f"access to attribute {attribute!r} of {type(obj).__name__!r} object is unsafe")

    environment = Refusing(trim_blocks=True, lstrip_blocks=True, autoescape=False)
    environment.globals["raise_exception"] = _raise_exception
    return environment


def _raise_exception(message: str) -> None:
    from jinja2 import TemplateError

    raise TemplateError(message)


def rendered(workload: Workload, template: ChatTemplate | None, encode: Encode, max_model_len: int) -> Workload:
    """Render and measure every sampled request; refuse, naming the line, one that does not fit the context."""
    sample = []
    for request in workload.sample:
        text = render(request, template)
        tokens = encode(text)
        if tokens + request.max_tokens > max_model_len:
            raise UserError(
                "workload:too-long",
                f"line {request.line}: the prompt is {tokens:,} tokens after templating; with max_tokens {request.max_tokens} "
                f"it needs {tokens + request.max_tokens:,}, over the maximum model length {max_model_len:,}.",
            )
        sample.append(replace(request, text=text, tokens=tokens))
    return replace(workload, sample=tuple(sample))
