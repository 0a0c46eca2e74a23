"""Request body parsers: DRF's, with refusals where its own would raise, or would let in what no read gives back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError

from kernel.typed import unstorable


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser; a body nested past Python's recursion limit is a 400 with the reason, not a 500. So is one
    whose text or numbers no store gives back: half a surrogate pair (`\\ud800`, which every later read of a kept
    document answered with a UnicodeEncodeError), a NUL (PostgreSQL's JSON refuses it), or a number that overflowed
    to infinity (`1e400`). DRF's string fields refuse the first two already; a JSON object's fields did not."""

    def parse(self, stream: IO[Any], media_type: str | None = None, parser_context: Mapping[str, Any] | None = None) -> Any:
        try:
            parsed = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the body is nested too deeply; send a flat object.") from None
        if where := unstorable(parsed):
            raise ParseError(f"JSON parse error - {where}.")
        return parsed
