"""`spechub`: SpecHub from a shell or a CI pipeline, through the REST API.

    spechub gate --draft org/head --verifier org/model          # exit 0 compatible, 1 not
    spechub submit --draft org/head --verifier org/model --wait --require certified
    spechub runs
    spechub recommend --verifier org/model --concurrency 8
    spechub verify certificate.json [--public-key issuer.pem | --url URL]   # no server needed with a key
    spechub reproduce certificate.json --out reproduced.json     # verifies first; needs the engine installed
    spechub watch --deployment 7 --metrics http://127.0.0.1:8000/metrics   # push a vLLM server's spec-decode counters
    spechub log watch --url https://spechub.example --every 300   # a witness: each checkpoint extends the last seen,
                                                                  # and a monitor: every new entry read, revocations kept
    spechub judge result.json --draft org/head --verifier org/model   # is my AL normal? exit 0 within, 3 below/above

The server comes from --url, SPECHUB_URL or the config file; the token from SPECHUB_TOKEN or the
config file, sent only to the configured server (spechub.client). `verify` trusts the key it is
given, or the key pinned for the server in known_keys.json beside the config file: recorded on
first use (only for a certificate and a server that name an issuer), then never fetched again, and the
certificate's issuer must be the one pinned with it. With a server named, `verify` then checks the file's
inclusion in the server's transparency log under a signed checkpoint, and that checkpoint's consistency with the
last one this client saw (kept in known_checkpoints.json beside known_keys.json); a revoked certificate says why
and exits 1, whether the server's answer says so or a revocation `log watch` read from the log does (kept in
known_revocations.json), and a log this client kept a checkpoint of may not answer empty. Text from the server prints
with its control characters escaped (kernel.plain). Every answer is checked against its shape (spechub.shapes), and
one over 32 MiB is refused (--max-answer-mb raises the cap).
Exit codes: 0 done (and the verdict meets --require); 1 the pair's
or the input's fault; 2 the service's fault or unreachable; 3 a verdict below --require.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import subprocess
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kernel.plain import shown
from spechub import capped, keyring, logbook, monitor, watch
from spechub.client import Client, SpecHubError, normalised
from spechub.shapes import AtConcurrency, Property, Run, Verdict

LEVELS = {"failed": 0, "provisional": 1, "certified": 2}
BELOW_REQUIRED = 3
OUTSIDE_BAND = 3  # `judge`: the run's AL lies wholly below or above the certified band
INVALID, EXPIRED = 1, 2


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="spechub", description="SpecHub's REST API from a shell.")
    server = argparse.ArgumentParser(add_help=False)
    server.add_argument("--url", help="The SpecHub server (default: SPECHUB_URL, or `url` in the config file).")
    server.add_argument("--allow-http", action="store_true",
                        help="Allow plain http to another machine (SPECHUB_ALLOW_HTTP=1); https is the default.")  # fmt: skip
    server.add_argument("--max-answer-mb", type=_mebibytes, default=capped.DEFAULT_MIB, metavar="MIB",
                        help=f"Refuse an answer larger than this (default {capped.DEFAULT_MIB} MiB).")  # fmt: skip
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, about: str) -> argparse.ArgumentParser:
        return commands.add_parser(name, help=about, parents=[server])

    gate = command("gate", "The compatibility gate's verdict on a pair; creates nothing.")
    _pair_arguments(gate, draft_required=False)
    submit = command("submit", "Submit a draft for certification (needs a token).")
    _pair_arguments(submit, draft_required=True)
    submit.add_argument("--wait", action="store_true", help="Follow the run to its end with a progress bar.")
    submit.add_argument("--require", choices=sorted(LEVELS, key=LEVELS.__getitem__), default="provisional",
                        help="With --wait: exit 3 unless the verdict is at least this (default provisional).")  # fmt: skip
    submit.add_argument("--out", type=Path, help="With --wait: save the run's signed certificate here (for `spechub verify`).")
    command("runs", "The newest runs.")
    recommend = command("recommend", "The best certified draft for a verifier at a concurrency.")
    recommend.add_argument("--verifier", required=True)
    recommend.add_argument("--concurrency", type=int, default=1)
    recommend.add_argument("--hardware", default="cpu")
    upload = command("upload", "Upload a sample of your own traffic for a verifier (private to you).")
    upload.add_argument("file", type=Path, help="OpenAI chat JSONL, vLLM custom-dataset JSONL, ShareGPT JSON, a suite, or text.")
    upload.add_argument("--verifier", required=True)
    upload.add_argument("--name", default="")
    compare = command("compare", "Certify drafts on your workload and compare them on it.")
    compare.add_argument("workload", type=int)
    compare.add_argument(
        "--certify", nargs="*", metavar="PAIR", help="Queue these pair ids first (none given: every compatible draft)."
    )
    compare.add_argument("--hardware", default="cpu")
    compare.add_argument("--concurrency", type=int, default=1, help="The concurrency the recommendation is for.")
    compare.add_argument("--wait", action="store_true", help="With --certify: follow each run to its end first.")
    verify = command("verify", "Verify a certificate file's signature, issuer and expiry.")
    reproduce = command("reproduce", "Verify a certificate, then re-run its certification here and compare.")
    for checked in (verify, reproduce):
        checked.add_argument("file", type=Path)
        checked.add_argument("--public-key", type=Path,
                             help="The issuer's PEM public key; without it, the key pinned for the server (first use: fetched "
                             "and pinned).")  # fmt: skip
        checked.add_argument("--issuer", help="With --public-key: the issuer the certificate must name (its server's URL).")
    reproduce.add_argument("--out", type=Path, required=True)
    log = command("log", "The transparency log: `spechub log watch` checks each checkpoint extends the last you saw.")
    log.add_argument("action", choices=["watch"])
    log.add_argument("--every", type=_seconds, default=300.0, metavar="SECONDS",
                     help="Seconds between checkpoints (default 300).")  # fmt: skip
    log.add_argument("--count", type=_count, metavar="M", help="Stop after this many checkpoints (default: until Ctrl-C).")
    log.add_argument("--public-key", type=Path, help="The issuer's PEM public key; without it, the key pinned for the server.")
    log.add_argument("--issuer", help="With --public-key: the issuer (the server's URL) whose log this is.")
    _watch_arguments(command("watch", "Push a vLLM server's spec-decode counters to a deployment you registered."))
    judging = command("judge", "Hold a vllm bench serve result (or a saved /metrics) to its pair's certified band.")
    judging.add_argument("file", type=Path, help="The JSON `vllm bench serve --save-result` wrote, or a saved /metrics text.")
    judging.add_argument("--draft", default="", help="The draft's Hub repo id (omit for ngram or suffix).")
    judging.add_argument("--verifier", required=True, help="The verifier's Hub repo id.")
    judging.add_argument("--k", type=int, help="num_speculative_tokens (default: the positions the file counts).")
    judging.add_argument("--temperature", type=float, default=None,
                         help="The temperature the run sampled at. By default the file's (vllm bench serve --metadata "
                         "temperature=0 writes it), else 0, assumed and said: vllm bench serve sends none without "
                         "--temperature, and the server's default (often 1) applies.")  # fmt: skip
    judging.add_argument("--hardware", default="cpu", help="The hardware class of the certified band (default cpu).")
    return parser.parse_args(argv)


def _mebibytes(text: str) -> float:
    try:
        found = float(text)
    except ValueError:
        found = math.nan
    if not (math.isfinite(found) and found > 0):
        raise argparse.ArgumentTypeError(f"give a number of MiB above 0, not {text[:40]!r}")
    return found


def _seconds(text: str) -> float:
    try:
        found = float(text)
    except ValueError:
        found = math.nan
    if not (math.isfinite(found) and 0 < found <= watch.MAX_EVERY):
        raise argparse.ArgumentTypeError(f"give a number of seconds above 0 and at most {watch.MAX_EVERY:.0f} (a day), "
                                         f"not {text[:40]!r}")  # fmt: skip
    return found


def _count(text: str) -> int:
    if not (text.isascii() and text.isdigit() and int(text) >= 1):
        raise argparse.ArgumentTypeError(f"give a whole number of 1 or more, not {text[:40]!r}")
    return int(text)


def _pair_arguments(parser: argparse.ArgumentParser, *, draft_required: bool) -> None:
    parser.add_argument("--draft", required=draft_required, help="The draft's Hub repo id (omit for ngram with gate).")
    parser.add_argument("--revision", default="main", help="The draft's revision.")
    parser.add_argument("--verifier", required=not draft_required, default="", help="The verifier's Hub repo id.")
    parser.add_argument("--verifier-revision", default="main")
    parser.add_argument("--method", help="The vLLM method; by default what the draft's config says.")
    parser.add_argument("--k", type=int, help="num_speculative_tokens.")


def _watch_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--deployment", type=int, required=True, metavar="N", help="The deployment's id on SpecHub.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--metrics", metavar="URL", help="The vLLM server's Prometheus /metrics, scraped every --every seconds.")
    source.add_argument("--once", type=Path, metavar="FILE",
                        help="Push one snapshot from a saved /metrics, as of the file's modification time.")  # fmt: skip
    parser.add_argument("--every", type=float, default=60.0, metavar="SECONDS", help="Seconds between scrapes (default 60).")
    parser.add_argument("--count", type=int, metavar="M", help="Stop after this many scrapes (default: until Ctrl-C or SIGTERM).")
    parser.add_argument("--token", help="The deployment's ingest token (default: SPECHUB_INGEST_TOKEN); not your API token.")


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    try:
        if args.command == "verify":
            return verify(args)
        if args.command == "reproduce":
            return reproduce(args)
        if args.command == "log":
            return log_watch(args)
        return int(COMMANDS[args.command](_client(args), args))
    except SpecHubError as error:
        print(f"spechub: {shown(error.code)}: {shown(error.message)}", file=sys.stderr)
        return INVALID if 300 <= error.status < 500 else 2  # a redirect: the URL given was not the server's own
    except OSError as error:  # a file named on the command line: missing, a directory, not ours to read or write
        named = error.filename if error.filename is not None else "a file"
        print(f"spechub: {named}: {error.strerror or error}; give the path of a file you can read (or write, for --out)",
              file=sys.stderr)  # fmt: skip
        return INVALID


def _client(args: argparse.Namespace) -> Client:
    client = Client.from_environment(url=args.url, allow_http=args.allow_http)
    client.max_answer_bytes = int(args.max_answer_mb * 2**20)
    return client


def gate(client: Client, args: argparse.Namespace) -> int:
    report = client.compatibility(verifier=args.verifier, draft=args.draft, method=args.method, k=args.k,
                                  verifier_revision=args.verifier_revision, draft_revision=args.revision)  # fmt: skip
    compatible = report["compatible"] is True  # checked a bool already; only true passes, whatever else comes
    said = "compatible" if compatible else "INCOMPATIBLE"
    print(f"{said}: {shown(report['method'])}, k={report['num_speculative_tokens']}")
    for finding in report["findings"]:
        print(f"  {shown(finding['severity']):<8} {shown(finding['code'])}: {shown(finding['message'])}")
    return 0 if compatible else INVALID


def submit(client: Client, args: argparse.Namespace) -> int:
    submission = client.submit(draft=args.draft, verifier=args.verifier, revision=args.revision,
                               verifier_revision=args.verifier_revision, method=args.method, k=args.k)  # fmt: skip
    print(f"submission {submission['id']}: {shown(submission['status'])}"
          + (f" ({shown(submission['refusal_code'])}: {shown(submission['refusal_message'])})"
             if submission.get("refusal_code") else "")
          + (f"; run {submission['run']}, pair {submission['pair']}" if submission.get("run") else ""))  # fmt: skip
    if submission["status"] == "refused":
        return INVALID
    queued = submission.get("run")  # read as leniently as before: another server version may leave a key out
    if not args.wait or not queued:
        return 0
    run = follow(client, queued)
    if args.out and run["state"] == "finished":
        certificate = client.pair(run["pair"]).get("certificate")
        if certificate and certificate["run"] == run["id"]:
            args.out.write_bytes(client.certificate_file(certificate["id"]))
            print(f"certificate {shown(certificate['digest'][:12])} -> {args.out}")
    return judged(run, args.require)


def follow(client: Client, run_id: int) -> Run:
    """Poll the run with a progress bar (tqdm) until it ends; return its final state."""
    from tqdm import tqdm

    with tqdm(total=100, desc=f"run {run_id}", unit="%", file=sys.stderr, bar_format="{desc} {bar} {n:.0f}%{postfix}") as bar:

        def show(run: Run) -> None:
            bar.n = run.get("progress") or 0
            bar.set_postfix_str(f"{shown(run['state'])} · {shown(run.get('stage') or '')}")

        return client.wait(run_id, on_progress=show)


def judged(run: Run, require: str) -> int:
    """Print the run's end and each property's verdict; the exit status follows the verdict against `require`."""
    if run["state"] != "finished":
        print(f"run {run['id']} ended {shown(run['state'])}: {shown(run.get('error_code'))}: {shown(run.get('error_message'))}")
        return INVALID if run["state"] == "failed_user" else 2
    verdict = run.get("verdict")
    label = verdict.get("verdict") if verdict else None
    print(f"run {run['id']}: {shown(label)}")
    for name, judgement in _judgements(verdict).items():
        print(f"  {shown(name):<10} {shown(judgement['outcome']):<24} {shown(judgement['reason'])}")
    meets = LEVELS.get(str(label), -1) >= LEVELS[require]
    if not meets:
        print(f"below the required level: {require}", file=sys.stderr)
    return 0 if meets else BELOW_REQUIRED


def _judgements(verdict: Verdict | None) -> dict[str, Property]:
    """Each property's judgement by name, as the server lists them; none for a run judged before they existed."""
    return (verdict.get("properties") if verdict else None) or {}


def runs(client: Client, args: argparse.Namespace) -> int:
    for run in client.runs():
        found = run.get("verdict")
        verdict = (found.get("verdict") if found else None) or ""
        print(f"{run['id']:>6}  pair {run['pair']:>5}  {shown(run['state']):<12} {shown(run.get('stage') or ''):<12} "
              f"{shown(verdict)}")  # fmt: skip
    return 0


def recommend(client: Client, args: argparse.Namespace) -> int:
    answer = client.recommend(verifier=args.verifier, concurrency=args.concurrency, hardware=args.hardware)
    best = answer.get("best")
    # json.dumps writes a control character in the server's answer as an escape, so `best` prints as it is.
    print(json.dumps(best, indent=2) if best else f"no certified draft for {args.verifier} on {args.hardware}")
    return 0 if best else INVALID


def verify(args: argparse.Namespace) -> int:
    """Verify with a key you trust: a PEM file, or the key pinned for the server; needs no Django, no database."""
    from kernel import certificate_text

    found = _checked(args)
    if found is None:
        return INVALID
    verified, key = found
    text, expired = certificate_text.describe(verified, datetime.now(UTC))
    print("\n".join(map(shown, text.split("\n"))))  # the issuer's text, line by line: a hostile issuer signs too
    logged = _in_the_log(args, verified, key)
    if logged is not None:
        return logged
    return EXPIRED if expired else 0


def _in_the_log(args: argparse.Namespace, verified: Any, key: Any) -> int | None:
    """Check the file's inclusion and the log's consistency with what this client saw; an exit status on a failure."""
    issuer = verified.payload.get("issuer")
    try:
        client = _client(args)
    except SpecHubError as none:
        if none.code != "client:no-server":
            raise
        print("spechub: not checked against the transparency log: name the server with --url", file=sys.stderr)
        return _revoked_offline(issuer, hashlib.sha256(args.file.read_bytes()).hexdigest())
    if not isinstance(issuer, str) or not issuer:
        print("spechub: not checked against the transparency log: the certificate names no issuer", file=sys.stderr)
        return None
    data = args.file.read_bytes()
    try:
        seen = logbook.check_file(client, data, issuer=issuer, key=key)
    except SpecHubError as refused:
        if refused.status != 404:
            raise
        return _not_in_the_log(client, refused)
    except logbook.LogFailure as failed:
        print(f"NOT VALID: the transparency log check failed: {shown(failed)}", file=sys.stderr)
        return INVALID
    print(logbook.said(seen))
    return _revoked(client, seen, hashlib.sha256(data).hexdigest())


def _not_in_the_log(client: Client, refused: SpecHubError) -> int | None:
    """The log has no entry for the file: it is not in the log, or the log is empty, which a log this client kept a
    checkpoint of cannot be (wiped or replaced); None where the log is new and empty, and nothing could be checked."""
    if not _log_empty(client):
        print(f"NOT IN THE LOG: {client.base_url} has no entry for this file: {shown(refused.message)}", file=sys.stderr)
        return INVALID
    wiped = logbook.wiped(client)
    if wiped is not None:
        print(wiped, file=sys.stderr)
        return INVALID
    print(f"spechub: not checked against the transparency log: {client.base_url}'s log is empty", file=sys.stderr)
    return None


def _revoked(client: Client, seen: logbook.Seen, certificate_sha256: str) -> int | None:
    """Say REVOKED and return 1 when the server's answer says so, or when a revocation `spechub log watch` read from
    the server's log names the file: the answer may leave out what the log holds."""
    kept = monitor.revocation_kept(client.base_url, certificate_sha256)
    revoked = seen.revocation or (kept[1] if kept else None)
    if revoked is None:
        return None
    _say_revoked(revoked)
    if seen.revocation is None and kept is not None:
        print(f"  {client.base_url}'s answer left this revocation out, but its log holds it, at index {kept[0].index}, "
              f"as `spechub log watch` read it on {kept[0].read_at} (kept in {monitor.path()}): the server hid it.")  # fmt: skip
    return INVALID


def _revoked_offline(issuer: object, certificate_sha256: str) -> int | None:
    """With no server to ask: a revocation `spechub log watch` read from the issuer's log still says REVOKED."""
    kept = monitor.revocation_kept(normalised(issuer), certificate_sha256) if isinstance(issuer, str) and issuer else None
    if kept is None:
        return None
    _say_revoked(kept[1])
    print(f"  as `spechub log watch` read it from {shown(issuer)}'s log on {kept[0].read_at} (kept in {monitor.path()})")
    return INVALID


def _say_revoked(revoked: Mapping[str, object]) -> None:
    print(f"REVOKED: revoked on {shown(revoked['revoked_at'])} by {shown(revoked['revoked_by'])}: {shown(revoked['reason'])}")


class Unpinnable(Exception):
    """Trust on first use cannot bind the server's key to an issuer: nothing is pinned."""


def _log_empty(client: Client) -> bool:
    try:
        client.log_checkpoint()
    except SpecHubError as refused:
        if refused.status == 404:
            return True
        raise
    return False


def _verified(args: argparse.Namespace) -> Any:
    """The certificate's verified content, or None after saying on stderr why it is not valid."""
    found = _checked(args)
    return None if found is None else found[0]


def _checked(args: argparse.Namespace) -> tuple[Any, Any] | None:
    """The certificate's verified content and the key that verified it, or None after saying on stderr why not."""
    from kernel import certificates

    try:
        data = args.file.read_bytes()
        key, issuer = _trusted_key(args, data)
        verified = certificates.verify(data, key)
    except (OSError, certificates.CertificateInvalid) as invalid:
        print(f"NOT VALID: {shown(invalid)}", file=sys.stderr)
        return None
    except Unpinnable as refused:
        print(f"spechub: {refused}", file=sys.stderr)
        return None
    named = verified.payload.get("issuer")
    if issuer and named != issuer:
        print(f"NOT VALID: the certificate names issuer {named!r}, but the key you trust is {issuer!r}'s.", file=sys.stderr)
        return None
    return verified, key


def _trusted_key(args: argparse.Namespace, data: bytes) -> tuple[Any, str | None]:
    """The key to verify with and the issuer it belongs to: given on the command line, or pinned for the server."""
    from kernel import certificates

    if args.public_key:
        return certificates.load_public_key(args.public_key), args.issuer
    client = _client(args)
    ring = keyring.read()
    pinned = ring.get(client.base_url)
    first_use = pinned is None
    if pinned is None:
        pinned = _first_use(client, args.file, data)
    if not isinstance(pinned, dict) or not isinstance(pinned.get("public_key_pem"), str):
        raise SpecHubError(0, "client:config-invalid", f"{keyring.path()}: the entry for {client.base_url} holds no PEM key; "
                           "remove it and verify again to pin the server's key")  # fmt: skip
    key = certificates.public_key_from_pem(pinned["public_key_pem"].encode(), f"the key pinned for {client.base_url}")
    if first_use:
        keyring.write({**ring, client.base_url: pinned})
        said = f"{client.base_url}'s key {certificates.key_id(key)} (issuer {pinned['issuer']!r})"
        print(f"spechub: trusting {said} on first use; pinned in {keyring.path()}, its certificates are checked against it "
              "from now on.", file=sys.stderr)  # fmt: skip
    return key, str(pinned.get("issuer") or "") or None


def _first_use(client: Client, path: Path, data: bytes) -> dict[str, str]:
    """The server's key and issuer to pin. Trust on first use binds the key to an issuer, which every later
    certificate must name: with none on either side, any certificate the key signed would pass as this server's."""
    advice = (f"Nothing was pinned. Get the issuer's public key from its operator, some way you trust, and verify with "
              f"it: spechub verify {path} --public-key issuer.pem")  # fmt: skip
    offered = client.public_key()
    if not _issuer_named(data):
        raise Unpinnable(f"{path} names no issuer, and trust on first use needs one to bind {client.base_url}'s key to. "
                         + advice)  # fmt: skip
    if not offered["issuer"]:
        raise Unpinnable(f"{client.base_url} names no issuer for its key, and trust on first use needs one. " + advice)
    return {**offered, "pinned_at": datetime.now(UTC).isoformat(timespec="seconds")}


def _issuer_named(data: bytes) -> str:
    """The issuer a certificate names, read before its signature is checked: only to decide whether to pin."""
    from kernel import certificates

    payload: object = certificates.payload_of(data)
    named = payload.get("issuer") if isinstance(payload, dict) else None
    return named if isinstance(named, str) else ""


def log_watch(args: argparse.Namespace) -> int:
    """Be a witness and a monitor: fetch the log's checkpoints, hold each to the last this client saw, and read the
    entries each added, keeping the revocations among them; 1 when one does not extend the last."""
    from kernel import certificates

    client = _client(args)
    logbook.read()  # what this machine kept is checked before the server is asked: damage there is not the server's
    monitor.read()
    try:
        key, issuer = _log_key(args, client)
    except certificates.CertificateInvalid as unread:
        print(f"spechub: {unread} Give --public-key the issuer's Ed25519 public key, as PEM.", file=sys.stderr)
        return INVALID
    if key is None:
        print(f"spechub: no key is pinned for {client.base_url}: verify one of its certificates first "
              "(spechub verify FILE --url URL), or give --public-key", file=sys.stderr)  # fmt: skip
        return INVALID
    return logbook.watch(client, args, key, issuer)


def _log_key(args: argparse.Namespace, client: Client) -> tuple[Any, str]:
    """The key the log's checkpoints must be signed with and the issuer whose log it is: given, or pinned (None then
    when none is)."""
    from kernel import certificates

    if args.public_key:
        return certificates.load_public_key(args.public_key), args.issuer or client.base_url
    pinned = keyring.read().get(client.base_url)
    if pinned is None or not isinstance(pinned.get("public_key_pem"), str):
        return None, ""
    key = certificates.public_key_from_pem(pinned["public_key_pem"].encode(), f"the key pinned for {client.base_url}")
    return key, str(pinned.get("issuer") or client.base_url)


def reproduce(args: argparse.Namespace) -> int:
    """Verify the certificate, then re-run its certification with the engine installed here."""
    if _verified(args) is None:
        return INVALID
    command = [sys.executable, "-m", "workers", "reproduce", str(args.file), "--out", str(args.out)]
    try:
        return subprocess.run(command, check=False).returncode
    except OSError as exc:
        print(f"spechub: cannot run the workers ({exc}); reproduce needs SpecHub's engine environment", file=sys.stderr)
        return 2


def upload(client: Client, args: argparse.Namespace) -> int:
    workload = client.workload_upload(args.file, verifier=args.verifier, name=args.name)
    print(f"workload {workload['id']} ({shown(workload['format'])}, sha256 {shown(workload['sha256'][:12])}): "
          f"{shown(workload['measured'])}")  # fmt: skip
    return 0


def compare(client: Client, args: argparse.Namespace) -> int:
    if args.certify is not None:
        drafts: list[int] | str = [int(p) for p in args.certify] or "all"
        queued = client.workload_certify(args.workload, drafts=drafts, hardware=args.hardware)
        print(f"queued runs {', '.join(str(run['id']) for run in queued)}")
        if args.wait:
            for run in queued:
                follow(client, run["id"])
    report = client.workload_report(args.workload, concurrency=args.concurrency)
    for row in report["candidates"]:
        outputs = "no output difference found" if row["equivalent"] else "OUTPUTS DIFFER"
        figures = f"AL {_acceptance_length(row['acceptance'])}  speedup {_speed(row['at_concurrency'])}"
        print(f"  {shown(row['draft']):<40} {figures}  {outputs}")
    recommendation = report["recommendation"]
    print(shown(recommendation["reason"]) if recommendation else "nothing measured on this workload yet")
    return 0 if recommendation and recommendation["pair"] else INVALID


def _speed(at: AtConcurrency | None) -> str:
    if at is None:
        return "not measured"
    interval = at["interval"]
    return f"{at['speedup']:.2f}x" + (f" [{interval[0]:.2f}, {interval[1]:.2f}]" if len(interval) == 2 else " (no interval)")


def _acceptance_length(acceptance: dict[str, object] | None) -> str:
    """The mean acceptance length of a free-form acceptance document: the server's to shape, so read with care."""
    found = (acceptance or {}).get("mean_acceptance_length")
    return f"{found:.2f}" if isinstance(found, int | float) and not isinstance(found, bool) else "-"


def judge(client: Client, args: argparse.Namespace) -> int:
    """Print where the file's AL and per-position rates stand against the band: exit 0 within, 3 below or above,
    1 where it could not be judged (no spec-decode fields, too few requests, another k, no band)."""
    if args.temperature is not None and not (math.isfinite(args.temperature) and 0 <= args.temperature <= 2):
        print(f"spechub: --temperature must be from 0 to 2, not {args.temperature}", file=sys.stderr)
        return INVALID
    from kernel import vllm_results  # the cap only; not loaded by every spechub command

    if args.file.is_file() and args.file.stat().st_size > vllm_results.MAX_BYTES:
        print(f"spechub: {args.file} is more than {vllm_results.MAX_BYTES // 2**20} MiB; that is no vllm bench serve "
              "result", file=sys.stderr)  # fmt: skip
        return INVALID
    answer = client.judge(args.file, verifier=args.verifier, draft=args.draft, k=args.k, temperature=args.temperature,
                          hardware=args.hardware)  # fmt: skip
    held = answer["held"]
    print(f"{shown(answer['verdict'])}: {shown(answer['reason'])}")
    note = f"; {shown(answer['note'])}" if answer["note"] else ""
    source = held.get("temperature_from", "given")
    print(f"  held to pair {held['pair']}, run {held['run']} ({shown(held['hardware'])}, vLLM "
          f"{shown(held['engine_version'] or '?')}, temperature {held['temperature']:g}"
          f"{'' if source == 'given' else f' ({shown(source)})'}); read as a "
          f"{shown(answer['source'])}{note}")  # fmt: skip
    for row in answer["positions"]:
        print(f"  position {row['position']}: {row['rate']:.3f} {_span(row['interval'])} against "
              f"{_rate(row['certified'])} {_span(row['certified_interval'])}: {shown(row['verdict'])}")  # fmt: skip
    if answer["verdict"] == "within":
        return 0
    return OUTSIDE_BAND if answer["verdict"] in ("below", "above") else INVALID


def _span(interval: list[float]) -> str:
    return f"[{interval[0]:.3f}, {interval[1]:.3f}]" if len(interval) == 2 else ""


def _rate(rate: float | None) -> str:
    return f"{rate:.3f}" if rate is not None else "none certified"


COMMANDS = {"gate": gate, "submit": submit, "runs": runs, "recommend": recommend, "upload": upload, "compare": compare,
            "watch": watch.command, "judge": judge}  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
