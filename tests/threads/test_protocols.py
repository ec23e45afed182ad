"""Each backend is every contract: a caller typed against the narrowest one gets any backend."""

from __future__ import annotations

from awaken_s3.threads import (
    DynamoThreadStore,
    InMemoryThreadStore,
    RunStore,
    RunSweepStore,
    ThreadStore,
    ToolCallLedger,
)


def test_every_backend_satisfies_every_contract(store: ThreadStore) -> None:
    for contract in (RunStore, ToolCallLedger, RunSweepStore, ThreadStore):
        assert isinstance(store, contract), contract.__name__


def _statically_typed(memory: InMemoryThreadStore, dynamo: DynamoThreadStore) -> None:
    # Never called: mypy checks these assignments, so a backend whose signature drifts from
    # a contract fails the type check, not a deployment.
    runs: list[RunStore] = [memory, dynamo]
    ledgers: list[ToolCallLedger] = [memory, dynamo]
    sweeps: list[RunSweepStore] = [memory, dynamo]
    whole: list[ThreadStore] = [memory, dynamo]
    del runs, ledgers, sweeps, whole
