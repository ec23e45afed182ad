"""``awaken-s3 init``: the files of a new project, and writing them without overwriting any.

A project is the user's own repository with awaken-s3 as a dependency: a package under
``src/`` with the app (one agent, two tools) and the three Lambda entry points, tests that run
the app on moto through awaken-s3's pytest plugin, the stack's template (derived from
awaken-s3's own, :mod:`awaken_s3.project.stack`), sam's settings and a README with the
commands. The files come from ``skeleton/``: Python files are real modules of a package named
``my_service`` (linted with this repository), renamed for the project; ``*.tmpl`` files have
``{{name}}`` fields filled in; a leading ``dot-`` becomes ``.``. awaken-s3 itself is required
the way the awaken-s3 writing the project was installed (:mod:`~awaken_s3.project.source`): a
project made by an awaken-s3 from a clone, a git URL or a wheel installs from the same place,
with no index holding awaken-s3.

:func:`project_files` is pure (the files as text, by relative path); :func:`write_project`
refuses to write when any of them exists, and then writes nothing.
"""

from __future__ import annotations

import importlib.resources
import json
import keyword
import re
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from pathlib import Path, PurePosixPath
from typing import Final, Literal

from awaken_s3.errors import AwakenError
from awaken_s3.project.source import Source, installed_source
from awaken_s3.project.stack import code_location, project_template, repository_template

Provider = Literal["bedrock", "anthropic", "openai"]
PROVIDERS: Final = ("bedrock", "anthropic", "openai")
#: the skeleton's own names, replaced by the project's
SKELETON_PACKAGE: Final = "my_service"
SKELETON_DISTRIBUTION: Final = "my-service"
#: package names that would shadow what the functions import
RESERVED_PACKAGES: Final = frozenset({"awaken_s3", "handlers", "tests", "test", "src"})
#: what a hosted provider is deployed with unless the user says otherwise
PROVIDER_MODELS: Final = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-4.1"}
_FIELD = re.compile(r"\{\{(\w+)\}\}")


class ProjectError(AwakenError, ValueError):
    """The project cannot be written as asked (the message says why and what to do)."""


@dataclass(frozen=True)
class ProjectSpec:
    #: the distribution's name (pyproject.toml), e.g. ``my-service``
    distribution: str
    #: the import package, e.g. ``my_service``
    package: str
    provider: Provider = "bedrock"

    @classmethod
    def for_directory(
        cls, directory: Path, *, provider: Provider = "bedrock", package: str | None = None
    ) -> ProjectSpec:
        """The project named after its directory (``my-service`` -> package ``my_service``)."""
        distribution = directory.resolve().name
        if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?", distribution):
            raise ProjectError(
                f"{distribution!r} is not a project name (letters, digits, '.', '_', '-'): "
                "choose another directory name"
            )
        name = package or re.sub(r"[^a-z0-9]+", "_", distribution.lower()).strip("_")
        if not name.isidentifier() or keyword.iskeyword(name) or not name.islower():
            raise ProjectError(
                f"{name!r} is not a package name; give one with --package (lower case, a "
                "Python identifier)"
            )
        if name in RESERVED_PACKAGES:
            raise ProjectError(f"the package may not be called {name!r}; choose --package")
        if provider not in PROVIDERS:
            raise ProjectError(f"--provider must be one of {', '.join(PROVIDERS)}")
        return cls(distribution.lower(), name, provider)


def _model_default(template: str) -> str:
    """The Model parameter's default: the Bedrock model a Bedrock project deploys with."""
    block = re.search(r"^  Model:\n((?:    .*\n)+)", template, re.M)
    found = re.search(r"^    Default: (\S+)$", block.group(1), re.M) if block else None
    if found is None:
        raise ProjectError("template.yaml has no default Model")
    return found.group(1)


def _fields(spec: ProjectSpec, template: str, source: Source) -> dict[str, str]:
    extras = () if spec.provider == "bedrock" else (spec.provider,)
    if spec.provider == "bedrock":
        overrides = ["Provider=bedrock", f"Model={_model_default(template)}"]
        key_step = (
            "**Bedrock** needs no key: enable access to the model in the Bedrock console "
            "(the worker may call that model only).\n\n"
        )
    else:
        parameter = f"/{spec.distribution}/{spec.provider}-api-key"
        overrides = [
            f"Provider={spec.provider}",
            f"Model={PROVIDER_MODELS[spec.provider]}",
            f"ApiKeyParameterName={parameter}",
        ]
        key_step = (
            f"**The {spec.provider} API key** lives in SSM (only the worker may read it); put "
            "it there first, from a file rather than the command line:\n\n"
            "```sh\n"
            f"aws ssm put-parameter --name {parameter} --type SecureString \\\n"
            f"    --value file://{spec.provider}-key.txt\n"
            "```\n\n"
        )
    return {
        "distribution": spec.distribution,
        "package": spec.package,
        "provider": spec.provider,
        "version": source.version,
        "extra": f"[{spec.provider}]" if extras else "",
        "requirement": source.requirement(*extras),
        # A TOML string (JSON's escapes are TOML's): a URL is the user's to choose.
        "awaken_dev": json.dumps(source.requirement("local")),
        "source": source.describe(),
        "overrides": "\n".join(f'    "{line}",' for line in overrides),
        "key_step": key_step,
        "python": code_location(template).runtime.removeprefix("python"),
    }


def _walk(root: Traversable, prefix: PurePosixPath) -> Iterator[tuple[PurePosixPath, str]]:
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.name == "__pycache__":
            continue
        path = prefix / entry.name
        if entry.is_dir():
            yield from _walk(entry, path)
        else:
            yield path, entry.read_text(encoding="utf-8")


def _fill(text: str, fields: dict[str, str], where: PurePosixPath) -> str:
    def value(match: re.Match[str]) -> str:
        if match.group(1) not in fields:
            raise ProjectError(f"skeleton {where}: no value for {{{{{match.group(1)}}}}}")
        return fields[match.group(1)]

    return _FIELD.sub(value, text)


def project_files(spec: ProjectSpec, source: Source | None = None) -> dict[str, str]:
    """Every file of the project, by its path relative to the project's directory (pure but
    for reading the installed package's skeleton and template). The project depends on
    awaken-s3 from ``source``, by default where the running awaken-s3 was installed from."""
    template = repository_template()
    fields = _fields(spec, template, source or installed_source())
    files: dict[str, str] = {}
    skeleton = importlib.resources.files("awaken_s3.project").joinpath("skeleton")
    for path, text in _walk(skeleton, PurePosixPath()):
        parts = [spec.package if part == SKELETON_PACKAGE else part for part in path.parts]
        name = parts[-1]
        if name.endswith(".tmpl"):
            name = name.removesuffix(".tmpl")
            text = _fill(text, fields, path)
        parts[-1] = "." + name.removeprefix("dot-") if name.startswith("dot-") else name
        text = text.replace(SKELETON_PACKAGE, spec.package)
        text = text.replace(SKELETON_DISTRIBUTION, spec.distribution)
        files[str(PurePosixPath(*parts))] = text
    files["template.yaml"] = project_template(
        spec.package, distribution=spec.distribution, version=fields["version"], template=template
    )
    return files


def write_project(directory: Path, spec: ProjectSpec, source: Source | None = None) -> list[Path]:
    """Write the project into ``directory`` (made if missing); the paths written. Nothing is
    written when any of the files exists already."""
    files = project_files(spec, source)
    existing = sorted(name for name in files if (directory / name).exists())
    if existing:
        raise ProjectError(
            f"{directory} already has {', '.join(existing)}: nothing was written (move them "
            "away, or choose another directory)"
        )
    written = []
    for name, text in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        # Exclusive creation: a file that appeared meanwhile is never overwritten either.
        with path.open("x", encoding="utf-8") as file:
            file.write(text)
        written.append(path)
    return written
