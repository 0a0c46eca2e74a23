"""Issue 64: each process holds its cached tree to the database in O(log n) a request and extends it in place, and
still notices entries changed or removed behind the registry's back: at once through the trigger that counts such
statements, and within COUNT_EVERY seconds by counting the entries when the trigger is gone."""

from __future__ import annotations

import hashlib

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from kernel.transparency import audit, entries, merkle
from registry.certificates.services import signing_key
from registry.models import Certificate, EntryKind, LogEntry
from registry.transparency import selectors
from registry.transparency.selectors import log_tree
from registry.transparency.services import log_append, log_origin
from tests.support.factories import PairFactory
from tests.support.runs import finish_run

pytestmark = pytest.mark.django_db


def logged(count: int) -> Certificate:
    """Return a certificate after the log holds `count` entries (its own and others appended under it)."""
    certificate = finish_run(PairFactory.create()).certificate
    assert certificate is not None
    for number in range(1, count):
        append(certificate, b"entry %d" % number)
    return certificate


def append(certificate: Certificate, data: bytes) -> None:
    log_append(kind=EntryKind.CERTIFICATE, certificate=certificate, entry=data, key=signing_key())


def leaves_in_the_database() -> list[bytes]:
    return [bytes(leaf) for leaf in LogEntry.objects.order_by("index").values_list("leaf_hash", flat=True)]


class Clock:
    """Stands in for the time module in the selectors: seconds move only when a test moves them."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    found = Clock()
    monkeypatch.setattr(selectors, "time", found)
    return found


def test_a_warm_tree_is_held_to_the_database_in_one_query_that_counts_nothing(clock):
    logged(5)
    log_tree()
    with CaptureQueriesContext(connection) as queries:
        found = log_tree()
    assert len(queries) == 1 and "COUNT(" not in queries[0]["sql"].upper(), queries.captured_queries
    assert found.tree.root() == bytes(LogEntry.objects.get(index=4).root_hash)
    clock.now += selectors.COUNT_EVERY  # then, once a window, the entries are counted too
    with CaptureQueriesContext(connection) as queries:
        log_tree()
    assert len(queries) == 1 and "COUNT(" in queries[0]["sql"].upper()


def test_appends_extend_the_tree_in_place_and_a_view_taken_before_them_is_unchanged(monkeypatch):
    certificate = logged(5)
    before = log_tree()
    root = before.tree.root()

    def read_all(state: object) -> None:
        raise AssertionError("a warm tree read the whole log again to take three new entries")

    monkeypatch.setattr(selectors, "_read_all", read_all)
    for number in range(3):
        append(certificate, b"more %d" % number)
    after = log_tree()
    assert (before.tree.size, before.tree.root(), before.top) == (5, root, 4)
    assert (after.tree.size, after.top) == (8, 7) and after.tree.root() == bytes(LogEntry.objects.get(index=7).root_hash)
    assert after.tree.root(5) == root and merkle.Tree(leaves_in_the_database()).root() == after.tree.root()
    with pytest.raises(TypeError, match="read-only"):
        after.tree.append(merkle.leaf_hash(b"x"))


def delete_third() -> None:
    with connection.cursor() as cursor:
        cursor.execute('DELETE FROM registry_logentry WHERE "index" = 2')


def change_third() -> None:
    with connection.cursor() as cursor:
        cursor.execute('UPDATE registry_logentry SET leaf_hash = %s WHERE "index" = 2', [merkle.leaf_hash(b"forged")])


@pytest.mark.both_databases
@pytest.mark.parametrize("tamper", [delete_third, change_third])
def test_an_entry_removed_or_changed_behind_the_registrys_back_is_noticed_at_once(tamper, monkeypatch):
    monkeypatch.setattr(selectors, "COUNT_EVERY", float("inf"))  # the trigger alone
    logged(6)
    seen = log_tree()
    tamper()
    found = log_tree()
    assert merkle.Tree(leaves_in_the_database()).root() == found.tree.root() != seen.tree.root()
    assert seen.tree.size == 6 and found.tree.size == len(leaves_in_the_database())


def test_a_truncated_log_is_noticed_at_once(monkeypatch):
    monkeypatch.setattr(selectors, "COUNT_EVERY", float("inf"))
    logged(3)
    log_tree()
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the test's own inserts checked first, as a commit would
        cursor.execute("TRUNCATE registry_logentry")
    assert log_tree().tree.size == 0


def test_a_removal_that_bypassed_the_trigger_is_noticed_within_count_every_seconds(clock):
    logged(6)
    log_tree()
    with connection.cursor() as cursor:  # with the owner's rights: the trigger off, the row gone
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("ALTER TABLE registry_logentry DISABLE TRIGGER USER")
        cursor.execute('DELETE FROM registry_logentry WHERE "index" = 2')
        cursor.execute("ALTER TABLE registry_logentry ENABLE TRIGGER USER")
    clock.now += selectors.COUNT_EVERY - 0.1
    assert log_tree().tree.size == 6  # within the window, still the log as it was read
    clock.now += 0.1
    assert log_tree().tree.size == 5  # the window over: counted, and read again


def test_entries_that_do_not_lead_to_the_root_stored_are_not_taken_and_the_whole_log_is_read(monkeypatch):
    certificate = logged(4)
    seen = log_tree()
    root = seen.tree.root()
    data = b"inserted behind the registry's back"
    LogEntry.objects.create(index=4, kind=EntryKind.CERTIFICATE, certificate=certificate, entry=data,
                            entry_sha256=entries.entry_sha256(data), leaf_hash=entries.entry_leaf(data),
                            root_hash=b"\0" * 32, logged_at=certificate.issued_at)  # fmt: skip
    found = log_tree()
    assert (seen.tree.size, seen.tree.root()) == (4, root)  # the view held meanwhile never took it
    assert found.tree.size == 5 and found.tree.root() == merkle.Tree(leaves_in_the_database()).root()


def test_an_append_rolled_back_is_not_in_the_tree_after(monkeypatch):
    certificate = logged(3)
    with pytest.raises(RuntimeError), transaction.atomic():
        append(certificate, b"rolled back")
        assert log_tree().tree.size == 4
        raise RuntimeError("the transaction fails after the append")
    found = log_tree()
    assert found.tree.size == 3 and found.tree.root() == bytes(LogEntry.objects.get(index=2).root_hash)


def test_after_a_removal_the_log_still_grows_in_place_and_its_proofs_hold(monkeypatch):
    certificate = logged(6)
    delete_third()
    log_tree()  # read again once, with the gap in the indexes

    def read_all(state: object) -> None:
        raise AssertionError("every append after a removal read the whole log again")

    monkeypatch.setattr(selectors, "_read_all", read_all)
    append(certificate, b"after the removal")
    found = log_tree()
    assert found.tree.size == 6 and found.top == 6 and found.positions is not None and found.positions[6] == 5
    proof = APIClient().get("/api/v1/log/proof/inclusion", {"certificate": hashlib.sha256(b"after the removal").hexdigest()})
    assert proof.status_code == 200, proof.content
    checked = audit.check_inclusion(b"after the removal", proof.json(), origin=log_origin(), key=signing_key().public_key())
    assert (checked.index, checked.checkpoint.size) == (5, 6)
