"""The HTTP API (API Gateway HTTP API, payload 2.0, JWT authorizer) on Powertools' resolver.

The caller is ``requestContext.authorizer.jwt.claims.sub``: a request without it is 401.
Thread and run ids are namespaced per caller (``awaken_s3.service.scoping``): one caller can
neither read nor even detect another's ids, on reads and on creates alike.
Errors are JSON ``{"error": code, "message": text[, "details": [...]]}``, never a stack trace
or a provider's own error text; message content is never logged (it can hold user data), only
ids. A malformed event or body is a 4xx, never a 500.

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
from collections.abc import Awaitable, Callable, Mapping
from http import HTTPStatus
from typing import Any, TypeVar, cast

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ValidationError

from awaken_s3.ids import InvalidIdError
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
from awaken_s3.service.partial import (
    InvalidQuery,
    PartialRead,
    etag_matches,
    parse_offset,
    partial_response,
    partial_view,
    read_partial,
    view_etag,
)
from awaken_s3.service.queue import RunMessage, send_run_message
from awaken_s3.service.scoping import (
    public_id,
    scoped_id,
    validate_public_run_id,
    validate_public_thread_id,
)
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
# Pinned: with debug on (POWERTOOLS_DEV), Powertools prints every event, bearer token included.
app = APIGatewayHttpResolver(debug=False)

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


def _error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": code, "message": message}


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


def subject(event: Mapping[str, Any]) -> str | None:
    """The JWT ``sub`` claim of an HTTP API event, or None; never raises on a malformed one."""
    node: Any = event
    for key in ("requestContext", "authorizer", "jwt", "claims", "sub"):
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node if isinstance(node, str) and node else None


def event_problem(event: Any) -> tuple[HTTPStatus, str, str] | None:
    """Why an invocation cannot be routed at all (status, code, message), or None (pure).

    API Gateway always sends these fields; anything else reaching the function (a test
    event, a direct invoke) is answered like a bad request, not with a KeyError's 500.
    """
    if not isinstance(event, Mapping):
        return HTTPStatus.BAD_REQUEST, "invalid_event", "not an HTTP API request"
    context = event.get("requestContext")
    if not isinstance(context, Mapping):
        # No request context means no authorizer ran: there is no caller to serve.
        return HTTPStatus.UNAUTHORIZED, "unauthorized", "authentication required"
    http = context.get("http")
    if (
        not isinstance(http, Mapping)
        or not isinstance(http.get("method"), str)
        or not isinstance(event.get("rawPath"), str)
        or not isinstance(event.get("headers") or {}, Mapping)
        or not isinstance(event.get("body"), str | None)
    ):
        return HTTPStatus.BAD_REQUEST, "invalid_event", "not an HTTP API request"
    return None


def caller() -> str:
    sub = subject(app.current_event.raw_event)
    if sub is None:
        raise ApiError(HTTPStatus.UNAUTHORIZED, "unauthorized", "authentication required")
    return sub


def path_id(value: str, validate: Callable[[str], str]) -> str:
    """A caller's id from the path, validated (it is never a stored id)."""
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
    except (ValueError, RecursionError) as exc:
        # RecursionError: nesting deeper than the interpreter's stack (a few kB of "[").
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


async def owned_run(services: Services, stored_id: str, public: str, owner: str) -> RunState:
    try:
        run = await services.threads.get_run(stored_id)
    except RunNotFound as exc:
        raise _not_found("run", public) from exc
    # The namespace already keeps other callers out; the stored owner is checked anyway.
    if run.owner != owner:
        raise _not_found("run", public)
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
    public = request.thread_id or uuid.uuid4().hex
    thread_id = scoped_id(owner, public)

    async def create(services: Services) -> tuple[Thread, bool]:
        try:
            thread = await services.threads.create_thread(
                thread_id, owner=owner, metadata=request.metadata
            )
            return thread, True
        except ThreadExists as exc:
            # The id is in the caller's own namespace: this is the caller's thread.
            try:
                existing = await services.threads.get_thread(thread_id, owner=owner)
            except ThreadNotFound:
                existing = None
            if existing is None or dict(existing.metadata) != request.metadata:
                # Not a retry of the same request: answering it with the old thread would
                # silently drop the new metadata.
                raise ApiError(
                    HTTPStatus.CONFLICT,
                    "thread_exists",
                    f"thread {public} exists with other metadata",
                ) from exc
            return existing, False

    thread, created = with_services(create)
    if created:
        metrics.add_metric(name="ThreadsCreated", unit=MetricUnit.Count, value=1)
    logger.info("thread created" if created else "thread exists", extra={"thread_id": thread_id})
    return _json(HTTPStatus.CREATED if created else HTTPStatus.OK, thread_view(thread))


@app.get("/threads/<thread_id>")
def get_thread(thread_id: str) -> Response[str]:
    owner = caller()
    public = path_id(thread_id, validate_public_thread_id)
    stored_id = scoped_id(owner, public)

    async def load(services: Services) -> tuple[Thread, list[Message]]:
        try:
            thread = await services.threads.get_thread(stored_id, owner=owner)
        except ThreadNotFound as exc:
            raise _not_found("thread", public) from exc
        return thread, await services.threads.load_messages(stored_id)

    thread, messages = with_services(load)
    body = thread_view(thread)
    body["messages"] = [message_view(m) for m in messages]
    return _json(HTTPStatus.OK, body)


@app.post("/threads/<thread_id>/runs")
def create_run(thread_id: str) -> Response[str]:
    owner = caller()
    public_thread = path_id(thread_id, validate_public_thread_id)
    stored_thread = scoped_id(owner, public_thread)
    request = parse_body(CreateRunRequest)
    settings = run_settings(request)
    public_run = request.run_id or uuid.uuid4().hex
    run_id = scoped_id(owner, public_run)

    async def start(services: Services) -> RunState:
        try:
            run = await services.threads.create_run(
                run_id,
                thread_id=stored_thread,
                owner=owner,
                settings=settings,
                messages=[Message.user(request.message)],
            )
        except ThreadNotFound as exc:
            raise _not_found("thread", public_thread) from exc
        except RunExists as exc:
            raise ApiError(
                HTTPStatus.CONFLICT,
                "run_exists",
                f"run {public_run} exists with another message or settings",
            ) from exc
        except RunActive as exc:
            # One live run per thread: a second would race the first for the thread's next
            # message positions and one of them would fail later with thread_moved_on.
            # The thread is the caller's, so its active run is too: name it as the caller does.
            raise ApiError(
                HTTPStatus.CONFLICT,
                "run_active",
                f"thread {public_thread} has an active run; wait for it to end or cancel it",
                [{"run_id": public_id(owner, exc.run_id)}],
            ) from exc
        except ThreadMovedOn as exc:
            raise ApiError(
                HTTPStatus.CONFLICT, "thread_changed", f"thread {public_thread} changed; retry"
            ) from exc
        if run.owner != owner:
            raise ApiError(HTTPStatus.CONFLICT, "run_exists", f"run id {public_run} is taken")
        if run.status == RunStatus.QUEUED:
            # Also on a retry: the first attempt may have failed between create and send.
            # The deduplication id makes a repeated send within 5 minutes a no-op on FIFO.
            await send_run_message(
                services.sqs, services.queue_url, RunMessage(run_id=run_id, reason="start")
            )
        return run

    run = with_services(start)
    metrics.add_metric(name="RunsCreated", unit=MetricUnit.Count, value=1)
    logger.info("run queued", extra={"thread_id": stored_thread, "run_id": run_id})
    return _json(HTTPStatus.ACCEPTED, run_view(run))


def query_offset(name: str) -> int | None:
    try:
        return parse_offset(app.current_event.get_query_string_value(name), name=name)
    except InvalidQuery as exc:
        raise ApiError(HTTPStatus.BAD_REQUEST, "invalid_query", str(exc)) from exc


def run_with_partial(run_id: str) -> tuple[str, RunState, PartialRead]:
    owner = caller()
    public = path_id(run_id, validate_public_run_id)
    stored_id = scoped_id(owner, public)

    async def load(services: Services) -> tuple[RunState, PartialRead]:
        run = await owned_run(services, stored_id, public, owner)
        return run, await read_partial(services.checkpoints, run)

    run, partial = with_services(load)
    return public, run, partial


@app.get("/runs/<run_id>")
def get_run(run_id: str) -> Response[str]:
    _, run, read = run_with_partial(run_id)
    body = run_view(run)
    body["partial"] = partial_view(read.stored) if read.stored is not None else None
    if read.unavailable:
        body["partial_unavailable"] = True
    return _json(HTTPStatus.OK, body)


@app.get("/runs/<run_id>/partial")
def get_partial(run_id: str) -> Response[str]:
    after, turn = query_offset("after"), query_offset("turn")
    public, run, read = run_with_partial(run_id)
    if read.unavailable:
        raise ApiError(
            HTTPStatus.SERVICE_UNAVAILABLE,
            "partial_unavailable",
            "the partial turn cannot be read right now; retry",
        )
    etag = view_etag(run, read.stored)
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if etag_matches(app.current_event.headers.get("if-none-match"), etag):
        return Response(status_code=int(HTTPStatus.NOT_MODIFIED), headers=headers)
    body = partial_response(public, run, read.stored, after=after, turn=turn)
    return Response(
        status_code=int(HTTPStatus.OK),
        content_type="application/json",
        body=json.dumps(body),
        headers=headers,
    )


@app.post("/runs/<run_id>/cancel")
def cancel_run(run_id: str) -> Response[str]:
    owner = caller()
    public = path_id(run_id, validate_public_run_id)
    stored_id = scoped_id(owner, public)

    async def cancel(services: Services) -> RunState:
        await owned_run(services, stored_id, public, owner)
        # A run that already ended answers with its final state.
        return await services.threads.cancel_run(stored_id)

    run = with_services(cancel)
    logger.info("run cancel requested", extra={"run_id": stored_id, "status": run.status.value})
    return _json(HTTPStatus.OK, run_view(run))


def _proxy_response(status: HTTPStatus, body: dict[str, Any]) -> dict[str, Any]:
    """An HTTP API response built without the resolver (the event could not be routed)."""
    return {
        "statusCode": int(status),
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps(body),
        "isBase64Encoded": False,
    }


# log_event pinned off as well: the event carries the caller's bearer token.
@logger.inject_lambda_context(
    correlation_id_path=correlation_paths.API_GATEWAY_HTTP, clear_state=True, log_event=False
)
@metrics.log_metrics(raise_on_empty_metrics=False)
def _resolve(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    problem = event_problem(event)
    if problem is not None:
        status, code, message = problem
        logger.warning("refused an event that is not an HTTP API request", extra={"code": code})
        return _proxy_response(status, _error_body(code, message))
    return app.resolve(event, context)


def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    with warnings.catch_warnings():
        # A request that counted nothing (a read) is normal, not worth a warning.
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        return cast(dict[str, Any], _resolve(event, context))
