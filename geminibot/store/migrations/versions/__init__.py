"""One Alembic revision per schema version, for both engines; append-only."""
