"""Read template.yaml as CloudFormation sees it, without AWS or the SAM tool chain.

``load_template`` understands the short-form intrinsic tags (``!Ref``, ``!Sub``, ...) and turns
them into their long form. ``Resolver`` evaluates conditions and intrinsics for a given set of
parameter values, so tests can ask what a deployment with those values would really grant.
Values it cannot know before deployment (``!GetAtt``, resource ``!Ref``) become readable
placeholders such as ``<CheckpointBucket.Arn>``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

TEMPLATE_PATH = Path(__file__).resolve().parents[2] / "template.yaml"

_SHORT_TAGS = [
    "Base64",
    "Cidr",
    "FindInMap",
    "GetAtt",
    "GetAZs",
    "ImportValue",
    "Join",
    "Select",
    "Split",
    "Sub",
    "Contains",
    "EachMemberEquals",
    "Transform",
    "And",
    "Equals",
    "If",
    "Not",
    "Or",
]


class _CfnLoader(yaml.SafeLoader):  # type: ignore[misc]
    pass


def _long_form(name: str) -> Any:
    def construct(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
        if isinstance(node, yaml.ScalarNode):
            value: Any = loader.construct_scalar(node)
            if name == "GetAtt":
                value = value.split(".", 1)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)
        return {f"Fn::{name}": value}

    return construct


for _tag in _SHORT_TAGS:
    _CfnLoader.add_constructor(f"!{_tag}", _long_form(_tag))
_CfnLoader.add_constructor("!Ref", lambda loader, node: {"Ref": loader.construct_scalar(node)})
_CfnLoader.add_constructor(
    "!Condition", lambda loader, node: {"Condition": loader.construct_scalar(node)}
)


def load_template(path: Path = TEMPLATE_PATH) -> dict[str, Any]:
    with path.open(encoding="utf-8") as handle:
        loaded: dict[str, Any] = yaml.load(handle, Loader=_CfnLoader)
    return loaded


NO_VALUE = object()
_PSEUDO = {
    "AWS::Region": "us-east-1",
    "AWS::AccountId": "123456789012",
    "AWS::Partition": "aws",
    "AWS::StackName": "awaken",
    "AWS::URLSuffix": "amazonaws.com",
}


class Resolver:
    """Evaluates a template's conditions and intrinsics for one set of parameter values."""

    def __init__(self, template: Mapping[str, Any], **overrides: str) -> None:
        self.template = template
        params: dict[str, Any] = {}
        for name, spec in template.get("Parameters", {}).items():
            if name in overrides:
                params[name] = overrides[name]
            elif "Default" in spec:
                params[name] = spec["Default"]
            else:
                params[name] = f"<{name}>"
            if spec.get("Type") == "CommaDelimitedList" and isinstance(params[name], str):
                params[name] = params[name].split(",")
            elif not isinstance(params[name], list):
                params[name] = str(params[name])
        unknown = set(overrides) - set(params)
        if unknown:
            raise KeyError(f"not template parameters: {sorted(unknown)}")
        self.params = params

    def condition(self, name: str) -> bool:
        return bool(self.resolve(self.template["Conditions"][name]))

    def _exists(self, entry: Mapping[str, Any]) -> bool:
        name = entry.get("Condition")
        return name is None or self.condition(name)

    @functools.cached_property
    def absent(self) -> frozenset[str]:
        """The resources these parameter values do not create (their Condition is false)."""
        resources = self.template["Resources"]
        return frozenset(name for name, res in resources.items() if not self._exists(res))

    def section(self, name: str) -> dict[str, Any]:
        """A section's entries (Resources, Outputs) as deployed: an entry whose Condition is
        false is left out, the others resolved. Referring to a resource left out is an error
        CloudFormation would refuse the template for, so it raises here too."""
        entries = self.template.get(name, {})
        kept = {key: entry for key, entry in entries.items() if self._exists(entry)}
        resolved: dict[str, Any] = self.resolve(kept)
        return resolved

    def resolve(self, value: Any) -> Any:
        """The deployed value: Fn::If branches chosen, AWS::NoValue entries removed."""
        if isinstance(value, list):
            items = (self.resolve(item) for item in value)
            return [item for item in items if item is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            handler = getattr(self, "_" + key.replace("::", "_"), None)
            if handler is not None:
                return handler(arg)
        resolved = {key: self.resolve(item) for key, item in value.items()}
        return {key: item for key, item in resolved.items() if item is not NO_VALUE}

    def _Ref(self, name: str) -> Any:
        if name == "AWS::NoValue":
            return NO_VALUE
        if name in self.params:
            return self.params[name]
        if name in _PSEUDO:
            return _PSEUDO[name]
        return self._resource(name)

    def _resource(self, name: str) -> str:
        """A placeholder for a resource's value, which must be one these values create."""
        if name in self.absent:
            raise KeyError(f"{name} is not created with these parameter values")
        return f"<{name}>"

    def _Condition(self, name: str) -> bool:
        return self.condition(name)

    def _Fn_If(self, arg: list[Any]) -> Any:
        name, then, otherwise = arg
        return self.resolve(then if self.condition(name) else otherwise)

    def _Fn_Equals(self, arg: list[Any]) -> bool:
        left, right = (self.resolve(item) for item in arg)
        return bool(str(left) == str(right))

    def _Fn_Not(self, arg: list[Any]) -> bool:
        return not self.resolve(arg[0])

    def _Fn_And(self, arg: list[Any]) -> bool:
        return all(self.resolve(item) for item in arg)

    def _Fn_Or(self, arg: list[Any]) -> bool:
        return any(self.resolve(item) for item in arg)

    def _Fn_Split(self, arg: list[Any]) -> list[str]:
        separator, text = arg
        return str(self.resolve(text)).split(separator)

    def _Fn_Join(self, arg: list[Any]) -> str:
        separator, items = arg
        return str(separator).join(str(item) for item in self.resolve(items))

    def _Fn_Select(self, arg: list[Any]) -> Any:
        index, items = arg
        return self.resolve(items)[int(index)]

    def _Fn_Contains(self, arg: list[Any]) -> bool:
        items, value = (self.resolve(item) for item in arg)
        return str(value) in [str(item) for item in items]

    def _Fn_EachMemberEquals(self, arg: list[Any]) -> bool:
        items, value = (self.resolve(item) for item in arg)
        return all(str(item) == str(value) for item in items)

    def _Fn_GetAtt(self, arg: list[str]) -> str:
        self._resource(arg[0])
        return f"<{arg[0]}.{arg[1]}>"

    def _Fn_FindInMap(self, arg: list[Any]) -> Any:
        mapping, first, second = (self.resolve(item) for item in arg)
        return self.template["Mappings"][mapping][str(first)][second]

    def _Fn_Sub(self, arg: Any) -> str:
        text = arg if isinstance(arg, str) else arg[0]

        def substitute(match: re.Match[str]) -> str:
            name = match.group(1)
            if "." in name:
                self._resource(name.split(".", 1)[0])
                return f"<{name}>"
            resolved = self._Ref(name)
            return str(resolved)

        return re.sub(r"\$\{([^}!]+)\}", substitute, text)


def resources_of_type(resources: Mapping[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    """The resources of one type, from a template or from its Resources section."""
    section: Mapping[str, Any] = resources.get("Resources", resources)
    return {name: resource for name, resource in section.items() if resource["Type"] == kind}


def with_function_globals(resources: dict[str, Any], globals_: Mapping[str, Any]) -> None:
    """Merge Globals.Function into every function, as SAM does (environments are merged)."""
    for resource in resources_of_type(resources, "AWS::Serverless::Function").values():
        props = resource.setdefault("Properties", {})
        for key, value in globals_.items():
            if key == "Environment":
                own = props.get("Environment", {}).get("Variables", {})
                props["Environment"] = {"Variables": {**value["Variables"], **own}}
            else:
                props.setdefault(key, value)


def role_statements(resolved_role: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every statement of an AWS::IAM::Role's inline policies (already resolved)."""
    for policy in resolved_role["Properties"].get("Policies", []):
        yield from policy["PolicyDocument"]["Statement"]


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]
