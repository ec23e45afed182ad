"""The library's public names are importable from the package root."""

from __future__ import annotations

import subprocess
import sys

import awaken_s3


def test_design_names_are_exported() -> None:
    from awaken_s3 import (  # noqa: F401
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
    assert set(awaken_s3.__all__) <= set(dir(awaken_s3)) | set(awaken_s3._LAZY)
    for name in awaken_s3._LAZY:
        assert getattr(awaken_s3, name) is not None


def test_the_library_face_for_ones_own_loop_is_exported() -> None:
    from awaken_s3 import (  # noqa: F401
        ReasoningChunk,
        ResumableTurn,
        TextChunk,
        ToolCallChunk,
        ToolCallReady,
        ToolCallStarted,
        TurnEvent,
        TurnFenced,
        TurnNotCompleted,
        TurnRequest,
        TurnResumed,
        open_turn,
    )

    assert open_turn.__module__ == "awaken_s3.streaming.resumable"
    assert TurnRequest.__module__ == "awaken_s3.streaming.turn_request"


def test_importing_the_package_does_not_load_aioboto3() -> None:
    code = "import sys, awaken_s3; print('aioboto3' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_unknown_attribute_is_an_attribute_error() -> None:
    try:
        awaken_s3.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("expected AttributeError")
