#!/usr/bin/env bash
# Make sure a Docker engine answers: install Debian's docker.io and start dockerd when it does not.
set -euo pipefail

if docker info >/dev/null 2>&1; then
    exit 0
fi

if ! command -v dockerd >/dev/null 2>&1; then
    echo "ensure-docker: installing docker.io from the distribution"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq docker.io >/dev/null
fi

if ! pgrep -x dockerd >/dev/null 2>&1; then
    echo "ensure-docker: starting dockerd"
    if command -v systemctl >/dev/null 2>&1 && systemctl is-system-running >/dev/null 2>&1; then
        systemctl start docker
    else
        nohup dockerd >/var/log/dockerd.log 2>&1 &
    fi
fi

for _ in $(seq 1 60); do
    if docker info >/dev/null 2>&1; then
        echo "ensure-docker: engine ready"
        exit 0
    fi
    sleep 1
done
echo "ensure-docker: dockerd did not answer within 60 s; see /var/log/dockerd.log" >&2
exit 1
