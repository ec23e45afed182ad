"""`awaken-s3 dev` builds its stack from the same definitions template.yaml deploys: the queue
and dead-letter queue properties, the visibility mapping, and the HTTP API's routes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from awaken_s3.dev.resources import (
    DEAD_LETTER_QUEUE_PROPERTIES,
    MAX_RECEIVE_COUNT,
    RUN_QUEUE_PROPERTIES,
    StackNames,
    visibility_timeout,
)
from awaken_s3.service.routes import HTTP_ROUTES
from tests.infra.cfn import resources_of_type

Deployed = Callable[..., dict[str, Any]]


def test_the_local_run_queue_has_the_template_s_properties(deployed: Deployed) -> None:
    queue = dict(deployed()["RunQueue"]["Properties"])
    redrive = queue.pop("RedrivePolicy")
    queue.pop("VisibilityTimeout")
    name = queue.pop("QueueName")
    assert queue == RUN_QUEUE_PROPERTIES
    assert int(redrive["maxReceiveCount"]) == MAX_RECEIVE_COUNT
    assert name == StackNames.from_name("awaken").queue


def test_the_local_dead_letter_queue_has_the_template_s_properties(deployed: Deployed) -> None:
    dlq = dict(deployed()["RunDeadLetterQueue"]["Properties"])
    assert dlq.pop("RedriveAllowPolicy")["redrivePermission"] == "byQueue"
    assert dlq == DEAD_LETTER_QUEUE_PROPERTIES


def test_the_local_visibility_timeout_follows_the_template_s_mapping(
    template: dict[str, Any],
) -> None:
    mapping = template["Mappings"]["WorkerTimeouts"]
    assert mapping
    for timeout, row in mapping.items():
        assert row["VisibilityTimeout"] == visibility_timeout(int(timeout))


def test_the_declared_routes_are_the_template_s(deployed: Deployed) -> None:
    routes = {
        (name, event["Properties"]["Method"], event["Properties"]["Path"])
        for fn in resources_of_type(deployed(), "AWS::Serverless::Function").values()
        for name, event in fn["Properties"].get("Events", {}).items()
        if event["Type"] == "HttpApi"
    }
    # One declaration (awaken_s3.service.routes) for the resolver, the dev server and this.
    assert {(route.name, route.method, route.path) for route in HTTP_ROUTES} == routes
