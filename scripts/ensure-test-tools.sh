#!/usr/bin/env bash
# The programs the tests run for real, from the distribution: fio (storage_bench's tests run it on a temporary
# directory), shellcheck (ansible-test sanity) and promtool (the alert rules' unit tests), which is taken out of
# Debian's prometheus package into build/tools without installing the package, so no Prometheus server is started
# on this machine. Idempotent.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
tools="$root/build/tools"
sudo=()
if [ "$(id -u)" -ne 0 ]; then
    sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1
updated=
# The package lists, refreshed once however many tools are missing.
update() {
    [ -n "$updated" ] || "${sudo[@]}" apt-get update -qq
    updated=1
}

missing=()
for tool in fio shellcheck; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "ensure-test-tools: installing ${missing[*]} from the distribution"
    update
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v promtool >/dev/null 2>&1 && [ ! -x "$tools/usr/bin/promtool" ]; then
    echo "ensure-test-tools: unpacking promtool from the distribution's prometheus package into $tools"
    download="$(mktemp -d)"
    trap 'rm -rf "$download"' EXIT
    update
    (cd "$download" && apt-get download -qq -o APT::Sandbox::User=root prometheus)
    mkdir -p "$tools"
    dpkg-deb -x "$download"/prometheus_*.deb "$download/root"
    install -D -m 0755 "$download/root/usr/bin/promtool" "$tools/usr/bin/promtool"
fi
