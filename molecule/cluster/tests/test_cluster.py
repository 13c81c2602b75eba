# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Behaviour of the converged 3-container cluster: what an operator checks after bring-up."""

from __future__ import annotations

import json
import os
import re

import pytest

from conftest import ALL_HOSTS, CONTROLLER, FIRST, NODES
from scenario_helpers import recaps, run_playbook, said, wait_for

# Where the pull role keeps the outcome of each node's run on the control host (pull_local_dir).
PULL_LAST_RUN = os.path.expanduser('~/.cache/llmforge/pull/last-run.json')
# The control host's tasks that write a bundle on the first controller: changed when the bundle is new.
PULL_BUNDLE_TASKS = {f'llmforge.cluster.pull : {name}' for name in (
    "Make the control host's packing directory", "Make the bundle's directories on the first controller",
    'Copy the collections into the bundle', "Write the bundle's cluster.json and manifest", "Write each node's own variables",
    'Remove all but the newest bundles')}


def job_state(ctl, job_id):
    out = ctl.check_output(f'sacct -X -n -P -j {job_id} -o State')
    return out.strip().splitlines()[0] if out.strip() else ''


@pytest.mark.parametrize('source', ALL_HOSTS)
def test_munge_credentials_decode_on_every_other_node(hosts, source):
    credential = hosts[source].check_output('munge -n')
    for target in ALL_HOSTS:
        if target == source:
            continue
        result = hosts[target].run(f"echo '{credential}' | unmunge")
        assert result.rc == 0, f'{target} could not decode a credential from {source}: {result.stderr}'
        assert 'STATUS:          Success' in result.stdout


def test_munge_key_is_one_private_1024_byte_key(hosts):
    digests = set()
    for name, host in hosts.items():
        key = host.file('/etc/munge/munge.key')
        assert key.user == 'munge' and key.mode == 0o400, name
        assert key.size == 1024, name
        digests.add(host.check_output('sha256sum /etc/munge/munge.key').split()[0])
    assert len(digests) == 1, 'munge keys differ between nodes'


def test_nodes_fetch_their_configuration_from_the_controller(hosts):
    for name in NODES:
        node = hosts[name]
        assert not node.file('/etc/slurm/slurm.conf').exists, f'{name} has a local slurm.conf (not configless)'
        assert node.file('/run/slurm/conf/slurm.conf').exists
        assert f'--conf-server {CONTROLLER}:6817' in node.file('/etc/default/slurmd').content_string


def test_accounting_secrets_are_private(ctl):
    dbd_conf = ctl.file('/etc/slurm/slurmdbd.conf')
    assert dbd_conf.user == 'slurm' and dbd_conf.mode == 0o600
    assert 'StoragePass=' in dbd_conf.content_string
    assert 'StoragePass' not in ctl.file('/etc/slurm/slurm.conf').content_string


@pytest.mark.parametrize('name', ALL_HOSTS)
def test_the_later_plays_packages_came_with_the_slurm_packages(hosts, name):
    # On a first converge slurm_hosts.yml plans the packages of the roles the later plays run on the host (SSSD, the
    # accounting database, crun, the node exporter) and installs them in its Slurm transaction: one apt run per host,
    # not one per role.
    host = hosts[name]
    history = host.file('/var/log/apt/history.log').content_string
    slurm = [line for line in history.splitlines() if re.match(r'Install: .*\bslurm-client:', line)]
    assert len(slurm) == 1, f'slurm-client installed in {len(slurm)} apt transactions on {name}'
    planned = [package for package in ('sssd-ldap', 'libpam-sss', 'prometheus-node-exporter', 'crun', 'slurmdbd',
                                       'mariadb-server') if host.package(package).is_installed]
    assert 'prometheus-node-exporter' in planned, f'no node exporter on {name}'
    late = [package for package in planned if not re.search(rf'\b{re.escape(package)}:', slurm[0])]
    assert not late, f'{late} came in another apt transaction than the Slurm packages on {name}'


def test_sinfo_lists_both_nodes_idle_with_eight_gpus(ctl):
    expected = {f'{node} idle gpu:h200:8' for node in NODES}

    def nodes():
        return set(ctl.check_output('sinfo -N -h -o "%N %T %G"').splitlines())
    assert wait_for(lambda: nodes() == expected), nodes()


def test_two_node_job_runs_on_both_nodes(user):
    out = user.check_output('timeout 120 srun -N2 bash -c "echo \\$(hostname) \\$(id -un)"')
    assert sorted(out.splitlines()) == sorted(f'{node} {user.name}' for node in NODES)


def test_gpu_request_sets_cuda_visible_devices(user):
    out = user.check_output('timeout 120 srun -N1 --gres=gpu:2 printenv CUDA_VISIBLE_DEVICES')
    devices = out.strip().split(',')
    assert len(devices) == 2 and all(d.isdigit() for d in devices), out


def test_batch_job_is_accounted_completed(ctl, user):
    out = user.check_output('sbatch --parsable -N1 --gres=gpu:1 -o /dev/null --wrap "hostname"')
    job_id = out.strip().split(';')[0]
    assert wait_for(lambda: job_state(ctl, job_id) == 'COMPLETED'), job_state(ctl, job_id)
    tres = ctl.check_output(f'sacct -X -n -P -j {job_id} -o AllocTRES,User')
    assert 'gres/gpu=1' in tres and tres.endswith(f'|{user.name}'), tres


def test_running_job_survives_slurmd_restart(hosts, ctl, user):
    out = user.check_output(f'sbatch --parsable -w {FIRST} -o /dev/null --wrap "sleep 15"')
    job_id = out.strip().split(';')[0]
    assert wait_for(lambda: job_state(ctl, job_id) == 'RUNNING'), job_state(ctl, job_id)
    hosts[FIRST].check_output('systemctl restart slurmd')
    assert hosts[FIRST].service('slurmd').is_running
    assert wait_for(lambda: job_state(ctl, job_id) == 'COMPLETED', timeout=120), job_state(ctl, job_id)


def test_gres_conf_lists_explicit_devices_without_a_driver(ctl):
    gres = ctl.file('/etc/slurm/gres.conf').content_string
    # The node names as Slurm itself compresses them (gpu[1-2]).
    nodes = ctl.check_output(f"scontrol show hostlist {','.join(NODES)}").strip()
    assert re.search(rf'^NodeName={re.escape(nodes)} Name=gpu Type=h200 File=/dev/nvidia\[0-7\]$', gres, re.M), gres


def changed_tasks(result, host):
    """The names of the tasks and handlers a play reported changed on `host`."""
    blocks = re.split(r'^(?:TASK|RUNNING HANDLER) \[', result.stdout, flags=re.M)[1:]
    return [block.split(']', 1)[0] for block in blocks if f'changed: [{host}]' in block]


def test_rerun_finds_drift_in_check_mode_then_restores_it_and_changes_nothing_else(hosts):
    """The idempotence proof of the whole site, with drift to find on one node: the health check's code, a package, an
    element added by hand to the firewall's loaded table, the munge key's owner and mode, munge disabled at boot, and
    an OCI bundle whose config.json was emptied and whose rootfs records another tarball.

    `--check --diff` reports exactly those and touches nothing (molecule/cluster_debian12); the real re-run restores
    them (molecule/cluster). Every other task on every host reports ok, which is what a separate idempotence run would
    show (neither scenario has one). Each site run costs minutes on this machine, so each scenario makes one of them
    (LLMFORGE_DRIFT_RUN=check or real): check mode runs the same tasks on every OS and decides what each would
    change; the real run proves they do it, with directory users and a login node. After the check run the test puts
    the drift back by hand, as it was before.
    """
    drifted = NODES[-1]
    node = hosts[drifted]
    code = ('/usr/local/lib/llmforge/python/ansible_collections/llmforge/cluster/plugins/module_utils/'
            'programs/_nodecheck.py')
    original = node.check_output(f'sha256sum {code}').split()[0]
    node.check_output(f"echo 'raise SystemExit(0)  # tampered' >> {code}")
    tampered = node.check_output(f'sha256sum {code}').split()[0]
    # python3-venv: the training environment's package on every GPU node of both cluster scenarios, needed by
    # nothing else (Debian 12's scenario has no directory users, so no ldap-utils). training_env puts it back.
    node.check_output('apt-get remove -y -q python3-venv')
    assert not node.package('python3-venv').is_installed
    expected = {'Install the Python code of programs._nodecheck', 'Install python3-venv'}
    # A hand edit inside the firewall's table: an address let in to SSH. The file on disk is unchanged, so only the
    # comparison of the loaded table with what the unit loaded finds it (and the handler reloads the file).
    intruder = '192.0.2.99'
    node.check_output(f'nft add element inet llmforge ssh_v4 {{ {intruder} }}')
    assert intruder in node.check_output('nft list set inet llmforge ssh_v4')
    expected |= {'Compare the loaded table with the ruleset the unit loaded', 'Load the host firewall'}
    # The munge key given to root and made world-readable: the key's step gives it back to munge, 0400, then munge
    # restarts and is checked to answer.
    key = '/etc/munge/munge.key'
    key_digest = node.check_output(f'sha256sum {key}').split()[0]
    node.check_output(f'chown root:root {key} && chmod 0644 {key}')
    expected |= {'Install the cluster munge key, readable by munge alone', 'Restart munge with the new key',
                 'Start munge and enable it at boot'}
    # munge disabled at boot by hand (left running: the node stays in the cluster meanwhile). The step after the key
    # enables it again.
    node.check_output('systemctl disable munge')
    assert not node.service('munge').is_enabled
    # The bundle "test": config.json emptied, and the checksum recorded at unpack no longer the tarball's, as after a
    # failed unpack. The rootfs is unpacked again (check mode: the unpack step reports what it would do; nothing is
    # unpacked nor are mount points made in a rootfs that check mode did not remove).
    bundle = '/var/lib/llmforge/containers/test'
    config = node.check_output(f'sha256sum {bundle}/config.json').split()[0]
    recorded = node.file(f'{bundle}/.rootfs-checksum').content_string
    node.check_output(f'cp -p {bundle}/config.json {bundle}/.rootfs-checksum /root/')
    node.check_output(f': > {bundle}/config.json && echo 0000 > {bundle}/.rootfs-checksum')
    expected |= {'Write the OCI configuration of bundle test',
                 'Unpack the rootfs and create its mount points for bundle test'}
    mode = os.environ.get('LLMFORGE_DRIFT_RUN', 'real')
    assert mode in ('check', 'real'), f'LLMFORGE_DRIFT_RUN={mode!r}: check or real'
    # molecule/cluster makes the re-run in pull mode: the GPU nodes run their plays themselves through Slurm (the pull
    # role), the other hosts are pushed. What a node changed is what it printed (the control host's last-run.json).
    converge = os.environ.get('LLMFORGE_DRIFT_CONVERGE', 'push')
    assert converge in ('push', 'pull'), f'LLMFORGE_DRIFT_CONVERGE={converge!r}: push or pull'

    for args in [('--check', '--diff')] if mode == 'check' else [()]:
        result = run_playbook(*args, *(('-e', 'pull_mode=pull') if converge == 'pull' else ()))
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        recap = recaps(result)
        # localhost runs converge.yml's check of which collection copy is used (and pull mode's plan and run).
        assert set(recap) == set(ALL_HOSTS) | {'localhost'}, result.stdout[-3000:]
        wanted = expected
        if converge == 'pull':
            with open(PULL_LAST_RUN, encoding='utf-8') as handle:
                outcomes = json.load(handle)['outcomes']
            assert sorted(outcomes) == sorted(NODES), outcomes
            changed = [f"{item['role']} : {item['task']}" for item in outcomes[drifted]['changed_tasks']]
            drifted_changed = outcomes[drifted]['stats']['changed']
            assert all(outcome['status'] == 'ok' and outcome['stats']['changed'] == 0
                       for name, outcome in outcomes.items() if name != drifted), outcomes
            # On the control host: the bundle, written by the first controller (new collections or cluster.json
            # give a new one), and the report of what the nodes changed.
            assert set(changed_tasks(result, 'localhost')) <= PULL_BUNDLE_TASKS | {
                'llmforge.cluster.pull : Say what the nodes changed'}, changed_tasks(result, 'localhost')
            assert f'{drifted} changed: ' in said(result) and 'pulled: 1 changed, 1 ok' in said(result)
            pushed = {host: counters for host, counters in recap.items() if host not in set(NODES) | {'localhost'}}
        else:
            changed = changed_tasks(result, drifted)
            drifted_changed = recap[drifted]['changed']
            pushed = {host: counters for host, counters in recap.items() if host != drifted}
        # python3-venv: slurm_hosts.yml plans the later roles' packages into its transaction only on a host converged
        # for the first time, so on a re-run the training environment's own install puts it back, once in each mode.
        assert sum(task.endswith(': Install python3-venv') for task in changed) == 1, (args, changed)
        assert drifted_changed == len(wanted), (args, changed, result.stdout[-5000:])
        assert all(counters['changed'] == 0 for host, counters in pushed.items()), (args, recap)
        assert all(any(name in task for task in changed) for name in wanted), (args, changed)
        if args:
            # Check mode showed the drift and left it in place.
            assert '# tampered' in result.stdout, result.stdout[-5000:]
            assert node.check_output(f'sha256sum {code}').split()[0] == tampered
            assert not node.package('python3-venv').is_installed
            assert intruder in node.check_output('nft list set inet llmforge ssh_v4')
            assert node.file(key).user == 'root' and node.file(key).mode == 0o644
            assert not node.service('munge').is_enabled
            assert node.file(f'{bundle}/config.json').size == 0
    if mode == 'check':
        # The drift put back by hand: the appended line, the package, the element, the key's owner and mode, munge
        # at boot (it kept running on its key), the bundle's two files.
        node.check_output(f"sed -i '$d' {code}")
        node.check_output('DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv')
        node.check_output(f'nft delete element inet llmforge ssh_v4 {{ {intruder} }}')
        node.check_output(f'chown munge:munge {key} && chmod 0400 {key} && systemctl enable munge')
        node.check_output(f'cp -p /root/config.json /root/.rootfs-checksum {bundle}/')
    node.check_output('rm -f /root/config.json /root/.rootfs-checksum')
    assert intruder not in node.check_output('nft list set inet llmforge ssh_v4')
    assert node.check_output(f'sha256sum {code}').split()[0] == original
    assert node.package('python3-venv').is_installed
    assert node.file(key).user == 'munge' and node.file(key).mode == 0o400
    assert node.check_output(f'sha256sum {key}').split()[0] == key_digest
    assert node.check_output('munge -n | unmunge').count('STATUS:          Success') == 1
    assert node.service('munge').is_enabled and node.service('munge').is_running
    assert node.check_output(f'sha256sum {bundle}/config.json').split()[0] == config
    assert node.file(f'{bundle}/.rootfs-checksum').content_string == recorded
    assert node.file(f'{bundle}/rootfs/usr/bin/busybox').exists


@pytest.mark.parametrize('name', NODES)
def test_gpu_stack_is_installed_held_and_configured(hosts, name):
    node = hosts[name]
    for package in ('nvidia-smi', 'libnvidia-ml1'):
        assert node.package(package).is_installed, package
    held = node.check_output('apt-mark showhold').split()
    assert 'nvidia-smi' in held
    if node.system_info.codename == 'bookworm':
        # Debian 12 packages no NCCL: the nccl role unpacks NVIDIA's wheel under /opt/nccl/<version> for the linker.
        linker = node.check_output('ldconfig -p')
        assert re.search(r'libnccl\.so\.2 .*=> /opt/nccl/[^/]+/nvidia/nccl/lib/libnccl\.so\.2$', linker, re.M), linker
    else:
        assert node.package('libnccl2').is_installed and 'libnccl2' in held
    assert 'blacklist nouveau' in node.file('/etc/modprobe.d/blacklist-nouveau.conf').content_string
    nccl_conf = node.file('/etc/nccl.conf').content_string
    assert 'NCCL_TOPO_FILE' not in nccl_conf and 'NCCL_SOCKET_IFNAME==eth0' in nccl_conf


def test_slurm_collector_exports_node_states(hosts, ctl):
    """The monitoring role's timer on the controller writes Slurm's node states for node_exporter."""
    path = '/var/lib/node_exporter/textfile/slurm.prom'
    assert wait_for(lambda: ctl.file(path).exists, timeout=90)
    metrics = ctl.file(path).content_string
    assert 'llmforge_slurm_up 1' in metrics
    for node in NODES:
        assert re.search(rf'^llmforge_slurm_node_state\{{[^}}]*node="{node}"[^}}]*\}} 1$', metrics, re.M), metrics
    # node_exporter listens on the management address only (its --web.listen-address).
    listen = re.search(r'--web\.listen-address=(\S+)', ctl.file('/etc/default/prometheus-node-exporter').content_string)
    exported = ctl.check_output(
        'python3 -c "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())" %s',
        f'http://{listen.group(1)}/metrics')
    assert 'llmforge_slurm_up 1' in exported


def test_topology_conf_comes_from_the_fabric(ctl):
    """The simulated fabric puts gpu1 and gpu2 under leaf01, below spine01; its third host is no node here.

    (cluster_debian12 writes the same tree out in slurm_controller_topology_switches: the fabric names gpu1, gpu2.)
    """
    topology = ctl.file('/etc/slurm/topology.conf').content_string
    nodes = ctl.check_output(f"scontrol show hostlist {','.join(NODES)}").strip()
    assert re.search(rf'^SwitchName=leaf01 Nodes={re.escape(nodes)}$', topology, re.M), topology
    assert re.search(r'^SwitchName=spine01 Switches=leaf01$', topology, re.M), topology
    assert 'gpu3' not in topology, 'a fabric host that is no compute node reached topology.conf'
    assert 'TopologyPlugin=topology/tree' in ctl.file('/etc/slurm/slurm.conf').content_string
    shown = ctl.check_output('scontrol show topology')
    assert re.search(rf'SwitchName=leaf01 .*Nodes={re.escape(nodes)}', shown), shown
    assert re.search(r'SwitchName=spine01 .*Switches=leaf01', shown), shown


def test_switches_job_lands_under_one_leaf(ctl):
    out = ctl.check_output('sbatch --parsable -N2 --switches=1@00:01:00 -o /dev/null --wrap "hostname"')
    job_id = out.strip().split(';')[0]
    assert wait_for(lambda: job_state(ctl, job_id) == 'COMPLETED'), job_state(ctl, job_id)
    node_list = ctl.check_output(f'sacct -X -n -P -j {job_id} -o NodeList').strip()
    placed = set(ctl.check_output(f'scontrol show hostnames {node_list}').split())
    assert placed == set(NODES), node_list
    # The whole tree, then leaf01's line: Slurm 22.05 and 24.11 agree on this form.
    shown = ctl.check_output('scontrol show topology')
    leaf = re.search(r'^SwitchName=leaf01 .*?Nodes=(\S+)', shown, re.M)
    assert leaf, shown
    leaf_nodes = leaf.group(1)
    assert placed <= set(ctl.check_output(f'scontrol show hostnames {leaf_nodes}').split()), shown
