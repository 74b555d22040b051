"""Posting state of diagnosis runs (an outbox for Slack) and follow-up state of incidents.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("diagnoses") as batch:
        batch.add_column(sa.Column("post_channel", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("posted_at", Timestamp, nullable=True))
        batch.add_column(sa.Column("post_attempts", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("last_post_error", sa.String(length=200), nullable=True))
        batch.create_index(op.f("ix_diagnoses_posted_at_post_channel"), ["posted_at", "post_channel"])
    with op.batch_alter_table("incidents") as batch:
        batch.add_column(sa.Column("last_checked_at", Timestamp, nullable=True))
        batch.add_column(sa.Column("resolution_posted_at", Timestamp, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("incidents") as batch:
        batch.drop_column("resolution_posted_at")
        batch.drop_column("last_checked_at")
    with op.batch_alter_table("diagnoses") as batch:
        batch.drop_index(op.f("ix_diagnoses_posted_at_post_channel"))
        batch.drop_column("last_post_error")
        batch.drop_column("post_attempts")
        batch.drop_column("posted_at")
        batch.drop_column("post_channel")
