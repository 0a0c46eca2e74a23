"""`manage.py verify_certificate FILE`: check a SpecHub certificate offline.

Exit status: 0 genuine and current, 1 not genuine (changed, malformed, or signed by
another key), 2 genuine but expired.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from kernel import certificate_text, certificates
from registry.certificates.services import verifying_key

EXPIRED = 2


class Command(BaseCommand):
    help = "Verify a certificate's Ed25519 signature and expiry, with no network and no database."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path, help="The certificate file, exactly as downloaded.")
        parser.add_argument(
            "--public-key",
            type=Path,
            help="PEM public key of the issuer (GET /api/v1/certificates/public-key/); by default this deployment's key.",
        )
        parser.add_argument("--json", action="store_true", help="Print the verified payload as JSON.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            data = options["file"].read_bytes()
        except OSError as exc:
            raise CommandError(f"Cannot read {options['file']}: {exc.strerror}.", returncode=1) from None
        try:
            key = certificates.load_public_key(options["public_key"]) if options["public_key"] else verifying_key()
            verified = certificates.verify(data, key)
        except certificates.CertificateInvalid as invalid:
            self.stderr.write(f"NOT VALID: {invalid}")
            raise SystemExit(1) from None
        self._report(verified, as_json=options["json"])

    def _report(self, verified: certificates.Verified, *, as_json: bool) -> None:
        text, expired = certificate_text.describe(verified, datetime.now(UTC))
        if as_json:
            text = json.dumps({"valid": True, "expired": expired, "digest": verified.digest, **verified.payload}, indent=2)
        self.stdout.write(text)
        if expired:
            raise SystemExit(EXPIRED)
