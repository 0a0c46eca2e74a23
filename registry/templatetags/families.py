"""A family's title where the pages name it (kernel.formats.families.title_of): "Gemma 4", not the code "gemma4"."""

from __future__ import annotations

from django import template

from kernel.formats.families import title_of

register = template.Library()


@register.filter
def family_title(code: str) -> str:
    return title_of(code)
