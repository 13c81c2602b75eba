#!/usr/bin/env bash
# Make sure a Chromium that can run headless is installed: install Debian's chromium when no
# chromium/chromium-browser binary is on PATH. Idempotent; the browser tests (tests/browser) need it.
set -euo pipefail

for candidate in chromium chromium-browser; do
    if command -v "$candidate" >/dev/null 2>&1; then
        exit 0
    fi
done

if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-chromium: no chromium binary and no apt-get; install Chromium by hand" >&2
    exit 1
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
        echo "ensure-chromium: installing chromium needs root (or sudo)" >&2
        exit 1
    fi
    sudo=(sudo)
fi

echo "ensure-chromium: installing chromium from the distribution"
export DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null

if ! command -v chromium >/dev/null 2>&1; then
    echo "ensure-chromium: apt-get finished but no chromium binary is on PATH" >&2
    exit 1
fi
echo "ensure-chromium: $(chromium --version 2>/dev/null || echo chromium installed)"
