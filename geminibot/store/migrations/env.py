"""Alembic's environment: runs the history on the connection :mod:`geminibot.store.upgrade`
hands over (``config.attributes["connection"]``), in its one transaction."""

from __future__ import annotations

from alembic import context

from geminibot.store.upgrade import after_migrations, before_migrations

connection = context.config.attributes["connection"]
context.configure(connection=connection, transactional_ddl=True)
with context.begin_transaction():
    before_migrations(connection, context.get_context(), context.script)
    context.run_migrations()
    after_migrations(connection)
