"""Images: tagged by content, reused when present, built from Debian packages otherwise."""

from __future__ import annotations

import pytest
from cluster_fixtures import require_docker

from floodmark.backends import images


def test_content_tag_is_stable_and_follows_the_base() -> None:
    assert images.content_tag("broker", "sha256:a") == images.content_tag("broker", "sha256:a")
    assert images.content_tag("broker", "sha256:a") != images.content_tag("broker", "sha256:b")
    assert images.content_tag("zookeeper", "sha256:a").startswith("floodmark/zookeeper:")


def test_broker_image_carries_the_reference_and_not_the_harness() -> None:
    names = {str(p.relative_to(images.PACKAGE_DIR)) for p in images._sources()}
    assert "reference/real/process.py" in names and "reference/broker/broker.py" in names
    assert "node_events.py" in names and "node_event_kinds.py" in names
    assert not any(name.startswith(("harness/", "checkers/", "reports/")) for name in names)


def test_a_foreign_base_image_must_already_be_present(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FLOODMARK_BASE_IMAGE", "floodmark-test/absent:none")

    class Images:
        def get(self, name: str) -> None:
            import docker.errors

            raise docker.errors.ImageNotFound(name)

    class Client:
        images = Images()

    with pytest.raises(images.ClusterError, match="floodmark-test/absent:none is not present"):
        images.ensure_images(Client())


@pytest.mark.docker
def test_present_images_are_reused_without_building() -> None:
    require_docker()
    import docker

    client = docker.from_env()  # type: ignore[attr-defined]
    try:
        first = images.ensure_images(client)
        lines: list[str] = []
        second = images.ensure_images(client, progress=lines.append)
        assert first == second and lines == []
        assert client.images.get(second["broker"]).id == client.images.get("floodmark/broker:latest").id
    finally:
        client.close()
