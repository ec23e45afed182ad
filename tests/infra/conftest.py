"""template.yaml, parsed once; tests pick parameter values through ``deployed``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.infra.cfn import Resolver, load_template, with_function_globals

# The parameters without a default, as an operator would pass them.
REQUIRED = {
    "JwtIssuer": "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_example",
    "JwtAudience": "client-id",
}


@pytest.fixture(scope="session")
def template() -> dict[str, Any]:
    return load_template()


@pytest.fixture
def deployed(template: dict[str, Any]) -> Callable[..., dict[str, Any]]:
    """The Resources section as deployed with the given parameter values (Globals merged)."""

    def resolve(**parameters: str) -> dict[str, Any]:
        resolver = Resolver(template, **{**REQUIRED, **parameters})
        resources: dict[str, Any] = resolver.resolve(template["Resources"])
        with_function_globals(resources, resolver.resolve(template["Globals"]["Function"]))
        return resources

    return resolve
