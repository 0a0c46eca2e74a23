"""Chat messages become the prompt the engine sees through the verifier's own chat template, which is hostile
input: it renders in Jinja's immutable sandbox, and any reach for Python internals is refused."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kernel import bounded
from kernel.errors import UserError
from kernel.traffic.requests import Request, Workload, refuse

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
    """Return the prompt text the engine sees for `request`, its `chat_template_kwargs` passed as vLLM's chat API
    passes them: as the template's own variables."""
    if request.messages is None:
        return request.prompt or ""
    if template is None:
        raise refuse(request.line, "`messages` needs the verifier's chat template, and its tokenizer_config.json has none")
    return _sandboxed(template, request)


def _sandboxed(template: ChatTemplate, request: Request) -> str:
    from jinja2 import TemplateError
    from jinja2.exceptions import SecurityError

    messages = [{"role": role, "content": content} for role, content in request.messages or ()]
    # The request's switches first: they may not stand in for the messages or the special tokens.
    variables = {**(request.chat_template_kwargs or {}), "messages": messages, "add_generation_prompt": True,
                 "bos_token": template.bos_token, "eos_token": template.eos_token}  # fmt: skip
    try:
        compiled = _environment().from_string(template.source)
        text: str = compiled.render(**variables)
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

    # optimized=False: Jinja's optimizer folds constant expressions as it compiles, outside the sandbox, so parsing a
    # hostile template (`{{ 'a' * 300000000 }}`, a tower of `**`) would cost seconds and hundreds of MB (issue 61 §1).
    environment = Refusing(trim_blocks=True, lstrip_blocks=True, autoescape=False, optimized=False)
    environment.globals["raise_exception"] = _raise_exception
    return environment


# What a chat template reads that is no switch of its own: the messages, the special tokens, tools and documents
# (transformers and vLLM pass these), and the sandbox's globals.
RENDERER_VARIABLES = frozenset({
    "messages", "add_generation_prompt", "continue_final_message", "bos_token", "eos_token", "pad_token", "unk_token",
    "tools", "documents", "custom_tools", "tools_in_user_message", "date_string", "strftime_now", "raise_exception",
})  # fmt: skip
# The switches that turn a model's thinking on and off (Qwen3's and its kin's `enable_thinking`, DeepSeek-V3.1's
# `thinking`), as the chat template names them; a boolean, on unless the request says otherwise.
THINKING_SWITCHES = ("enable_thinking", "thinking")
# The switches a certification measures acceptance by (issue 53, issue 60), each with its modes in the order the page
# shows them and the value each sets: the thinking switches, and gpt-oss's harmony `reasoning_effort`. The first
# mode's AL less the last's is the paired difference published.
ModeValue = bool | str
MODE_SWITCHES: dict[str, tuple[tuple[str, ModeValue], ...]] = {
    "enable_thinking": (("thinking on", True), ("thinking off", False)),
    "thinking": (("thinking on", True), ("thinking off", False)),
    "reasoning_effort": (("effort low", "low"), ("effort medium", "medium"), ("effort high", "high")),
}
MAX_TEMPLATE_CHARS = 200_000


@dataclass(frozen=True)
class Switches:
    """The variables a chat template reads beyond what every renderer passes, and the thinking switch among them."""

    names: tuple[str, ...] = ()
    thinking: str | None = None
    problem: str | None = None  # why the template could not be read: it is then treated as taking none

    @property
    def measured(self) -> str | None:
        """The switch acceptance is measured by: a thinking switch, else a reasoning effort; None if it takes neither."""
        return next((name for name in MODE_SWITCHES if name in self.names), None)


def switches(template: ChatTemplate | None) -> Switches:
    """Return the switches `template` takes, read from its source (Jinja's parser in the sandbox; nothing renders)."""
    from jinja2 import TemplateSyntaxError

    if template is None:
        return Switches()
    if len(template.source) > MAX_TEMPLATE_CHARS:
        return Switches(problem=f"the chat template is {len(template.source):,} characters, over {MAX_TEMPLATE_CHARS:,}")
    environment = _environment()
    try:
        found = _undeclared(environment, environment.parse(template.source))
    except (TemplateSyntaxError, RecursionError, ValueError) as exc:  # ValueError: an integer literal over 4,300 digits
        return Switches(problem=f"the chat template does not parse: {type(exc).__name__}: {str(exc)[:200]}")
    names = tuple(sorted(found - RENDERER_VARIABLES - set(environment.globals)))
    return Switches(names, next((name for name in THINKING_SWITCHES if name in names), None))


def _undeclared(environment: Any, ast: Any) -> set[str]:
    """jinja2.meta.find_undeclared_variables without evaluating anything (issue 61 §1): Jinja's code generator folds
    constant expressions as it compiles, with its optimizer and in every `{{ }}` output (`{{ 'a' * 300000000 }}`
    cost 1.5-1.8 s and 300 MB to parse here), outside the sandbox. The variables come from each frame's symbol
    analysis, which evaluates nothing; outputs are visited, never folded."""
    from jinja2.compiler import CodeGenerator
    from jinja2.meta import TrackingCodeGenerator

    class Unoptimized(TrackingCodeGenerator):
        def __init__(self, environment: Any) -> None:
            CodeGenerator.__init__(self, environment, "<introspection>", "<introspection>", optimized=False)
            self.undeclared_identifiers: set[str] = set()

        def visit_Output(self, node: Any, frame: Any) -> None:
            for child in node.nodes:
                self.visit(child, frame)

    codegen = Unoptimized(environment)
    codegen.visit(ast)
    return codegen.undeclared_identifiers


def with_switch(request: Request, switch: str, value: ModeValue) -> Request:
    """`request` as a chat, asked with the template's `switch` set: a plain prompt becomes the user's one message."""
    messages = request.messages if request.messages is not None else (("user", request.prompt or ""),)
    return replace(request, prompt=None, messages=messages, chat_template_kwargs={**(request.chat_template_kwargs or {}),
                   switch: value}, text=None, tokens=None)  # fmt: skip


def _raise_exception(message: str) -> None:
    from jinja2 import TemplateError

    raise TemplateError(message)


# What rendering a workload's sample may spend (issue 61 §1): a sample of 200 chats renders in tens of ms.
RENDER_BUDGET = bounded.Budget(cpu_seconds=1, memory_bytes=512 * 2**20, wall_seconds=5.0)


def rendered(workload: Workload, template: ChatTemplate | None, encode: Encode, max_model_len: int) -> Workload:
    """Render (in a bounded child) and measure every sampled request; refuse, naming the line, one that does not fit
    the context."""
    sample = []
    for request, text in zip(workload.sample, rendered_texts(workload.sample, template), strict=True):
        tokens = encode(text)
        if tokens + request.max_tokens > max_model_len:
            raise UserError(
                "workload:too-long",
                f"line {request.line}: the prompt is {tokens:,} tokens after templating; with max_tokens {request.max_tokens} "
                f"it needs {tokens + request.max_tokens:,}, over the maximum model length {max_model_len:,}.",
            )
        sample.append(replace(request, text=text, tokens=tokens))
    return replace(workload, sample=tuple(sample))


def rendered_texts(requests: Sequence[Request], template: ChatTemplate | None) -> list[str]:
    """Each request's prompt text, rendered in a child held to RENDER_BUDGET; a template that spends it is refused."""
    if template is None or all(request.messages is None for request in requests):
        return [render(request, template) for request in requests]
    _environment()  # imports Jinja here: an import in a child forked from a threaded parent may wait on a lock
    try:
        texts = bounded.run(lambda: [render(request, template) for request in requests], RENDER_BUDGET)
    except bounded.Exceeded as exceeded:
        raise UserError("workload:template-too-costly", f"Rendering the {len(requests)} sampled requests "
                        f"{_SPENT[exceeded.spent]}.") from None  # fmt: skip
    assert isinstance(texts, list)
    return [str(text) for text in texts]


_SPENT = {
    "cpu": f"ran past {RENDER_BUDGET.cpu_seconds} s of CPU time", "time": f"ran past {RENDER_BUDGET.wall_seconds:g} s",
    "memory": f"asked for more than {RENDER_BUDGET.memory_bytes // 2**20} MiB",
    "answer": f"wrote more than {bounded.MAX_ANSWER_BYTES // 2**20} MiB", "died": "stopped the rendering process",
}  # fmt: skip
