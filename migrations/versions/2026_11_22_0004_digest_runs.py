"""Digest runs: one per digest and scheduled time, claimed by one replica, with what it listed.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Timestamp = sa.DateTime(timezone=True)
JsonDoc = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "digest_runs",
        sa.Column("id", BigId, nullable=False),
        sa.Column("digest_key", sa.String(length=200), nullable=False),
        sa.Column("channel", sa.String(length=32), nullable=False),
        sa.Column("scheduled_for", Timestamp, nullable=False),
        sa.Column("manual", sa.Boolean(), nullable=False),
        sa.Column("claimed_at", Timestamp, nullable=False),
        sa.Column("claimed_by", sa.String(length=100), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("built_at", Timestamp, nullable=True),
        sa.Column("posted_at", Timestamp, nullable=True),
        sa.Column("post_attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("message_ts", sa.String(length=32), nullable=True),
        sa.Column("summary", JsonDoc, nullable=True),
        sa.Column("message", JsonDoc, nullable=True),
        sa.Column("error", sa.String(length=500), nullable=True),
        sa.CheckConstraint(
            "status IN ('claimed', 'built', 'posted', 'post_failed', 'skipped')", name=op.f("ck_digest_runs_status")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_digest_runs")),
        sa.UniqueConstraint("digest_key", "scheduled_for", name=op.f("uq_digest_runs_digest_key_scheduled_for")),
    )
    op.create_index(
        op.f("ix_digest_runs_digest_key_status_scheduled_for"), "digest_runs", ["digest_key", "status", "scheduled_for"]
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_digest_runs_digest_key_status_scheduled_for"), table_name="digest_runs")
    op.drop_table("digest_runs")
