#!/bin/sh
# Build the floodmark/base image from Debian packages, without any container registry:
# debootstrap a bookworm "minbase" root file system with everything the broker and the
# ZooKeeper images need, then `docker import` it as a single-layer image.
#
# Usage: docker/build-base.sh [IMAGE_TAG]        (default floodmark/base)
# Environment: FLOODMARK_DEBIAN_MIRROR (default http://deb.debian.org/debian),
#              FLOODMARK_DEBIAN_SUITE (default bookworm).
# Needs root, debootstrap and a Docker engine. Takes a few minutes the first time
# (measured on a 2-core machine: see docker/README.md).
set -eu

TAG="${1:-floodmark/base}"
MIRROR="${FLOODMARK_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SUITE="${FLOODMARK_DEBIAN_SUITE:-bookworm}"
# python3 + kazoo/yaml: the broker; iptables/iproute2/procps/util-linux: the nemeses
# (rules, addresses, signals, setpriv); the JRE and ZooKeeper jars: the ZooKeeper node.
PACKAGES="python3,python3-kazoo,python3-yaml,python3-jinja2,iptables,iproute2,procps,util-linux,openjdk-17-jre-headless,libzookeeper-java,libslf4j-java"

ROOTFS="$(mktemp -d /tmp/floodmark-rootfs.XXXXXX)"
unmount_all() { for m in proc sys dev/pts dev; do umount "$ROOTFS/$m" 2>/dev/null || true; done; }
# --one-file-system: never follow a mount debootstrap might have left into the host's /proc.
cleanup() { unmount_all; rm -rf --one-file-system "$ROOTFS"; }
trap cleanup EXIT INT TERM

echo "floodmark: debootstrap $SUITE minbase into $ROOTFS (this takes a few minutes)"
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOTFS" "$MIRROR"

# Keep the image small: package lists, caches and docs are not needed at run time.
chroot "$ROOTFS" apt-get clean
rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/* \
       "$ROOTFS"/var/cache/apt/*.bin
# Clean any mounts debootstrap may have left behind before archiving.
unmount_all

echo "floodmark: importing $ROOTFS as $TAG"
tar -C "$ROOTFS" -c . | docker import \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["/bin/bash"]' \
    - "$TAG"
echo "floodmark: built $TAG"
