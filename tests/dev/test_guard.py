"""Which ``Host``, ``Origin`` and ``Sec-Fetch-Site`` headers the dev server takes as its own
(the decisions alone; tests/dev/test_dev_origin.py sends them to a running server)."""

from __future__ import annotations

import pytest

from awaken_s3.dev.guard import Refusal, host_refusal, origin_refusal

PORT = 8787


@pytest.mark.parametrize("host", ["127.0.0.1:8787", "localhost:8787", "LocalHost:8787"])
def test_its_own_names_are_served(host: str) -> None:
    assert host_refusal([host], PORT) is None


@pytest.mark.parametrize(
    "hosts",
    [
        ["evil.example:8787"],  # DNS rebinding: the attacker's name, resolved to 127.0.0.1
        ["127.0.0.1.evil.example:8787"],
        ["127.0.0.1:8788"],
        ["127.0.0.1"],  # port 80 only
        ["[::1]:8787"],  # not listened on
        ["localhost.:8787"],
        [""],
        [],
        ["127.0.0.1:8787", "evil.example:8787"],
    ],
)
def test_any_other_host_is_refused(hosts: list[str]) -> None:
    assert host_refusal(hosts, PORT) is Refusal.HOST


def test_port_80_is_also_named_without_its_port() -> None:
    assert host_refusal(["localhost"], 80) is None
    assert origin_refusal(["http://127.0.0.1"], [], 80) is None


@pytest.mark.parametrize(
    ("origins", "sites"),
    [
        ([], []),  # not a browser: curl, botocore, the CLI
        (["http://127.0.0.1:8787"], ["same-origin"]),
        (["http://localhost:8787"], []),
        ([], ["none"]),  # the user typed the address
    ],
)
def test_its_own_origin_and_clients_without_one_pass(origins: list[str], sites: list[str]) -> None:
    assert origin_refusal(origins, sites, PORT) is None


@pytest.mark.parametrize(
    ("origins", "sites"),
    [
        (["http://evil.example"], []),
        (["null"], []),  # a sandboxed frame, a file:// page
        (["https://127.0.0.1:8787"], []),
        (["http://127.0.0.1:3000"], []),  # another local app
        (["http://127.0.0.1:8787", "http://evil.example"], []),
        ([], ["cross-site"]),
        ([], ["same-site"]),
        (["http://127.0.0.1:8787"], ["cross-site"]),
    ],
)
def test_a_page_elsewhere_is_refused(origins: list[str], sites: list[str]) -> None:
    assert origin_refusal(origins, sites, PORT) is Refusal.ORIGIN
