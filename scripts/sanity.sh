#!/usr/bin/env bash
# Run `ansible-test sanity` on a copy of the tracked files laid out as ansible_collections/llmforge/cluster,
# the path ansible-test requires. Runs on the local Python: no containers, no downloads.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="${LLMFORGE_SANITY_DIR:-/tmp/llmforge-sanity}"
dest="$work/ansible_collections/llmforge/cluster"
rm -rf "$work"
mkdir -p "$dest"
(cd "$root" && git ls-files -z --cached --others --exclude-standard | grep -zv '^collections/' \
    | xargs -0 cp --parents -t "$dest")
cd "$dest"
# The collection's own docs and metadata, on the same copy: every plugin's docs and markup (each filter has its
# plugins/filter/<name>.yml), the changelog fragments and changelog.yaml, and the execution environment metadata,
# from which ansible-builder must read the plugins' Python requirement and the system packages.
antsibull-docs lint-collection-docs --plugin-docs .
antsibull-changelog lint
antsibull-changelog lint-changelog-yaml changelogs/changelog.yaml
ee_deps="$(ansible-builder introspect --sanitize "$work")"
if ! grep -q "^- 'netaddr==" <<<"$ee_deps" || ! grep -q "^- 'openssh-client " <<<"$ee_deps"; then
    echo "$ee_deps" >&2
    echo "sanity: ansible-builder does not read netaddr and openssh-client from meta/execution-environment.yml" >&2
    exit 1
fi
# ansible-test builds a virtualenv per test and bootstraps pip into it with a script it downloads
# from a host this machine may not reach; give it our stand-in for every pip version it may ask for.
pip_version="$(python3 - <<'PY'
import inspect
from ansible_test._internal import python_requirements as pr
import re
print(re.search(r"pip='([0-9.]+)'", inspect.getsource(pr.get_venv_packages)).group(1))
PY
)"
mkdir -p ~/.ansible/test/cache
cp "$root/scripts/pip_bootstrap.py" ~/.ansible/test/cache/"get_pip_${pip_version//./_}.py"
python_version="$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
ansible-test sanity --python "$python_version" --color no "$@"
