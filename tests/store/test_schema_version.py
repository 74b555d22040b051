"""The schema check of `serve` and the commands that open the database (`bot/store/schema_version.py`)
reads what Alembic reads, at every revision, and its head is Alembic's head."""

from __future__ import annotations

import pytest
from alembic.script import ScriptDirectory

from bot.errors import PermanentError
from bot.store import migrating, schema_version


def test_the_head_is_the_newest_migration() -> None:
    """Fails when a migration is added and HEAD_REVISION is not moved with it."""
    assert migrating.head_revision() == schema_version.HEAD_REVISION


def test_the_same_reading_as_alembic_at_every_revision(database_url: str) -> None:
    assert schema_version.current_revision(database_url) is None  # never migrated
    script = ScriptDirectory.from_config(migrating.alembic_config(database_url))
    revisions = [r.revision for r in reversed(list(script.walk_revisions()))]
    assert revisions[-1] == schema_version.HEAD_REVISION
    for revision in revisions:
        migrating.upgrade(database_url, revision)
        assert schema_version.current_revision(database_url) == migrating.current_revision(database_url) == revision
    migrating.downgrade(database_url, "base")
    assert schema_version.current_revision(database_url) is None
    assert migrating.current_revision(database_url) is None


def test_an_unreachable_database_is_said_in_one_line_without_its_password() -> None:
    url = "postgresql+psycopg://nsstuck:hunter2-secret@127.0.0.1:1/nsstuck"
    with pytest.raises(PermanentError) as raised:
        schema_version.current_revision(url)
    assert "cannot reach the database" in str(raised.value)
    assert "hunter2-secret" not in str(raised.value)
    assert "\n" not in str(raised.value)


def test_alembic_is_not_loaded_to_check_the_schema() -> None:
    """What the check saves the bot's start: Alembic's import, checked in a fresh interpreter."""
    import subprocess
    import sys

    code = (
        "import sys; from bot.store import schema_version; "
        "schema_version.current_revision('sqlite://'); print('alembic' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
