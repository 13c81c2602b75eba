# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster's secrets lie only in the files meant to hold them, readable by their service alone.

The scenario converges with known secrets: the demo inventory generates each one on first use into
~/.config/llmforge-demo/<name> on the Molecule runner (slurm_db_password, and whichever others the inventory
generates there), and the primary controller generates the munge key. This test looks for each of them

- on every node of the `cluster` group, in every regular file under SCAN_ROOTS (binary files too), and in every
  process's command line;
- on the runner, in the converge log (molecule.yml's provisioner writes ANSIBLE_LOG_PATH and tells the verifier
  where: LLMFORGE_CONVERGE_LOG), Ansible's temporary directories (~/.ansible/tmp, /tmp/ansible*) and the
  scenario's ephemeral directory;

and fails on any file that holds one, unless it is a file of SECRET_FILES with its owner and at most its mode. Text
secrets are looked for as they are and base64-encoded; the munge key (1024 random bytes) as the start of its base64
form and as a slice of its raw bytes. The secrets never leave the runner: the nodes are given fingerprints only
(see secret_scan.py), and the failure messages list paths, owners and modes, never a secret.
"""

from __future__ import annotations

import base64
import dataclasses
import glob
import json
import os
import pathlib
import re

import pytest
import yaml

import secret_scan
from conftest import ALL_HOSTS, CONTROLLER
from scenario_helpers import docker_hosts

DEMO_SECRETS = pathlib.Path(os.environ.get('LLMFORGE_DEMO_SECRETS_DIR')
                            or pathlib.Path.home() / '.config' / 'llmforge-demo')
# Where the nodes keep configuration, state, logs, temporary files and home directories. /shared is one volume
# mounted on every node: the controller scans it.
SCAN_ROOTS = ('/etc', '/var', '/tmp', '/root', '/home', '/srv', '/opt', '/usr/local', '/run')
SHARED_ROOTS = ('/shared',)
# Downloaded package archives: files from the distribution, written before any secret existed.
SKIP = ('/var/cache/apt/archives',)
SCAN_TIMEOUT = 900

# The files meant to hold a secret: path -> (owner, group that may read it or None). A file of this list passes
# with mode 0600 or less, or 0640 or less when it names a group and the file belongs to that group. Any other file
# holding a secret fails, whatever its mode.
SECRET_FILES = {
    # The munge key: every node's copy, and the primary controller's cluster key it is copied from.
    '/etc/munge/munge.key': ('munge', None),
    '/etc/munge/cluster.key': ('munge', None),
    # slurmdbd reads StoragePass as the slurm user; nobody else may.
    '/etc/slurm/slurmdbd.conf': ('slurm', None),
    # SSSD refuses a configuration readable by others: the role keeps the LDAP bind password in a drop-in of its
    # own, and sssd copies its configuration into its private database.
    '/etc/sssd/sssd.conf': ('root', None),
    '/etc/sssd/conf.d/llmforge-bind.conf': ('root', None),
    '/var/lib/sss/db/config.ldb': ('root', None),
    # Alertmanager (SMTP password, webhook URLs) and Prometheus (scrape credentials) run as prometheus.
    '/etc/prometheus/alertmanager.yml': ('root', 'prometheus'),
    '/etc/prometheus/prometheus.yml': ('root', 'prometheus'),
    # Grafana's admin password and secret key; the grafana package reads it as group grafana.
    '/etc/grafana/grafana.ini': ('root', 'grafana'),
}
# The same, for files whose path carries a digest: a pull bundle's node files (the munge key and the LDAP bind
# password the node's roles take), written by the first controller on shared storage, root's alone.
SECRET_PATTERNS = {
    re.compile(r'^/shared/llmforge/pull/[0-9a-f]{64}/nodes/[A-Za-z0-9][A-Za-z0-9._-]*\.json$'): ('root', None),
}


@dataclasses.dataclass(frozen=True)
class Secret:
    """A known secret: its name and the byte strings that betray it (kept out of repr: pytest prints reprs)."""

    name: str
    # (how it is written, the bytes): '' for the secret as it is.
    forms: tuple = dataclasses.field(repr=False)

    def needles(self) -> list[dict]:
        return [secret_scan.fingerprint(form, f'{self.name} ({label})' if label else self.name)
                for label, form in self.forms]

    def texts(self) -> list[str]:
        return [form.decode('ascii') for _label, form in self.forms if form.isascii()]


def _text_secret(name: str, value: str) -> Secret:
    raw = value.encode()
    return Secret(name, (('', raw), ('base64', base64.b64encode(raw).rstrip(b'='))))


def _public(text: str) -> bool:
    """Whether a file of the demo secrets directory holds a certificate (public, such as ldap-ca.pem)."""
    return text.startswith('-----BEGIN') and 'PRIVATE KEY' not in text.split('\n', 1)[0]


def _demo_secrets() -> list[Secret]:
    """The secrets the demo inventory generated ('<password>' or '<password> salt=...' per file)."""
    found = []
    for path in sorted(DEMO_SECRETS.glob('*')) if DEMO_SECRETS.is_dir() else []:
        if not path.is_file() or path.name.endswith('_lockfile'):
            continue
        text = path.read_text(encoding='utf-8', errors='surrogateescape')
        if _public(text):
            continue
        if text.startswith('-----BEGIN'):
            # A PEM private key: its longest base64 line is what any copy of it holds.
            body = max((line for line in text.splitlines() if not line.startswith('-----')), key=len, default='')
            if len(body) >= 16:
                found.append(Secret(path.name, (('', body.encode()),)))
            continue
        value = text.split('\n', 1)[0].split(' salt=', 1)[0]
        if len(value) >= 8:
            found.append(_text_secret(path.name, value))
    return found


def _munge_key(ctl) -> Secret:
    key = ctl.file('/etc/munge/munge.key').content
    assert len(key) >= 64, f'/etc/munge/munge.key on {CONTROLLER} holds {len(key)} bytes'
    # A raw slice whose first bytes are distinct and not NUL, so that the search does not stop at every run of zeros.
    start = next((offset for offset in range(len(key) - 32)
                  if len(set(key[offset:offset + secret_scan.PREFIX]) - {0}) == secret_scan.PREFIX), 0)
    return Secret('munge key', (('base64', base64.b64encode(key)[:48]), ('raw bytes', key[start:start + 32])))


def _cluster_hosts() -> list[str]:
    """The hosts of the `cluster` group in Molecule's inventory; those of conftest when run by hand."""
    inventory = os.environ.get('MOLECULE_INVENTORY_FILE')
    if inventory and os.path.isfile(inventory):
        with open(inventory, encoding='utf-8') as stream:
            groups = yaml.safe_load(stream) or {}
        hosts = sorted(((groups.get('cluster') or {}).get('hosts') or {}))
        if hosts:
            return hosts
    return list(ALL_HOSTS)


CLUSTER_HOSTS = _cluster_hosts()


@pytest.fixture(scope='module')
def cluster():
    return docker_hosts(CLUSTER_HOSTS)


@pytest.fixture(scope='module')
def known_secrets(cluster):
    found = _demo_secrets()
    assert 'slurm_db_password' in {secret.name for secret in found}, (
        f'{DEMO_SECRETS}/slurm_db_password is missing: the demo inventory generates the accounting database password '
        'there on first use, so the scenario converged with another inventory or HOME')
    return found + [_munge_key(cluster[CONTROLLER])]


def _judge(host: str, hit: dict) -> str:
    """Why a file holding a secret is wrong; '' when it is one of SECRET_FILES as it should be."""
    where = f'{host}:{_where(hit)}'
    expected = SECRET_FILES.get(hit['path']) or next(
        (owner for pattern, owner in SECRET_PATTERNS.items() if pattern.match(hit['path'])), None)
    if expected is None:
        return f'{where}: no secret belongs in this file'
    owner, group = expected
    allowed = 0o640 if group is not None and hit['group'] == group else 0o600
    if hit['owner'] != owner or hit['mode'] & ~allowed:
        readers = f'{owner}, mode {allowed:04o} or less' + (f' with group {group}' if allowed == 0o640 else '')
        return f'{where}: must be owned by {readers}'
    return ''


def _scan_node(host: str, node, roots: tuple, needles: list[dict]) -> dict:
    spec = json.dumps({'roots': list(roots), 'needles': needles, 'skip': list(SKIP)})
    source = pathlib.Path(secret_scan.__file__).read_text(encoding='utf-8')
    result = node.run('timeout %s python3 -c %s %s', str(SCAN_TIMEOUT), source, spec)
    assert result.rc != 124, f'the scan of {host} did not end within {SCAN_TIMEOUT} s'
    assert result.rc == 0, f'the scan failed on {host}: {result.stderr[-2000:]}'
    return json.loads(result.stdout)


def _where(hit: dict) -> str:
    return f"{hit['path']} ({hit['secret']}; {hit['owner']}:{hit['group']} {hit['mode']:04o})"


@pytest.mark.parametrize('host', CLUSTER_HOSTS)
def test_secrets_lie_only_in_their_files(cluster, known_secrets, host):
    needles = [needle for secret in known_secrets for needle in secret.needles()]
    roots = SCAN_ROOTS + (SHARED_ROOTS if host == CONTROLLER else ())
    found = _scan_node(host, cluster[host], roots, needles)
    wrong = [reason for reason in (_judge(host, hit) for hit in found['hits']) if reason]
    assert not wrong, 'files holding a secret where they should not:\n' + '\n'.join(wrong)


@pytest.mark.parametrize('host', CLUSTER_HOSTS)
def test_no_command_line_holds_a_secret(cluster, known_secrets, host):
    listing = cluster[host].check_output('ps -eww -o pid=,user=,args=')
    shown = []
    for line in listing.splitlines():
        leaks = sorted(secret.name for secret in known_secrets if any(text in line for text in secret.texts()))
        if leaks:
            pid, user = line.split()[:2]
            shown.append(f"{host}: process {pid} of {user} has {', '.join(leaks)} on its command line")
    assert not shown, '\n'.join(shown)


def test_the_runner_keeps_no_secret_in_logs_or_temporary_files(known_secrets):
    log = os.environ.get('LLMFORGE_CONVERGE_LOG', '')
    if log:
        assert os.path.isfile(log) and os.path.getsize(log) > 0, (
            f'the converge log {log} (LLMFORGE_CONVERGE_LOG) is missing or empty: molecule.yml sets ANSIBLE_LOG_PATH '
            'for the provisioner')
    places = [log, str(pathlib.Path.home() / '.ansible' / 'tmp'), os.environ.get('MOLECULE_EPHEMERAL_DIRECTORY', '')]
    places += sorted(glob.glob('/tmp/ansible*'))
    needles = [needle for secret in known_secrets for needle in secret.needles()]
    hits, _unreadable = secret_scan.scan([place for place in places if place and os.path.exists(place)], needles)
    where = sorted({_where(hit) for hit in hits})
    assert not where, 'the runner keeps secrets in:\n' + '\n'.join(where)


def test_the_demo_secrets_are_private_to_the_runner_user(known_secrets):
    """The generated secrets themselves: readable by the user who ran the scenario only (certificates are public)."""
    loose = [f'{path}: mode {path.stat().st_mode & 0o777:04o}' for path in sorted(DEMO_SECRETS.glob('*'))
             if path.is_file() and path.stat().st_mode & 0o077
             and not _public(path.read_text(encoding='utf-8', errors='surrogateescape'))]
    assert len(known_secrets) > 1
    assert not loose, 'demo secrets others can read:\n' + '\n'.join(loose)
