"""The local backend's network plumbing: names within Linux limits, subnets nobody uses."""

from __future__ import annotations

import ipaddress

from floodmark.backends import cleanup, netns


def test_names_fit_in_an_interface_name() -> None:
    assert len(netns.namespace_name("abcdef12", "zk")) <= 15
    assert len(netns.namespace_name("abcdef12", "n9")) <= 15
    assert netns.bridge_name("abc123") == "fm-abc123"


def test_subnet_avoids_routes_already_on_the_host(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    first = netns.choose_subnet("abc123")
    monkeypatch.setattr(netns, "_used_networks", lambda: [first])
    second = netns.choose_subnet("abc123")
    assert second != first and not second.overlaps(first)
    assert second.subnet_of(ipaddress.IPv4Network("10.200.0.0/13"))


def test_cleanup_recognises_only_floodmark_names() -> None:
    assert cleanup._run_of("fm-abc123") == "abc123"
    assert cleanup._run_of("fm-abc123-n1") == "abc123"
    assert cleanup._run_of("docker0") is None and cleanup._run_of("veth1234") is None
