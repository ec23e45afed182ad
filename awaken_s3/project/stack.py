"""One stack, two places its code can live: a project's template from this repository's.

awaken-s3's own ``template.yaml`` is the one definition of the stack: its parameters, rules,
storage, queues, roles, alarms, dashboard, sweeper and API. The wheel carries it
(``awaken_s3/project/template.yaml`` is that very file), and :func:`project_template` writes a
project's template from it by changing only where the code lives:

* the functions' code is the project's ``src/`` (``CodeUri``), built by SAM's standard Python
  builder instead of awaken-s3's Makefile (the functions' ``Metadata`` goes);
* their dependencies are a layer, ``DependenciesLayer``, built by the same builder from the
  project's ``layer/requirements.txt`` (``Layers``);
* each ``Handler`` of a function that serves the app names the project's own entry point
  (``<package>.handlers.worker...``); the WebSocket API's functions, which serve no app, name
  awaken-s3's own (``awaken_s3.service.socket...``);
* the preamble (description, build notes) is the project's.

Everything else is copied as it is, comments included, so a fix to the stack lands in every
project made after it; ``tests/infra/test_project_template.py`` checks that the two templates
agree apart from those places. Each change is anchored on text the stack must contain exactly
as often as expected, so an edit of template.yaml that moves an anchor fails loudly here, in
the tests, rather than writing a wrong template.
"""

from __future__ import annotations

import importlib.resources
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from awaken_s3.errors import AwakenError

#: the functions that serve the project's app, and their entry-point modules in its package
FUNCTIONS: Final = {"WorkerFunction": "worker", "ApiFunction": "api", "SweeperFunction": "sweeper"}
#: the functions that serve no app (the WebSocket API's routes and its $connect authorizer):
#: template.yaml's entry-point module -> awaken-s3's own module, which the layer holds
PACKAGE_ENTRY_POINTS: Final = {
    "socket": "awaken_s3.service.socket",
    "socket_authorizer": "awaken_s3.service.socket_auth",
}
#: where a project's code and dependencies live (relative to its template)
CODE_DIR: Final = "src/"
LAYER_DIR: Final = "layer/"
LAYER: Final = "DependenciesLayer"

_PREAMBLE = re.compile(r"\A.*?(?=^Parameters:\n)", re.S | re.M)
_GLOBAL_CODE = re.compile(r"(^Globals:\n  Function:\n)(.*?)(?=^    Environment:\n)", re.S | re.M)
_RUNTIME = re.compile(r"^    Runtime: (\S+)\n", re.M)
_ARCHITECTURES = re.compile(r"^    Architectures: \[(\w+)\]\n", re.M)
_MAKEFILE_BUILD = re.compile(
    r"^    Metadata:\n      BuildMethod: makefile\n(?:      #.*\n)*      WorkingDirectory: \.\n",
    re.M,
)
_HANDLER = re.compile(r"^      Handler: handlers\.(\w+)\.lambda_handler\n", re.M)
_FIRST_FUNCTION = "  WorkerFunction:\n    Type: AWS::Serverless::Function\n"


class StackTemplateError(AwakenError, RuntimeError):
    """template.yaml no longer has a place the project template changes (a test catches it)."""


@dataclass(frozen=True)
class CodeLocation:
    runtime: str
    architecture: str


def repository_template() -> str:
    """awaken-s3's own template.yaml, as this installation carries it."""
    return importlib.resources.files("awaken_s3.project").joinpath("template.yaml").read_text()


def code_location(template: str) -> CodeLocation:
    """The functions' runtime and architecture (Globals), which the layer is built for."""
    found = _GLOBAL_CODE.search(template)
    if found is None:
        raise StackTemplateError("template.yaml has no Globals.Function block")
    runtime = _RUNTIME.search(found.group(2))
    architecture = _ARCHITECTURES.search(found.group(2))
    if runtime is None or architecture is None:
        raise StackTemplateError("Globals.Function names no Runtime or one Architectures entry")
    return CodeLocation(runtime.group(1), architecture.group(1))


def _replace(
    pattern: re.Pattern[str],
    replacement: str | Callable[[re.Match[str]], str],
    text: str,
    count: int,
    what: str,
) -> str:
    result, found = pattern.subn(replacement, text)
    if found != count:
        raise StackTemplateError(f"template.yaml: expected {count} {what}, found {found}")
    return result


def _preamble(distribution: str, version: str, where: CodeLocation) -> str:
    """The project's description and build notes, in place of the stack's."""
    return (
        'AWSTemplateFormatVersion: "2010-09-09"\n'
        "Transform: AWS::Serverless-2016-10-31\n"
        "Description: >-\n"
        f"  {distribution}: agents served by awaken-s3, whose turns survive the death of their\n"
        "  Lambda. HTTP API (JWT) -> DynamoDB + SQS FIFO -> worker Lambda with S3 checkpoints.\n"
        "\n"
        f"# Written by `awaken-s3 init` from the template of awaken-s3 {version}: the same stack,\n"
        f"# only the code lives elsewhere: the functions are this project's {CODE_DIR} (SAM's\n"
        f"# Python builder), their dependencies the {LAYER} ({LAYER_DIR}requirements.txt).\n"
        "# Comments that name docs/ point at awaken-s3's documentation. `sam build` needs a local\n"
        f"# {where.runtime} on PATH; `sam deploy --guided` (or samconfig.toml) deploys it.\n"
        "\n"
    )


def _global_code(where: CodeLocation) -> str:
    """Where the functions' code and dependencies live (Globals.Function)."""
    return (
        "    # The functions' code: this project's src/ (no requirements.txt there: SAM's Python\n"
        "    # builder copies it as it is); every dependency comes from the layer.\n"
        f"    Runtime: {where.runtime}\n"
        f"    Architectures: [{where.architecture}]\n"
        f"    CodeUri: {CODE_DIR}\n"
        "    Layers:\n"
        f"      - !Ref {LAYER}\n"
    )


def _layer_resource(where: CodeLocation) -> str:
    """The layer of the functions' dependencies, defined before the first function."""
    return (
        "  # The functions' dependencies, layer/requirements.txt (the list pyproject.toml\n"
        "  # installs too), built by SAM's Python builder for the functions' runtime and\n"
        "  # architecture. A code change rebuilds and uploads only the functions' small package;\n"
        "  # this layer changes with the requirements alone. A replaced version is deleted.\n"
        f"  {LAYER}:\n"
        "    Type: AWS::Serverless::LayerVersion\n"
        "    Metadata:\n"
        f"      BuildMethod: {where.runtime}\n"
        f"      BuildArchitecture: {where.architecture}\n"
        "    Properties:\n"
        '      LayerName: !Sub "${AWS::StackName}-dependencies"\n'
        f"      Description: The Python packages of the functions ({LAYER_DIR}requirements.txt).\n"
        f"      ContentUri: {LAYER_DIR}\n"
        f"      CompatibleRuntimes: [{where.runtime}]\n"
        f"      CompatibleArchitectures: [{where.architecture}]\n"
        "      RetentionPolicy: Delete\n"
        "\n"
    )


def project_template(
    package: str, *, distribution: str, version: str, template: str | None = None
) -> str:
    """The template of a project whose code is the package ``package`` (see the module's
    docstring); ``template``: the stack to derive it from (default: this installation's)."""
    stack = repository_template() if template is None else template
    where = code_location(stack)
    preamble = _preamble(distribution, version, where)
    text = _replace(_PREAMBLE, preamble.replace("\\", "\\\\"), stack, 1, "preamble")
    text = _replace(_GLOBAL_CODE, r"\g<1>" + _global_code(where), text, 1, "Globals.Function block")
    functions = len(FUNCTIONS) + len(PACKAGE_ENTRY_POINTS)
    text = _replace(_MAKEFILE_BUILD, "", text, functions, "makefile Metadata blocks")

    def entry_point(found: re.Match[str]) -> str:
        module = found.group(1)
        target = PACKAGE_ENTRY_POINTS.get(module, f"{package}.handlers.{module}")
        return f"      Handler: {target}.lambda_handler\n"

    text = _replace(_HANDLER, entry_point, text, functions, "handlers")
    if text.count(_FIRST_FUNCTION) != 1:
        raise StackTemplateError("template.yaml: expected one WorkerFunction definition")
    return text.replace(_FIRST_FUNCTION, _layer_resource(where) + _FIRST_FUNCTION)
