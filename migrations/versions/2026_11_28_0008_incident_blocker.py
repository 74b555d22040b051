"""A memory of the fix (issue 39 §3): each incident keeps the blocking object family of its cause (the
APIService, webhook configuration, finalizer, node pool or group version), and an index serves the verdict's
"seen before" query: the newest incidents of a cluster, cause and family.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("incidents") as batch:
        batch.add_column(sa.Column("blocker", sa.String(length=255), nullable=True))
        batch.create_index(
            "ix_incidents_cluster_cause_blocker_first_seen_at", ["cluster", "cause", "blocker", "first_seen_at"]
        )


def downgrade() -> None:
    with op.batch_alter_table("incidents") as batch:
        batch.drop_index("ix_incidents_cluster_cause_blocker_first_seen_at")
        batch.drop_column("blocker")
