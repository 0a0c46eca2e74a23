"""The transparency log's rows: one entry per signed certificate or revocation, and the head that orders them."""

from __future__ import annotations

from django.db import models

from registry.certificates.models import Certificate


class EntryKind(models.TextChoices):
    CERTIFICATE = "certificate"
    REVOCATION = "revocation"


class LogEntry(models.Model):
    """One leaf of the log. `entry` is what was logged (the certificate file as signed, or the revocation
    statement); the leaf is RFC 6962's hash of its SHA-256. Entries are never changed or deleted."""

    index = models.BigIntegerField(unique=True)
    kind = models.CharField(max_length=16, choices=EntryKind.choices)
    # PROTECT: a logged certificate is revoked, never deleted; its entry keeps it in the log either way.
    certificate = models.ForeignKey(Certificate, on_delete=models.PROTECT, related_name="log_entries")
    entry = models.BinaryField()
    entry_sha256 = models.CharField(max_length=64, db_index=True)
    leaf_hash = models.BinaryField(max_length=32)
    # The root of the log as this entry left it: what the checkpoint of size index + 1 signed.
    root_hash = models.BinaryField(max_length=32)
    logged_at = models.DateTimeField()

    class Meta:
        ordering = ["index"]

    def __str__(self) -> str:
        return f"log entry {self.index} ({self.kind})"


class LogHead(models.Model):
    """The log's one head row: locked by every append so indexes are gapless, and holding the latest checkpoint."""

    size = models.BigIntegerField(default=0)
    checkpoint = models.TextField(blank=True)
    # Statements that changed or removed log entries: the registry never does, so a database trigger counts them
    # (migration 0021), and each process rereads the log when the count moves (registry/transparency/selectors.py).
    rewrites = models.BigIntegerField(default=0, db_default=0)

    def __str__(self) -> str:
        return f"log of size {self.size}"
