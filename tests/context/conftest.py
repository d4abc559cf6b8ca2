from tests.fakes.openai_server import fake_openai_fixture  # noqa: F401
