"""Remediation requests, approvers' votes, backups, and the append-only, hash-chained audit trail.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Timestamp = sa.DateTime(timezone=True)
GENESIS = "0" * 64

# Tables that are only ever appended to. The hash chain makes tampering evident; these triggers make
# it deliberate (whoever edits the rows has to drop a trigger first, which needs DDL rights).
APPEND_ONLY = ("audit_entries", "backups")


def upgrade() -> None:
    op.create_table(
        "remediation_requests",
        sa.Column("id", BigId, nullable=False),
        sa.Column("diagnosis_id", BigId, nullable=False),
        sa.Column("incident_id", BigId, nullable=True),
        sa.Column("cluster", sa.String(length=63), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("remedy_id", sa.String(length=32), nullable=False),
        sa.Column("action", sa.String(length=40), nullable=False),
        sa.Column("risk", sa.String(length=8), nullable=False),
        sa.Column("description", sa.String(length=500), nullable=False),
        sa.Column("remedy", sa.JSON(), nullable=False),
        sa.Column("requested_by", sa.String(length=64), nullable=False),
        sa.Column("requested_at", Timestamp, nullable=False),
        sa.Column("expires_at", Timestamp, nullable=False),
        sa.Column("required_approvals", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("status_reason", sa.String(length=1000), nullable=True),
        sa.Column("decided_at", Timestamp, nullable=True),
        sa.Column("channel", sa.String(length=32), nullable=True),
        sa.Column("thread_ts", sa.String(length=32), nullable=True),
        sa.Column("message_ts", sa.String(length=32), nullable=True),
        sa.Column("execution_id", sa.String(length=36), nullable=True),
        sa.Column("execution_started_at", Timestamp, nullable=True),
        sa.Column("execution_deadline", Timestamp, nullable=True),
        sa.Column("finished_at", Timestamp, nullable=True),
        sa.Column("follow_until", Timestamp, nullable=True),
        sa.Column("verified_at", Timestamp, nullable=True),
        sa.Column("verification", sa.String(length=24), nullable=True),
        sa.Column("updated_at", Timestamp, nullable=False),
        sa.CheckConstraint(
            "status IN ('pending', 'rejected', 'expired', 'stale', 'executing', 'applied', 'failed')",
            name=op.f("ck_remediation_requests_status"),
        ),
        sa.CheckConstraint("required_approvals >= 1", name=op.f("ck_remediation_requests_required_approvals")),
        sa.ForeignKeyConstraint(
            ["diagnosis_id"],
            ["diagnoses.id"],
            name=op.f("fk_remediation_requests_diagnosis_id_diagnoses"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["incident_id"],
            ["incidents.id"],
            name=op.f("fk_remediation_requests_incident_id_incidents"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_remediation_requests")),
    )
    op.create_index(op.f("ix_remediation_requests_status_expires_at"), "remediation_requests", ["status", "expires_at"])
    op.create_index(op.f("ix_remediation_requests_incident_id"), "remediation_requests", ["incident_id"])
    op.create_index(
        "uq_remediation_requests_pending_remedy",
        "remediation_requests",
        ["diagnosis_id", "remedy_id"],
        unique=True,
        sqlite_where=sa.text("status = 'pending'"),
        postgresql_where=sa.text("status = 'pending'"),
    )

    op.create_table(
        "remediation_votes",
        sa.Column("id", BigId, nullable=False),
        sa.Column("request_id", BigId, nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("decision", sa.String(length=8), nullable=False),
        sa.Column("decided_at", Timestamp, nullable=False),
        sa.CheckConstraint("decision IN ('approve', 'reject')", name=op.f("ck_remediation_votes_decision")),
        sa.ForeignKeyConstraint(
            ["request_id"],
            ["remediation_requests.id"],
            name=op.f("fk_remediation_votes_request_id_remediation_requests"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_remediation_votes")),
        sa.UniqueConstraint("request_id", "user_id", name=op.f("uq_remediation_votes_request_id_user_id")),
    )

    op.create_table(
        "backups",
        sa.Column("id", BigId, nullable=False),
        sa.Column("request_id", BigId, nullable=False),
        sa.Column("cluster", sa.String(length=63), nullable=False),
        sa.Column("api_version", sa.String(length=253), nullable=False),
        sa.Column("kind", sa.String(length=63), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=True),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column("uid", sa.String(length=64), nullable=True),
        sa.Column("resource_version", sa.String(length=64), nullable=True),
        sa.Column("taken_at", Timestamp, nullable=False),
        sa.Column("object", sa.JSON(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["request_id"],
            ["remediation_requests.id"],
            name=op.f("fk_backups_request_id_remediation_requests"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_backups")),
    )
    op.create_index(op.f("ix_backups_request_id"), "backups", ["request_id"])

    op.create_table(
        "audit_entries",
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("at", Timestamp, nullable=False),
        sa.Column("event", sa.String(length=24), nullable=False),
        sa.Column("actor", sa.String(length=64), nullable=False),
        sa.Column("cluster", sa.String(length=63), nullable=True),
        sa.Column("namespace", sa.String(length=63), nullable=True),
        sa.Column("request_id", sa.BigInteger(), nullable=True),
        sa.Column("objects", sa.JSON(), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("prev_hash", sa.String(length=64), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_audit_entries")),
    )
    op.create_index(op.f("ix_audit_entries_request_id"), "audit_entries", ["request_id"])
    op.create_index(op.f("ix_audit_entries_at"), "audit_entries", ["at"])

    head = op.create_table(
        "audit_head",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.CheckConstraint("id = 1", name=op.f("ck_audit_head_single_row")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_head")),
    )
    op.bulk_insert(head, [{"id": 1, "seq": 0, "hash": GENESIS}])

    _append_only_triggers()


def _append_only_triggers() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION nsstuck_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "BEGIN RAISE EXCEPTION '% is append-only', TG_TABLE_NAME; END $$"
        )
        for table in APPEND_ONLY:
            op.execute(
                f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION nsstuck_append_only()"
            )
    else:
        for table in APPEND_ONLY:
            for verb in ("UPDATE", "DELETE"):
                op.execute(
                    f"CREATE TRIGGER {table}_no_{verb.lower()} BEFORE {verb} ON {table} "
                    f"BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END"
                )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in APPEND_ONLY:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}")
        op.execute("DROP FUNCTION IF EXISTS nsstuck_append_only()")
    else:
        for table in APPEND_ONLY:
            for verb in ("update", "delete"):
                op.execute(f"DROP TRIGGER IF EXISTS {table}_no_{verb}")
    op.drop_table("audit_head")
    op.drop_index(op.f("ix_audit_entries_at"), table_name="audit_entries")
    op.drop_index(op.f("ix_audit_entries_request_id"), table_name="audit_entries")
    op.drop_table("audit_entries")
    op.drop_index(op.f("ix_backups_request_id"), table_name="backups")
    op.drop_table("backups")
    op.drop_table("remediation_votes")
    op.drop_index("uq_remediation_requests_pending_remedy", table_name="remediation_requests")
    op.drop_index(op.f("ix_remediation_requests_incident_id"), table_name="remediation_requests")
    op.drop_index(op.f("ix_remediation_requests_status_expires_at"), table_name="remediation_requests")
    op.drop_table("remediation_requests")
