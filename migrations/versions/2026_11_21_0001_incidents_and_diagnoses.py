"""Incidents and the diagnosis runs that belong to them.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "incidents",
        sa.Column("id", BigId, nullable=False),
        sa.Column("cluster", sa.String(length=63), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("namespace_uid", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("cause", sa.String(length=32), nullable=True),
        sa.Column("terminating_since", Timestamp, nullable=True),
        sa.Column("first_seen_at", Timestamp, nullable=False),
        sa.Column("resolved_at", Timestamp, nullable=True),
        sa.Column("slack_channel", sa.String(length=32), nullable=True),
        sa.Column("slack_thread_ts", sa.String(length=32), nullable=True),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("updated_at", Timestamp, nullable=False),
        sa.CheckConstraint("status IN ('open', 'resolved')", name=op.f("ck_incidents_status")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_incidents")),
        sa.UniqueConstraint("cluster", "namespace_uid", name=op.f("uq_incidents_cluster_namespace_uid")),
    )
    op.create_index(op.f("ix_incidents_cluster_namespace_status"), "incidents", ["cluster", "namespace", "status"])
    op.create_index(op.f("ix_incidents_status_first_seen_at"), "incidents", ["status", "first_seen_at"])

    op.create_table(
        "diagnoses",
        sa.Column("id", BigId, nullable=False),
        sa.Column("incident_id", BigId, nullable=True),
        sa.Column("cluster", sa.String(length=63), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("trigger", sa.String(length=16), nullable=False),
        sa.Column("requested_by", sa.String(length=64), nullable=False),
        sa.Column("started_at", Timestamp, nullable=False),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("cause", sa.String(length=32), nullable=True),
        sa.Column("complete", sa.Boolean(), nullable=False),
        sa.Column("report", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False),
        sa.Column("snapshot", sa.LargeBinary(), nullable=True),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.CheckConstraint("state IN ('terminating', 'active', 'not_found')", name=op.f("ck_diagnoses_state")),
        sa.CheckConstraint("trigger IN ('slack', 'schedule', 'cli')", name=op.f("ck_diagnoses_trigger")),
        sa.ForeignKeyConstraint(
            ["incident_id"],
            ["incidents.id"],
            name=op.f("fk_diagnoses_incident_id_incidents"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_diagnoses")),
    )
    op.create_index(
        op.f("ix_diagnoses_cluster_namespace_started_at"), "diagnoses", ["cluster", "namespace", "started_at"]
    )
    op.create_index(op.f("ix_diagnoses_incident_id_started_at"), "diagnoses", ["incident_id", "started_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_diagnoses_incident_id_started_at"), table_name="diagnoses")
    op.drop_index(op.f("ix_diagnoses_cluster_namespace_started_at"), table_name="diagnoses")
    op.drop_table("diagnoses")
    op.drop_index(op.f("ix_incidents_status_first_seen_at"), table_name="incidents")
    op.drop_index(op.f("ix_incidents_cluster_namespace_status"), table_name="incidents")
    op.drop_table("incidents")
