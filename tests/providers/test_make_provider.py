from __future__ import annotations

import subprocess
import sys

import pytest

from bot.config import ModelSettings
from bot.errors import ConfigError
from bot.providers import OpenAICompatibleProvider
from bot.providers.router import make_router


async def test_base_url_gives_the_openai_provider() -> None:
    router = make_router(ModelSettings(base_url="http://127.0.0.1:9/v1", api_key="key"))

    [target] = router.targets_for("gpt-4o-mini")
    assert isinstance(target.provider, OpenAICompatibleProvider)
    assert router.name == "openai"
    await router.aclose()


def test_base_url_without_scheme_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="must start with http:// or https://"):
        make_router(ModelSettings(base_url="api.example.com/v1"))


@pytest.mark.parametrize(("provider", "imported"), [("openai", False), ("anthropic", True)])
def test_the_anthropic_sdk_is_imported_only_for_an_anthropic_endpoint(provider: str, imported: bool) -> None:
    # The SDK takes about a second to import: every command that builds the runtime paid it.
    probe = (
        "import sys\n"
        "from bot.config import ModelSettings\n"
        "from bot.runtime import build_runtime\n"
        "from bot.providers.router import make_router\n"
        f"make_router(ModelSettings(provider={provider!r}, base_url='http://127.0.0.1:9/v1', api_key='k'))\n"
        "print('anthropic' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == str(imported)
