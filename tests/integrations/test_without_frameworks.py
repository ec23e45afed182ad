"""Without the framework extras the package and its library face still import, and each
adapter's import says which extra to install."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import sys
    sys.modules["strands"] = None  # an import of it now raises ImportError
    sys.modules["strands.models"] = None
    sys.modules["strands.models.model"] = None
    sys.modules["pydantic_ai"] = None
    import awaken_s3
    from awaken_s3.integrations import ResumableTurnError
    print("library", awaken_s3.open_turn.__name__, ResumableTurnError.__name__)
    for module in ("strands", "pydantic_ai"):
        try:
            __import__(f"awaken_s3.integrations.{module}")
        except ImportError as exc:
            print("needs-extra", exc)
    """
)


@pytest.mark.slow
def test_the_library_imports_without_frameworks_and_each_adapter_names_its_extra() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=True
    )
    lines = result.stdout.splitlines()
    assert lines[0] == "library open_turn ResumableTurnError"
    assert "pip install 'awaken-s3[strands]'" in lines[1]
    assert "pip install 'awaken-s3[pydantic-ai]'" in lines[2]
