"""The Docker images of the docker backend, built on demand from Debian packages.

No container registry is assumed. ``floodmark/base`` is a Debian bookworm root file system
made by ``docker/build-base.sh`` (debootstrap + ``docker import``); ``floodmark/zookeeper`` and
``floodmark/broker`` are built on it from ``docker/*.Dockerfile``. A user with a registry can
set ``FLOODMARK_BASE_IMAGE=debian:bookworm-slim`` (or any Debian-like image): the Dockerfiles
install what a stock image lacks.

Images are tagged with a hash of everything that goes into them (Dockerfile, base image id,
the floodmark sources, libfaketime), so a changed broker is rebuilt and an unchanged one is
reused; building is skipped entirely when the tag exists. Run ``python -m
floodmark.backends.images`` to build them ahead of time.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import floodmark
from floodmark.backends.faketime import libfaketime_library
from floodmark.harness.cluster import ClusterError, zookeeper_config

BASE_IMAGE = "floodmark/base"
BROKER_IMAGE = "floodmark/broker"
ZOOKEEPER_IMAGE = "floodmark/zookeeper"
PACKAGE_DIR = Path(floodmark.__file__).resolve().parent
DOCKER_DIR = PACKAGE_DIR.parent / "docker"
ZOOKEEPER_DATA = "/var/lib/floodmark/data"

Progress = Callable[[str], None]


def _print(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def base_image() -> str:
    return os.environ.get("FLOODMARK_BASE_IMAGE", BASE_IMAGE)


def _image_id(client: Any, name: str) -> str | None:
    import docker.errors

    try:
        return str(client.images.get(name).id)
    except docker.errors.ImageNotFound:
        return None


def build_base(progress: Progress = _print) -> None:
    """Run docker/build-base.sh (root, debootstrap; a few minutes), streaming its output."""
    script = DOCKER_DIR / "build-base.sh"
    if not script.exists():
        raise ClusterError(f"{script} not found: build the base image from a source checkout")
    if os.geteuid() != 0 or shutil.which("debootstrap") is None:
        raise ClusterError(f"{BASE_IMAGE} is missing and building it needs root and debootstrap; "
                           f"run {script} as root, or set FLOODMARK_BASE_IMAGE to a Debian image")
    progress(f"building {BASE_IMAGE} from Debian packages (debootstrap, a few minutes)")
    process = subprocess.Popen(["sh", str(script), BASE_IMAGE], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    for line in process.stdout:
        progress(f"  base: {line.rstrip()}")
    if process.wait() != 0:
        raise ClusterError(f"{script} failed with exit code {process.returncode}")


def _context_files(role: str) -> dict[str, bytes]:
    """Files of the build context, other than the floodmark package, by name."""
    dockerfile = (DOCKER_DIR / f"{role}.Dockerfile").read_bytes()
    if role == "broker":
        return {"Dockerfile": dockerfile, "libfaketime.so.1": Path(libfaketime_library()).read_bytes()}
    return {"Dockerfile": dockerfile, "zoo.cfg": zookeeper_config(ZOOKEEPER_DATA).encode()}


# What the broker image carries besides the top-level modules: the reference and the one
# package of the layers below it (see the layers contract in pyproject.toml).
IMAGE_PACKAGES = ("reference", "contracts", "inputs")


def broker_sources() -> list[Path]:
    """What the broker image carries: the reference implementation and everything below it
    in the layers (the ``contracts``, the error types, and the readers' ``inputs``); not the
    harness, checkers or reports, so work on those does not rebuild the image."""
    wanted = list(PACKAGE_DIR.glob("*.py"))
    for package in IMAGE_PACKAGES:
        wanted += [p for p in (PACKAGE_DIR / package).rglob("*.py") if "__pycache__" not in p.parts]
    return sorted(wanted)


def content_tag(role: str, base_id: str) -> str:
    digest = hashlib.sha256(base_id.encode())
    for name, data in sorted(_context_files(role).items()):
        digest.update(name.encode() + b"\0" + data)
    if role == "broker":
        for path in broker_sources():
            digest.update(str(path.relative_to(PACKAGE_DIR)).encode() + b"\0" + path.read_bytes())
    image = BROKER_IMAGE if role == "broker" else ZOOKEEPER_IMAGE
    return f"{image}:{digest.hexdigest()[:12]}"


def _build(client: Any, role: str, tag: str, base: str, progress: Progress) -> None:
    with tempfile.TemporaryDirectory(prefix="floodmark-image-") as context:
        for name, data in _context_files(role).items():
            Path(context, name).write_bytes(data)
        if role == "broker":
            for source in broker_sources():
                target = Path(context, "floodmark", source.relative_to(PACKAGE_DIR))
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
        progress(f"building {tag} (FROM {base})")
        stream = client.api.build(path=context, tag=tag, buildargs={"BASE": base}, rm=True,
                                  forcerm=True, decode=True, pull=False)
        for chunk in stream:
            if "error" in chunk:
                raise ClusterError(f"building {tag} failed: {chunk['error'].strip()}")
            line = str(chunk.get("stream", "")).rstrip()
            if line.startswith("Step "):
                progress(f"  {line}")
    repository = tag.rsplit(":", 1)[0]
    client.images.get(tag).tag(repository, "latest")
    # Older content tags of this image are dead weight: drop them (layers shared stay).
    for image in client.images.list(name=repository):
        for old in image.tags:
            if old not in (tag, f"{repository}:latest"):
                with contextlib.suppress(Exception):  # still used by another run's container
                    client.images.remove(old, noprune=False)


def ensure_images(client: Any, progress: Progress = _print) -> dict[str, str]:
    """The image tag for each role ("broker", "zookeeper"), building whatever is missing."""
    base = base_image()
    base_id = _image_id(client, base)
    if base_id is None:
        if base != BASE_IMAGE:
            raise ClusterError(f"base image {base} is not present; docker pull it first")
        build_base(progress)
        base_id = _image_id(client, base)
        if base_id is None:
            raise ClusterError(f"{BASE_IMAGE} still missing after building it")
    tags = {}
    for role in ("zookeeper", "broker"):
        tag = content_tag(role, base_id)
        if _image_id(client, tag) is None:
            _build(client, role, tag, base, progress)
        else:  # reused: :latest still names the image runs actually use
            client.images.get(tag).tag(tag.rsplit(":", 1)[0], "latest")
        tags[role] = tag
    return tags


def main() -> int:
    import docker

    client = docker.from_env()  # type: ignore[attr-defined]
    try:
        for role, tag in ensure_images(client).items():
            print(f"{role}: {tag}")
    except ClusterError as e:
        print(f"floodmark images: {e}", file=sys.stderr)
        return 1
    finally:
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
