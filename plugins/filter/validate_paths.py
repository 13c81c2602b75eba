# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters choosing how validate.yml's hardware stage reaches each GPU node (through Slurm or with Ansible) and
reading the Slurm path's results back (see plugin_utils/_validate_paths.py)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.plugin_utils._lazy_module_utils import module_utils, plugin_utils

_paths = plugin_utils('_validate_paths')
_report = plugin_utils('_report')
_quarantine = plugin_utils('_dcgm_quarantine')
_catalog = module_utils('_gpu_catalog')
_prometheus = module_utils('_prometheus')
_validators = module_utils('_validators')

# The variables of a node the stage's parameters are read from, and the role's own (validate_*) with the value the
# play has for them (a node's own setting, from the inventory, comes first).
ROLE_SETTINGS = ('validate_nvidia_smi', 'validate_sysfs_root', 'validate_kernel_faults_source', 'monitoring_textfile_dir')


def _facts(hostvars, host):
    facts = hostvars[host] if host in hostvars else {}
    return facts if hasattr(facts, 'get') else {}


def _params(facts, defaults):
    def setting(name):
        value = facts.get(name)
        return defaults.get(name) if value is None else value
    nvidia_smi, sysfs_root = setting('validate_nvidia_smi'), setting('validate_sysfs_root')
    params = {
        'gpu_topology': {'profile': facts.get('gpu_profile') or None, 'expected': facts.get('gpu_expected') or {},
                         'nvidia_smi_path': nvidia_smi},
        'rdma_links': {'sysfs_root': sysfs_root, 'expected': facts.get('rdma_expected') or {}},
        'kernel_faults': {'source': setting('validate_kernel_faults_source'), 'nvidia_smi_path': nvidia_smi,
                          'sysfs_root': sysfs_root},
    }
    if defaults.get('validate_dcgm') is True:
        # The DCGM stage's fast tier in the same step, with the options dcgm.yml gives the module.
        params['dcgm_diag'] = {'level': int(setting('validate_dcgm_fast_level')),
                               'timeout': int(setting('validate_dcgm_fast_timeout')),
                               'dcgmi_path': setting('validate_dcgm_dcgmi')}
    return params


def validate_hardware_plan(nodes, hostvars, scontrol, mode, options, defaults):
    """The hardware stage's plan for `nodes`: which go through Slurm (and the srun steps), which with Ansible,
    which are busy or down (see _validate_paths.plan)."""
    nodes = list(nodes or [])
    missing = [name for name in ROLE_SETTINGS if name not in (defaults or {})]
    if missing:
        raise AnsibleFilterError(f"validate_hardware_plan: defaults must give {', '.join(missing)}")
    params, gpus, textfile_dirs = {}, {}, {}
    options = dict(options or {})
    try:
        for host in nodes:
            facts = _facts(hostvars, host)
            params[host] = _params(facts, defaults)
            textfile_dirs[host] = str(facts.get('monitoring_textfile_dir') or defaults['monitoring_textfile_dir'])
            gpus[host] = int(_catalog.node_gpus(str(host), facts)['gpu_count'] or 0) if facts else 0
            if 'dcgm_diag' in params[host]:
                # The step's time covers the fast DCGM diagnostic's own limit and the three validators' (30 s each).
                needed = -(-(params[host]['dcgm_diag']['timeout'] + 90) // 60)
                options['time_minutes'] = max(int(options.get('time_minutes') or 5), needed)
        return _paths.plan(nodes, _paths.slurm_names(hostvars, nodes), params, gpus, scontrol, str(mode), options,
                           textfile_dirs)
    except (_paths.PlanError, ValueError) as err:
        raise AnsibleFilterError(f'validate_hardware_plan: {err}') from err


def validate_slurm_results(plan, runs, hostvars):
    """{node: {validator: result}} of the nodes the plan did not give to Ansible: the Slurm steps' results (their
    registered loop results, in plan order) and the busy and down nodes' skipped ones."""
    validators = list(_report.REGISTERED_VALIDATORS)
    steps = (plan or {}).get('steps') or []
    hosts = [host for step in steps for host in step['hosts']]
    try:
        results = _paths.node_results(plan, list(runs or []), _paths.slurm_names(hostvars, hosts), validators)
    except _paths.PlanError as err:
        raise AnsibleFilterError(f'validate_slurm_results: {err}') from err
    results.update(_paths.not_validated(plan, validators))
    return results


def validate_slurm_dcgm(plan, runs, hostvars):
    """{node: dcgm_diag result} of the fast DCGM diagnostic the Slurm steps ran (validate_dcgm): what the dcgm.yml
    task registers on a node of the Ansible path. Empty when the steps did not run it."""
    ran = {host for step in (plan or {}).get('steps') or [] if 'dcgm_diag' in (step.get('validators') or [])
           for host in step['hosts']}
    if not ran:
        return {}
    hosts = [host for step in (plan or {}).get('steps') or [] for host in step['hosts']]
    try:
        results = _paths.node_results(plan, list(runs or []), _paths.slurm_names(hostvars, hosts), ['dcgm_diag'])
    except _paths.PlanError as err:
        raise AnsibleFilterError(f'validate_slurm_dcgm: {err}') from err
    found = {}
    for host, result in results.items():
        if host in ran:
            result = result['dcgm_diag']
            # A node that printed nothing is not reached, as an unreachable node on the Ansible path (its hardware
            # results say it failed); a diagnostic that could not run has its `error` verdict.
            unreached = result.get('failed') and 'verdict' not in result
            found[host] = {'unreachable': True, 'msg': result['msg']} if unreached else result
    return found


def validate_metrics_plan(plan, scontrol, hostvars):
    """The metrics steps of the Slurm path's nodes still idle, and the nodes whose metrics Ansible writes (the
    hardware stage's Ansible nodes and the Slurm path's nodes a stage drained or a job took meanwhile)."""
    hosts = [host for step in (plan or {}).get('steps') or [] for host in step['hosts']]
    return _paths.metrics_plan(plan or {}, scontrol, _paths.slurm_names(hostvars, hosts))


def validate_metrics_payload(hosts, hostvars, verdicts, hardware):
    """The standard input of the Slurm path's metrics step: each host's llmforge_validate.prom text (its hardware
    results from `hardware`, the stages' `verdicts`, DCGM's metrics), each distinct text once."""
    hosts = list(hosts or [])
    verdicts = verdicts or {}
    try:
        results = _report.collect_results({host: (hardware or {})[host] for host in hosts}, verdicts)
        texts = {host: _prometheus.validators_text(results[host], _validators.families)
                 + _quarantine.metrics_text(verdicts.get('dcgm', {}).get(host)) for host in hosts}
    except KeyError as err:
        raise AnsibleFilterError(f'validate_metrics_payload: no hardware results for {err}') from err
    except (_report.ReportError, _prometheus.PrometheusError, TypeError, ValueError) as err:
        raise AnsibleFilterError(f'validate_metrics_payload: {err}') from err
    return _paths.metrics_payload(texts, _paths.slurm_names(hostvars, hosts))


class FilterModule:
    """Hardware stage path filters."""

    def filters(self):
        return {
            'validate_hardware_plan': validate_hardware_plan,
            'validate_slurm_results': validate_slurm_results,
            'validate_slurm_dcgm': validate_slurm_dcgm,
            'validate_metrics_payload': validate_metrics_payload,
            'validate_metrics_plan': validate_metrics_plan,
        }
