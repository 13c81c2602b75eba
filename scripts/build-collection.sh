#!/usr/bin/env bash
# Build the tarball, follow README's "Running it against real servers" as written in a scratch HOME and prove the
# installed copy works on its own; it stays in build/user/collections, which the Molecule cluster scenario converges from.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/build"
user_collections="$out/user/collections"
version="$(sed -n 's/^version: *//p' "$root/galaxy.yml")"
tarball="llmforge-cluster-$version.tar.gz"
started=$SECONDS
say() { echo "build-collection: $*"; }
die() { echo "build-collection: FAILED: $*" >&2; exit 1; }

rm -rf "$out/user" "${out:?}/$tarball"
mkdir -p "$out/user"
ansible-galaxy collection build "$root" --output-path "$out" --force >/dev/null

# What ships: nothing of the checkout's machinery, no link leading out of the collection, and what README sends users to.
python3 - "$out/$tarball" <<'PY'
import posixpath, sys, tarfile
bad, names = [], set()
with tarfile.open(sys.argv[1]) as tar:
    for m in tar.getmembers():
        name = posixpath.normpath(m.name)
        names.add(name)
        top = name.split('/', 1)[0]
        if top in ('build', '.venv', 'collections', '.git', 'molecule', 'tests') or '/.venv/' in f'/{name}/':
            bad.append(f'{name}: must not ship')
        if m.issym() or m.islnk():
            target = posixpath.normpath(posixpath.join(posixpath.dirname(name), m.linkname))
            if m.linkname.startswith('/') or target == '..' or target.startswith('../'):
                bad.append(f'{name} -> {m.linkname}: link leads out of the collection')
for need in ('MANIFEST.json', 'README.md', 'requirements.txt', 'requirements.yml', 'meta/runtime.yml',
             'inventories/example/hosts.yml', 'ansible.cfg.example', 'inventories/example/group_vars/all/vault.yml.example'):
    if need not in names:
        bad.append(f'{need}: missing')
if bad:
    sys.exit('tarball: ' + '; '.join(bad))
PY
say "built $out/$tarball (contents checked)"

# Every line of README's code block (comments stripped) is either run below or skipped by name, so the two stay in step.
mapfile -t readme_lines < <(python3 - "$root/README.md" <<'PY'
import re, sys
text = open(sys.argv[1], encoding='utf-8').read()
section = text.split('\n## Running it against real servers\n', 1)[1].split('\n## ', 1)[0]
for line in section.splitlines():
    if line.startswith('    ') and line.strip():
        print(re.sub(r'\s+#\s.*$', '', line.strip()))
PY
)
[ "${#readme_lines[@]}" -gt 0 ] || die "README has no command block under '## Running it against real servers'"
declare -A covered=()
readme_has() {
    printf '%s\n' "${readme_lines[@]}" | grep -qxF -- "$1" || die "README no longer says: $1"
    covered["$1"]=1
}
readme() {  # run a README line as written (plus extra arguments, e.g. --quiet), after checking README still says it
    local line="$1"; shift
    readme_has "$line"
    echo "+ $line${*:+ $*}"
    eval "$line${*:+ $*}"
}
skip() { readme_has "$1"; echo "- skipped: $1 ($2)"; }

# A user's shell: scratch HOME (pip keeps its cache and config), none of the checkout's ANSIBLE_*/PYTHONPATH/.venv.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
export XDG_CACHE_HOME="${XDG_CACHE_HOME:-$HOME/.cache}" XDG_CONFIG_HOME="${XDG_CONFIG_HOME:-$HOME/.config}"
export HOME="$scratch/home"
mkdir -p "$HOME"
unset PYTHONPATH VIRTUAL_ENV
while read -r var; do unset "$var"; done < <(compgen -e | grep '^ANSIBLE_' || true)
path=""
IFS=: read -ra path_dirs <<<"$PATH"
for dir in "${path_dirs[@]}"; do [[ "$dir/" == "$root/"* ]] || path="${path:+$path:}$dir"; done
PATH="$path"
# No collection server is reachable: the declared dependencies must come from the `ansible` package.
export ANSIBLE_GALAXY_SERVER=http://127.0.0.1:9

cd "$root"
skip 'sudo apt-get install -y python3-venv' 'changes the system; python3 -m venv below needs it'
readme 'python3 -m venv ~/llmforge-venv && . ~/llmforge-venv/bin/activate'
readme 'pip install -r requirements.txt' --quiet
[ "$(command -v ansible-galaxy)" = "$HOME/llmforge-venv/bin/ansible-galaxy" ] || die "ansible-galaxy is not the new venv's"
version_text="$(ansible --version)"
say "venv from requirements.txt ready at $((SECONDS - started)) s: ${version_text%%$'\n'*}"
readme 'ansible-galaxy collection build --output-path ~/llmforge-site' '>/dev/null'
readme 'cd ~/llmforge-site'
[ ! -e ~/.ansible/collections ] || die "$HOME/.ansible/collections exists before the install"
readme "ansible-galaxy collection install $tarball -p ~/.ansible/collections" "| tee $scratch/install.log"
for dep in $(python3 -c 'import json, sys; print(*json.load(open(sys.argv[1]))["collection_info"]["dependencies"])' \
        ~/.ansible/collections/ansible_collections/llmforge/cluster/MANIFEST.json); do
    grep -q "'$dep:.*' is already installed, skipping" "$scratch/install.log" || die "$dep did not come from the ansible package"
done
readme 'mkdir -p inventories && cp -r ~/.ansible/collections/ansible_collections/llmforge/cluster/inventories/example inventories/mycluster'
readme 'cp ~/.ansible/collections/ansible_collections/llmforge/cluster/ansible.cfg.example ansible.cfg'
skip 'ansible-vault create inventories/mycluster/group_vars/all/vault.yml' 'interactive'
skip 'ansible-playbook llmforge.cluster.site -i inventories/mycluster --ask-vault-pass --become' \
    'needs servers: every playbook is syntax-checked with the same inventory below'
skip 'ansible-playbook llmforge.cluster.gpu -i inventories/mycluster --ask-vault-pass --become -e gpu_driver_update=true -e cluster_rolling_batch=5%' \
    'a driver roll-out needs servers: molecule/cluster/tests/test_rolling.py runs it on the test cluster'
skip 'sbatch /lustre/sw/envs/llmforge-train/share/llmforge/llmforge-train.sbatch --steps 2000 --ckpt-every-minutes 10' \
    'needs a cluster: molecule/cluster/tests/test_training.py submits the reference job on the test cluster'
for line in "${readme_lines[@]}"; do
    [ -n "${covered[$line]:-}" ] || die "README line neither run nor skipped here: $line"
done

# From here on only the installed copy, at the fixed path, and the venv's own collections are visible.
mv ~/.ansible/collections "$user_collections"
installed="$user_collections/ansible_collections/llmforge/cluster"
export ANSIBLE_COLLECTIONS_PATH="$user_collections"
# The site's ansible.cfg is the one copied above, and its settings are in effect.
[[ "$(ansible --version)" == *$'\n  config file = '"$PWD"$'/ansible.cfg\n'* ]] || die "$PWD/ansible.cfg is not the config Ansible reads"
settings="$(ansible-config dump --only-changed --format json |
    python3 -c 'import json, sys; print(*("%s=%s" % (e["name"], e["value"]) for e in json.load(sys.stdin) if "name" in e))')"
for want in DEFAULT_FORKS=50 DEFAULT_GATHERING=smart INJECT_FACTS_AS_VARS=False ANSIBLE_PIPELINING=True; do
    [[ " $settings " == *" $want "* ]] || die "the copied ansible.cfg does not set $want (set: $settings)"
done
say "the site's ansible.cfg is read: $settings"
[ "$(ansible-galaxy collection list llmforge.cluster --format json | python3 -c 'import json, sys; print(*json.load(sys.stdin))')" \
    = "$user_collections/ansible_collections" ] || die "llmforge.cluster resolves elsewhere than $user_collections"

# Every plugin and role the installed roles and playbooks name by FQCN resolves.
python3 - "$installed" <<'PY'
import json, pathlib, re, subprocess, sys
installed = pathlib.Path(sys.argv[1])
manifest = json.loads((installed / 'MANIFEST.json').read_text())['collection_info']
collections = ['llmforge.cluster', *manifest['dependencies']]
fqcn = re.compile(r'(?<![\w.])(' + '|'.join(map(re.escape, collections)) + r')\.([a-z_][a-z0-9_]*)\b')
used = set()
for path in [*installed.glob('roles/**/*'), *installed.glob('playbooks/**/*')]:
    if path.suffix in ('.yml', '.yaml', '.j2') and path.is_file():
        used.update('.'.join(m) for m in fqcn.findall(path.read_text(encoding='utf-8')))
def doc(*args):
    result = subprocess.run(['ansible-doc', '--json', *args], capture_output=True, text=True, check=False)
    return set(json.loads(result.stdout or '{}'))
found = {f'llmforge.cluster.{p.stem}' for p in (installed / 'playbooks').glob('*.yml')}
for kind in ('module', 'filter', 'test', 'lookup', 'role'):
    found |= doc('-t', kind, '-l', 'llmforge.cluster')
    wanted = sorted(n for n in used - found if not n.startswith('llmforge.cluster.'))
    if wanted and kind != 'role':
        found |= doc('-t', kind, *wanted)
missing = sorted(used - found)
if missing:
    sys.exit(f'FQCNs that do not resolve: {", ".join(missing)}')
print('build-collection: resolve:', ' '.join(sorted(n for n in used if not n.startswith('llmforge.cluster.'))),
      f'and {sum(n.startswith("llmforge.cluster.") for n in used)} llmforge.cluster plugins, roles and playbooks')
PY

for playbook in "$installed"/playbooks/*.yml; do
    name="llmforge.cluster.$(basename "$playbook" .yml)"
    ansible-playbook "$name" -i inventories/mycluster --syntax-check >/dev/null || die "$name --syntax-check"
    echo "ansible-playbook $name -i inventories/mycluster --syntax-check: ok"
done
say "README's install works from requirements.txt alone, offline, in $((SECONDS - started)) s"
say "installed collection: $installed"
