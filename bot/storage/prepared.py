"""Hot statements compiled once and run on the driver's cursor of an open connection.

SQLAlchemy Core spends about 70–100 µs of Python on every `Connection.execute` (an
execution context, parameter processing, a result object), several times what SQLite
takes to run a one-row insert. A turn's writes are a few such statements each
(`MessageStore.append`: the sequence bump, the row, its full-text row, its delivery
state, its jobs), and a tool round writes two of them, so for these alone the
statement is compiled by SQLAlchemy once per dialect and set of parameter names, and
run by the driver (sqlite3, psycopg) inside the SQLAlchemy transaction the caller
holds. Values still go through each column type's bind processor, errors are raised
as SQLAlchemy's (an `IntegrityError` stays one), and `before_cursor_execute`
listeners still see every statement.

Only statements whose work SQLAlchemy would not add to at execution time qualify:
no Python-side column defaults to fill in, no expanding `IN` lists, and returned
columns the driver already gives back as Python values; `Prepared` refuses others
when it compiles them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import exc
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ClauseElement

BindProcessor = Callable[[Any], Any]


@dataclass(frozen=True)
class _Compiled:
    sql: str
    compiled: SQLCompiler
    # For a positional paramstyle (SQLite's `?`), the parameters' names in order.
    names: tuple[str, ...] | None
    processors: Mapping[str, BindProcessor]


class Prepared:
    """One statement, compiled at its first use on each dialect and set of parameter names."""

    def __init__(self, statement: ClauseElement) -> None:
        self.statement = statement
        self._compiled: dict[tuple[str, frozenset[str]], _Compiled] = {}

    def execute(self, connection: Connection, parameters: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """Run on `connection`'s transaction; the rows it returns (RETURNING), else []."""
        dialect = connection.dialect
        key = (dialect.name, frozenset(parameters))
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = self._compiled[key] = self._compile(dialect, parameters)
        values = compiled.compiled.construct_params(dict(parameters))
        for name, process in compiled.processors.items():
            values[name] = process(values[name])
        bound: Sequence[Any] | Mapping[str, Any] = (
            values if compiled.names is None else tuple(values[name] for name in compiled.names)
        )
        cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            listeners = connection.dispatch.before_cursor_execute
            if listeners:
                listeners(connection, cursor, compiled.sql, bound, None, False)
            try:
                cursor.execute(compiled.sql, bound)
            except dialect.loaded_dbapi.Error as error:
                raise exc.DBAPIError.instance(
                    compiled.sql, bound, error, dialect.loaded_dbapi.Error, dialect=dialect
                ) from error
            return list(cursor.fetchall()) if compiled.compiled.returning else []
        finally:
            cursor.close()

    def _compile(self, dialect: Dialect, parameters: Mapping[str, Any]) -> _Compiled:
        compiled = self.statement.compile(dialect=dialect, column_keys=sorted(parameters))
        assert isinstance(compiled, SQLCompiler)
        if compiled.insert_prefetch or compiled.update_prefetch:
            raise ValueError("a prepared statement must not need column defaults filled in")
        if any(bind.expanding for bind in compiled.binds.values()):
            raise ValueError("a prepared statement must not expand a list of values")
        for column in compiled.returning or ():
            if column.type.dialect_impl(dialect).result_processor(dialect, None) is not None:
                raise ValueError(f"a prepared statement cannot return {column} as the driver gives it")
        processors = {}
        for name, bind in compiled.binds.items():
            process = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if process is not None:
                processors[compiled.escaped_bind_names.get(name, name)] = process
        names = tuple(compiled.positiontup or ()) if compiled.positional else None
        return _Compiled(compiled.string, compiled, names, processors)
