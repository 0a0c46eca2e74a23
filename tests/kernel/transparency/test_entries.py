"""Revocation statements as the log holds them: /2 names every file signed for the run, and a /1 statement, logged
before that, still reads as naming its one file (issue 61, item 2)."""

from __future__ import annotations

import json

import pytest

from kernel.transparency import entries, merkle

OLDER, NEWER = "a" * 64, "b" * 64
V1 = {"format": "spechub-revocation/1", "certificate_sha256": NEWER, "serial": 7, "reason": "misconfigured",
      "revoked_by": "staff", "revoked_at": "2026-12-01T00:00:00+00:00"}  # fmt: skip


def statement(**changes: object) -> str:
    found = {**V1, "format": entries.REVOCATION_FORMAT, "certificate_sha256s": [OLDER, NEWER], **changes}
    del found["certificate_sha256"]
    return json.dumps(found)


def test_a_revocation_names_every_file_signed_for_the_run_and_each_reads_revoked():
    for named in (OLDER, NEWER):
        assert entries.revocation_of(statement(), named)["reason"] == "misconfigured"
    with pytest.raises(merkle.ProofError, match="names another certificate"):
        entries.revocation_of(statement(), "c" * 64)


def test_a_revocation_logged_in_the_first_format_still_reads_as_naming_its_one_file():
    read = entries.revocation_of(json.dumps(V1), NEWER)
    assert read["certificate_sha256s"] == [NEWER] and read["revoked_by"] == "staff"
    with pytest.raises(merkle.ProofError, match="names another certificate"):
        entries.revocation_of(json.dumps(V1), OLDER)


@pytest.mark.parametrize(
    "changes",
    [{"certificate_sha256s": []}, {"certificate_sha256s": ["not a sha"]}, {"certificate_sha256s": OLDER},
     {"reason": 5}, {"serial": "7"}, {"serial": True}, {"format": "spechub-revocation/3"}, {"extra": 1}],
)  # fmt: skip
def test_a_statement_that_is_not_a_revocation_this_code_reads_is_refused_saying_why(changes):
    with pytest.raises(merkle.ProofError, match="revocation statement"):
        entries.revocation_read(statement(**changes))


def test_an_entry_is_a_revocation_by_what_it_says_not_by_what_the_server_calls_it():
    assert entries.is_revocation(statement().encode()) and entries.is_revocation(json.dumps(V1).encode())
    assert entries.is_revocation(statement(format="spechub-revocation/3").encode())  # read as one, and refused there
    assert not entries.is_revocation(b'{"payload": "e30=", "payloadType": "x", "signatures": []}\n')
    assert not entries.is_revocation(b"\xff not JSON")
