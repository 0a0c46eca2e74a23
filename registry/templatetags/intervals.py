"""The minimums an interval over prompts is published from (kernel/quantized.py), for the pages that say why one is
missing."""

from __future__ import annotations

from django import template

from kernel.quantized import MIN_EFFECTIVE_PROMPTS, MIN_PROMPTS

register = template.Library()


@register.simple_tag
def interval_min_prompts() -> int:
    return MIN_PROMPTS


@register.simple_tag
def interval_min_effective() -> str:
    return f"{MIN_EFFECTIVE_PROMPTS:g}"
