"""Persistence: SQLAlchemy 2.0 async models, repositories and Alembic migrations."""
