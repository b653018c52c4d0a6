"""Tables a migration makes from the schema's metadata (:func:`geminibot.store.schema.metadata`)
as they were at its version: the columns it names, each made as the schema describes it
today (a later version that changes a column, rather than adding one, freezes it in its
own migration)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import sqlalchemy as sa
from alembic import op

from geminibot.store.schema import metadata


def as_created(column: sa.Column[Any]) -> sa.Column[Any]:
    """A new column made as the schema's ``column`` is (name, type, key, nullability,
    default, identity, generated expression, foreign key)."""
    extra: list[Any] = [
        sa.ForeignKey(fk.target_fullname, ondelete=fk.ondelete) for fk in column.foreign_keys
    ]
    if column.identity is not None:
        extra.append(sa.Identity(always=column.identity.always))
    if column.computed is not None:
        extra.append(sa.Computed(column.computed.sqltext, persisted=column.computed.persisted))
    default = column.server_default
    value: Any = default.arg if isinstance(default, sa.DefaultClause) else None
    return sa.Column(
        column.name,
        column.type,
        *extra,
        primary_key=column.primary_key,
        nullable=column.nullable,
        unique=column.unique,
        server_default=value,
    )


def create_table(name: str, columns: Collection[str] = ()) -> bool:
    """Create the schema's table ``name`` with ``columns`` (empty: all it has today), in
    the migration's connection; False when the engine has no such table."""
    table = metadata(op.get_bind().dialect.name).tables.get(name)
    if table is None:
        return False
    kept = [c for c in table.columns if not columns or c.name in columns]
    op.create_table(name, *(as_created(c) for c in kept), **dict(table.kwargs))
    return True
