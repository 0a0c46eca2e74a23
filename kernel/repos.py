"""The gate's I/O half: repo metadata and mapping tensors, read from the Hub or a local folder.

The rules in kernel.formats judge; this module only reads. A folder or Hub
repo that cannot be read raises InfraError/UserError; anything readable but
wrong is handed to the rules, which turn it into findings.
"""

from __future__ import annotations

import os
import struct
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from kernel.errors import InfraError
from kernel.formats import GateInput, Report, judge
from kernel.formats.inputs import (
    MAPPING_TENSORS,
    MAX_JSON_BYTES,
    RepoMetadata,
    TensorData,
    TensorInfo,
    decode_tensor,
    parse_json_object,
    readable_tensor,
)
from kernel.hub import METADATA_FILES, HubClient, is_safe_filename

# The safetensors format caps its JSON header at 100 MB.
MAX_HEADER_BYTES = 100_000_000


class RepoSource(Protocol):
    repo_id: str

    def metadata(self) -> RepoMetadata: ...

    def tensors(self, meta: RepoMetadata, names: Iterable[str] = MAPPING_TENSORS) -> dict[str, TensorData]: ...


class HubRepo:
    """A repo on the Hub at a revision (branch, tag or sha)."""

    def __init__(self, client: HubClient, repo_id: str, revision: str = "main") -> None:
        self.client, self.repo_id, self.revision = client, repo_id, revision
        self._metadata: RepoMetadata | None = None

    def metadata(self) -> RepoMetadata:
        """Read once: a submission reads the draft's config for its verifier, then the gate reads it again."""
        if self._metadata is None:
            self._metadata = self.client.metadata(self.repo_id, self.revision)
        return self._metadata

    def tensors(self, meta: RepoMetadata, names: Iterable[str] = MAPPING_TENSORS) -> dict[str, TensorData]:
        return self.client.tensors(meta, names)


class LocalRepo:
    """A model folder on disk, read with no network; repo_id names it for the gate's checks.

    Symlinks may point anywhere inside `boundary` (the folder itself by default;
    a huggingface_hub snapshot links into its repo's blobs/ folder), never out.
    """

    def __init__(self, path: Path, repo_id: str, sha: str | None = None, boundary: Path | None = None) -> None:
        self.path, self.repo_id, self.sha = path, repo_id, sha
        self.boundary = (boundary or path).resolve()

    def metadata(self) -> RepoMetadata:
        try:
            return self._metadata()
        except OSError as exc:
            raise InfraError("repo:unreadable", f"{self.path}: {exc}.") from exc

    def _metadata(self) -> RepoMetadata:
        files, unsafe = self._listing()
        problems: dict[str, str] = {}
        documents = {name: _read_json(self.path / name, name, problems) for name in METADATA_FILES if name in files}
        headers = {}
        for name in (n for n in files if n.endswith(".safetensors")):
            header = _read_header(self.path / name, name, problems)
            if header is not None:
                headers[name] = header
        return RepoMetadata(
            repo_id=self.repo_id,
            sha=self.sha if self.sha is not None else _git_head(self.path),
            files=files,
            config=documents.get("config.json"),
            tokenizer=documents.get("tokenizer.json"),
            tokenizer_config=documents.get("tokenizer_config.json"),
            safetensors=headers,
            problems=problems,
            unsafe_files=unsafe,
        )

    def _listing(self) -> tuple[list[str], list[str]]:
        """Return (files, unsafe names); a symlink leading out of the folder is unsafe."""
        root = self.path.resolve()
        files: list[str] = []
        unsafe: list[str] = []
        for directory, subdirs, names in os.walk(root, onerror=_raise):
            subdirs[:] = [d for d in subdirs if d != ".git"]
            for name in names:
                path = Path(directory) / name
                relative = path.relative_to(root).as_posix()
                escapes = path.is_symlink() and not path.resolve().is_relative_to(self.boundary)
                (unsafe if escapes or not is_safe_filename(relative) else files).append(relative)
        return sorted(files), sorted(unsafe)

    def tensors(self, meta: RepoMetadata, names: Iterable[str] = MAPPING_TENSORS) -> dict[str, TensorData]:
        found: dict[str, TensorData] = {}
        for name in names:
            filename = meta.tensor_file(name)
            if filename is None:
                continue
            info = readable_tensor(meta.safetensors[filename][name])
            found[name] = info if isinstance(info, TensorData) else self._read(filename, info)
        return found

    def _read(self, filename: str, info: TensorInfo) -> TensorData:
        start, end = info["data_offsets"]
        with (self.path / filename).open("rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            handle.seek(8 + length + start)
            return decode_tensor(info, handle.read(end - start))


def _raise(exc: OSError) -> None:
    raise exc


def _read_json(path: Path, name: str, problems: dict[str, str]) -> dict[str, object] | None:
    if path.stat().st_size > MAX_JSON_BYTES:
        problems[name] = f"{name} is larger than {MAX_JSON_BYTES} bytes"
        return None
    return parse_json_object(path.read_bytes(), name, problems)


def _read_header(path: Path, name: str, problems: dict[str, str]) -> dict[str, Mapping[str, object]] | None:
    """Return {tensor: {dtype, shape, data_offsets}} from a safetensors header, reading nothing else; entries unchecked."""
    with path.open("rb") as handle:
        prefix = handle.read(8)
        length = struct.unpack("<Q", prefix)[0] if len(prefix) == 8 else -1
        if not 0 < length <= MAX_HEADER_BYTES:
            problems[name] = f"{name} has no valid safetensors header"
            return None
        header = parse_json_object(handle.read(length), name, problems)
    if header is None:
        return None
    return {key: value for key, value in header.items() if key != "__metadata__" and isinstance(value, dict)}


def _git_head(path: Path) -> str:
    """Return the folder's git HEAD commit when it is a checkout, else ''."""
    if not (path / ".git").exists():
        return ""
    found = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    return found.stdout.strip() if found.returncode == 0 else ""


def gate_inputs(
    *,
    verifier: RepoSource,
    verifier_id: str,
    draft: RepoSource | None,
    method: str | None = None,
    k: int | None = None,
    options: Mapping[str, object] | None = None,
) -> GateInput:
    """Read both repos' metadata, and the draft's mapping tensors when its headers list them."""
    verifier_meta = verifier.metadata()
    draft_meta = draft.metadata() if draft else None
    tensors = draft.tensors(draft_meta) if draft and draft_meta else {}
    return GateInput(
        verifier=verifier_meta,
        verifier_id=verifier_id,
        draft=draft_meta,
        method=method,
        k=k,
        options=options or {},
        tensors=tensors,
    )


def gate_check(**kwargs: Any) -> Report:
    """Return the gate's report for a pair; raises only when the inputs cannot be read."""
    return judge(gate_inputs(**kwargs))
