"""The request journal (`emu.journal`): what was asked, in which form, as whom, answered how; bounded."""

from __future__ import annotations

import http.client
import re

import pytest

from tests.emulator._api_support import Raw, admin, emu, make_cm, make_ns, user
from tests.fakes.kubeapi import USER_IDENTITY, Emulator, Journal, Journaled

__all__ = ["admin", "emu", "user"]

CM = "/api/v1/namespaces/j/configmaps/c"


def test_each_request_of_a_non_admin_identity_is_journaled_with_its_answer(
    emu: Emulator, admin: Raw, user: Raw
) -> None:
    make_ns(admin, "j")
    make_cm(admin, "j", "c")
    assert emu.journal.entries(admin=True) == []  # the admin's own requests are not journaled
    assert user.get(CM).status == 200
    assert user.get("/api/v1/namespaces/j/configmaps/missing").status == 404
    assert user.patch(f"{CM}?dryRun=All&fieldManager=t", {"data": {"x": "1"}}).status == 200
    assert Raw(emu, "no-such-token").get(CM).status == 401  # not authenticated: not journaled

    journal = emu.journal.entries()
    assert [(e.method, e.path, e.query, e.status) for e in journal] == [
        ("GET", CM, "", 200),
        ("GET", "/api/v1/namespaces/j/configmaps/missing", "", 404),
        ("PATCH", CM, "dryRun=All&fieldManager=t", 200),
    ]
    assert emu.journal.lines() == [f"GET {CM}", "GET /api/v1/namespaces/j/configmaps/missing", f"PATCH {CM} dryRun"]
    assert [e.dry_run for e in journal] == [False, False, True]
    for e in journal:
        assert (e.user, e.groups, e.impersonated_by, e.by_admin) == (
            USER_IDENTITY,
            ("system:serviceaccounts", "system:serviceaccounts:nsstuck", "system:authenticated"),
            "",
            False,
        )
        assert e.accept == "application/json"
        assert re.fullmatch(r"127\.0\.0\.1:\d+", e.peer)
    assert [e.seq for e in journal] == sorted(e.seq for e in journal)
    assert len({e.seq for e in journal}) == 3
    assert journal[0].at <= journal[1].at <= journal[2].at

    # the filters: method equal, path equal or searched
    assert emu.journal.entries("PATCH") == [journal[2]]
    assert emu.journal.entries(path=CM) == [journal[0], journal[2]]
    assert emu.journal.entries("GET", re.compile(r"/missing$")) == [journal[1]]
    assert emu.journal.lines("PATCH", CM) == [f"PATCH {CM} dryRun"]

    # cleared, it starts again; the numbering goes on
    last = journal[-1].seq
    emu.journal.clear()
    assert emu.journal.entries() == []
    assert user.get(CM).status == 200
    [again] = emu.journal.entries()
    assert again.seq > last


def test_what_the_admin_sends_as_someone_else_is_in_the_audit_view_only(emu: Emulator, admin: Raw) -> None:
    make_ns(admin, "j")
    make_cm(admin, "j", "c")
    as_alice = admin.get(CM, headers={"Impersonate-User": "alice", "Impersonate-Group": "sre"})
    assert as_alice.status == 200
    assert emu.journal.entries() == []
    assert emu.journal.lines() == []
    [entry] = emu.journal.entries(admin=True)
    assert (entry.method, entry.path, entry.status) == ("GET", CM, 200)
    assert (entry.user, entry.groups, entry.impersonated_by, entry.by_admin) == (
        "alice",
        ("sre", "system:authenticated"),
        emu.admin_identity,
        True,
    )


def test_a_request_whose_connection_was_reset_is_journaled_unanswered(emu: Emulator, admin: Raw, user: Raw) -> None:
    make_ns(admin, "j")
    make_cm(admin, "j", "c")
    emu.knobs.inject_fault(f"^GET {CM}$", 0, reset_connection=True, times=1)
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        user.get(CM)
    assert user.get(CM).status == 200
    assert [(e.path, e.status) for e in emu.journal.entries()] == [(CM, 0), (CM, 200)]


def test_the_journal_keeps_the_newest_records_up_to_its_capacity() -> None:
    journal = Journal(capacity=3)
    for i in range(5):
        journal.record(Journaled("GET", f"/api/v1/namespaces/n{i}"))
    assert [(e.seq, e.path) for e in journal.entries()] == [
        (3, "/api/v1/namespaces/n2"),
        (4, "/api/v1/namespaces/n3"),
        (5, "/api/v1/namespaces/n4"),
    ]
