"""The package root is the curated face users import from: each name once, loaded lazily."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import awaken_s3
from awaken_s3._lazy import exported_names

ROOT = Path(__file__).resolve().parents[2]


def test_design_names_are_exported() -> None:
    from awaken_s3 import (
        CheckpointCorrupt,
        CheckpointFenced,
        CheckpointSchemaUnsupported,
        FsStreamCheckpointStore,
        InMemoryStreamCheckpointStore,
        PartialToolCall,
        S3StreamCheckpointStore,
        StoredCheckpoint,
        StreamCheckpoint,
        StreamCheckpointError,
        StreamCheckpointStore,
        plan_recovery,
    )

    assert issubclass(CheckpointFenced, StreamCheckpointError)
    assert issubclass(CheckpointCorrupt, StreamCheckpointError)
    # Not a kind of corruption: nothing that discards corrupt checkpoints may discard it.
    assert issubclass(CheckpointSchemaUnsupported, StreamCheckpointError)
    assert not issubclass(CheckpointSchemaUnsupported, CheckpointCorrupt)
    assert S3StreamCheckpointStore.__module__ == "awaken_s3.stores.s3"
    assert FsStreamCheckpointStore.__module__ == "awaken_s3.stores.fs"
    assert InMemoryStreamCheckpointStore.__module__ == "awaken_s3.stores.memory"
    assert {StreamCheckpoint, PartialToolCall, StoredCheckpoint, StreamCheckpointStore}
    assert callable(plan_recovery)


def test_what_users_build_on_is_exported() -> None:
    from awaken_s3 import (  # noqa: F401
        Agent,
        App,
        AwakenError,
        DynamoThreadStore,
        FailureCode,
        InMemoryThreadStore,
        MCPServer,
        ReasoningChunk,
        ResumableTurn,
        TextChunk,
        ThreadStoreError,
        ToolCallChunk,
        ToolCallReady,
        ToolCallStarted,
        ToolContext,
        ToolError,
        TurnEvent,
        TurnFenced,
        TurnNotCompleted,
        TurnResumed,
        build_provider,
        load_app,
        open_turn,
        tool,
    )

    assert open_turn.__module__ == "awaken_s3.streaming.resumable"
    assert MCPServer.__module__ == "awaken_s3.mcp"
    assert issubclass(ThreadStoreError, AwakenError) and issubclass(ToolError, AwakenError)


def test_every_exported_name_resolves_and_all_lists_them() -> None:
    names = exported_names((ROOT / "awaken_s3" / "__init__.py").read_text())
    assert awaken_s3.__all__ == sorted(names)
    for name, module in names.items():
        value = getattr(awaken_s3, name)
        assert value is getattr(importlib.import_module(module), name)
    assert set(awaken_s3.__all__) <= set(dir(awaken_s3))


@pytest.mark.parametrize(
    ("name", "module"),
    [
        ("NOT_LOADED", "awaken_s3.streaming.runner"),
        ("TurnRunner", "awaken_s3.streaming.runner"),
        ("TurnRequest", "awaken_s3.streaming.turn_request"),
        ("RunLoop", "awaken_s3.runtime.loop"),
        ("RunEnd", "awaken_s3.runtime.loop"),
        ("RunResult", "awaken_s3.runtime.loop"),
        ("ToolRegistry", "awaken_s3.runtime.tools"),
        ("StreamAccumulator", "awaken_s3.streaming.accumulator"),
        ("CheckpointStats", "awaken_s3.streaming.outcome"),
    ],
)
def test_internals_live_in_their_submodules_not_in_the_root(name: str, module: str) -> None:
    assert name not in awaken_s3.__all__
    with pytest.raises(AttributeError, match=name):
        getattr(awaken_s3, name)
    assert getattr(importlib.import_module(module), name) is not None


def test_the_architecture_doc_lists_the_namespace() -> None:
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    section = doc.split("## The public namespace", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", section))
    assert set(awaken_s3.__all__) <= listed, set(awaken_s3.__all__) - listed


def test_importing_the_package_does_not_load_aioboto3() -> None:
    code = "import sys, awaken_s3; print('aioboto3' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_an_agent_with_an_mcp_server_does_not_load_the_mcp_sdk_until_it_lists() -> None:
    # Defining the app happens at a Lambda handler's import: the SDK (and httpx, anyio) load
    # only when the worker first lists the server's tools.
    code = (
        "import sys, awaken_s3\n"
        "awaken_s3.Agent('a', toolsets=[awaken_s3.MCPServer('http://127.0.0.1:9/mcp')])\n"
        "print('mcp' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        awaken_s3.NoSuchThing  # noqa: B018


def test_an_export_that_is_not_a_re_export_is_refused() -> None:
    with pytest.raises(TypeError, match="re-export"):
        exported_names("if TYPE_CHECKING:\n    from a import B\n")
    with pytest.raises(TypeError, match="only"):
        exported_names("if TYPE_CHECKING:\n    import a\n")


def test_exports_are_read_whatever_loader_imported_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pytest imports a plugin's package (awaken_s3.testing's, in a project's tests) through
    # its assertion rewriter, a loader without get_source: the exports come from the file.
    from awaken_s3._lazy import lazy_exports

    package = tmp_path / "userpkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from userpkg.part import answer as answer\n"
    )
    (package / "part.py").write_text("answer = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("userpkg")

    class SourcelessLoader:
        pass

    monkeypatch.setattr(module.__spec__, "loader", SourcelessLoader())
    getattr_, _, names = lazy_exports("userpkg")
    assert names == ["answer"] and getattr_("answer") == 42
