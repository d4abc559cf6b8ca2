from tests.durable.conftest import postgres_url  # noqa: F401
