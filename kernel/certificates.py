"""Signed certificates: a DSSE envelope (the in-toto attestation format) around canonical JSON, Ed25519,
and strict offline verification.

Pure apart from reading the key: no database and no Django, so `spechub verify`,
`manage.py verify_certificate` and anyone holding the public key can check a certificate offline.

A certificate file is a DSSE envelope, canonical JSON followed by one newline:
`{"payload": base64(<payload bytes>), "payloadType": PAYLOAD_TYPE, "signatures": [{"keyid", "sig"}]}`.
The signature is Ed25519 over DSSE's pre-authentication encoding of the payload type and the
payload bytes, which travel as they are: any DSSE implementation verifies them without
rebuilding them from JSON. The payload bytes are the payload's canonical JSON (sorted keys,
no whitespace, UTF-8), so its digest is the same as before.

Verification here is stricter than DSSE asks: the file must *be* the canonical envelope and
the base64 canonical, so that any changed byte fails, even one a lenient parser would ignore.

Certificates issued before DSSE (`{"certificate": <payload>, "signature": {...}}`, signed over
the canonical payload, hex signature) still verify.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict, cast

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from kernel.result import CertifiedResults, Environment, Properties
from kernel.spec import InputFields

FORMAT = "spechub-certificate/1"
PAYLOAD_TYPE = "application/vnd.spechub.certificate+json"
ALGORITHM = "ed25519"
_DSSE_KEYS = {"payload", "payloadType", "signatures"}
_DSSE_SIGNATURE_KEYS = {"keyid", "sig"}
_HEX_SIGNATURE = re.compile(r"^[0-9a-f]{128}$")
_ENVELOPE_KEYS = {"certificate", "signature"}
_SIGNATURE_KEYS = {"algorithm", "key_id", "value"}


class MeasuredOn(TypedDict):
    """Where a run was measured: SpecHub's hosted pool, or a team's own machine and what it reported."""

    kind: Literal["hosted", "self-hosted"]
    worker: str | None  # the self-hosted machine's name
    owner: str | None  # its owner's username
    engine_build: str | None  # the build it registered
    evidence: dict[str, object] | None  # device names, memory, CPUs, as torch saw them


class Payload(TypedDict):
    """What a certificate states: the pinned inputs, the environment, the results and the verdict."""

    format: str
    serial: int
    issuer: str
    issued_at: str
    expires_at: str
    verdict: str
    reasons: list[str]
    thresholds: dict[str, float]
    inputs: InputFields
    environment: Environment
    results: CertifiedResults
    reproduce: str
    # Since per-property verdicts: each property judged and attributed, and the engine
    # qualification (by digest) the verdict was judged with; absent from older certificates.
    properties: NotRequired[Properties | None]
    qualification: NotRequired[dict[str, str] | None]
    # Since self-hosted workers: "hosted" or "self-hosted", with the worker, its owner and what it reported.
    measured_on: NotRequired[MeasuredOn | None]


class CertificateInvalid(Exception):
    """The certificate is malformed, was signed by another key, or was changed after signing."""


def canonical(value: Any) -> bytes:
    """Return the one byte form of a JSON value that is signed and stored."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.encode("utf-8")


def digest(payload: Payload) -> str:
    """Return the sha256 of the payload's canonical bytes."""
    return hashlib.sha256(canonical(payload)).hexdigest()


def key_id(public_key: Ed25519PublicKey) -> str:
    """Return a short, stable name for a public key: the start of the sha256 of its raw bytes."""
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what the signature covers."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(body), body)


def sign(payload: Payload, private_key: Ed25519PrivateKey) -> bytes:
    """Return the certificate file's bytes: a DSSE envelope around the canonical payload, newline-terminated."""
    body = canonical(payload)
    signature = {"keyid": key_id(private_key.public_key()), "sig": _b64(private_key.sign(pae(PAYLOAD_TYPE, body)))}
    return canonical({"payload": _b64(body), "payloadType": PAYLOAD_TYPE, "signatures": [signature]}) + b"\n"


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _unb64(text: object, what: str) -> bytes:
    """Decode canonical base64 only: padding and unused bits exactly as encoding gives them."""
    try:
        raw = base64.b64decode(str(text), validate=True)
    except ValueError:
        raise CertificateInvalid(f"Malformed certificate: {what} is not base64.") from None
    if _b64(raw) != text:
        raise CertificateInvalid(f"Malformed certificate: {what} is not in canonical base64.")
    return raw


@dataclass(frozen=True)
class Verified:
    payload: Payload
    key_id: str
    signature: str
    digest: str


def verify(data: bytes, public_key: Ed25519PublicKey) -> Verified:
    """Return the payload of a certificate file signed by `public_key`, or raise CertificateInvalid."""
    envelope = _json_object(data)
    return _verify_dsse(data, envelope, public_key) if "payloadType" in envelope else _verify_legacy(data, public_key)


def payload_of(data: bytes) -> Payload:
    """Return a certificate file's payload without checking its signature (for reading, never for trusting)."""
    envelope = _json_object(data)
    if "payloadType" not in envelope:
        return cast(Payload, envelope.get("certificate"))
    return cast(Payload, _json_object(_unb64(envelope.get("payload"), "the payload")))


def _json_object(data: bytes) -> dict[str, object]:
    try:
        found = json.loads(data.decode("utf-8"), object_pairs_hook=_unique_keys)
    except (UnicodeDecodeError, ValueError) as exc:
        raise CertificateInvalid(f"Not a certificate: the file is not UTF-8 JSON ({exc}).") from None
    except RecursionError:  # nested deeper than the parser's stack: no certificate is
        raise CertificateInvalid("Not a certificate: its JSON is nested too deeply to read.") from None
    if not isinstance(found, dict):
        raise CertificateInvalid("Not a certificate: expected a JSON object.")
    return found


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """A JSON object whose keys are unique: with a key twice, readers disagree on which value was signed."""
    found = dict(pairs)
    if len(found) != len(pairs):
        twice = sorted({key for key, _ in pairs if sum(k == key for k, _ in pairs) > 1})
        raise ValueError(f"the key {twice[0]!r} appears more than once in one object")
    return found


def _verify_dsse(data: bytes, envelope: dict[str, object], public_key: Ed25519PublicKey) -> Verified:
    signatures = envelope.get("signatures")
    if set(envelope) != _DSSE_KEYS or envelope["payloadType"] != PAYLOAD_TYPE:
        raise CertificateInvalid(f"Not a SpecHub certificate: expected a DSSE envelope of type {PAYLOAD_TYPE!r}.")
    if (
        not isinstance(signatures, list)
        or len(signatures) != 1
        or not isinstance(signatures[0], dict)
        or set(signatures[0]) != _DSSE_SIGNATURE_KEYS
    ):
        raise CertificateInvalid("Malformed certificate: expected one signature with keyid and sig.")
    if canonical(envelope) + b"\n" != data:
        raise CertificateInvalid(
            "The file is not in canonical form (it was reformatted or edited): verify the file exactly as issued."
        )
    body, (signature,) = _unb64(envelope["payload"], "the payload"), signatures
    _check_key(signature["keyid"], public_key)
    try:
        public_key.verify(_unb64(signature["sig"], "the signature"), pae(PAYLOAD_TYPE, body))
    except InvalidSignature:
        raise CertificateInvalid("The signature does not match the content: the certificate was changed after signing.") from None
    payload = cast(Payload, _json_object(body))
    if payload.get("format") != FORMAT:
        raise CertificateInvalid(f"Unknown certificate format {payload.get('format')!r}; this verifier reads {FORMAT!r}.")
    return Verified(payload, signature["keyid"], signature["sig"], hashlib.sha256(body).hexdigest())


def _check_key(found: object, public_key: Ed25519PublicKey) -> None:
    if found != key_id(public_key):
        raise CertificateInvalid(
            f"Signed by key {found!r}, not by {key_id(public_key)!r}; verify with the key that issued it "
            "(GET /api/v1/certificates/public-key/)."
        )


def _verify_legacy(data: bytes, public_key: Ed25519PublicKey) -> Verified:
    envelope = _parse(data)
    signature = envelope["signature"]
    _check_key(signature["key_id"], public_key)
    try:
        public_key.verify(bytes.fromhex(signature["value"]), canonical(envelope["certificate"]))
    except InvalidSignature:
        raise CertificateInvalid("The signature does not match the content: the certificate was changed after signing.") from None
    payload = envelope["certificate"]
    return Verified(payload, signature["key_id"], signature["value"], digest(payload))


class _LegacySignature(TypedDict):
    algorithm: str
    key_id: str
    value: str  # 128 lowercase hex digits


class _Legacy(TypedDict):
    """The envelope before DSSE, once _parse has checked it."""

    certificate: Payload
    signature: _LegacySignature


def _parse(data: bytes) -> _Legacy:
    envelope = _json_object(data)
    if set(envelope) != _ENVELOPE_KEYS:
        raise CertificateInvalid("Not a certificate: expected exactly the keys 'certificate' and 'signature'.")
    signature, payload = envelope["signature"], envelope["certificate"]
    if not isinstance(signature, dict) or set(signature) != _SIGNATURE_KEYS or not isinstance(payload, dict):
        raise CertificateInvalid("Malformed certificate: 'signature' must hold algorithm, key_id and value.")
    value = signature["value"]  # text: 128 decimal digits as a number print as the pattern too
    if signature["algorithm"] != ALGORITHM or not isinstance(value, str) or not _HEX_SIGNATURE.fullmatch(value):
        raise CertificateInvalid("Malformed signature: expected an ed25519 signature as 128 lowercase hex digits.")
    if payload.get("format") != FORMAT:
        raise CertificateInvalid(f"Unknown certificate format {payload.get('format')!r}; this verifier reads {FORMAT!r}.")
    if canonical(envelope) + b"\n" != data:
        raise CertificateInvalid(
            "The file is not in canonical form (it was reformatted or edited): verify the file exactly as issued."
        )
    return cast(_Legacy, envelope)  # its keys and the signature's value checked above; key_id is checked against the key


def _32_bytes(text: str, what: str) -> bytes:
    """Return the 32 bytes `text` holds in base64; ValueError says what is wrong."""
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except ValueError:
        raise ValueError("is not base64") from None
    if len(raw) != 32:
        raise ValueError(f"decodes to {len(raw)} bytes; an Ed25519 {what} is 32")
    return raw


def private_key_from_seed(text: str) -> Ed25519PrivateKey:
    """Return the key whose 32-byte seed `text` holds in base64; ValueError says what is wrong."""
    return Ed25519PrivateKey.from_private_bytes(_32_bytes(text, "seed"))


def new_seed() -> str:
    """Return a fresh random Ed25519 seed in base64."""
    raw = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    return base64.b64encode(raw).decode("ascii")


def public_key_from_text(text: str) -> Ed25519PublicKey:
    """Return the public key whose 32 raw bytes `text` holds in base64; ValueError says what is wrong."""
    return Ed25519PublicKey.from_public_bytes(_32_bytes(text, "public key"))


def public_key_text(public_key: Ed25519PublicKey) -> str:
    """Return the public key's 32 raw bytes in base64, the form SPECHUB_SIGNING_PUBLIC_KEY takes."""
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode("ascii")


def public_key_pem(public_key: Ed25519PublicKey) -> str:
    """Return the public key as PEM (SubjectPublicKeyInfo), the form verifiers load."""
    return public_key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def load_public_key(path: Path) -> Ed25519PublicKey:
    """Return the Ed25519 public key stored as PEM at `path`, or raise CertificateInvalid."""
    try:
        pem = path.read_bytes()
    except OSError as exc:
        raise CertificateInvalid(f"Cannot read a PEM public key from {path}: {exc}") from None
    return public_key_from_pem(pem, str(path))


def public_key_from_pem(pem: bytes, source: str) -> Ed25519PublicKey:
    """Return the Ed25519 public key in `pem` (read from `source`, which errors name), or raise CertificateInvalid."""
    try:
        key = serialization.load_pem_public_key(pem)
    except ValueError as exc:
        raise CertificateInvalid(f"Cannot read a PEM public key from {source}: {exc}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise CertificateInvalid(f"{source} holds a {type(key).__name__}, not an Ed25519 public key.")
    return key
