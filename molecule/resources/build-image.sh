#!/usr/bin/env bash
# Build a local systemd test image with mmdebstrap + docker import: Debian 13 (trixie) by default,
# LLMFORGE_TEST_SUITE=bookworm for Debian 12 (the Makefile's image-debian12 names it MOLECULE_IMAGE_DEBIAN12).
# No container registry is needed; set MOLECULE_IMAGE to use an image of your own instead.
set -euo pipefail

image="${MOLECULE_IMAGE:-llmforge/debian13-systemd:latest}"
suite="${LLMFORGE_TEST_SUITE:-trixie}"

if docker image inspect "$image" >/dev/null 2>&1; then
    echo "build-image: $image already present"
    exit 0
fi
if [[ "$image" != llmforge/* ]]; then
    echo "build-image: MOLECULE_IMAGE=$image is not present locally; pull or build it first" >&2
    exit 1
fi

if ! command -v mmdebstrap >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq mmdebstrap >/dev/null
fi

workdir="$(mktemp -d)"
trap 'rm -rf "$workdir"' EXIT

# What Ansible and systemd need inside a container; everything the roles install comes later, for real.
packages=python3,python3-apt,systemd,systemd-sysv,dbus,iproute2,procps,ca-certificates,gnupg,sudo,less

echo "build-image: bootstrapping $suite into a rootfs tarball"
# The hooks run in mmdebstrap's shell, where $1 is the new root: single quotes are meant. dpkg in the containers
# skips its fsync calls (force-unsafe-io), as in Debian's own container images: a container's files do not outlive
# a crash of its host anyway, and the installs of every converge are faster (apt-get install of the demo's GPU-node
# package set, two fresh containers side by side on a loaded machine: 726 s with it, 820 s without).
# shellcheck disable=SC2016
mmdebstrap --variant=minbase --include="$packages" \
    --customize-hook='rm -f "$1"/etc/machine-id "$1"/var/lib/dbus/machine-id; touch "$1"/etc/machine-id' \
    --customize-hook='for u in getty@tty1 console-getty systemd-networkd-wait-online; do chroot "$1" systemctl mask $u.service >/dev/null 2>&1 || true; done' \
    --customize-hook='echo force-unsafe-io >"$1"/etc/dpkg/dpkg.cfg.d/docker-apt-speedup' \
    "$suite" "$workdir/rootfs.tar"

docker import \
    -c 'CMD ["/lib/systemd/systemd"]' \
    -c 'ENV container=docker' \
    "$workdir/rootfs.tar" "$image" >/dev/null
echo "build-image: built $image"
