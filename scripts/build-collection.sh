#!/usr/bin/env bash
# Build the collection tarball, install it offline into a scratch path and prove the installed copy
# works on its own: filters load, roles resolve, and `llmforge.cluster.site` parses as a collection playbook.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/build"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

mkdir -p "$out"
ansible-galaxy collection build "$root" --output-path "$out" --force
version="$(sed -n 's/^version: *//p' "$root/galaxy.yml")"
tarball="$out/llmforge-cluster-$version.tar.gz"
# Only the scratch install may be visible, not the checkout (nor its ansible.cfg).
export ANSIBLE_COLLECTIONS_PATH="$scratch"
cd "$scratch"
ansible-galaxy collection install "$tarball" -p "$scratch" --offline --no-deps --force
test -f "$scratch/ansible_collections/llmforge/cluster/MANIFEST.json"
ansible localhost -m ansible.builtin.debug \
    -a "msg={{ ['gpu001','gpu002','gpu003','gpu007','login1'] | llmforge.cluster.hostlist_compress }}" \
    | grep -F 'gpu[001-003,007],login1'
for playbook in site controller compute; do
    ansible-playbook "llmforge.cluster.$playbook" -i "$root/inventories/example" --syntax-check >/dev/null
done
echo "build-collection: $tarball installs offline; collection playbooks parse"
