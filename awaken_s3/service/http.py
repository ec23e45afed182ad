"""The HTTP API (API Gateway HTTP API, payload 2.0, JWT authorizer) on Powertools' resolver.

The routes here parse and answer; what a request may do is :mod:`awaken_s3.service.runs`.

The caller is ``requestContext.authorizer.jwt.claims.sub``: a request without it is 401.
Thread and run ids are namespaced per caller (``awaken_s3.service.scoping``): one caller can
neither read nor even detect another's ids, on reads and on creates alike.
Errors are JSON ``{"error": code, "message": text[, "details": [...]]}``, never a stack trace
or a provider's own error text; message content is never logged (it can hold user data), only
ids. A malformed event or body is a 4xx, never a 500.

Each request's store calls run on the process's event loop with the process's AWS clients
(:func:`awaken_s3.service.wiring.warm_runtime`), opened by the first request that needs them
and kept for the requests after it.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import uuid
import warnings
from collections.abc import Awaitable, Callable, Mapping
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, TypeVar, cast

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ValidationError

from awaken_s3.failures import FailureCode
from awaken_s3.ids import InvalidIdError
from awaken_s3.service import runs
from awaken_s3.service.http_models import (
    ID_RULE,
    MAX_BODY_BYTES,
    CreateRunRequest,
    CreateThreadRequest,
    agent_view,
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
from awaken_s3.service.routes import HTTP_ROUTES
from awaken_s3.service.runs import ApiError
from awaken_s3.service.scoping import (
    validate_public_run_id,
    validate_public_thread_id,
)
from awaken_s3.threads.errors import StoreUnavailable
from awaken_s3.threads.models import RunSettings, RunState

if TYPE_CHECKING:
    from awaken_s3.agents import Agent, App
    from awaken_s3.service.wiring import Services

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or "awaken-s3")
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "awaken-s3")
route_library_logs(logger)
# Pinned: with debug on (POWERTOOLS_DEV), Powertools prints every event, bearer token included.
app = APIGatewayHttpResolver(debug=False)

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

#: the app whose agents the API serves: this repository's default until a handler built by
#: :func:`handler_for` names another (one invocation at a time per process, as on Lambda)
_SERVED: list[App | str] = ["awaken_s3.agents:default_app"]
_LOADED: dict[str, App] = {}


def served_app() -> App:
    from awaken_s3.agents import load_app

    app = _SERVED[-1]
    if isinstance(app, str):
        if app not in _LOADED:
            _LOADED[app] = load_app(app)
        return _LOADED[app]
    return app


def _json(status: HTTPStatus | int, body: dict[str, Any]) -> Response[str]:
    return Response(status_code=int(status), content_type="application/json", body=json.dumps(body))


def _error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": code, "message": message}


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


def _unavailable(exc: StoreUnavailable) -> Response[str]:
    # Throttled or unreachable through the client's retries: the caller's retry may succeed,
    # and every write recognises its own landed attempt, so a retry never doubles anything.
    logger.warning("a store did not answer", extra={"error": type(exc).__name__})
    return _json(
        HTTPStatus.SERVICE_UNAVAILABLE,
        {"error": "unavailable", "message": "the service is busy; retry shortly"},
    )


# Registered without decorator syntax: Powertools' decorator is untyped.
app.exception_handler(ApiError)(_api_error)
app.exception_handler(StoreUnavailable)(_unavailable)
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
        # Fixed words: what the caller put in the path is not repeated.
        raise ApiError(HTTPStatus.BAD_REQUEST, "invalid_id", ID_RULE) from exc


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
            validation_details(cast(list[Any], exc.errors()), model.model_fields),
        ) from exc


def with_services(operation: Callable[[Services], Awaitable[T]]) -> T:
    from awaken_s3.service.wiring import warm_runtime
    from awaken_s3.settings import StorageSettings

    storage = StorageSettings.from_env(need_queue=True)
    runtime = warm_runtime()

    async def run() -> T:
        return await operation(await runtime.services(storage))

    return runtime.run(run())


def _refused(field: str, message: str, kind: str, choices: Any) -> ApiError:
    return ApiError(
        HTTPStatus.UNPROCESSABLE_ENTITY,
        "invalid_request",
        message,
        [{"loc": [field], "msg": message, "type": kind, "choices": list(choices)}],
    )


def agent_for(request: CreateRunRequest) -> Agent:
    from awaken_s3.agents import UnknownAgent

    try:
        return served_app().agent(request.agent)
    except UnknownAgent as exc:
        # Fixed words: the name the caller sent is not repeated.
        message = f"no such agent; the agents are {', '.join(exc.choices)}"
        raise _refused("agent", message, FailureCode.UNKNOWN_AGENT, exc.choices) from exc


def settings_for(request: CreateRunRequest) -> RunSettings:
    """The run's settings (:func:`awaken_s3.agents.plan_run`): the agent's, with the overrides
    it allows (422 otherwise, before anything is stored or enqueued)."""
    from awaken_s3.agents import RunRequestRefused, plan_run

    agent = agent_for(request)
    try:
        return plan_run(agent, request.overrides()).settings
    except RunRequestRefused as exc:
        raise _refused(exc.field, str(exc), exc.kind, exc.choices) from exc


# -- routes


def list_agents() -> Response[str]:
    caller()
    from awaken_s3.agents import plan_run

    agents = [agent_view(agent, model=plan_run(agent).settings.model) for agent in served_app()]
    return _json(HTTPStatus.OK, {"agents": agents})


def create_thread() -> Response[str]:
    owner = caller()
    request = parse_body(CreateThreadRequest)
    public = request.thread_id or uuid.uuid4().hex
    thread, created = with_services(
        lambda services: runs.create_thread(
            services.threads, owner=owner, public=public, metadata=request.metadata
        )
    )
    if created:
        metrics.add_metric(name="ThreadsCreated", unit=MetricUnit.Count, value=1)
    logger.info(
        "thread created" if created else "thread exists", extra={"thread_id": thread.thread_id}
    )
    return _json(HTTPStatus.CREATED if created else HTTPStatus.OK, thread_view(thread))


def get_thread(thread_id: str) -> Response[str]:
    owner = caller()
    public = path_id(thread_id, validate_public_thread_id)
    thread, messages = with_services(
        lambda services: runs.thread_with_messages(services.threads, owner=owner, public=public)
    )
    body = thread_view(thread)
    body["messages"] = [message_view(m) for m in messages]
    return _json(HTTPStatus.OK, body)


def create_run(thread_id: str) -> Response[str]:
    owner = caller()
    public_thread = path_id(thread_id, validate_public_thread_id)
    request = parse_body(CreateRunRequest)
    settings = settings_for(request)
    public_run = request.run_id or uuid.uuid4().hex

    async def start(services: Services) -> RunState:
        async def send(message: RunMessage) -> str:
            return await send_run_message(services.sqs, services.queue_url, message)

        return await runs.start_run(
            services.threads,
            send,
            owner=owner,
            public_thread=public_thread,
            public_run=public_run,
            settings=settings,
            message=request.message,
        )

    run = with_services(start)
    metrics.add_metric(name="RunsCreated", unit=MetricUnit.Count, value=1)
    logger.info("run queued", extra={"thread_id": run.thread_id, "run_id": run.run_id})
    return _json(HTTPStatus.ACCEPTED, run_view(run))


def query_offset(name: str) -> int | None:
    try:
        return parse_offset(app.current_event.get_query_string_value(name), name=name)
    except InvalidQuery as exc:
        raise ApiError(HTTPStatus.BAD_REQUEST, "invalid_query", str(exc)) from exc


def run_with_partial(run_id: str) -> tuple[str, RunState, PartialRead]:
    owner = caller()
    public = path_id(run_id, validate_public_run_id)

    async def load(services: Services) -> tuple[RunState, PartialRead]:
        run = await runs.owned_run(services.threads, owner=owner, public=public)
        return run, await read_partial(services.checkpoints, run)

    run, partial = with_services(load)
    return public, run, partial


def get_run(run_id: str) -> Response[str]:
    _, run, read = run_with_partial(run_id)
    body = run_view(run)
    body["partial"] = partial_view(read.stored) if read.stored is not None else None
    if read.unavailable:
        body["partial_unavailable"] = True
    return _json(HTTPStatus.OK, body)


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


def cancel_run(run_id: str) -> Response[str]:
    owner = caller()
    public = path_id(run_id, validate_public_run_id)

    async def cancel(services: Services) -> RunState:
        from awaken_s3.service.socket import cancel_and_tell

        return await cancel_and_tell(services, owner=owner, public=public)

    run = with_services(cancel)
    logger.info("run cancel requested", extra={"run_id": run.run_id, "status": run.status.value})
    return _json(HTTPStatus.OK, run_view(run))


#: each route's function; the routes themselves are declared once, in :mod:`routes`
ROUTE_FUNCTIONS: dict[str, Callable[..., Response[str]]] = {
    "ListAgents": list_agents,
    "CreateThread": create_thread,
    "GetThread": get_thread,
    "CreateRun": create_run,
    "GetRun": get_run,
    "GetRunPartial": get_partial,
    "CancelRun": cancel_run,
}
if set(ROUTE_FUNCTIONS) != {route.name for route in HTTP_ROUTES}:
    raise RuntimeError("every declared route needs a function here, and only those")
for _route in HTTP_ROUTES:
    app.route(_route.resolver_path, method=_route.method)(ROUTE_FUNCTIONS[_route.name])


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


def handler_for(app: App | str) -> Callable[[dict[str, Any], LambdaContext], dict[str, Any]]:
    """An HTTP API ``lambda_handler`` serving ``app``'s agents (or the app that
    ``"MODULE:ATTRIBUTE"`` names, imported at the first request that needs it)."""

    def serve(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        _SERVED.append(app)
        try:
            return lambda_handler(event, context)
        finally:
            _SERVED.pop()

    return serve
