# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every inventory value a role renders into a configuration file is refused by its preflight when hostile.

RENDERED is the walk: (role, variable, a usable value, where in it the hostile text goes, which hostile texts the
file cannot hold). One ansible-playbook run covers it: each host is one hostile variant (a newline, '#', a space,
...), and every variable whose file cannot hold that variant gets it on that host, all at once; the host
host-good keeps the usable values. The play includes each role's preflight (its first task files, before anything is
installed or written) with errors ignored, so every role's checks run on every host; each hostile variable must be
named by a failed check of its role on its host, and on host-good no check naming a walked variable fails.
"""

from __future__ import annotations

import json
import re
import sys
import typing as t

import pytest
import yaml

from preflight_play import ROOT, run_preflight

# The hostile texts, each made from a usable value.
VARIANTS: dict[str, t.Callable[[str], str]] = {
    'newline': lambda base: base + '\nProlog=/tmp/x',
    'trailing-newline': lambda base: base + '\n',
    'carriage-return': lambda base: base + '\rx',
    'nul': lambda base: base + '\0x',
    'space': lambda base: base + ' State=DOWN',
    'hash': lambda base: base + '#x',
    'equals': lambda base: base + '=x',
    'percent': lambda base: base + '%x',
    'leading-hash': lambda base: '#' + base,
    'leading-semicolon': lambda base: ';' + base,
}
# What each kind of place cannot hold.
LINE = frozenset({'newline', 'trailing-newline', 'carriage-return', 'nul'})
INI = LINE | {'leading-hash', 'leading-semicolon'}
FIELDS = LINE | {'space', 'hash'}
NAME = FIELDS | {'equals', 'percent'}
# A path step that makes the hostile text a mapping's key (the one key of the usable mapping) instead of a value.
KEY = object()


class Rendered(t.NamedTuple):
    role: str
    variable: str
    base: t.Any
    path: tuple[t.Any, ...]
    refuses: frozenset[str]


RENDERED = [
    # sssd.conf and its bind snippet
    Rendered('sssd', 'sssd_ldap_uri', ['ldaps://ldap1.example.org'], (0,), NAME),
    Rendered('sssd', 'sssd_ldap_base_dn', 'dc=example,dc=org', (), INI),
    Rendered('sssd', 'sssd_ldap_user_search_base', 'ou=people,dc=example,dc=org?subtree?', (), INI),
    Rendered('sssd', 'sssd_ldap_group_search_base', 'ou=groups,dc=example,dc=org', (), INI),
    Rendered('sssd', 'sssd_ldap_bind_dn', 'cn=sssd,dc=example,dc=org', (), INI),
    Rendered('sssd', 'sssd_ldap_bind_password', 'Hq4mZt8RvW2xLc6NpB9k', (), INI),
    Rendered('sssd', 'sssd_domain', 'ldap', (), NAME),
    Rendered('sssd', 'sssd_home_base', '/shared/home', (), LINE | {'space', 'percent'}),
    # slurm.conf, gres.conf, cgroup.conf, topology.conf, job_container.conf, slurmdbd.conf, MariaDB's settings
    Rendered('slurm_controller', 'slurm_common_cluster_name', 'llmforge', (), FIELDS),
    Rendered('slurm_controller', 'slurm_common_health_check_program', '/usr/local/sbin/llmforge-nodecheck', (), FIELDS),
    Rendered('slurm_controller', 'slurm_common_health_check_node_state', 'ANY,CYCLE', (), FIELDS),
    Rendered('slurm_controller', 'slurm_common_job_container_base_path', '/scratch/slurm-tmp', (), FIELDS),
    Rendered('slurm_controller', 'slurm_controller_state_save_location', '/var/lib/slurm/slurmctld', (), FIELDS),
    Rendered('slurm_controller', 'slurm_controller_db_name', 'slurm_acct_db', (), FIELDS),
    Rendered('slurm_controller', 'slurm_controller_db_user', 'slurm', (), FIELDS),
    Rendered('slurm_controller', 'slurm_controller_db_bind_address', '127.0.0.1', (), FIELDS),
    Rendered('slurm_controller', 'slurm_controller_db_innodb_buffer_pool_size', '1G', (), FIELDS),
    Rendered('slurm_controller', 'slurm_controller_config', {'DefMemPerGPU': '229376'}, ('DefMemPerGPU',), FIELDS),
    Rendered('slurm_controller', 'slurm_controller_cgroup_config', {'AllowedRAMSpace': 100}, (KEY,), NAME),
    Rendered('slurm_controller', 'slurm_controller_job_container_config', {'Dirs': '/tmp,/dev/shm'}, ('Dirs',), FIELDS),
    Rendered('slurm_controller', 'slurm_controller_dbd_config', {'ArchiveDir': '/var/spool/slurm'}, ('ArchiveDir',),
             FIELDS),
    Rendered('slurm_controller', 'slurm_controller_partitions',
             [{'name': 'gpu', 'default': True, 'options': {'MaxTime': 'INFINITE'}}], (0, 'options', 'MaxTime'), FIELDS),
    Rendered('slurm_controller', 'slurm_node_config', {'Features': ['h200', 'nvlink']}, ('Features', 1), FIELDS),
    Rendered('slurm_controller', 'slurm_controller_topology_switches',
             [{'name': 'leaf1', 'nodes': '{{ inventory_hostname }}'}], (0, 'name'), NAME),
    # slurmd's options, pam_slurm_adopt's PAM line, access.conf, sshd's drop-in
    Rendered('slurm_node', 'slurm_node_conf_server', 'ctl1:6817', (), FIELDS),
    Rendered('slurm_node', 'slurm_node_extra_options', ['-v'], (0,), FIELDS),
    Rendered('slurm_node', 'slurm_node_adopt_admin_group', 'hpcadmins', (), FIELDS),
    Rendered('slurm_node', 'slurm_node_adopt_options', ['action_no_jobs=deny'], (0,), FIELDS),
    # Empty (listen everywhere): an address must be one of the host's, which this machine's is not.
    Rendered('slurm_node', 'slurm_node_ssh_listen_address', '', (), FIELDS),
    # sackd's options
    Rendered('slurm_login', 'slurm_login_conf_server', 'ctl1:6817', (), FIELDS),
    Rendered('slurm_login', 'slurm_login_sackd_extra_options', ['-v'], (0,), FIELDS),
    # the nftables table
    Rendered('firewall', 'cluster_admin_cidrs', ['10.0.0.0/8'], (0,), NAME),
    Rendered('firewall', 'firewall_login_ssh_cidrs', ['::/0'], (0,), NAME),
    Rendered('firewall', 'firewall_ssh_extra_cidrs', ['fe80::1'], (0,), NAME),
    Rendered('firewall', 'firewall_extra_rules', ['tcp dport 988 ip saddr 10.20.0.0/16 accept'], (0,), LINE),
    # the exporters' and Prometheus' options and units, prometheus.yml, the alert rules
    Rendered('monitoring', 'monitoring_cluster_name', 'llmforge', (), FIELDS),
    Rendered('monitoring', 'monitoring_textfile_dir', '/var/lib/node_exporter/textfile', (), FIELDS),
    Rendered('monitoring', 'monitoring_bind_address', '10.0.0.5', (), FIELDS),
    Rendered('monitoring', 'monitoring_node_exporter_extra_args', ['--collector.systemd'], (0,), FIELDS),
    Rendered('monitoring', 'monitoring_dcgm_hostengine', 'localhost:5555', (), FIELDS),
    Rendered('monitoring', 'monitoring_ipmi_listen_address', '127.0.0.1:9290', (), FIELDS),
    Rendered('monitoring', 'monitoring_slurm_metrics_interval', '30s', (), FIELDS),
    Rendered('monitoring', 'monitoring_prometheus_retention', '30d', (), FIELDS),
    Rendered('monitoring', 'monitoring_prometheus_storage_path', '/var/lib/prometheus/metrics2', (), FIELDS),
    Rendered('monitoring', 'monitoring_listen_address', '10.0.0.5:9090', (), FIELDS),
    Rendered('monitoring', 'monitoring_scrape_interval', '15s', (), FIELDS),
    Rendered('monitoring', 'monitoring_evaluation_interval', '15s', (), FIELDS),
    Rendered('monitoring', 'monitoring_alert_for_override', '5m', (), FIELDS),
    Rendered('monitoring', 'monitoring_alert_mountpoint_regex', '/scratch|/checkpoints', (), FIELDS),
    Rendered('monitoring', 'monitoring_alertmanager_listen_address', '10.0.0.5:9093', (), FIELDS),
    # nccl.conf
    Rendered('nccl', 'nccl_tunables', {'NCCL_IB_TIMEOUT': '22'}, ('NCCL_IB_TIMEOUT',), LINE),
    Rendered('nccl', 'nccl_tunables_defaults', {'NCCL_DEBUG': 'WARN'}, (KEY,), NAME),
    # enroot.conf, oci.conf, pyxis' plugstack line
    Rendered('containers', 'containers_enroot_conf', {'ENROOT_SQUASH_OPTIONS': '-noI -noD'},
             ('ENROOT_SQUASH_OPTIONS',), LINE),
    Rendered('containers', 'containers_oci_conf', {'DebugFlags': 'Steps'}, (KEY,), NAME),
    Rendered('containers', 'containers_enroot_data_root', '/var/lib/enroot', (), FIELDS),
    Rendered('containers', 'containers_pyxis_plugin_path', '/usr/lib/x86_64-linux-gnu/slurm-wlm/spank_pyxis.so', (),
             FIELDS),
    Rendered('containers', 'containers_pyxis_options', ['runtime_path=/run/pyxis'], (0,), FIELDS),
    # fstab, LNet's settings, the pruning units
    Rendered('lustre_client', 'lustre_client_lnet_networks', ['o2ib0(ib0)'], (0,), FIELDS),
    Rendered('lustre_client', 'lustre_client_mounts',
             [{'fsname': 'lustre', 'mgs_nids': '10.20.0.1@o2ib0', 'mount_point': '/lustre'}], (0, 'mount_point'), FIELDS),
    Rendered('lustre_client', 'lustre_client_mount_options', ['_netdev', 'flock'], (1,), FIELDS),
    Rendered('lustre_client', 'lustre_client_prune_user', 'root', (), FIELDS),
    Rendered('lustre_client', 'lustre_client_prune_schedule', 'hourly', (), LINE),
    # the scratch filesystem's fstab line
    Rendered('local_scratch', 'local_scratch_mount_point', '/scratch', (), FIELDS),
    Rendered('local_scratch', 'local_scratch_mount_options', 'noatime,nofail', (), FIELDS),
    Rendered('local_scratch', 'local_scratch_slurm_tmp_dir', '/scratch/slurm', (), FIELDS),
    # opensm's files, the memlock limits, modules-load.d, the IPoIB network files
    Rendered('infiniband', 'infiniband_ipoib_networks', [{'interface': 'ib0', 'cidr': '10.20.0.0/16'}],
             (0, 'interface'), NAME),
    Rendered('infiniband', 'infiniband_ipoib_mode', 'datagram', (), FIELDS),
    Rendered('infiniband', 'infiniband_memlock_limit', 'unlimited', (), FIELDS),
    Rendered('infiniband', 'infiniband_kernel_modules', ['ib_umad'], (0,), FIELDS),
    Rendered('infiniband', 'infiniband_opensm_ports', ['0x0002c9030002fce9'], (0,), NAME),
    Rendered('infiniband', 'infiniband_opensm_options', {'sweep_interval': 10}, (KEY,), NAME),
    Rendered('infiniband', 'infiniband_roce_interfaces', ['eth2'], (0,), NAME),
    Rendered('infiniband', 'infiniband_roce_trust', 'dscp', (), FIELDS),
    Rendered('infiniband', 'infiniband_doca_version', '2.9.1', (), FIELDS),
]
ROLES = list(dict.fromkeys(entry.role for entry in RENDERED))
# What the preflights need besides the walked values: the host is its own controller, compute node and IPoIB group;
# the pruning and topology checks run.
SETTINGS = {'sssd_override_homedir': True, 'slurm_controller_topology_source': 'switches',
            'lustre_client_prune_enabled': True, 'lustre_client_prune_roots': ['/lustre/checkpoints'],
            'lustre_client_lnet_config': 'modprobe'}
GROUP_SETTINGS = ('slurm_common_controller_group', 'slurm_controller_dbd_group', 'infiniband_ipoib_group')
RENDERED_CHECK = 'rendered from'


def hostile(base: t.Any, path: tuple[t.Any, ...], variant: str) -> t.Any:
    """The usable value with the variant's text at `path` (a copy; a KEY step renames the mapping's only key)."""
    if not path:
        return VARIANTS[variant](base)
    step, rest = path[0], path[1:]
    if step is KEY:
        (key, value), = base.items()
        return {VARIANTS[variant](key): value}
    copy = list(base) if isinstance(base, list) else dict(base)
    copy[step] = hostile(base[step], rest, variant)
    return copy


def host_settings(variant: t.Optional[str]) -> dict[str, t.Any]:
    """The variables of the host of one variant (None: every value usable)."""
    values = {entry.variable: hostile(entry.base, entry.path, variant) if variant in entry.refuses else entry.base
              for entry in RENDERED}
    return {**SETTINGS, **values}


def host_of(variant: str) -> str:
    """The inventory host of a variant ('good': every value usable)."""
    return f'host-{variant}'


def _playbook() -> list[dict[str, t.Any]]:
    tasks: list[dict[str, t.Any]] = [
        {'name': 'Load OS names shared by the Slurm roles',
         'ansible.builtin.include_role': {'name': 'llmforge.cluster.slurm_common', 'tasks_from': 'os_vars',
                                          'public': True}}]
    for role in ROLES:
        tasks.append({'name': f'Run the preflight of {role}',
                      'ansible.builtin.include_role': {'name': f'llmforge.cluster.{role}', 'tasks_from': 'preflight',
                                                       'apply': {'ignore_errors': True}},
                      'ignore_errors': True})
    return [{'name': 'Check hostile values as the roles do', 'hosts': 'all', 'gather_facts': True,
             'gather_subset': ['!all', 'min'], 'tasks': tasks}]


def _inventory() -> dict[str, t.Any]:
    hosts, children = {}, {}
    for variant in ['good', *VARIANTS]:
        group = 'case_' + variant.replace('-', '_')
        settings = host_settings(None if variant == 'good' else variant)
        hosts[host_of(variant)] = {'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable,
                                   'slurm_common_node_groups': [group], **{name: group for name in GROUP_SETTINGS},
                                   **settings}
        children[group] = {'hosts': {host_of(variant): None}}
    return {'all': {'hosts': hosts, 'children': children}}


def _messages(result: t.Mapping[str, t.Any]) -> list[str]:
    """A task's messages, its loop items' included."""
    return [str(result.get('msg', ''))] + [str(item.get('msg', '')) for item in result.get('results') or []
                                           if isinstance(item, t.Mapping)]


@pytest.fixture(scope='module')
def failures(tmp_path_factory) -> dict[str, dict[str, list[tuple[str, str]]]]:
    """host -> role -> [(name of a failed task of that role's preflight, its messages joined)]."""
    results = run_preflight(tmp_path_factory.mktemp('rendered-values'), _inventory(), _playbook(), 'the roles',
                            timeout=600)
    output = json.loads(results[host_of('good')]['output'])
    found: dict[str, dict[str, list[tuple[str, str]]]] = {host: {role: [] for role in ROLES} for host in results}
    role = None
    for task in output['plays'][0]['tasks']:
        name = task['task']['name']
        if name.startswith('Run the preflight of '):
            role = name.rpartition(' ')[2]
        for host, result in task['hosts'].items():
            if role is not None and result.get('failed'):
                found[host][role].append((name.rpartition(' : ')[2], ' '.join(_messages(result))))
    return found


def _names(variable: str, text: str) -> bool:
    return re.search(rf'(?<![A-Za-z0-9_]){re.escape(variable)}(?![A-Za-z0-9_])', text) is not None


def test_the_walk_covers_every_role_that_renders_a_configuration_file():
    checked = {path.parts[-3] for path in (ROOT / 'roles').glob('*/tasks/preflight.yml')
               if RENDERED_CHECK in path.read_text(encoding='utf-8')}
    assert checked == set(ROLES)


@pytest.mark.parametrize('role', ROLES)
def test_the_preflight_checks_rendered_values_before_anything_else(role):
    """The check of rendered values is a preflight task, and the preflight runs before the role writes anything."""
    main = yaml.safe_load((ROOT / 'roles' / role / 'tasks' / 'main.yml').read_text(encoding='utf-8'))
    writers = [index for index, task in enumerate(main)
               if not any(key in task for key in ('ansible.builtin.debug', 'ansible.builtin.meta'))
               and task.get('ansible.builtin.import_tasks') not in ('os_vars.yml', 'preflight.yml')
               and (task.get('ansible.builtin.include_role') or {}).get('tasks_from') != 'os_vars']
    preflight = next(index for index, task in enumerate(main)
                     if task.get('ansible.builtin.import_tasks') == 'preflight.yml')
    assert preflight < min(writers, default=len(main)), f'{role}: a task comes before the preflight'


@pytest.mark.parametrize('role', ROLES)
def test_usable_values_pass_every_check_that_names_them(failures, role):
    """So a hostile host's refusals come from its hostile values (other checks may fail here, on other variables)."""
    variables = [entry.variable for entry in RENDERED if entry.role == role]
    refused = [(name, msg) for name, msg in failures[host_of('good')][role]
               if RENDERED_CHECK in name or any(_names(variable, msg) for variable in variables)]
    assert refused == []


CASES = [pytest.param(entry.role, entry.variable, variant, id=f'{entry.variable}-{variant}')
         for entry in RENDERED for variant in VARIANTS if variant in entry.refuses]


@pytest.mark.parametrize(('role', 'variable', 'variant'), CASES)
def test_a_hostile_value_is_refused_by_the_preflight_naming_the_variable(failures, role, variable, variant):
    messages = [msg for _name, msg in failures[host_of(variant)][role]]
    assert any(_names(variable, msg) for msg in messages), (variable, variant, messages)


@pytest.mark.parametrize('variant', sorted(VARIANTS))
def test_the_checks_of_rendered_values_name_the_host(failures, variant):
    rendered = [msg for role in ROLES for name, msg in failures[host_of(variant)][role] if RENDERED_CHECK in name]
    assert rendered and all(host_of(variant) in msg for msg in rendered), rendered
