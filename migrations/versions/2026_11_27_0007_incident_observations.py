"""Progress across follow-ups (issue 37 §1): each incident keeps what the looks at its namespace saw (a
few entries of a time, the remaining count and resourceVersions), so that a later diagnosis tells
progress from standing still.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("incidents") as batch:
        batch.add_column(
            sa.Column("observations", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table("incidents") as batch:
        batch.drop_column("observations")
