# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pull mode's bundle: what the control host writes for one converge and what every node checks before using it.

Standard library only, no Ansible import; read by the control host's pull filters and by
llmforge-pull-node on the nodes. A bundle is a directory on storage every node reads:

    <bundle>/bundle.json          the manifest (MANIFEST_KEYS), root's, not writable by others
    <bundle>/<collections>        a .tar.gz of the collections the plays use, its sha256 in the manifest
    <bundle>/cluster.json         what every node's plays read and no secret: {vars, hosts, groups} (CLUSTER_KEYS),
                                  its sha256 in the manifest
    <bundle>/nodes/<node>.json    {digest, vars}: the node's own variables, its secrets among them; root's, 0600

A node's inventory is composed from the two (`inventory`): cluster.json's `vars` for every host (the variables the
pulled nodes share), each host of `hosts` with its variables (the others' addresses), the groups, and the node with
its own variables over the shared ones. The digest names the bundle: sha256 of the manifest's keys, the two
sha256s among them, so a node given the digest on its command line uses exactly what the control host built, and
each node's file repeats the digest it was written for.
"""

from __future__ import annotations

import hashlib
import json
import re
import typing as t

MANIFEST_FILE = 'bundle.json'
CLUSTER_FILE = 'cluster.json'
NODES_DIR = 'nodes'
# What the digest covers: the collections' and cluster.json's checksums, the playbook the nodes run and the Ansible
# they run it with.
MANIFEST_KEYS = ('collections', 'collections_sha256', 'cluster_sha256', 'playbook', 'ansible_playbook')
CLUSTER_KEYS = ('vars', 'hosts', 'groups')
_HEX64 = re.compile(r'^[0-9a-f]{64}$')
_FILE_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$')
_NODE_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$')
_PLAYBOOK = re.compile(r'^[a-z0-9_]+\.[a-z0-9_]+\.[a-z0-9_]+$')

# What a node's run came to, worst first: the control host drains the nodes of every status but ok and changed.
STATUSES = ('bundle', 'no-ansible', 'timeout', 'failed', 'changed', 'ok')


class BundleError(ValueError):
    """The manifest or a node's file is not what a bundle holds; the message names the field."""


def digest(manifest: t.Mapping[str, t.Any]) -> str:
    """The bundle's digest: sha256 of the manifest's MANIFEST_KEYS as sorted, compact JSON."""
    text = json.dumps({key: manifest.get(key) for key in MANIFEST_KEYS}, sort_keys=True, separators=(',', ':'))
    return hashlib.sha256(text.encode('utf-8')).hexdigest()


def check_manifest(manifest: t.Any) -> dict[str, t.Any]:
    """The manifest with its digest added, or BundleError naming the first unusable field."""
    if not isinstance(manifest, dict):
        raise BundleError(f'{MANIFEST_FILE} must hold an object, got {type(manifest).__name__}')
    for key in MANIFEST_KEYS:
        if not isinstance(manifest.get(key), str) or not manifest[key]:
            raise BundleError(f'{MANIFEST_FILE}: {key} must be a non-empty string')
    if not _FILE_NAME.match(manifest['collections']):
        raise BundleError(f"{MANIFEST_FILE}: collections must be a file name in the bundle, got {manifest['collections']!r}")
    for key in ('collections_sha256', 'cluster_sha256'):
        if not _HEX64.match(manifest[key]):
            raise BundleError(f'{MANIFEST_FILE}: {key} must be 64 lowercase hex digits')
    if not _PLAYBOOK.match(manifest['playbook']):
        raise BundleError(f"{MANIFEST_FILE}: playbook must be a collection's playbook (namespace.collection.name), "
                          f"got {manifest['playbook']!r}")
    if not manifest['ansible_playbook'].startswith('/'):
        raise BundleError(f"{MANIFEST_FILE}: ansible_playbook must be an absolute path, got {manifest['ansible_playbook']!r}")
    return dict(manifest, digest=digest(manifest))


def node_file(node: str) -> str:
    """The node's file, relative to the bundle; BundleError for a name that cannot be one."""
    if not isinstance(node, str) or not _NODE_NAME.match(node):
        raise BundleError(f'node name {node!r} cannot name a file in the bundle')
    return f'{NODES_DIR}/{node}.json'


def check_cluster(document: t.Any) -> dict[str, t.Any]:
    """cluster.json's {vars, hosts, groups}, or BundleError naming the field."""
    if not isinstance(document, dict) or set(document) != set(CLUSTER_KEYS):
        raise BundleError(f"{CLUSTER_FILE} must hold an object of {', '.join(CLUSTER_KEYS)}")
    if not isinstance(document['vars'], dict) or not isinstance(document['hosts'], dict):
        raise BundleError(f'{CLUSTER_FILE}: vars and hosts must be objects')
    if not all(isinstance(value, dict) for value in document['hosts'].values()):
        raise BundleError(f'{CLUSTER_FILE}: every host of hosts must map to an object of variables')
    groups = document['groups']
    if not isinstance(groups, dict) or not all(isinstance(hosts, list) and all(isinstance(host, str) for host in hosts)
                                               for hosts in groups.values()):
        raise BundleError(f'{CLUSTER_FILE}: groups must map each group to a list of host names')
    return document


def check_node_document(document: t.Any, node: str, bundle_digest: str) -> dict[str, t.Any]:
    """The variables of a node's file, or BundleError when it was written for another bundle or is unusable."""
    if not isinstance(document, dict):
        raise BundleError(f'{node_file(node)} must hold an object')
    if document.get('digest') != bundle_digest:
        raise BundleError(f'{node_file(node)} was written for bundle {str(document.get("digest"))[:12]}, '
                          f'not {bundle_digest[:12]}')
    if not isinstance(document.get('vars'), dict):
        raise BundleError(f'{node_file(node)}: vars must be an object')
    return document['vars']


def inventory(cluster: t.Mapping[str, t.Any], node: str, own: t.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """The node's Ansible inventory (the YAML/JSON inventory format): every host and group of the cluster, the shared
    variables on `all`, and the node with its own variables, reached through the local connection."""
    hosts: dict[str, t.Any] = {name: dict(variables) for name, variables in cluster['hosts'].items()}
    hosts[node] = dict(hosts.get(node, {}), **own, ansible_connection='local',
                       ansible_python_interpreter='/usr/bin/python3')
    children = {group: {'hosts': {name: None for name in names}} for group, names in cluster['groups'].items()
                if group not in ('all', 'ungrouped')}
    return {'all': {'vars': dict(cluster['vars']), 'hosts': hosts, 'children': children}}
