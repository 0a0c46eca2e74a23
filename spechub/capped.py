"""Read an HTTP answer's body whole, but never more than a cap, compressed or not.

httpx inflates each compressed chunk whole, so 64 KiB of gzip can be 64 MiB in memory before a cap sees it; the body
is read raw here and inflated no further than one byte past the cap (the client's answers, and spechub.watch's /metrics).
"""

from __future__ import annotations

import time
import zlib

import httpx

ENCODINGS = "gzip, deflate"  # what is asked for, and all that is decoded here
DEFAULT_MIB = 32  # a page of runs with every figure is well under 1 MiB


class Unread(ValueError):
    """The body is in an encoding that is not decoded here, or does not decompress, or is past the cap (TooLarge)."""


class TooLarge(Unread):
    """The body is past the cap."""


class TooSlow(Unread):
    """The body is still arriving past its deadline (httpx's timeout is per read: a trickle beats it)."""


def body(answer: httpx.Response, cap: int, deadline: float | None = None) -> bytes:
    """The decoded body of a streamed `answer`; Unread past `cap` bytes, or past `deadline` (time.monotonic())."""
    inflate = _decompressor(answer.headers.get("Content-Encoding", ""))
    read = bytearray()
    for chunk in answer.iter_raw():
        try:
            _take(read, chunk, inflate, cap)
        except zlib.error as exc:
            raise Unread(f"a compressed body that does not decompress ({exc})") from None
        if len(read) > cap:
            raise TooLarge(f"more than {cap / 2**20:g} MiB")
        if deadline is not None and time.monotonic() > deadline:
            raise TooSlow("an answer still arriving past its deadline")
    if inflate is not None and not inflate.eof:
        raise Unread("a compressed body that ends early")
    return bytes(read)


def _decompressor(encoding: str) -> zlib._Decompress | None:
    named = [part.strip().lower() for part in encoding.split(",") if part.strip().lower() not in ("", "identity")]
    if not named:
        return None
    if named not in (["gzip"], ["x-gzip"], ["deflate"]):
        raise Unread(f"Content-Encoding {encoding[:40]!r}, which was not asked for (only {ENCODINGS})")
    return zlib.decompressobj(zlib.MAX_WBITS | 32)  # | 32: a gzip or a zlib header, whichever it has


def _take(read: bytearray, chunk: bytes, inflate: zlib._Decompress | None, cap: int) -> None:
    """Append what `chunk` decodes to, stopping one byte past `cap`."""
    if inflate is None:
        read += chunk[: cap + 1 - len(read)]
        return
    while chunk and len(read) <= cap:
        read += inflate.decompress(chunk, cap + 1 - len(read))  # a max_length of at least 1: 0 means unbounded
        chunk = inflate.unconsumed_tail
