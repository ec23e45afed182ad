"""docs/DEPLOY.md describes the stack template.yaml deploys: a reader who follows it finds
the functions, parameters, outputs and routes that are really there. The routes come from
their one declaration (awaken_s3/service/routes.py) and the run body from the request model,
so a route or a field added to the code and not to the page fails here."""

from __future__ import annotations

import re
from typing import Any

from awaken_s3.service.http_models import CreateRunRequest
from awaken_s3.service.routes import HTTP_ROUTES, SOCKET_ROUTES
from tests.infra.cfn import TEMPLATE_PATH, resources_of_type

DOC = TEMPLATE_PATH.parent / "docs" / "DEPLOY.md"
_WORDS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
_NUMBERS = {word: number for number, word in enumerate(_WORDS, start=1)}
#: CloudFormation's limits on the names the stack derives from its own name
_NAME_LIMITS = {"FunctionName": 64, "QueueName": 80}


def _text() -> str:
    return DOC.read_text(encoding="utf-8")


def _section(heading: str) -> str:
    """The text under a heading (``## X`` or ``### X``), up to the next heading of its level
    or above."""
    text = _text()
    level = heading.split(" ", 1)[0]
    start = text.index(f"\n{heading}\n")
    ends = [
        found.start()
        for found in re.finditer(rf"^#{{1,{len(level)}}} ", text, re.M)
        if found.start() > start + 1
    ]
    return text[start : min(ends, default=len(text))]


def _rows(section: str) -> list[list[str]]:
    """The cells of every table row of a section (header rows and rules left out)."""
    rows: list[list[str]] = []
    lines = [line for line in section.splitlines() if line.startswith("|")]
    rules = {index for index, line in enumerate(lines) if set(line) <= set("|-: ")}
    for index, line in enumerate(lines):
        if index in rules or index + 1 in rules:
            continue  # the rule, and the header row right above it
        rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return rows


def _names(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_the_function_list_is_the_template_s_five(template: dict[str, Any]) -> None:
    functions = resources_of_type(template, "AWS::Serverless::Function")
    listed = {}
    for row in _rows(_section("## What gets created")):
        for name in _names(row[0]):
            if name in template["Resources"]:
                listed[name] = row
    documented = {name for name in listed if name.endswith("Function")}
    assert documented == set(functions)
    for name, function in functions.items():
        handler = function["Properties"]["Handler"]
        assert _names(listed[name][1]) == [handler], name
    # Every "N functions" of the page is the template's count; one stale "three" fails.
    counts = re.findall(r"\b(\w+) (?:Lambda )?functions\b", _text(), re.I)
    stated = [_NUMBERS[word.lower()] for word in counts if word.lower() in _NUMBERS]
    assert stated and set(stated) == {len(functions)}


def test_every_resource_the_created_table_names_exists(template: dict[str, Any]) -> None:
    named = {
        name
        for row in _rows(_section("## What gets created"))
        for name in _names(row[0])
        if re.fullmatch(r"[A-Z][A-Za-z0-9]+", name)
    }
    assert named and named <= set(template["Resources"]), named - set(template["Resources"])
    # The WebSocket API and the user pool are on the page, not only the HTTP side.
    assert {"SocketApi", "ConnectionTable", "UserPool", "UserPoolClient"} <= named


def test_the_api_table_lists_every_route_and_every_run_field() -> None:
    rows = _rows(_section("## Calling the API"))
    routes: dict[str, list[str]] = {}
    for row in rows:
        found = re.fullmatch(r"`((?:GET|POST|PUT|PATCH|DELETE) /\S*)`", row[0])
        if found:
            routes[found.group(1)] = row
    assert set(routes) == {route.key for route in HTTP_ROUTES}
    body = routes["POST /threads/{thread_id}/runs"][1]
    written = set(re.findall(r'"(\w+)"\??:?', body))
    assert written == set(CreateRunRequest.model_fields), "the run body's fields"
    # The WebSocket API's actions (every route but the $ ones API Gateway names itself).
    actions = {name for name in SOCKET_ROUTES if not name.startswith("$")}
    shown = {found for row in rows for found in re.findall(r'`\{"action": "(\w+)"', row[0])}
    assert shown == actions


def test_the_parameters_table_is_the_template_s_with_its_defaults(
    template: dict[str, Any],
) -> None:
    documented: dict[str, str] = {}
    for row in _rows(_section("### Parameters")):
        names, defaults = _names(row[0]), row[1].split(" / ")
        if len(defaults) == 1:
            defaults = defaults * len(names)
        assert len(names) == len(defaults), row
        for name, default in zip(names, defaults, strict=True):
            documented[name] = default.strip().strip("`")
    parameters = template["Parameters"]
    assert set(documented) == set(parameters)
    for name, spec in parameters.items():
        expected = str(spec["Default"])
        assert documented[name] == (expected or "empty"), name


def test_the_outputs_table_is_the_template_s(template: dict[str, Any]) -> None:
    documented: dict[str, str] = {}
    for row in _rows(_section("### Outputs")):
        for name in _names(row[0]):
            documented[name] = row[1]
    outputs = template["Outputs"]
    assert set(documented) == set(outputs)
    for name, output in outputs.items():
        # An output of one AuthMode says so.
        if "Condition" in output:
            assert "AuthMode=cognito` only" in documented[name], name


def test_the_stack_name_limit_fits_every_name_derived_from_it(template: dict[str, Any]) -> None:
    limit = 10**6
    for resource in template["Resources"].values():
        for prop, maximum in _NAME_LIMITS.items():
            value = resource.get("Properties", {}).get(prop)
            if isinstance(value, dict) and "Fn::Sub" in value:
                suffix = value["Fn::Sub"].replace("${AWS::StackName}", "")
                limit = min(limit, maximum - len(suffix))
    stated = re.findall(r"keep the stack\s+name at (\d+) characters or fewer", _text())
    assert stated == [str(limit)]
    assert f"at most {limit} characters" in _section("## First deploy, end to end")
