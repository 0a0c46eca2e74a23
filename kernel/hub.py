"""The only module that talks to the Hub, always through huggingface_hub.

Metadata comes before weights: a revision resolves to a commit sha, then
config.json, the tokenizer files and the safetensors headers are read without
downloading any weight. Snapshots are pinned to a sha and limited to what an
engine needs; pickled weights and repo code are never fetched. Client errors
become UserError or InfraError with a stable code. This module imports nothing
from Django, so a worker can use it alone.
"""

from __future__ import annotations

import copy
import re
import struct
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TypeVar

import httpx2
from huggingface_hub import (
    CommitOperationAdd,
    HfApi,
    get_session,
    hf_hub_url,
    hf_raise_for_status,
    set_client_factory,
    snapshot_download,
)
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    NotASafetensorsRepoError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils._http import default_client_factory

from kernel import settings
from kernel.errors import InfraError, RunError, UserError
from kernel.formats.inputs import (
    MAPPING_TENSORS,
    MAX_JSON_BYTES,
    RepoMetadata,
    TensorData,
    decode_tensor,
    parse_json_object,
    readable_tensor,
)
from kernel.settings import Settings

T = TypeVar("T")
SHA = re.compile(r"^[0-9a-f]{40}$")
# What `metadata` read at a commit, kept per process: a commit's files never change, and a submission burst, an import
# sweep and the compatibility check read the same commits again (each read is a dozen Hub requests, ~1.3 s for a
# toy pair through olah). Keyed by endpoint and token too, so no caller reads what its own token could not.
METADATA_KEPT = 64
_kept: OrderedDict[tuple[str | None, str | bool, str, str], RepoMetadata] = OrderedDict()
_kept_lock = threading.Lock()
METADATA_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json")
# What an engine needs; never *.bin, *.pt, *.pkl or *.py.
SNAPSHOT_PATTERNS = ["*.safetensors", "*.safetensors.index.json", "*.json", "tokenizer.model", "*.tiktoken", "*.txt"]
_SAFE_NAME = re.compile(r"^(?!/)(?!.*(?:^|/)\.\.(?:/|$))[A-Za-z0-9_.\-/ +=@]{1,255}$")


def is_safe_filename(name: str) -> bool:
    """Return whether name is a plain relative path inside the repo."""
    return bool(_SAFE_NAME.fullmatch(name)) and "\\" not in name and "//" not in name


def check_filename(name: str) -> None:
    """Raise UserError unless name is a plain relative path inside the repo."""
    if not is_safe_filename(name):
        raise UserError("hub:unsafe-filename", f"Refused file name {name!r}.")


def configure_timeout(seconds: float) -> None:
    """Give every huggingface_hub request a timeout.

    Its API calls pass `timeout=None` per request, which disables the client's
    own default, so the limit is applied in a request hook instead.
    """
    limit = httpx2.Timeout(seconds).as_dict()

    def apply_limit(request: httpx2.Request) -> None:
        current = request.extensions.get("timeout") or {}
        if all(value is None for value in current.values()):
            request.extensions["timeout"] = limit

    def factory() -> httpx2.Client:
        client = default_client_factory()
        client.event_hooks["request"].append(apply_limit)
        return client

    set_client_factory(factory)


class HubClient:
    """Reads repos from one Hub endpoint (huggingface.co or any Hub-protocol mirror)."""

    def __init__(
        self,
        endpoint: str | None = None,
        cache_dir: Path | None = None,
        token: str | bool = False,
        retries: int = 3,
        backoff: float = 0.5,
        timeout: float = 30.0,
    ) -> None:
        configure_timeout(timeout)
        self.endpoint = endpoint
        self.cache_dir = cache_dir
        self.token = token
        self.retries, self.backoff = retries, backoff
        self.api = HfApi(endpoint=endpoint, token=token)

    def __repr__(self) -> str:  # never the token
        return f"HubClient(endpoint={self.endpoint!r}, authenticated={bool(self.token)})"

    @classmethod
    def from_settings(cls, given: Settings | None = None) -> HubClient:
        """Return a client for workers without Django: the endpoint, cache and read token of `given` (this process's
        settings by default). A token of False, not None: huggingface_hub would otherwise look for a login of its own."""
        given = given or settings.current()
        return cls(endpoint=given.hub_endpoint, cache_dir=given.hub_cache, token=given.hub_token)

    def resolve(self, repo_id: str, revision: str) -> str:
        """Return the commit sha that `revision` (branch, tag or sha) names in repo_id."""
        info = self._call(lambda: self.api.model_info(repo_id, revision=revision), repo_id, revision)
        if not info.sha or not SHA.fullmatch(info.sha):
            raise InfraError("hub:server-error", f"{repo_id}@{revision} resolved to no commit sha.")
        return info.sha

    def metadata(self, repo_id: str, revision: str) -> RepoMetadata:
        """Return config, tokenizer and safetensors headers at the resolved commit; no weights. The revision is resolved
        each time (a branch moves); what was read at a commit is read once (METADATA_KEPT)."""
        sha = self.resolve(repo_id, revision)
        key = (self.endpoint, self.token, repo_id, sha)
        with _kept_lock:
            found = _kept.get(key)
            if found is not None:
                _kept.move_to_end(key)
                return copy.deepcopy(found)  # callers may change theirs; the kept one stays as read
        read = self._read_at(repo_id, sha)
        with _kept_lock:
            _kept[key] = copy.deepcopy(read)
            while len(_kept) > METADATA_KEPT:
                _kept.popitem(last=False)
        return read

    def _read_at(self, repo_id: str, sha: str) -> RepoMetadata:
        listed = self._call(lambda: self.api.list_repo_files(repo_id, revision=sha), repo_id, sha)
        unsafe = [name for name in listed if not is_safe_filename(name)]
        files = [name for name in listed if name not in unsafe]
        problems: dict[str, str] = {}
        documents = {name: self._json(repo_id, sha, name, problems) for name in METADATA_FILES if name in files}
        headers = self._headers(repo_id, sha) if any(n.endswith(".safetensors") for n in files) else {}
        return RepoMetadata(
            repo_id=repo_id,
            sha=sha,
            files=sorted(files),
            config=documents.get("config.json"),
            tokenizer=documents.get("tokenizer.json"),
            tokenizer_config=documents.get("tokenizer_config.json"),
            safetensors=headers,
            problems=problems,
            unsafe_files=unsafe,
        )

    def open_pr(self, repo_id: str, files: Mapping[str, bytes], title: str, description: str) -> str:
        """Propose adding `files` (path in repo -> bytes) to repo_id's main branch as one pull request; return its URL.

        Not retried: a commit that reached the server but lost its answer must not open a second PR.
        """
        for path_in_repo in files:
            check_filename(path_in_repo)
        try:
            commit = self.api.create_commit(
                repo_id=repo_id,
                repo_type="model",
                operations=[CommitOperationAdd(path_in_repo=path, path_or_fileobj=data) for path, data in files.items()],
                commit_message=title,
                commit_description=description,
                revision="main",
                create_pr=True,
            )
        except Exception as exc:
            raise classify(exc, repo_id, "main", authenticated=bool(self.token)) from exc
        return str(commit.pr_url or commit.commit_url)

    def tensors(self, meta: RepoMetadata, names: Iterable[str] = MAPPING_TENSORS) -> dict[str, TensorData]:
        """Read the named small tensors with HTTP range requests; other tensors are never fetched."""
        found: dict[str, TensorData] = {}
        header_lengths: dict[str, int] = {}  # one 8-byte read per file, however many tensors it holds
        for name in names:
            filename = meta.tensor_file(name)
            if filename is not None:
                found[name] = self._tensor(meta, filename, name, header_lengths)
        return found

    def _tensor(self, meta: RepoMetadata, filename: str, name: str, header_lengths: dict[str, int]) -> TensorData:
        info = readable_tensor(meta.safetensors[filename][name])
        if isinstance(info, TensorData):
            return info
        url = hf_hub_url(meta.repo_id, filename, revision=meta.sha, endpoint=self.endpoint)
        if filename not in header_lengths:
            prefix = self._call(lambda: self._range(url, 0, 8), meta.repo_id, meta.sha)
            header_lengths[filename] = struct.unpack("<Q", prefix)[0]
        data = 8 + header_lengths[filename]  # the data section follows the length and the header
        start, end = info["data_offsets"]
        raw = self._call(lambda: self._range(url, data + start, data + end), meta.repo_id, meta.sha)
        return decode_tensor(info, raw)

    def _range(self, url: str, start: int, end: int) -> bytes:
        """Return bytes [start, end) of url, reading no more than that even if the server ignores Range."""
        headers = {**self.api._build_hf_headers(token=self.token), "range": f"bytes={start}-{end - 1}"}
        with get_session().stream("GET", url, headers=headers, follow_redirects=True) as response:
            if response.status_code >= 400:
                response.read()
                hf_raise_for_status(response)
            skip = 0 if response.status_code == 206 else start
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) >= skip + (end - start):
                    break
        return bytes(body[skip : skip + end - start])

    def snapshot(self, repo_id: str, sha: str) -> Path:
        """Download the engine files of repo_id at exactly `sha` and return the local folder."""
        if not SHA.fullmatch(sha):
            raise ValueError(f"snapshot needs a full commit sha, got {sha!r}; resolve the revision first")
        path = self._call(
            lambda: snapshot_download(
                repo_id,
                revision=sha,
                allow_patterns=SNAPSHOT_PATTERNS,
                cache_dir=self.cache_dir,
                endpoint=self.endpoint,
                token=self.token,
            ),
            repo_id,
            sha,
        )
        return Path(path)

    def _json(self, repo_id: str, sha: str, filename: str, problems: dict[str, str]) -> dict[str, object] | None:
        """Read a metadata file, but never more than MAX_JSON_BYTES of it."""
        url = hf_hub_url(repo_id, filename, revision=sha, endpoint=self.endpoint)
        raw = self._call(lambda: self._range(url, 0, MAX_JSON_BYTES + 1), repo_id, sha)
        if len(raw) > MAX_JSON_BYTES:
            problems[filename] = f"{filename} is larger than {MAX_JSON_BYTES} bytes"
            return None
        return parse_json_object(raw, filename, problems)

    def _headers(self, repo_id: str, sha: str) -> dict[str, dict[str, Mapping[str, object]]]:
        """Return {file: {tensor: {dtype, shape, data_offsets}}} read from the safetensors headers only.

        huggingface_hub types the entries but does not check them: they stay unchecked here, as read from disk.
        """
        try:
            found = self._call(lambda: self.api.get_safetensors_metadata(repo_id, revision=sha), repo_id, sha)
        except NotASafetensorsRepoError:
            return {}
        return {
            filename: {
                name: {"dtype": info.dtype, "shape": list(info.shape), "data_offsets": list(info.data_offsets)}
                for name, info in meta.tensors.items()
            }
            for filename, meta in found.files_metadata.items()
        }

    def _call(self, action: Callable[[], T], repo_id: str, revision: str) -> T:
        """Run one Hub call, retrying transient failures with backoff; map errors to SpecHub's."""
        for attempt in range(1, self.retries + 1):
            try:
                return action()
            except Exception as exc:
                error = classify(exc, repo_id, revision, authenticated=bool(self.token))
                if not (error.retryable and attempt < self.retries):
                    raise error from exc
            time.sleep(self.backoff * 2 ** (attempt - 1))
        raise AssertionError("unreachable")


def _chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def classify(exc: BaseException, repo_id: str, revision: str, *, authenticated: bool = False) -> RunError:
    """Return the SpecHub error for a huggingface_hub failure; `authenticated` says whether a token was sent.

    A gated repository is the submitter's to open to SpecHub's account, unless this deployment
    has no token at all; a token the Hub rejects is the operator's. No message carries the token.
    """
    where = f"{repo_id}@{revision}"
    for cause in _chain(exc):
        if isinstance(cause, RunError):
            return cause
        if isinstance(cause, GatedRepoError):
            return UserError("hub:gated", f"{where}.") if authenticated else InfraError("hub:gated-no-token", f"{where}.")
        if isinstance(cause, RevisionNotFoundError):
            return UserError("hub:revision-not-found", f"{where}.")
        if isinstance(cause, RepositoryNotFoundError):
            return UserError("hub:not-found", f"{where}.")
        # A LocalEntryNotFoundError (also a FileNotFoundError) is a cache miss wrapping a network failure.
        if isinstance(cause, EntryNotFoundError) and not isinstance(cause, FileNotFoundError):
            return UserError("hub:file-not-found", f"{where}: {cause}.")
        if isinstance(cause, httpx2.TimeoutException | TimeoutError):
            return InfraError("hub:timeout", f"{where}.")
        if isinstance(cause, httpx2.TransportError | ConnectionError):
            return InfraError("hub:unreachable", f"{where}: {cause}.")
        if isinstance(cause, HfHubHTTPError) and cause.response is not None:
            if authenticated and cause.response.status_code in (401, 403):
                return InfraError("hub:token-rejected", f"{where}: HTTP {cause.response.status_code}.")
            return _http_error(cause.response.status_code, where)
    return InfraError("hub:unreachable", f"{where}: {type(exc).__name__}: {exc}.")


def _http_error(status: int, where: str) -> RunError:
    """A 4xx is the request's fault (retrying repeats it), except a timeout or a request to slow down."""
    if status in (408, 429) or status >= 500:
        return InfraError("hub:server-error", f"{where}: HTTP {status}.")
    return UserError("hub:refused", f"{where}: HTTP {status}.")
