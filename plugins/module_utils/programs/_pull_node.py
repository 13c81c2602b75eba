# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""llmforge-pull-node: run the GPU-node plays on this node itself, from a bundle the control host built (pull mode).

In pull mode site.yml does not run the GPU nodes' tasks from the control host: it writes a bundle (see
module_utils/_pull_bundle.py) and starts this program on every node at once in one Slurm step; each node checks the
bundle against the digest on its command line, unpacks the collections (once per bundle), writes its inventory
(cluster.json and its own file) into a private directory and runs the bundle's playbook against itself with the local connection, from the pinned Ansible
environment the ansible_node role installed. It prints what the run came to as ``{"node": ..., "pull": {...}}`` in
numbered lines (module_utils/_node_lines.py) for the control host to read from srun's output:

    status         ok | changed | failed | timeout | no-ansible | bundle (module_utils/_pull_bundle.STATUSES)
    message        one line: what happened, naming the file, the task or the limit
    stats          the recap counts (ok, changed, failures, unreachable, skipped, rescued, ignored)
    changed_tasks  [{role, task}] in the order they changed
    failed_task    {role, task, message} of the failure that stopped the node, else null
    seconds        the run's wall time; digest, check: what was run

    llmforge-pull-node --bundle /shared/llmforge/pull/<digest> --digest <digest> [--check] [--timeout 3600]

Run by root. Nothing another user can write is used: the bundle's directory, manifest, collections and the node's
file must be root's and writable by root alone, the node's file readable by root alone, and the checksums must match. The run's full output is
kept in /var/log/llmforge/pull.log (0600). Exit status: 0 when the lines were printed (a failing run is a result, not
an error), 2 unusable arguments.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import stat
import sys
import tarfile
import tempfile
import time
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils import _files as files
from ansible_collections.llmforge.cluster.plugins.module_utils import _node_lines as node_lines
from ansible_collections.llmforge.cluster.plugins.module_utils import _proc as proc
from ansible_collections.llmforge.cluster.plugins.module_utils import _pull_bundle as bundle

PROGRAM = 'llmforge-pull-node'
MARKER = PROGRAM
STATE_DIR = '/var/lib/llmforge/pull'
LOG_FILE = '/var/log/llmforge/pull.log'
# Bundles' collections kept unpacked on the node: the newest few (a re-run reuses its bundle's).
KEEP_UNPACKED = 3
# Characters of a read file at most: a manifest or a node's inventory (the control host's, small).
MAX_DOCUMENT = 16 * 1024 * 1024
UNPACKED_MARKER = '.llmforge-unpacked'
ANSIBLE_CFG = """[defaults]
inject_facts_as_vars = False
gathering = smart
interpreter_python = /usr/bin/python3
retry_files_enabled = False
forks = 1
"""


class PullError(Exception):
    """The run could not start; `status` says why (a STATUSES value), the message names the file or setting."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


def _check_owner(path: str, info: os.stat_result, private: bool = False) -> None:
    """Root's and writable by root alone (`private`: readable by root alone too), else PullError('bundle')."""
    if info.st_uid != 0:
        raise PullError('bundle', f'{path} is owned by uid {info.st_uid}, not root: not used')
    if info.st_mode & (0o077 if private else 0o022):
        what = 'readable or writable by others' if private else 'writable by others'
        raise PullError('bundle', f'{path} is {what} (mode {stat.S_IMODE(info.st_mode):04o}): not used')


def _stat_trusted(path: str, directory: bool) -> None:
    """A directory (or a regular file) that is root's and writable by root alone, not a link; else PullError."""
    try:
        info = os.stat(path, follow_symlinks=False)
    except OSError as err:
        raise PullError('bundle', f'cannot read {path}: {err.strerror}') from None
    if not (stat.S_ISDIR(info.st_mode) if directory else stat.S_ISREG(info.st_mode)):
        raise PullError('bundle', f"{path} is not a {'directory' if directory else 'regular file'}")
    _check_owner(path, info)


def _read_trusted(path: str, private: bool = False) -> bytes:
    """The bytes of a regular file that is root's (not through a symbolic link), else PullError('bundle')."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as err:
        raise PullError('bundle', f'cannot read {path}: {err.strerror}') from None
    with os.fdopen(descriptor, 'rb') as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise PullError('bundle', f'{path} is not a regular file')
        _check_owner(path, info, private)
        return handle.read(MAX_DOCUMENT + 1)


def _json(path: str, private: bool = False) -> t.Any:
    data = _read_trusted(path, private)
    if len(data) > MAX_DOCUMENT:
        raise PullError('bundle', f'{path} is larger than {MAX_DOCUMENT} bytes')
    try:
        return json.loads(data)
    except ValueError as err:
        raise PullError('bundle', f'{path} is not JSON: {err}') from None


def load(bundle_dir: str, expected: str, node: str) -> tuple[dict[str, t.Any], dict[str, t.Any]]:
    """(manifest, this node's inventory) after every check: owners and modes, the digest on the command line,
    cluster.json's sha256 and the node's file written for this bundle (the collections are checked by `unpack`)."""
    for directory in (bundle_dir, os.path.join(bundle_dir, bundle.NODES_DIR)):
        _stat_trusted(directory, directory=True)
    try:
        manifest = bundle.check_manifest(_json(os.path.join(bundle_dir, bundle.MANIFEST_FILE)))
        if manifest['digest'] != expected:
            raise PullError('bundle', f'{os.path.join(bundle_dir, bundle.MANIFEST_FILE)} has digest '
                                      f"{manifest['digest'][:12]}, the control host asked for {expected[:12]}")
        cluster_path = os.path.join(bundle_dir, bundle.CLUSTER_FILE)
        data = _read_trusted(cluster_path)
        found = hashlib.sha256(data).hexdigest()
        if found != manifest['cluster_sha256']:
            raise PullError('bundle', f"{cluster_path} has sha256 {found[:12]}, the manifest says "
                                      f"{manifest['cluster_sha256'][:12]}: not used")
        try:
            cluster = bundle.check_cluster(json.loads(data))
        except ValueError as err:
            if isinstance(err, bundle.BundleError):
                raise
            raise PullError('bundle', f'{cluster_path} is not JSON: {err}') from None
        own = bundle.check_node_document(
            _json(os.path.join(bundle_dir, bundle.node_file(node)), private=True), node, expected)
    except bundle.BundleError as err:
        raise PullError('bundle', f'{bundle_dir}: {err}') from None
    return manifest, bundle.inventory(cluster, node, own)


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, 'rb', opener=lambda name, flags: os.open(name, flags | os.O_NOFOLLOW)) as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b''):
            digest.update(chunk)
    return digest.hexdigest()


def _safe_members(archive: tarfile.TarFile, source: str) -> list[tarfile.TarInfo]:
    """The archive's members, each a file or directory below the top (no link, device, absolute or '..' path)."""
    members = []
    for member in archive.getmembers():
        name = member.name
        if name.startswith('/') or '..' in name.split('/') or not (member.isfile() or member.isdir()):
            raise PullError('bundle', f'{source}: member {name!r} is not a plain file or directory below the top')
        members.append(member)
    return members


def unpack(bundle_dir: str, manifest: t.Mapping[str, t.Any], state_dir: str = STATE_DIR) -> str:
    """The directory holding the bundle's collections (ANSIBLE_COLLECTIONS_PATH), unpacked once per bundle: the
    archive's sha256 checked first, then unpacked into a temporary directory renamed into place."""
    target = os.path.join(state_dir, f"collections-{manifest['collections_sha256'][:16]}")
    if os.path.exists(os.path.join(target, UNPACKED_MARKER)):
        return target
    source = os.path.join(bundle_dir, manifest['collections'])
    _stat_trusted(source, directory=False)
    found = _sha256(source)
    if found != manifest['collections_sha256']:
        raise PullError('bundle', f"{source} has sha256 {found[:12]}, the manifest says "
                                  f"{manifest['collections_sha256'][:12]}: not used")
    os.makedirs(state_dir, mode=0o700, exist_ok=True)
    temporary = tempfile.mkdtemp(prefix='.unpack.', dir=state_dir)
    try:
        with tarfile.open(source, 'r:gz') as archive:
            members = _safe_members(archive, source)
            if hasattr(tarfile, 'data_filter'):
                archive.extractall(temporary, members=members, filter='data')
            else:  # pragma: no cover - Pythons without the extraction filters; the members were checked above
                archive.extractall(temporary, members=members)  # noqa: S202
        files.write_atomic(os.path.join(temporary, UNPACKED_MARKER), manifest['collections_sha256'] + '\n', mode=0o600)
        shutil.rmtree(target, ignore_errors=True)
        os.rename(temporary, target)
    except (OSError, tarfile.TarError) as err:
        shutil.rmtree(temporary, ignore_errors=True)
        raise PullError('bundle', f'cannot unpack {source}: {err}') from None
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    _forget_old(state_dir, keep=target)
    return target


def _forget_old(state_dir: str, keep: str) -> None:
    """Remove all but the newest KEEP_UNPACKED unpacked bundles (the one in use always kept)."""
    unpacked = [os.path.join(state_dir, name) for name in os.listdir(state_dir) if name.startswith('collections-')]
    unpacked.sort(key=lambda path: os.stat(path).st_mtime, reverse=True)
    for path in [path for path in unpacked if path != keep][KEEP_UNPACKED - 1:]:
        shutil.rmtree(path, ignore_errors=True)


def summarize(recap: t.Any, node: str) -> dict[str, t.Any]:
    """status, message, stats, changed_tasks and failed_task from the recap callback's file."""
    host = (recap or {}).get('hosts', {}).get(node) if isinstance(recap, dict) else None
    if not isinstance(host, dict) or not isinstance(host.get('stats'), dict):
        return {'status': 'failed', 'message': f'the run ended without a recap for {node}', 'stats': {},
                'changed_tasks': [], 'failed_task': None}
    stats = host['stats']
    failures = [item for item in host.get('failures', []) if not item.get('ignored')]
    changed = host.get('changed_tasks', [])
    if stats.get('failures') or stats.get('unreachable'):
        failed = failures[-1] if failures else {'role': '', 'task': '(unknown)', 'message': ''}
        where = f"{failed['role']} : {failed['task']}" if failed.get('role') else failed['task']
        return {'status': 'failed', 'message': f"failed at '{where}': {failed.get('message', '')}".strip(),
                'stats': stats, 'changed_tasks': changed,
                'failed_task': {key: failed.get(key, '') for key in ('role', 'task', 'message')}}
    status = 'changed' if stats.get('changed') else 'ok'
    return {'status': status, 'message': f"{stats.get('ok', 0)} ok, {stats.get('changed', 0)} changed",
            'stats': stats, 'changed_tasks': changed, 'failed_task': None}


def run(bundle_dir: str, expected: str, node: str, check: bool, timeout: float,
        state_dir: str = STATE_DIR, log_file: str = LOG_FILE) -> dict[str, t.Any]:
    """What the node's run came to (the document printed under "pull")."""
    started = time.monotonic()
    outcome: dict[str, t.Any] = {'digest': expected, 'check': check, 'stats': {}, 'changed_tasks': [], 'failed_task': None}
    try:
        manifest, inventory = load(bundle_dir, expected, node)
        ansible_playbook = manifest['ansible_playbook']
        if not os.access(ansible_playbook, os.X_OK):
            raise PullError('no-ansible', f'{ansible_playbook} is not there: the pinned Ansible environment is missing '
                                          '(the ansible_node role installs it)')
        collections = unpack(bundle_dir, manifest, state_dir)
        work = tempfile.mkdtemp(prefix='run.', dir=state_dir)
        try:
            outcome.update(_play(work, collections, manifest, inventory, node, check, timeout, log_file))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    except PullError as err:
        outcome.update(status=err.status, message=str(err))
    outcome['seconds'] = round(time.monotonic() - started, 1)
    return outcome


def _play(work: str, collections: str, manifest: t.Mapping[str, t.Any], inventory: dict[str, t.Any], node: str,
          check: bool, timeout: float, log_file: str) -> dict[str, t.Any]:
    inventory_file = os.path.join(work, 'inventory.json')
    files.write_atomic(inventory_file, json.dumps(inventory), mode=0o600)
    files.write_atomic(os.path.join(work, 'ansible.cfg'), ANSIBLE_CFG, mode=0o600)
    recap_file = os.path.join(work, 'recap.json')
    env = {'PATH': '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', 'HOME': '/root',
           'LANG': 'C.UTF-8', 'ANSIBLE_CONFIG': os.path.join(work, 'ansible.cfg'),
           'ANSIBLE_COLLECTIONS_PATH': collections, 'ANSIBLE_CALLBACKS_ENABLED': 'llmforge.cluster.pull_recap',
           'LLMFORGE_PULL_RECAP': recap_file, 'ANSIBLE_LOCAL_TEMP': os.path.join(work, 'tmp'),
           'ANSIBLE_NOCOLOR': '1', 'ANSIBLE_FORCE_COLOR': '0'}
    argv = [manifest['ansible_playbook'], '-i', inventory_file, '--limit', node, manifest['playbook']]
    if check:
        argv += ['--check', '--diff']
    try:
        done = proc.run(argv, timeout, env=env)
    except proc.CommandError as err:
        status = 'timeout' if err.reason == proc.TIMEOUT else 'no-ansible'
        return {'status': status, 'message': f'{err}'}
    _keep_log(log_file, done)
    try:
        with open(recap_file, encoding='utf-8') as handle:
            recap = json.load(handle)
    except (OSError, ValueError):
        tail = ' '.join((done.stderr or done.stdout).strip().splitlines()[-3:])
        return {'status': 'failed', 'message': f'ansible-playbook exited {done.rc} without a recap: {tail}'[:600]}
    return summarize(recap, node)


def _keep_log(log_file: str, done: proc.Completed) -> None:
    """The run's whole output, for the node's administrator (root's alone)."""
    try:
        os.makedirs(os.path.dirname(log_file), mode=0o755, exist_ok=True)
        files.write_atomic(log_file, done.stdout + done.stderr, mode=0o600)
    except OSError:
        pass


def node_name(given: t.Optional[str] = None) -> str:
    """The node's name as its inventory knows it: as given, else $SLURMD_NODENAME, else the short host name."""
    return given or os.environ.get('SLURMD_NODENAME') or os.uname().nodename.split('.')[0]


def parse_output(text: str) -> dict[str, dict[str, t.Any]]:
    """{node: outcome} of every node whose lines are all in srun's output."""
    return node_lines.read(MARKER, 'pull', text)


def main(argv: t.Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--bundle', required=True, help="the bundle's directory")
    parser.add_argument('--digest', required=True, help="the bundle's digest (64 hex digits), as the control host built it")
    parser.add_argument('--node', help="this node's inventory name (default: $SLURMD_NODENAME, else the host name)")
    parser.add_argument('--check', action='store_true', help='run the plays in check mode with --diff')
    parser.add_argument('--timeout', type=float, default=3600.0, help='seconds the plays may take (default 3600)')
    args = parser.parse_args(argv)
    node = node_name(args.node)
    if not os.path.isabs(args.bundle) or len(args.digest) != 64 or args.timeout <= 0:
        sys.stderr.write(f'{PROGRAM} on {node}: --bundle must be absolute, --digest 64 hex digits, --timeout > 0\n')
        return 2
    outcome = run(args.bundle, args.digest, node, args.check, args.timeout)
    sys.stdout.write(''.join(line + '\n' for line in node_lines.lines(MARKER, node, 'pull', outcome)))
    sys.stdout.flush()
    return 0
