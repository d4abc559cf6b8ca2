from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from tests.fakes.openai_server import fake_openai_fixture  # noqa: F401

ADMIN_URL = os.environ.get("CHORUS_TEST_POSTGRES_URL")
needs_postgres = pytest.mark.skipif(
    not ADMIN_URL, reason="CHORUS_TEST_POSTGRES_URL is not set (scripts/test.sh sets it)"
)


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh, uniquely named database on the test PostgreSQL server."""
    assert ADMIN_URL is not None
    name = f"chorus_durable_{uuid.uuid4().hex[:12]}"
    admin = create_engine(
        make_url(ADMIN_URL).set(drivername="postgresql+psycopg"), isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    yield make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()
