"""A user's request as SpecHub keeps it, the limits an upload is read under, and a read upload (`Workload`)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

from kernel.errors import UserError

CATEGORIES = ("code", "translation", "summarization", "chat", "math", "qa", "rag")
# SPEED-Bench's categories, carried over as they are so that its figures sit beside the field's: the qualitative
# config's 11, and the throughput configs' entropy classes (their input length goes to the prompt-length buckets,
# which are read from each prompt's own tokens).
SPEED_BENCH_CATEGORIES = (
    "coding", "humanities", "math", "multilingual", "qa", "rag", "reasoning", "roleplay", "stem", "summarization", "writing",
)  # fmt: skip
SPEED_BENCH_ENTROPY = ("low_entropy", "mixed", "high_entropy")
CUSTOM = "custom"
KINDS = tuple(dict.fromkeys((*CATEGORIES, *SPEED_BENCH_CATEGORIES, *SPEED_BENCH_ENTROPY, CUSTOM)))
FORMATS = ("openai-chat", "vllm-custom", "sharegpt", "suite", "text", "speed-bench")
ROLES = ("system", "user", "assistant")
SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system"}
CHUNK = 1 << 16  # how an upload is read: a stream of chunks this size

Message = tuple[str, str]  # (role, content)
TemplateValue = bool | int | float | str | None  # a chat template switch's value: JSON's scalars


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


class StoredRequest(TypedDict):
    """A request as a workload's sample keeps it (the registry's JSON column, the worker's hand-off file)."""

    line: int
    category: str
    max_tokens: int
    prompt: NotRequired[str | None]  # a plain prompt, or
    messages: NotRequired[list[list[str]]]  # chat messages, each [role, content]
    count: NotRequired[int]  # absent in samples stored before requests were counted: 1
    chat_template_kwargs: NotRequired[dict[str, TemplateValue]]  # the chat template's switches, as vLLM's chat API takes them
    text: NotRequired[str | None]
    tokens: NotRequired[int | None]


class ChatMessage(TypedDict):
    role: str
    content: str


class PromptLine(TypedDict):
    """vLLM's custom dataset form: a plain prompt."""

    prompt: str | None
    output_tokens: int
    category: str


class ChatLine(TypedDict):
    """The OpenAI chat form (vLLM's chat API: `chat_template_kwargs` beside the messages)."""

    messages: list[ChatMessage]
    max_tokens: int
    category: str
    chat_template_kwargs: NotRequired[dict[str, TemplateValue]]


class _Asked(TypedDict):
    c: str  # category
    n: int  # max_tokens
    p: NotRequired[str | None]  # the prompt, or
    m: NotRequired[list[list[str]]]  # the messages
    k: NotRequired[dict[str, TemplateValue]]  # the chat template's switches, where the request sets any


@dataclass(frozen=True)
class Request:
    """One distinct request: a plain prompt or chat messages, first seen at `line`, seen `count` times."""

    line: int
    category: str
    prompt: str | None = None
    messages: tuple[Message, ...] | None = None
    max_tokens: int = 32
    count: int = 1
    # The chat template's switches (for example {"enable_thinking": False}), as vLLM's chat API takes them; None:
    # the template's defaults. A dict, so left out of the hash.
    chat_template_kwargs: dict[str, TemplateValue] | None = field(default=None, hash=False)
    text: str | None = None  # the prompt the engine sees, once rendered
    tokens: int | None = None  # its length under the verifier's tokenizer

    @classmethod
    def from_dict(cls, stored: StoredRequest) -> Request:
        messages = stored.get("messages")
        return cls(
            line=stored["line"],
            category=stored["category"],
            prompt=stored.get("prompt"),
            messages=tuple((m[0], m[1]) for m in messages) if messages is not None else None,
            max_tokens=stored["max_tokens"],
            count=stored.get("count", 1),
            chat_template_kwargs=stored.get("chat_template_kwargs"),
            text=stored.get("text"),
            tokens=stored.get("tokens"),
        )

    def as_line(self) -> PromptLine | ChatLine:
        """The request as one JSONL line this module reads back (the chat or the vLLM custom form)."""
        if self.messages is None:
            return {"prompt": self.prompt, "output_tokens": self.max_tokens, "category": self.category}
        messages: list[ChatMessage] = [{"role": role, "content": content} for role, content in self.messages]
        line: ChatLine = {"messages": messages, "max_tokens": self.max_tokens, "category": self.category}
        if self.chat_template_kwargs:
            line["chat_template_kwargs"] = dict(self.chat_template_kwargs)
        return line

    def as_dict(self) -> StoredRequest:
        body: StoredRequest = {"line": self.line, "category": self.category, "max_tokens": self.max_tokens, "count": self.count}
        if self.messages is None:
            body["prompt"] = self.prompt
        else:
            body["messages"] = [list(m) for m in self.messages]
        if self.chat_template_kwargs:
            body["chat_template_kwargs"] = dict(self.chat_template_kwargs)
        body["text"], body["tokens"] = self.text, self.tokens
        return body


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
    asked: _Asked = {"c": request.category, "n": request.max_tokens}
    if request.messages is None:
        asked["p"] = request.prompt
    else:
        asked["m"] = [list(m) for m in request.messages]
    if request.chat_template_kwargs:  # absent where none is set, so every earlier workload keeps its identity
        asked["k"] = dict(request.chat_template_kwargs)
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
