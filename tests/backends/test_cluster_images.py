"""Images: tagged by content, reused when present, built from Debian packages otherwise."""

from __future__ import annotations

import os
import site
import subprocess
import sys
from pathlib import Path

import pytest
from cluster_fixtures import require_docker

from floodmark.backends import images


def test_content_tag_is_stable_and_follows_the_base() -> None:
    assert images.content_tag("broker", "sha256:a") == images.content_tag("broker", "sha256:a")
    assert images.content_tag("broker", "sha256:a") != images.content_tag("broker", "sha256:b")
    assert images.content_tag("zookeeper", "sha256:a").startswith("floodmark/zookeeper:")


def test_broker_image_carries_the_reference_and_not_the_harness() -> None:
    names = {str(p.relative_to(images.PACKAGE_DIR)) for p in images.broker_sources()}
    assert "reference/real/process.py" in names and "reference/broker/broker.py" in names
    assert "contracts/node_events.py" in names and "contracts/node_event_kinds.py" in names
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


def test_the_broker_image_holds_everything_the_reference_imports(tmp_path: Path) -> None:
    # The image carries a selection of the package; a module the reference imports from
    # outside it (a package moved below the reference, say) would leave the broker unable to
    # start in its container. Import every module of the reference from exactly that selection.
    for source in images.broker_sources():
        target = tmp_path / "floodmark" / source.relative_to(images.PACKAGE_DIR)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes())
    program = (
        "import importlib, pkgutil, sys\n"
        "import floodmark, floodmark.reference\n"
        f"assert floodmark.__file__.startswith({str(tmp_path)!r}), floodmark.__file__\n"
        "for m in pkgutil.walk_packages(floodmark.reference.__path__, 'floodmark.reference.'):\n"
        "    importlib.import_module(m.name)\n"
        "from floodmark.reference.real.process import main\n"
        "print('imported', len([m for m in sys.modules if m.startswith('floodmark.')]))\n"
    )
    # -S: no site processing, so no editable install's finder can supply a module the copy
    # lacks; the site-packages directories stay on the path for kazoo and orjson.
    path = os.pathsep.join([str(tmp_path), *site.getsitepackages()])
    done = subprocess.run([sys.executable, "-S", "-c", program], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": path, "PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("imported ")
