"""The package works without the anthropic/openai extras; Bedrock needs nothing extra."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import sys
    sys.modules["anthropic"] = None  # an import of it now raises ImportError
    sys.modules["openai"] = None
    import awaken_s3.providers as providers
    bedrock = providers.build_provider(providers.ProviderSettings(provider="bedrock", model="m"))
    print("bedrock", bedrock.name)
    for cls in (providers.AnthropicProvider, providers.OpenAIChatProvider):
        try:
            cls(api_key="x")
        except ImportError as exc:
            print("needs-extra", exc)
    """
)


@pytest.mark.slow
def test_bedrock_without_extras_and_a_clear_message_for_the_others() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=True
    )
    lines = result.stdout.splitlines()
    assert lines[0] == "bedrock bedrock"
    assert "pip install 'awaken-s3[anthropic]'" in lines[1]
    assert "pip install 'awaken-s3[openai]'" in lines[2]
