# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the validate role's DCGM stage: quarantine candidates, what the long diagnostic decides, the
reservation's scontrol call and the node's DCGM metrics (plugin_utils/_dcgm_quarantine.py holds the rules)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.plugin_utils._lazy_module_utils import module_utils, plugin_utils

dcgm = module_utils('_dcgm_diag')
drain = module_utils('_slurm_drain')
quarantine = plugin_utils('_dcgm_quarantine')
paths = plugin_utils('_validate_paths')

FAST_RESULT = '__validate_dcgm_fast'
LONG_RESULT = '__validate_dcgm_long'


def _registered(value, name):
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, dict) for item in value):
        raise AnsibleFilterError(f'{name}: expected registered loop results, got {type(value).__name__}')
    return value


def _fact(hostvars, host, variable):
    facts = hostvars[host] if host in hostvars else {}
    return facts.get(variable) if hasattr(facts, 'get') else None


def _read_states(states, hosts, hostvars):
    """The per-node results a `scontrol show node <name> -o` loop over `hosts` registers, from the registered result
    of one `scontrol show node --oneliner` (skipped or failed: no node is known to Slurm)."""
    if not isinstance(states, dict):
        raise AnsibleFilterError(f'dcgm_quarantine_plan: expected the registered scontrol result, got {type(states).__name__}')
    entries = [{'slurm_name': name, 'host': host} for host, name in paths.slurm_names(hostvars, hosts).items()]
    if states.get('skipped') or states.get('rc') != 0:
        return [{'skipped': True, 'item': host} for host in hosts]
    return [dict(read, item=read['item']['host']) for read in drain.read_states(entries, str(states.get('stdout') or ''))]


def dcgm_quarantine_plan(states, hostvars, fast_level, long_level, nodes=None, fast_results=None):
    """One entry per node of the registered `scontrol show node` loop (its item: the host) or, with `nodes`, of those
    hosts read from one registered `scontrol show node --oneliner`: its fast result (its own registered one, else
    `fast_results`' from the Slurm path), Slurm state, whether it is a quarantine candidate and its pending reason."""
    if nodes is not None:
        states = _read_states(states, list(nodes), hostvars)
    elsewhere = fast_results if isinstance(fast_results, dict) else {}
    results = _registered(states, 'dcgm_quarantine_plan')
    names = paths.slurm_names(hostvars, [result.get('item') for result in results])
    entries = []
    for result in results:
        host = result.get('item')
        fast = _fact(hostvars, host, FAST_RESULT)
        if fast is None or (isinstance(fast, dict) and fast.get('skipped')):
            fast = elsewhere.get(host, fast)
        entries.append({'host': host, 'slurm_name': names[host], 'fast': fast, 'state': result})
    try:
        return quarantine.quarantine_plan(entries, int(fast_level), int(long_level))
    except (quarantine.QuarantineError, dcgm.DcgmDiagError) as err:
        raise AnsibleFilterError(f'dcgm_quarantine_plan: {err}') from err


def dcgm_release(plan, states, hostvars, fast_level, long_level, reservation):
    """{decisions, results, cluster, release, keep}: what the long diagnostic decides for each candidate of the
    plan, the nodes' validator results for the report and metrics, and the report's cluster-level stage."""
    if not isinstance(plan, (list, tuple)) or not all(isinstance(item, dict) for item in plan):
        raise AnsibleFilterError(f'dcgm_release: expected the dcgm_quarantine_plan, got {type(plan).__name__}')
    by_name = {}
    for result in _registered(states, 'dcgm_release'):
        item = result.get('item')
        if isinstance(item, dict) and item.get('slurm_name'):
            by_name[item['slurm_name']] = result
    long_results = {entry['host']: _fact(hostvars, entry['host'], LONG_RESULT) for entry in plan}
    try:
        decisions = quarantine.release_plan(plan, long_results, by_name, int(long_level))
        return {
            'decisions': decisions,
            'results': quarantine.node_results(plan, decisions, reservation),
            'cluster': quarantine.cluster_stage(plan, decisions, reservation, int(fast_level), int(long_level)),
            'release': [item['slurm_name'] for item in decisions if item['slurm'] and item['release'] is True],
            'keep': [item['slurm_name'] for item in decisions if item['slurm'] and item['release'] is False],
        }
    except (quarantine.QuarantineError, dcgm.DcgmDiagError, KeyError) as err:
        raise AnsibleFilterError(f'dcgm_release: {err}') from err


def dcgm_reservation_command(result, name, add=None, remove=None):
    """The scontrol argv that makes reservation `name` hold its current nodes (the registered `scontrol show
    reservation <name> -o`) less `remove` plus `add`; [] when nothing changes."""
    if not isinstance(result, dict):
        raise AnsibleFilterError(f'dcgm_reservation_command: expected a registered result, got {type(result).__name__}')
    try:
        current = quarantine.reservation_nodes(result)
        return quarantine.reservation_command(name, current, quarantine.wanted_nodes(current, add or [], remove or []))
    except quarantine.QuarantineError as err:
        raise AnsibleFilterError(f'dcgm_reservation_command: {err}') from err


def dcgm_metrics(result):
    """llmforge_dcgm_* textfile metrics of one node's DCGM stage result ('' without one)."""
    if result is not None and not isinstance(result, dict):
        raise AnsibleFilterError(f'dcgm_metrics: expected the node\'s DCGM result, got {type(result).__name__}')
    try:
        return quarantine.metrics_text(result)
    except (KeyError, TypeError, ValueError) as err:
        raise AnsibleFilterError(f'dcgm_metrics: malformed DCGM result: {err}') from err


class FilterModule:
    """DCGM quarantine filters."""

    def filters(self):
        return {
            'dcgm_quarantine_plan': dcgm_quarantine_plan,
            'dcgm_release': dcgm_release,
            'dcgm_reservation_command': dcgm_reservation_command,
            'dcgm_metrics': dcgm_metrics,
        }
