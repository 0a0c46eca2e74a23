"""A published `vllm serve` line as the measured servers ran it (kernel.result.served_line): after the environment
a user's own server needs too, such as the CPU engines' preloaded libraries."""

from __future__ import annotations

from django import template

from kernel import result

register = template.Library()


@register.filter
def served(line: str | None, servers: result.Servers | None) -> str:
    return result.served_line(line, servers) if line else ""
