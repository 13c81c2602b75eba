#!/usr/bin/python
# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ib_topology
short_description: Slurm's topology.conf from the InfiniBand fabric as ibnetdiscover sees it
version_added: "0.1.0"
description:
  - Reads the fabric with C(ibnetdiscover) (or a saved output of it), finds the hosts from the CAs' node
    descriptions, rebuilds the switch tree of one rail and returns the lines of Slurm's C(topology.conf) for the
    topology/tree plugin - C(SwitchName=<leaf> Nodes=<hostlist>) per leaf switch, then
    C(SwitchName=<upper> Switches=<list>) level by level - so that jobs (C(sbatch --switches=1)) land under one leaf.
  - Only ibnetdiscover's default output is read, not that of C(ibnetdiscover -p), C(-l) or C(-g). Several
    outputs may be concatenated in one file (one per subnet); a node seen twice is one node.
  - "Hosts: O(host_pattern) takes the host name from a CA's description (rdma-ndd writes C(%h %d), such as
    C(gpu001 mlx5_0)). The rail of a CA is its HCA name (C(mlx5_0)) when every host CA's description gives one,
    else its place among its host's CAs ordered by GUID (C(0), C(1)...). Slurm puts each node under one leaf, so
    the tree is built from one rail, O(rail)."
  - "Levels: switches with a CA attached are leaves (level 0); the others take their breadth-first distance from
    the leaves. The tree of a rail holds its hosts' leaves and the switches reached from them going up one level
    at a time; switches of other rails' planes are left out."
  - "Switch names: the text between C(;) and C(:) of the Mellanox form C(MF0;<name>:<model>/U1), else the whole
    description, with runs of characters other than letters, digits, C(-), C(_) and C(.) turned into C(-). A
    switch without a description, or whose name another switch shares, is named C(ib-<GUID>) (16 hex digits)."
  - Read-only; it never changes the fabric. The logic lives in C(plugins/module_utils/_ib_topology.py).
options:
  ibnetdiscover_output:
    description: Path of a saved C(ibnetdiscover) output on the managed node, read instead of running O(command).
    type: path
  command:
    description:
      - The command that prints the fabric, without a shell. Defaults to V([ibnetdiscover]) when
        O(ibnetdiscover_output) is not given.
      - In a rail-optimised fabric each rail is its own subnet and C(ibnetdiscover) sees the one of the port it
        runs from; choose it with C(-C), for example V([ibnetdiscover, -C, mlx5_3]) with O(rail=mlx5_3).
    type: list
    elements: str
  timeout:
    description: Seconds O(command) may run before it is stopped and the module fails.
    type: int
    default: 60
  hosts:
    description:
      - The inventory names expected on the fabric. Only these appear in C(Nodes=), since Slurm rejects names it
        does not know; leaves left without hosts, and switches left without children, are dropped.
      - Hosts of the list missing from the rail and fabric hosts not in the list are returned, not failed on.
    type: list
    elements: str
  host_pattern:
    description:
      - Regular expression searched in each CA's node description, with a named group C(host) for the host name
        and optionally one named C(hca) for the HCA name (else the last word after the match is the HCA name).
      - A CA whose description it does not match is not a host (a warning counts them).
      - The default takes the first word, as in C(gpu001 mlx5_0).
    type: str
    default: '^\s*(?P<host>\S+)'
  rail:
    description:
      - The rail the tree is built from, an HCA name such as V(mlx5_0), or an index (V(0) is the first rail,
        HCA names in natural order). Defaults to the first rail.
      - A rail not on the fabric fails the module, naming the rails seen.
    type: raw
extends_documentation_fragment:
  - llmforge.cluster.validator.read_only
notes:
  - Writing C(topology.conf) is left to a template or M(ansible.builtin.copy) task with RV(topology_conf); Slurm
    also needs C(TopologyPlugin=topology/tree) in C(slurm.conf).
  - A warning says so when no switch of the tree is above all its leaves, as Slurm then cannot place one job
    across them.
requirements:
  - C(ibnetdiscover) (Debian and Ubuntu package C(infiniband-diags)) and root on a node with an active InfiniBand
    port on the fabric, unless O(ibnetdiscover_output) is given.
author:
  - llmforge.cluster maintainers (@llmforge)
"""

EXAMPLES = r"""
- name: Read the fabric of rail mlx5_0 from a login node
  llmforge.cluster.ib_topology:
    hosts: "{{ groups['compute'] }}"
  become: true
  register: fabric

- name: Write topology.conf on the controller
  ansible.builtin.copy:
    content: "{{ fabric.topology_conf | join('\n') }}\n"
    dest: /etc/slurm/topology.conf
    mode: "0644"
  delegate_to: "{{ groups['slurm_controller'][0] }}"

- name: Rail 3's subnet, host names being the short form of FQDN descriptions
  llmforge.cluster.ib_topology:
    command: [ibnetdiscover, -C, mlx5_3]
    rail: mlx5_3
    host_pattern: '^(?P<host>[a-z]+[0-9]+)\.'
  become: true

- name: A saved dump
  llmforge.cluster.ib_topology:
    ibnetdiscover_output: /var/tmp/fabric.txt
    rail: 0
"""

RETURN = r"""
topology_conf:
  description: The lines of topology.conf, leaves first, then each level up, by name within a level.
  returned: always
  type: list
  elements: str
  sample: ["SwitchName=leaf01 Nodes=gpu[0001-0032]", "SwitchName=spine01 Switches=leaf[01-04]"]
switches:
  description: The switches of the tree, in the order of RV(topology_conf).
  returned: always
  type: list
  elements: dict
  contains:
    guid:
      description: Node GUID, C(0x) and 16 hex digits.
      type: str
      sample: "0xfc6a1c0300e1b2a0"
    name:
      description: The name in topology.conf.
      type: str
      sample: leaf01
    description:
      description: The switch's node description as the fabric shows it.
      type: str
      sample: MF0;leaf01:MQM9700/U1
    level:
      description: 0 for a leaf, 1 for the switches above the leaves, and so on.
      type: int
    hosts:
      description: The hosts under a leaf (empty above the leaves).
      type: list
      elements: str
    switches:
      description: The names of the switches one level down (empty on a leaf).
      type: list
      elements: str
hosts_missing_from_fabric:
  description: Hosts of O(hosts) with no CA on the rail, sorted; empty without O(hosts).
  returned: always
  type: list
  elements: str
fabric_hosts_not_in_inventory:
  description: Hosts with a CA on the rail that O(hosts) does not list, sorted; empty without O(hosts).
  returned: always
  type: list
  elements: str
rail:
  description: The rail the tree was built from, an HCA name or, when the descriptions give none, an index.
  returned: success
  type: str
  sample: mlx5_0
rails:
  description: Every rail seen, in order.
  returned: success
  type: list
  elements: str
counts:
  description: What the output held.
  returned: success
  type: dict
  contains:
    switches:
      description: Switches.
      type: int
    cas:
      description: Channel adapters (HCAs).
      type: int
    routers:
      description: Routers.
      type: int
    links:
      description: Links, each counted once.
      type: int
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmforge.cluster.plugins.module_utils import _ib_topology as ib
from ansible_collections.llmforge.cluster.plugins.module_utils import _module_errors as errors
from ansible_collections.llmforge.cluster.plugins.module_utils import _proc as proc

MAX_WARNINGS = 20


def read_output(module, empty):
    """The text to parse and a phrase naming where it came from."""
    params = module.params
    path = params['ibnetdiscover_output']
    if path:
        try:
            with open(path, encoding='utf-8', errors='replace') as handle:
                return handle.read(), path
        except FileNotFoundError:
            module.fail_json(msg=f'ibnetdiscover_output {path} does not exist', **empty)
        except OSError as err:
            module.fail_json(msg=f'cannot read ibnetdiscover_output {path}: {err.strerror or err}', **empty)
    argv = params['command'] or ['ibnetdiscover']
    try:
        # Its own process group: a wrapper script's children (ssh, sudo) end with it on timeout.
        done = proc.run(argv, params['timeout'], own_session=True)
    except proc.CommandError as err:
        if err.reason == proc.MISSING:
            hint = ': install infiniband-diags' if argv[0].endswith('ibnetdiscover') else ''
            module.fail_json(msg=f'{argv[0]} not found{hint}', **empty)
        if err.reason == proc.TIMEOUT:
            module.fail_json(msg=f"'{err.command}' did not finish within {params['timeout']} s: is the fabric "
                                 'reachable and a subnet manager running? Raise timeout for a large fabric', **empty)
        module.fail_json(msg=str(err), **empty)
    if done.rc != 0:
        detail = (done.stderr or done.stdout).strip()[-1000:] or 'no output'
        module.fail_json(msg=f"'{' '.join(argv)}' failed with rc {done.rc}: {detail}", **empty)
    return done.stdout, f"the output of '{' '.join(argv)}'"


def main():
    module = AnsibleModule(
        argument_spec=dict(
            ibnetdiscover_output=dict(type='path'),
            command=dict(type='list', elements='str'),
            timeout=dict(type='int', default=60),
            hosts=dict(type='list', elements='str'),
            host_pattern=dict(type='str', default=ib.DEFAULT_HOST_PATTERN),
            rail=dict(type='raw'),
        ),
        mutually_exclusive=[('ibnetdiscover_output', 'command')],
        supports_check_mode=True,
    )
    params = module.params
    empty = dict(changed=False, topology_conf=[], switches=[], hosts_missing_from_fabric=[],
                 fabric_hosts_not_in_inventory=[])
    if params['timeout'] <= 0:
        module.fail_json(msg=f"timeout must be a positive number of seconds, got {params['timeout']}", **empty)
    if params['command'] is not None and not params['command']:
        module.fail_json(msg='command must name a program, as in [ibnetdiscover]', **empty)
    with errors.last_resort(module.fail_json, 'the ibnetdiscover output', **empty) as current:
        text, source = read_output(module, empty)
        current.what = source
        try:
            result = ib.analyse(text, params['hosts'], params['host_pattern'], params['rail'])
        except ib.IbnetdiscoverError as err:
            module.fail_json(msg=f'{source}: {err}', **empty)
        except ib.TopologyError as err:
            module.fail_json(msg=str(err), **empty)
    warnings = result.pop('warnings')
    for warning in warnings[:MAX_WARNINGS]:
        module.warn(warning)
    if len(warnings) > MAX_WARNINGS:
        module.warn(f'{len(warnings) - MAX_WARNINGS} more warnings left out')
    module.exit_json(changed=False, **result)


if __name__ == '__main__':
    main()
