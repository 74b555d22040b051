"""The watch: one claim per watched cluster and round, whether each watched cluster answers, and the
incidents whose verdict the watch posted unasked.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("incidents") as batch:
        batch.add_column(sa.Column("watch_posted_at", Timestamp, nullable=True))
    op.create_table(
        "watch_rounds",
        sa.Column("id", BigId, nullable=False),
        sa.Column("cluster", sa.String(length=63), nullable=False),
        sa.Column("round_start", Timestamp, nullable=False),
        sa.Column("claimed_by", sa.String(length=100), nullable=False),
        sa.Column("claimed_at", Timestamp, nullable=False),
        sa.Column("finished_at", Timestamp, nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=True),
        sa.Column("namespaces", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_watch_rounds")),
        sa.UniqueConstraint("cluster", "round_start", name=op.f("uq_watch_rounds_cluster_round_start")),
    )
    op.create_index(op.f("ix_watch_rounds_round_start"), "watch_rounds", ["round_start"])
    op.create_table(
        "watched_clusters",
        sa.Column("cluster", sa.String(length=63), nullable=False),
        sa.Column("reachable", sa.Boolean(), nullable=False),
        sa.Column("changed_at", Timestamp, nullable=False),
        sa.Column("checked_at", Timestamp, nullable=False),
        sa.Column("reason", sa.String(length=500), nullable=True),
        sa.PrimaryKeyConstraint("cluster", name=op.f("pk_watched_clusters")),
    )


def downgrade() -> None:
    op.drop_table("watched_clusters")
    op.drop_index(op.f("ix_watch_rounds_round_start"), table_name="watch_rounds")
    op.drop_table("watch_rounds")
    with op.batch_alter_table("incidents") as batch:
        batch.drop_column("watch_posted_at")
