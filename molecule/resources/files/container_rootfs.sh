#!/bin/sh
# Build a tiny usr-merged rootfs tarball for container tests: Debian's static busybox and an /etc/os-release
# the tests look for. Deterministic (sorted, fixed mtime and owners): the same busybox gives the same sha256.
# Usage: container_rootfs.sh OUTPUT.tar   (needs the busybox-static package)
set -eu
out=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
r=$work/rootfs
mkdir -p "$r/usr/bin" "$r/usr/sbin" "$r/etc" "$r/proc" "$r/sys" "$r/dev" "$r/tmp" "$r/run" "$r/var" "$r/home"
ln -s usr/bin "$r/bin"
ln -s usr/sbin "$r/sbin"
ln -s ../run "$r/var/run"
cp /bin/busybox "$r/usr/bin/busybox"
for applet in $(/bin/busybox --list); do
  [ "$applet" = busybox ] || ln -s busybox "$r/usr/bin/$applet"
done
printf 'PRETTY_NAME="llmforge container test"\nNAME=llmforge-container-test\nID=llmforge-container-test\n' > "$r/etc/os-release"
chmod 1777 "$r/tmp"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$r" -cf "$out" .
