# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""llmforge-pull-node: a real ansible-playbook run on this host from a bundle, and every refusal before one.

The bundle's collections are a small test collection (its playbook writes a file, or fails when told to) and this
collection's pull_recap callback; ansible-playbook is the test environment's. Owners and modes are checked as the
program checks them on a node, so the tests need root (as the program does).
"""

from __future__ import annotations

import io
import json
import os
import pathlib
import sys
import tarfile

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils import _node_lines as node_lines
from ansible_collections.llmforge.cluster.plugins.module_utils import _pull_bundle as bundle
from ansible_collections.llmforge.cluster.plugins.module_utils.programs import _pull_node as program

ROOT = pathlib.Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = str(pathlib.Path(sys.executable).parent / 'ansible-playbook')
PLAYBOOK = """---
- name: A node's plays
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Write the node's file
      ansible.builtin.copy:
        content: "{{ pulled_text }} {{ pulled_shared }} {{ groups['controllers'] | join(',') }}\\n"
        dest: "{{ pulled_dest }}"
        mode: "0644"
    - name: Fail when told to
      ansible.builtin.fail:
        msg: the node was told to fail
      when: pulled_fail | default(false)
    - name: Sleep when told to
      ansible.builtin.command: sleep {{ pulled_sleep }}
      changed_when: false
      when: pulled_sleep is defined
"""

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason='the program trusts root-owned bundles only')


def _collections_tar(path: pathlib.Path) -> None:
    with tarfile.open(path, 'w:gz') as archive:
        def add(name: str, text: str) -> None:
            data = text.encode('utf-8')
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            archive.addfile(info, io.BytesIO(data))
        add('ansible_collections/test/pull/playbooks/node.yml', PLAYBOOK)
        add('ansible_collections/test/pull/galaxy.yml', 'namespace: test\nname: pull\nversion: 1.0.0\n')
        callback = (ROOT / 'plugins' / 'callback' / 'pull_recap.py').read_text(encoding='utf-8')
        add('ansible_collections/llmforge/cluster/plugins/callback/pull_recap.py', callback)


def make_bundle(directory: pathlib.Path, nodes: dict[str, dict], ansible_playbook: str = ANSIBLE_PLAYBOOK) -> str:
    """A bundle in `directory` for `nodes` ({node: its variables}); returns its digest."""
    (directory / bundle.NODES_DIR).mkdir(parents=True, mode=0o755)
    os.chmod(directory, 0o755)
    _collections_tar(directory / 'collections.tar.gz')
    cluster = {'vars': {'pulled_shared': 'yes'}, 'hosts': {'ctl1': {'cluster_network_addresses': {'management': '10.0.0.1'}}},
               'groups': {'gpu_nodes': sorted(nodes), 'controllers': ['ctl1']}}
    (directory / bundle.CLUSTER_FILE).write_text(json.dumps(cluster), encoding='utf-8')
    manifest = {'collections': 'collections.tar.gz',
                'collections_sha256': program._sha256(str(directory / 'collections.tar.gz')),
                'cluster_sha256': program._sha256(str(directory / bundle.CLUSTER_FILE)),
                'playbook': 'test.pull.node', 'ansible_playbook': ansible_playbook}
    digest = bundle.digest(manifest)
    (directory / bundle.MANIFEST_FILE).write_text(json.dumps(manifest), encoding='utf-8')
    for node, variables in nodes.items():
        path = directory / bundle.node_file(node)
        path.write_text(json.dumps({'digest': digest, 'vars': variables}), encoding='utf-8')
        os.chmod(path, 0o600)
    return digest


@pytest.fixture
def where(tmp_path):
    return {'bundle': tmp_path / 'bundle', 'state': str(tmp_path / 'state'), 'log': str(tmp_path / 'log' / 'pull.log'),
            'dest': tmp_path / 'node-file'}


def pull(where, digest, node='gpu1', check=False, timeout=120.0):
    return program.run(str(where['bundle']), digest, node, check, timeout, state_dir=where['state'], log_file=where['log'])


def test_a_run_changes_then_a_rerun_changes_nothing_and_check_mode_finds_drift(where):
    digest = make_bundle(where['bundle'], {'gpu1': {'pulled_text': 'one', 'pulled_dest': str(where['dest'])}})
    first = pull(where, digest)
    assert first['status'] == 'changed', first
    assert first['changed_tasks'] == [{'role': '', 'task': 'Write the node\'s file'}]
    assert where['dest'].read_text() == 'one yes ctl1\n'
    again = pull(where, digest)
    assert (again['status'], again['stats']['changed'], again['changed_tasks']) == ('ok', 0, []), again
    where['dest'].write_text('drifted\n')
    checked = pull(where, digest, check=True)
    assert checked['status'] == 'changed' and checked['check'] and where['dest'].read_text() == 'drifted\n'
    assert pull(where, digest)['status'] == 'changed' and where['dest'].read_text() == 'one yes ctl1\n'
    # The log of the last run is root's alone; the run directories are gone, the collections unpacked once.
    assert os.stat(where['log']).st_mode & 0o777 == 0o600
    assert sorted(name.split('-')[0] for name in os.listdir(where['state'])) == ['collections']


def test_a_failing_task_is_named(where):
    digest = make_bundle(where['bundle'], {'gpu1': {'pulled_text': 'one', 'pulled_dest': str(where['dest']),
                                                    'pulled_fail': True}})
    outcome = pull(where, digest)
    assert outcome['status'] == 'failed', outcome
    assert outcome['failed_task'] == {'role': '', 'task': 'Fail when told to', 'message': 'the node was told to fail'}
    assert outcome['message'] == "failed at 'Fail when told to': the node was told to fail"


def test_a_hung_run_is_stopped_at_its_timeout(where):
    digest = make_bundle(where['bundle'], {'gpu1': {'pulled_text': 'one', 'pulled_dest': str(where['dest']),
                                                    'pulled_sleep': 60}})
    outcome = pull(where, digest, timeout=8)
    assert outcome['status'] == 'timeout' and 'did not finish within 8 s' in outcome['message'], outcome
    assert outcome['seconds'] < 20


def test_a_digest_that_does_not_match_is_refused_before_anything_runs(where):
    digest = make_bundle(where['bundle'], {'gpu1': {'pulled_text': 'one', 'pulled_dest': str(where['dest'])}})
    outcome = pull(where, 'f' * 64)
    assert outcome['status'] == 'bundle' and 'the control host asked for ffffffffffff' in outcome['message']
    # cluster.json, then the collections, changed after the manifest was written.
    cluster_file = where['bundle'] / bundle.CLUSTER_FILE
    original = cluster_file.read_text()
    cluster_file.write_text(original.replace('10.0.0.1', '10.6.6.6'))
    outcome = pull(where, digest)
    assert outcome['status'] == 'bundle' and 'cluster.json has sha256' in outcome['message'], outcome
    cluster_file.write_text(original)
    with open(where['bundle'] / 'collections.tar.gz', 'ab') as handle:
        handle.write(b'\0')
    outcome = pull(where, digest)
    assert outcome['status'] == 'bundle' and 'collections.tar.gz has sha256' in outcome['message'], outcome
    assert not where['dest'].exists() and not os.path.exists(where['state'])


def test_a_node_file_of_another_bundle_or_readable_by_others_is_refused(where):
    digest = make_bundle(where['bundle'], {'gpu1': {'pulled_text': 'one', 'pulled_dest': str(where['dest'])}})
    node_file = where['bundle'] / bundle.node_file('gpu1')
    os.chmod(node_file, 0o644)
    outcome = pull(where, digest)
    assert outcome['status'] == 'bundle' and 'readable or writable by others (mode 0644)' in outcome['message']
    document = json.loads(node_file.read_text())
    node_file.write_text(json.dumps(dict(document, digest='0' * 64)))
    os.chmod(node_file, 0o600)
    outcome = pull(where, digest)
    assert outcome['status'] == 'bundle' and 'was written for bundle 000000000000' in outcome['message'], outcome
    outcome = pull(where, digest, node='gpu7')
    assert outcome['status'] == 'bundle' and 'cannot read' in outcome['message'] and 'nodes/gpu7.json' in outcome['message']


def test_a_bundle_another_user_can_write_is_refused(where):
    digest = make_bundle(where['bundle'], {'gpu1': {'pulled_text': 'one', 'pulled_dest': str(where['dest'])}})
    os.chmod(where['bundle'], 0o777)
    outcome = pull(where, digest)
    assert outcome['status'] == 'bundle' and 'writable by others (mode 0777)' in outcome['message']
    os.chmod(where['bundle'], 0o755)
    os.chown(where['bundle'] / bundle.MANIFEST_FILE, 65534, -1)
    outcome = pull(where, digest)
    assert outcome['status'] == 'bundle' and 'owned by uid 65534, not root' in outcome['message']


def test_a_node_without_the_ansible_environment_is_named(where, tmp_path):
    digest = make_bundle(where['bundle'], {'gpu1': {'pulled_text': 'one', 'pulled_dest': str(where['dest'])}},
                         ansible_playbook='/opt/llmforge/missing/bin/ansible-playbook')
    outcome = pull(where, digest)
    assert outcome['status'] == 'no-ansible'
    assert outcome['message'].startswith('/opt/llmforge/missing/bin/ansible-playbook is not there')


def test_an_archive_with_a_link_out_of_its_top_is_refused(where):
    digest = make_bundle(where['bundle'], {'gpu1': {'pulled_text': 'one', 'pulled_dest': str(where['dest'])}})
    archive_path = where['bundle'] / 'collections.tar.gz'
    with tarfile.open(archive_path, 'w:gz') as archive:
        info = tarfile.TarInfo('ansible_collections/evil')
        info.type, info.linkname = tarfile.SYMTYPE, '/etc'
        archive.addfile(info)
    manifest = json.loads((where['bundle'] / bundle.MANIFEST_FILE).read_text())
    manifest['collections_sha256'] = program._sha256(str(archive_path))
    (where['bundle'] / bundle.MANIFEST_FILE).write_text(json.dumps(manifest))
    node_file = where['bundle'] / bundle.node_file('gpu1')
    node_file.write_text(json.dumps(dict(json.loads(node_file.read_text()), digest=bundle.digest(manifest))))
    outcome = pull(where, bundle.digest(manifest))
    assert outcome['status'] == 'bundle', outcome
    assert "member 'ansible_collections/evil' is not a plain file or directory below the top" in outcome['message']
    assert not [name for name in os.listdir(where['state']) if not name.startswith('.')]


def test_the_printed_lines_are_read_back_by_the_control_host(where, capsys):
    digest = make_bundle(where['bundle'], {'gpu1': {'pulled_text': 'one', 'pulled_dest': str(where['dest'])}})
    outcome = pull(where, digest)
    text = '\n'.join(node_lines.lines(program.MARKER, 'gpu1', 'pull', outcome)) + '\nsrun: a message of its own\n'
    assert program.parse_output(text) == {'gpu1': json.loads(json.dumps(outcome))}


def test_the_installed_program_prints_its_lines_and_refuses_unusable_arguments(where, tmp_path_factory):
    from node_install import install, run_launcher
    installed = install('programs._pull_node', tmp_path_factory.mktemp('node') / 'python')
    digest = make_bundle(where['bundle'], {'gpu1': {'pulled_text': 'one', 'pulled_dest': str(where['dest'])}},
                         ansible_playbook='/opt/llmforge/missing/bin/ansible-playbook')
    done = run_launcher('programs._pull_node', installed, '--bundle', str(where['bundle']), '--digest', digest,
                        '--node', 'gpu1')
    assert done.returncode == 0, done.stderr
    outcome = program.parse_output(done.stdout)['gpu1']
    assert outcome['status'] == 'no-ansible' and outcome['digest'] == digest
    done = run_launcher('programs._pull_node', installed, '--bundle', 'relative/dir', '--digest', digest)
    assert done.returncode == 2 and '--bundle must be absolute' in done.stderr
