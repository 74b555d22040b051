"""Seen requests: the signatures of the signed Slack requests let in, so that a replay is refused.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "seen_requests",
        sa.Column("signature", sa.String(length=80), nullable=False),
        sa.Column("request_ts", sa.BigInteger(), nullable=False),
        sa.Column("seen_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("signature", name=op.f("pk_seen_requests")),
    )
    op.create_index(op.f("ix_seen_requests_request_ts"), "seen_requests", ["request_ts"])


def downgrade() -> None:
    op.drop_index(op.f("ix_seen_requests_request_ts"), table_name="seen_requests")
    op.drop_table("seen_requests")
