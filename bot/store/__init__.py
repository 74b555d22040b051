"""Persistence: the only package that imports SQLAlchemy and Alembic.

Typed models, repositories that never commit, and `unit_of_work()`: the request or the job that
opens a unit of work owns its transaction. Alembic (migrations/) owns the schema.
"""
