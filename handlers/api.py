"""The HTTP API (API Gateway HTTP API, payload 2.0, JWT authorizer) on Powertools' resolver.

The caller is ``requestContext.authorizer.jwt.claims.sub``: a request without it is 401.
One caller never sees another's threads or runs: a foreign id answers 404, like a missing one.
Errors are JSON ``{"error": code, "message": text[, "details": [...]]}``, never a stack trace;
message content is never logged (it can hold user data), only ids.

Each request runs one event loop (``asyncio.run``) that opens the AWS clients, does the
request's store calls and closes the clients: aiobotocore clients are bound to their loop.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import os
import uuid
import warnings
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any, TypeVar, cast

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ValidationError

from awaken_s3.ids import InvalidIdError, validate_run_id, validate_thread_id
from awaken_s3.messages import Message
from awaken_s3.providers.config import ProviderSettings
from awaken_s3.service.config import allowed_models
from awaken_s3.service.http_models import (
    MAX_BODY_BYTES,
    CreateRunRequest,
    CreateThreadRequest,
    message_view,
    run_view,
    thread_view,
    validation_details,
)
from awaken_s3.service.logs import route_library_logs
from awaken_s3.service.queue import RunMessage, send_run_message
from awaken_s3.service.wiring import Services, open_services
from awaken_s3.settings import StorageSettings
from awaken_s3.threads.errors import (
    RunActive,
    RunExists,
    RunNotFound,
    ThreadExists,
    ThreadMovedOn,
    ThreadNotFound,
)
from awaken_s3.threads.models import RunSettings, RunState, RunStatus, Thread

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or "awaken-s3")
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "awaken-s3")
route_library_logs(logger)
app = APIGatewayHttpResolver()

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


class ApiError(Exception):
    def __init__(
        self,
        status: HTTPStatus,
        code: str,
        message: str,
        details: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details


def _json(status: HTTPStatus | int, body: dict[str, Any]) -> Response[str]:
    return Response(status_code=int(status), content_type="application/json", body=json.dumps(body))


def _not_found(kind: str, ident: str) -> ApiError:
    return ApiError(HTTPStatus.NOT_FOUND, "not_found", f"{kind} {ident} not found")


def _api_error(exc: ApiError) -> Response[str]:
    body: dict[str, Any] = {"error": exc.code, "message": exc.message}
    if exc.details is not None:
        body["details"] = exc.details
    return _json(exc.status, body)


@app.not_found
def _no_route(exc: NotFoundError) -> Response[str]:
    return _json(HTTPStatus.NOT_FOUND, {"error": "not_found", "message": "no such route"})


def _unexpected(exc: Exception) -> Response[str]:
    # The traceback goes to the log, never to the caller.
    logger.exception("unhandled error")
    return _json(
        HTTPStatus.INTERNAL_SERVER_ERROR,
        {"error": "internal_error", "message": "internal error; retry later"},
    )


# Registered without decorator syntax: Powertools' decorator is untyped.
app.exception_handler(ApiError)(_api_error)
app.exception_handler(Exception)(_unexpected)


# -- request helpers


def caller() -> str:
    claims = app.current_event.request_context.authorizer.jwt_claim
    sub = claims.get("sub") if isinstance(claims, dict) else None
    if not isinstance(sub, str) or not sub:
        raise ApiError(HTTPStatus.UNAUTHORIZED, "unauthorized", "authentication required")
    return sub


def path_id(value: str, validate: Callable[[str], str]) -> str:
    try:
        return validate(value)
    except InvalidIdError as exc:
        raise ApiError(HTTPStatus.BAD_REQUEST, "invalid_id", str(exc)) from exc


def raw_body() -> bytes:
    event = app.current_event
    body = event.body or ""
    if len(body) > MAX_BODY_BYTES * 4 // 3 + 4:
        raise _too_large()
    if event.is_base64_encoded:
        try:
            data = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ApiError(HTTPStatus.BAD_REQUEST, "invalid_body", "bad base64 body") from exc
    else:
        data = body.encode("utf-8")
    if len(data) > MAX_BODY_BYTES:
        raise _too_large()
    return data


def _too_large() -> ApiError:
    return ApiError(
        HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
        "body_too_large",
        f"request bodies are limited to {MAX_BODY_BYTES} bytes",
    )


def parse_body(model: type[M]) -> M:
    data = raw_body()
    if not data.strip():
        data = b"{}"
    try:
        payload = json.loads(data)
    except ValueError as exc:
        raise ApiError(HTTPStatus.BAD_REQUEST, "invalid_json", "the body is not JSON") from exc
    if not isinstance(payload, dict):
        raise ApiError(HTTPStatus.BAD_REQUEST, "invalid_json", "the body must be a JSON object")
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        raise ApiError(
            HTTPStatus.UNPROCESSABLE_ENTITY,
            "invalid_request",
            "the body has invalid fields",
            validation_details(cast(list[Any], exc.errors())),
        ) from exc


def with_services(operation: Callable[[Services], Awaitable[T]]) -> T:
    storage = StorageSettings.from_env(need_queue=True)

    async def run() -> T:
        async with open_services(storage) as services:
            return await operation(services)

    return asyncio.run(run())


async def owned_run(services: Services, run_id: str, owner: str) -> RunState:
    try:
        run = await services.threads.get_run(run_id)
    except RunNotFound as exc:
        raise _not_found("run", run_id) from exc
    if run.owner != owner:
        raise _not_found("run", run_id)
    return run


def run_settings(request: CreateRunRequest) -> RunSettings:
    default = ProviderSettings.from_env().model
    model = request.model or default
    if model not in allowed_models(default=default):
        raise ApiError(
            HTTPStatus.UNPROCESSABLE_ENTITY,
            "invalid_request",
            "the body has invalid fields",
            [{"loc": ["model"], "msg": "model is not allowed", "type": "model_not_allowed"}],
        )
    return RunSettings(
        model=model,
        system=request.system,
        max_tokens=request.max_tokens,
        temperature=request.temperature,
        tools=request.tools,
        max_turns=request.max_turns,
    )


# -- routes


@app.post("/threads")
def create_thread() -> Response[str]:
    owner = caller()
    request = parse_body(CreateThreadRequest)
    thread_id = request.thread_id or uuid.uuid4().hex

    async def create(services: Services) -> tuple[Thread, bool]:
        try:
            thread = await services.threads.create_thread(
                thread_id, owner=owner, metadata=request.metadata
            )
            return thread, True
        except ThreadExists as exc:
            try:
                # A retried create of the caller's own thread answers with that thread.
                return await services.threads.get_thread(thread_id, owner=owner), False
            except ThreadNotFound:
                raise ApiError(
                    HTTPStatus.CONFLICT, "thread_exists", f"thread id {thread_id} is taken"
                ) from exc

    thread, created = with_services(create)
    if created:
        metrics.add_metric(name="ThreadsCreated", unit=MetricUnit.Count, value=1)
    logger.info("thread created" if created else "thread exists", extra={"thread_id": thread_id})
    return _json(HTTPStatus.CREATED if created else HTTPStatus.OK, thread_view(thread))


@app.get("/threads/<thread_id>")
def get_thread(thread_id: str) -> Response[str]:
    owner = caller()
    thread_id = path_id(thread_id, validate_thread_id)

    async def load(services: Services) -> tuple[Thread, list[Message]]:
        try:
            thread = await services.threads.get_thread(thread_id, owner=owner)
        except ThreadNotFound as exc:
            raise _not_found("thread", thread_id) from exc
        return thread, await services.threads.load_messages(thread_id)

    thread, messages = with_services(load)
    body = thread_view(thread)
    body["messages"] = [message_view(m) for m in messages]
    return _json(HTTPStatus.OK, body)


@app.post("/threads/<thread_id>/runs")
def create_run(thread_id: str) -> Response[str]:
    owner = caller()
    thread_id = path_id(thread_id, validate_thread_id)
    request = parse_body(CreateRunRequest)
    settings = run_settings(request)
    run_id = request.run_id or uuid.uuid4().hex

    async def start(services: Services) -> RunState:
        try:
            run = await services.threads.create_run(
                run_id,
                thread_id=thread_id,
                owner=owner,
                settings=settings,
                messages=[Message.user(request.message)],
            )
        except ThreadNotFound as exc:
            raise _not_found("thread", thread_id) from exc
        except RunExists as exc:
            raise ApiError(
                HTTPStatus.CONFLICT, "run_exists", f"run {run_id} exists with other settings"
            ) from exc
        except RunActive as exc:
            # One live run per thread: a second would race the first for the thread's next
            # message positions and one of them would fail later with thread_moved_on.
            raise ApiError(
                HTTPStatus.CONFLICT,
                "run_active",
                f"thread {thread_id} has an active run; wait for it to end or cancel it",
                [{"run_id": exc.run_id}],
            ) from exc
        except ThreadMovedOn as exc:
            raise ApiError(
                HTTPStatus.CONFLICT, "thread_changed", f"thread {thread_id} changed; retry"
            ) from exc
        if run.owner != owner:
            raise ApiError(HTTPStatus.CONFLICT, "run_exists", f"run id {run_id} is taken")
        if run.status == RunStatus.QUEUED:
            # Also on a retry: the first attempt may have failed between create and send.
            # The deduplication id makes a repeated send within 5 minutes a no-op on FIFO.
            await send_run_message(
                services.sqs, services.queue_url, RunMessage(run_id=run_id, reason="start")
            )
        return run

    run = with_services(start)
    metrics.add_metric(name="RunsCreated", unit=MetricUnit.Count, value=1)
    logger.info("run queued", extra={"thread_id": thread_id, "run_id": run_id})
    return _json(HTTPStatus.ACCEPTED, run_view(run))


@app.get("/runs/<run_id>")
def get_run(run_id: str) -> Response[str]:
    owner = caller()
    run_id = path_id(run_id, validate_run_id)
    run = with_services(lambda services: owned_run(services, run_id, owner))
    return _json(HTTPStatus.OK, run_view(run))


@app.post("/runs/<run_id>/cancel")
def cancel_run(run_id: str) -> Response[str]:
    owner = caller()
    run_id = path_id(run_id, validate_run_id)

    async def cancel(services: Services) -> RunState:
        await owned_run(services, run_id, owner)
        # A run that already ended answers with its final state.
        return await services.threads.cancel_run(run_id)

    run = with_services(cancel)
    logger.info("run cancel requested", extra={"run_id": run_id, "status": run.status.value})
    return _json(HTTPStatus.OK, run_view(run))


@logger.inject_lambda_context(
    correlation_id_path=correlation_paths.API_GATEWAY_HTTP, clear_state=True
)
@metrics.log_metrics(raise_on_empty_metrics=False)
def _resolve(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)


def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    with warnings.catch_warnings():
        # A request that counted nothing (a read) is normal, not worth a warning.
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        return cast(dict[str, Any], _resolve(event, context))
