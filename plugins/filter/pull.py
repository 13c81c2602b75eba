# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of site.yml's pull mode (the pull role): which GPU nodes converge themselves, the bundle they read, and
what their Slurm step said. The logic lives in plugin_utils/_pull_plan.py and module_utils/_pull_bundle.py; each
filter's documentation is beside this file."""

from __future__ import annotations

import hashlib
import importlib
import json
import os

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.plugin_utils._lazy_module_utils import module_utils, plugin_utils

_pull = plugin_utils('_pull_plan')
_networks = plugin_utils('_networks')
_paths = plugin_utils('_validate_paths')
_bundle = module_utils('_pull_bundle')

ROLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), 'roles')


def pull_plan(nodes, hostvars, scontrol, mode, min_nodes, batch=None):
    """Which GPU nodes pull (one Slurm step per rolling batch), which are pushed (_pull_plan.plan)."""
    nodes = list(nodes or [])
    try:
        return _pull.plan(nodes, _paths.slurm_names(hostvars, nodes), scontrol, str(mode), min_nodes, batch)
    except _pull.PlanError as err:
        raise AnsibleFilterError(f'pull_plan: {err}') from err


def _secret_options(roles):
    """{role: [options marked no_log]} from the roles' argument specs in this collection."""
    import yaml  # the control host's Ansible has it; imported where used, as the other lazy imports
    found = {}
    for role in sorted(os.listdir(ROLES_DIR)):
        path = os.path.join(ROLES_DIR, role, 'meta', 'argument_specs.yml')
        if not os.path.exists(path):
            continue
        with open(path, encoding='utf-8') as handle:
            specs = (yaml.safe_load(handle) or {}).get('argument_specs') or {}
        names = set()
        for entry in specs.values():
            for name, option in ((entry or {}).get('options') or {}).items():
                if isinstance(option, dict) and option.get('no_log'):
                    names.add(name)
        found[role] = names
    unknown = sorted(set(roles) - set(found))
    if unknown:
        raise AnsibleFilterError(f"pull_bundle_content: pull_node_roles names roles this collection does not have: "
                                 f"{', '.join(unknown)}")
    return found


def _plain(value):
    """A variable's value as plain JSON data (templated by the access that read it)."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def pull_bundle_content(plan, hostvars, groups, roles, cluster_group='cluster', networks=None, extra=None,
                        withheld_prefixes=('vault_',)):
    """What the bundle holds besides the collections: cluster.json's text and sha256, and each pulled node's file
    content; `extra` adds variables to every node's own file (the munge key read from the controller); variables
    whose names start with one of `withheld_prefixes` are never sent."""
    pulled = list((plan or {}).get('pull') or [])
    by_role = _secret_options(list(roles or []))
    secrets = set().union(*(by_role[role] for role in roles or [])) if roles else set()
    withheld = set().union(*by_role.values()) - secrets
    node_vars = {}
    for node in pulled:
        host = hostvars[node]
        variables = {}
        for name in list(host):
            if not _pull.sendable(name, withheld, [str(prefix) for prefix in withheld_prefixes or ()]):
                continue
            try:
                variables[name] = _plain(host[name])
            except Exception as err:  # noqa: BLE001 - any templating error, named with its variable
                raise AnsibleFilterError(f'pull_bundle_content: variable {name} of {node} cannot be resolved on the '
                                         f'control host (pull mode sends resolved values): {err}') from err
        variables.update(_plain(extra or {}))
        node_vars[node] = variables
    addresses = {}
    problems = []
    for host in list((groups or {}).get(cluster_group) or []):
        try:
            addresses[host] = _networks.host_address(hostvars[host], 'management', networks)
        except ValueError as err:
            problems.append(str(err))
    if problems:
        raise AnsibleFilterError('pull_bundle_content: pull mode needs every cluster host\'s management address '
                                 'without reaching the pulled nodes (set cluster_network_addresses.management): '
                                 + '; '.join(problems[:5]) + (f' (and {len(problems) - 5} more)' if len(problems) > 5 else ''))
    content = _pull.documents(node_vars, addresses, {name: list(members) for name, members in (groups or {}).items()},
                              secrets | set((extra or {}).keys()))
    cluster_text = json.dumps(content['cluster'], sort_keys=True, separators=(',', ':')) + '\n'
    return {'cluster_text': cluster_text, 'cluster_sha256': hashlib.sha256(cluster_text.encode('utf-8')).hexdigest(),
            'nodes': dict(content['nodes'])}


def pull_manifest(collections_sha256, cluster_sha256, playbook, ansible_playbook, collections='collections.tar.gz'):
    """The bundle's manifest with its digest (module_utils/_pull_bundle.py)."""
    manifest = {'collections': collections, 'collections_sha256': collections_sha256, 'cluster_sha256': cluster_sha256,
                'playbook': playbook, 'ansible_playbook': ansible_playbook}
    try:
        return _bundle.check_manifest(manifest)
    except _bundle.BundleError as err:
        raise AnsibleFilterError(f'pull_manifest: {err}') from err


def pull_pack_argv(names, dest):
    """tar's command line packing the installed collections `names` of the control host into `dest` (.tar.gz),
    reproducibly: sorted, owned by root, dated 0, without bytecode, compressed without a time stamp."""
    argv = ['tar', '--sort=name', '--mtime=@0', '--owner=0', '--group=0', '--numeric-owner', '--mode=go-w',
            '--exclude=__pycache__', '--exclude=*.pyc', '-I', 'gzip -n', '-cf', str(dest)]
    for name in names or []:
        parts = str(name).split('.')
        if len(parts) != 2 or not all(parts):
            raise AnsibleFilterError(f'pull_pack_argv: {name!r} in pull_collections is not namespace.collection')
        try:
            package = importlib.import_module(f'ansible_collections.{parts[0]}.{parts[1]}')
        except ImportError as err:
            raise AnsibleFilterError(f'pull_pack_argv: collection {name} of pull_collections is not installed on the '
                                     f'control host: {err}') from err
        directory = os.path.abspath(list(package.__path__)[0])
        root = os.path.dirname(os.path.dirname(os.path.dirname(directory)))
        argv += ['-C', root, os.path.relpath(directory, root)]
    return argv


def pull_node_files(content, digest):
    """{<node>.json: text} of every pulled node: the bundle's digest and the node's own variables."""
    return {f'{node}.json': json.dumps({'digest': digest, 'vars': variables}, sort_keys=True, separators=(',', ':')) + '\n'
            for node, variables in ((content or {}).get('nodes') or {}).items()}


def pull_step(batch, options, bundle_dir, digest, check=False):
    """srun's command line of a batch's step (_pull_plan.srun_argv)."""
    return _pull.srun_argv(batch, options or {}, str(bundle_dir), str(digest), bool(check))


def pull_outcomes(batch, run, hostvars):
    """{node: what its run came to} of a batch's step (_pull_plan.outcomes)."""
    hosts = list((batch or {}).get('hosts') or [])
    return _pull.outcomes(batch, _paths.slurm_names(hostvars, hosts), run)


def pull_report(plan, outcomes, hostvars):
    """{outcomes, drains, summary, slurm_names, not_run} of the whole run: what each node came to, the drain reasons
    of those that did not converge, the lines to print, and the nodes of batches not run after a failing one."""
    pulled = list((plan or {}).get('pull') or [])
    names = _paths.slurm_names(hostvars, pulled)
    outcomes = dict(outcomes or {})
    not_run = [node for node in pulled if node not in outcomes]
    summary = _pull.summary(outcomes, names)
    if not_run:
        summary['lines'].append(f"not run, an earlier batch failed: {', '.join(names[node] for node in not_run)}")
    return {'outcomes': outcomes, 'drains': _pull.drains(outcomes), 'summary': summary, 'slurm_names': names,
            'not_run': not_run}


class FilterModule:
    def filters(self):
        return {'pull_plan': pull_plan, 'pull_bundle_content': pull_bundle_content, 'pull_manifest': pull_manifest,
                'pull_pack_argv': pull_pack_argv, 'pull_node_files': pull_node_files, 'pull_step': pull_step,
                'pull_outcomes': pull_outcomes, 'pull_report': pull_report}
