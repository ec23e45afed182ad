"""The template `awaken-s3 init` writes is this repository's stack with only the code moved:
the same parameters, rules, conditions, storage, queues, roles, alarms, dashboard, sweeper and
API, so a fix to template.yaml lands in every project made after it. What differs is where the
code lives: the functions' CodeUri, Handler and build Metadata, the dependencies' layer."""

from __future__ import annotations

import copy
import importlib
from pathlib import Path
from typing import Any

import pytest

from awaken_s3.project.scaffold import ProjectSpec, project_files
from awaken_s3.project.stack import StackTemplateError, project_template
from tests.infra.cfn import TEMPLATE_PATH, Resolver, load_template

FUNCTIONS = {"WorkerFunction": "worker", "ApiFunction": "api", "SweeperFunction": "sweeper"}
#: the WebSocket API's functions serve no app: awaken-s3's own entry points, from the layer
PACKAGE_FUNCTIONS = {
    "SocketFunction": "awaken_s3.service.socket",
    "SocketAuthorizerFunction": "awaken_s3.service.socket_auth",
}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], dict[str, Any]]:
    """A project's files and its template, parsed as CloudFormation reads it."""
    files = project_files(ProjectSpec("billing-desk", "billing_desk", "anthropic"))
    path = tmp_path_factory.mktemp("project") / "template.yaml"
    path.write_text(files["template.yaml"])
    return files, load_template(path)


def without_code(template: dict[str, Any]) -> dict[str, Any]:
    """The template minus where its code lives (and its description)."""
    stack = copy.deepcopy(template)
    stack.pop("Description")
    for key in ("CodeUri", "Layers"):
        stack["Globals"]["Function"].pop(key, None)
    stack["Resources"].pop("DependenciesLayer", None)
    for name in (*FUNCTIONS, *PACKAGE_FUNCTIONS):
        stack["Resources"][name].pop("Metadata", None)
        stack["Resources"][name]["Properties"].pop("Handler")
    return stack


def test_the_project_s_stack_is_this_repository_s_apart_from_where_the_code_lives(
    template: dict[str, Any], project: tuple[dict[str, str], dict[str, Any]]
) -> None:
    _, theirs = project
    assert without_code(theirs) == without_code(template)
    # And the comments come along: the file is the repository's, line for line, outside the
    # preamble and the code's places.
    ours_text = TEMPLATE_PATH.read_text()
    theirs_text = project[0]["template.yaml"]
    body = ours_text[ours_text.index("Parameters:\n") : ours_text.index("Globals:\n")]
    assert body in theirs_text


def test_the_project_s_code_is_its_src_and_its_dependencies_a_layer(
    project: tuple[dict[str, str], dict[str, Any]],
) -> None:
    files, theirs = project
    globals_ = theirs["Globals"]["Function"]
    assert globals_["CodeUri"] == "src/"
    assert globals_["Layers"] == [{"Ref": "DependenciesLayer"}]
    layer = theirs["Resources"]["DependenciesLayer"]
    runtime, (architecture,) = globals_["Runtime"], globals_["Architectures"]
    # SAM's standard Python builder, for the functions' runtime and architecture.
    assert layer["Metadata"] == {"BuildMethod": runtime, "BuildArchitecture": architecture}
    props = layer["Properties"]
    assert props["ContentUri"] == "layer/" and "layer/requirements.txt" in files
    assert (props["CompatibleRuntimes"], props["CompatibleArchitectures"]) == (
        [runtime],
        [architecture],
    )
    assert props["RetentionPolicy"] == "Delete"
    # src/ holds the code only: a requirements.txt there would make SAM install it twice.
    assert not [name for name in files if name.startswith("src/") and name.endswith(".txt")]
    for name, module in FUNCTIONS.items():
        function = theirs["Resources"][name]
        assert "Metadata" not in function, "SAM's Python builder, not a Makefile"
        handler = function["Properties"]["Handler"]
        assert handler == f"billing_desk.handlers.{module}.lambda_handler"
        # The module the handler names is a file of the project, and defines it.
        source = files[f"src/billing_desk/handlers/{module}.py"]
        assert "lambda_handler = app." in source
    for name, module in PACKAGE_FUNCTIONS.items():
        function = theirs["Resources"][name]
        assert "Metadata" not in function
        assert function["Properties"]["Handler"] == f"{module}.lambda_handler"
        # The layer installs awaken-s3, whose module defines the handler.
        assert callable(importlib.import_module(module).lambda_handler)


def test_the_user_s_parameters_are_in_the_project_s_template(
    project: tuple[dict[str, str], dict[str, Any]],
) -> None:
    _, theirs = project
    parameters = theirs["Parameters"]
    for name in ("WorkerPolicyArns", "ToolEnvironment", "ToolSecretArns"):
        assert name in parameters
    for name in ("WorkerMemorySize", "WorkerTimeout"):
        assert name in parameters
    resolver = Resolver(
        theirs,
        WorkerMemorySize="2048",
        WorkerTimeout="300",
        WorkerPolicyArns="arn:aws:iam::123456789012:policy/tickets",
    )
    worker = resolver.resolve(theirs["Resources"]["WorkerFunction"]["Properties"])
    assert (worker["MemorySize"], worker["Timeout"]) == ("2048", "300")
    role = resolver.resolve(theirs["Resources"]["WorkerRole"]["Properties"])
    assert role["ManagedPolicyArns"] == ["arn:aws:iam::123456789012:policy/tickets"]


def test_a_template_without_the_places_it_changes_is_refused(tmp_path: Path) -> None:
    stack = TEMPLATE_PATH.read_text()
    moved = stack.replace("      Handler: handlers.api.lambda_handler\n", "      Handler: x.y\n")
    with pytest.raises(StackTemplateError, match="expected 5 handlers, found 4"):
        project_template("p", distribution="p", version="0.1.0", template=moved)
    built = stack.replace("BuildMethod: makefile", "BuildMethod: python3.13", 1)
    with pytest.raises(StackTemplateError, match="makefile Metadata blocks"):
        project_template("p", distribution="p", version="0.1.0", template=built)
