"""What the gate judges: repo metadata and the few tensors it reads, fetched elsewhere."""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress
from typing import Any, TypedDict

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")
# The Hub's own rules: an optional namespace, then a name; no '..', '--',
# leading or trailing '.'/'-', at most 96 characters per part.
_REPO_PART = re.compile(r"^(?![.-])(?!.*(?:\.\.|--))[A-Za-z0-9_.-]{1,96}(?<![.-])$")
# Tensors the vocab-mapping rule reads from an EAGLE-3 head with a reduced vocab.
MAPPING_TENSORS = ("t2d", "d2t")
# A vocab mapping for a 256k vocab is 2 MiB as int64; anything far bigger is not one.
MAX_TENSOR_BYTES = 16 * 2**20
# A metadata file (config, tokenizer) larger than this is refused unread, from the Hub or from disk.
MAX_JSON_BYTES = 50 * 2**20
# safetensors dtype → (array typecode, item size); all little-endian on disk.
INTEGER_TYPECODES = {
    "BOOL": ("B", 1),
    "U8": ("B", 1),
    "I8": ("b", 1),
    "I16": ("h", 2),
    "U16": ("H", 2),
    "I32": ("i", 4),
    "U32": ("I", 4),
    "I64": ("q", 8),
    "U64": ("Q", 8),
}


@dataclass(frozen=True)
class RepoMetadata:
    """One repo at one commit, read without weights (from the Hub or a local folder)."""

    repo_id: str
    sha: str
    files: list[str]
    config: Any
    # The tokenizer files as published: open JSON, whose keys are the tokenizers library's, not ours.
    tokenizer: dict[str, Any] | None
    tokenizer_config: dict[str, Any] | None
    # {file: {tensor: {"dtype", "shape", "data_offsets"}}}, from the safetensors headers only. Unchecked:
    # readable_tensor checks an entry before anything reads its bytes.
    safetensors: dict[str, dict[str, Mapping[str, object]]] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)
    unsafe_files: list[str] = field(default_factory=list)

    @property
    def pickle_files(self) -> list[str]:
        return [name for name in self.files if name.endswith(PICKLE_SUFFIXES)]

    @property
    def code_files(self) -> list[str]:
        return [name for name in self.files if name.endswith(".py")]

    @property
    def safetensors_files(self) -> list[str]:
        return [name for name in self.files if name.endswith(".safetensors")]

    def tensor_file(self, name: str) -> str | None:
        """Return the safetensors file whose header lists tensor `name`."""
        return next((file for file, tensors in self.safetensors.items() if name in tensors), None)


class TensorShape(TypedDict):
    """What decoding a tensor needs: an integer dtype of INTEGER_TYPECODES and a shape of sizes ≥ 0."""

    dtype: str
    shape: list[int]


class TensorInfo(TensorShape):
    """A safetensors header entry once readable_tensor has checked it; data_offsets is [start, end) in the data section."""

    data_offsets: tuple[int, int]


@dataclass(frozen=True)
class TensorData:
    """A small tensor read in full, or why it could not be read."""

    dtype: str
    shape: tuple[int, ...]
    values: Sequence[int] = ()  # an array.array: 8 bytes an entry, not a Python int each
    problem: str | None = None


@dataclass(frozen=True)
class GateInput:
    """Everything one judgement needs; rules read this and nothing else."""

    verifier: RepoMetadata
    verifier_id: str
    draft: RepoMetadata | None
    method: str | None = None
    k: int | None = None
    options: Mapping[str, object] = field(default_factory=dict)
    tensors: dict[str, TensorData] = field(default_factory=dict)
    tensor_parallel_size: int = 1  # the verifier's, as the pair is served: SpecHub measures on one device


# Real configs nest a few levels; deeper is hostile, and would exhaust the recursion of every
# later reader (the rules, the JSON columns, the API's renderer).
MAX_JSON_DEPTH = 32


def _not_json(constant: str) -> float:
    raise ValueError(f"{constant} is not a JSON number; write a finite number or null")


def parse_json_object(raw: bytes, name: str, problems: dict[str, str]) -> dict[str, object] | None:
    """Return the JSON object in `raw`, or None with the reason recorded under `name`.

    NaN and Infinity (which Python's json accepts and no JSON column or response can hold) and
    nesting deeper than MAX_JSON_DEPTH are refused like any other malformed file.
    """
    try:
        document = json.loads(raw, parse_constant=_not_json)
    except RecursionError:
        problems[name] = f"{name} nests deeper than {MAX_JSON_DEPTH} levels"
        return None
    except (ValueError, UnicodeDecodeError) as exc:
        problems[name] = f"{name} is not valid JSON: {exc}"
        return None
    if not isinstance(document, dict):
        problems[name] = f"{name} is not a JSON object"
        return None
    if json_depth(document) > MAX_JSON_DEPTH:
        problems[name] = f"{name} nests deeper than {MAX_JSON_DEPTH} levels"
        return None
    return document


def json_depth(value: object) -> int:
    """Return how deeply objects and arrays nest in a parsed JSON value (a scalar is 0), without recursion."""
    if not isinstance(value, dict | list):
        return 0
    deepest, stack = 1, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        # Only containers go on the stack, picked out in C: a list of 8 million numbers is not 8 million pushes.
        children = item.values() if isinstance(item, dict) else item
        containers = compress(children, map(_CONTAINER_TYPES.__contains__, map(type, children)))
        stack.extend((child, depth + 1) for child in containers)
    return deepest


_CONTAINER_TYPES = frozenset({dict, list})


def tokenizer_hash(tokenizer: Mapping[str, object], tokenizer_config: Mapping[str, object] | None = None) -> str:
    """Return a digest of the token→id map, the added tokens and the special tokens.

    Two tokenizers with the same size but different tokens get different hashes.
    """
    model = tokenizer.get("model")
    model = model if isinstance(model, dict) else {}
    added_tokens = tokenizer.get("added_tokens")
    added = sorted(
        (str(t.get("id")), str(t.get("content")), bool(t.get("special")))
        for t in (added_tokens if isinstance(added_tokens, list) else [])
        if isinstance(t, dict)
    )
    config = tokenizer_config or {}
    special = {key: config.get(key) for key in ("bos_token", "eos_token", "pad_token", "unk_token")}
    canonical = json.dumps(
        {"vocab": model.get("vocab"), "merges": model.get("merges"), "added": added, "special": special},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def is_repo_id(value: str) -> bool:
    """Return whether value is a Hub repo id such as 'org/name'."""
    parts = value.split("/")
    return len(parts) <= 2 and all(_REPO_PART.fullmatch(part) for part in parts)


def readable_tensor(entry: Mapping[str, object]) -> TensorInfo | TensorData:
    """Return a 1-D integer tensor's header entry, checked, or why its bytes will not be read."""
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape):
        return TensorData(dtype=str(dtype), shape=(), problem=f"the header gives an invalid shape {shape!r}")
    read = TensorData(dtype=str(dtype), shape=tuple(shape))
    # isinstance first: `in` raises on an unhashable dtype, such as a list.
    if not isinstance(dtype, str) or dtype not in INTEGER_TYPECODES or len(shape) != 1:
        return read  # the rule reports the wrong dtype or rank from dtype and shape alone
    size = math.prod(shape) * INTEGER_TYPECODES[dtype][1]
    if size > MAX_TENSOR_BYTES:
        return TensorData(dtype=dtype, shape=tuple(shape), problem=f"it is {size} bytes, more than a vocab mapping")
    match offsets:
        case [int(start), int(end)] if start >= 0 and end - start == size:
            return TensorInfo(dtype=dtype, shape=shape, data_offsets=(start, end))
    return TensorData(dtype=dtype, shape=tuple(shape), problem=f"data_offsets {offsets!r} do not match its shape")


def decode_tensor(info: TensorShape, raw: bytes) -> TensorData:
    """Return the values of a 1-D integer tensor from its little-endian bytes."""
    dtype, shape = info["dtype"], tuple(info["shape"])
    typecode, item = INTEGER_TYPECODES[dtype]
    if len(raw) != math.prod(shape) * item:
        return TensorData(dtype=dtype, shape=shape, problem=f"read {len(raw)} bytes, expected {math.prod(shape) * item}")
    values = array(typecode, raw)
    if sys.byteorder == "big":
        values.byteswap()
    return TensorData(dtype=dtype, shape=shape, values=values)
