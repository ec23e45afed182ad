"""template.yaml, parsed once; tests pick parameter values through ``deployed``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.infra.cfn import Resolver, load_template, with_function_globals

#: the parameters of a deployment that brings its own issuer (AuthMode=jwt), as an operator
#: would pass them; every parameter has a default, so a first deploy passes none of them.
BRING_YOUR_OWN_ISSUER = {
    "AuthMode": "jwt",
    "JwtIssuer": "https://issuer.example/tenant",
    "JwtAudience": "client-id",
}


@pytest.fixture(scope="session")
def template() -> dict[str, Any]:
    return load_template()


def deployed_resources(template: dict[str, Any], **parameters: str) -> dict[str, Any]:
    """The Resources section as deployed with these parameter values: the resources their
    conditions leave out are gone, and Globals are merged into the functions as SAM does."""
    resolver = Resolver(template, **parameters)
    resources = resolver.section("Resources")
    with_function_globals(resources, resolver.resolve(template["Globals"]["Function"]))
    return resources


@pytest.fixture
def deployed(template: dict[str, Any]) -> Callable[..., dict[str, Any]]:
    """The Resources section as deployed with the given parameter values (Globals merged)."""

    def resolve(**parameters: str) -> dict[str, Any]:
        return deployed_resources(template, **parameters)

    return resolve
