"""The project's exception family.

Every error a user can cause or fix carries a short, secret-free message meant to be shown as is.
The doors (CLI, Slack) map the families to exit codes and replies; nothing below them prints.
"""

from __future__ import annotations


class NsstuckError(Exception):
    """Base of every error raised on purpose by nsstuck."""

    exit_code = 1


class UserError(NsstuckError):
    """The user asked for something that cannot be done as asked (bad input, bad config)."""

    exit_code = 2


class ConfigError(UserError):
    """The configuration (file or environment) is invalid.

    `source` is the file or variable, `key` the dotted path inside it, `problem` what is wrong.
    """

    def __init__(self, source: str, key: str | None, problem: str) -> None:
        self.source = source
        self.key = key
        self.problem = problem
        where = f"{source}: {key}" if key else source
        super().__init__(f"{where}: {problem}")


class UnknownClusterError(UserError):
    """A cluster name that is not registered in the config file."""

    def __init__(self, name: str, known: list[str], suggestion: str | None = None) -> None:
        self.name = name
        self.known = known
        self.suggestion = suggestion
        hint = f"; did you mean {suggestion!r}?" if suggestion else ""
        listing = ", ".join(known) if known else "none are registered"
        super().__init__(f"unknown cluster {name!r} (registered: {listing}){hint}")


class ClusterUnreachableError(NsstuckError):
    """The cluster's API server cannot be reached, or refuses our credentials."""

    exit_code = 3


class TemporaryError(NsstuckError):
    """Something outside us failed in a way that may pass; retrying later makes sense."""


class PermanentError(NsstuckError):
    """Something outside us failed in a way that retrying will not fix."""


class StoreUnavailableError(TemporaryError):
    """The database cannot be reached right now (down, restarting, failing over, the connection
    dropped, SQLite's file locked past its busy timeout): the same work may succeed later."""


class StoreError(PermanentError):
    """The database refused the work (a constraint, a schema that does not match): trying again will
    not help."""
