#!/usr/bin/python
# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: rdma_links
short_description: Prove every InfiniBand or RoCE port is up, at full rate and clean
version_added: "0.1.0"
description:
  - Reads the RDMA stack from sysfs (C(<sysfs_root>/class/infiniband/<dev>/)) and judges every port of the
    selected devices (state, physical state, rate, link layer, MTU, error counters, netdev mapping, subnet
    manager), each HCA's PCIe link, and firmware consistency across HCAs of one model.
  - Read-only, it only reads files; it never resets counters or changes a port.
  - Every check is returned with a status C(pass), C(fail), C(warn) or C(skip), in the same shape as
    M(llmforge.cluster.gpu_topology).
  - The reader lives in C(plugins/module_utils/_rdma_links.py), which has no Ansible import, so the same
    code runs on nodes outside Ansible.
options:
  sysfs_root:
    description: Where sysfs is mounted. Tests point it at a fake tree.
    type: path
    default: /sys
  expected:
    description:
      - What the ports must show. An unknown key is an error.
      - C(hca_count) (int, ports counted after the C(devices) filter), C(devices) (regular expression searched
        in the device name, for example V(^mlx5_(?!bond\))), C(link_layer) (C(InfiniBand) or C(Ethernet)),
        C(rate_gbps) (minimum rate, judged only on ACTIVE ports), C(state) (default C(ACTIVE)),
        C(phys_state) (default C(LinkUp)), C(mtu) (minimum MTU of the port's netdev), C(max_counters)
        (counter name to the largest allowed value, laid over the defaults below), C(require_netdev) (bool,
        every port must map to a netdev, as RoCE and IPoIB need), C(require_sm) (bool, InfiniBand ports
        must see a subnet manager, sm_lid not 0).
      - Default counter limits, counted since the last clear, are symbol_error 10, link_error_recovery 10,
        link_downed 2, port_rcv_errors 10, port_rcv_remote_physical_errors 10,
        excessive_buffer_overrun_errors 0, local_link_integrity_errors 0, port_xmit_discards 100.
    type: dict
    default: {}
extends_documentation_fragment:
  - llmforge.cluster.validator
  - llmforge.cluster.validator.read_only
notes:
  - Error counters saturate at their bit width (16, 8 or 4 bits); a saturated value is reported as "at least"
    that many.
  - With no C(class/infiniband) directory at all the module returns one failing C(hca_count) check.
requirements:
  - The kernel's RDMA stack on the managed node (the HCA driver, such as C(mlx5_ib), loaded), which shows the HCAs
    under C(<sysfs_root>/class/infiniband) and their netdevs under C(<sysfs_root>/class/net); only sysfs is read,
    no tool such as C(ibstat) is needed
author:
  - llmforge.cluster maintainers (@llmforge)
"""

EXAMPLES = r"""
- name: Prove eight NDR ports per node
  llmforge.cluster.rdma_links:
    expected:
      devices: '^mlx5_(?!bond)'
      hca_count: 8
      link_layer: InfiniBand
      rate_gbps: 400
      require_sm: true

- name: Prove two RoCE ports with jumbo frames, report instead of failing
  llmforge.cluster.rdma_links:
    expected:
      link_layer: Ethernet
      hca_count: 2
      rate_gbps: 200
      mtu: 9000
      require_netdev: true
    fail_on_mismatch: false
  register: rdma_report
"""

RETURN = r"""
ports:
  description: Every selected port with what sysfs says about it and its HCA.
  returned: always
  type: list
  elements: dict
  contains:
    device:
      description: RDMA device name.
      type: str
      sample: mlx5_0
    port:
      description: Port number.
      type: int
    state:
      description: Logical state (DOWN, INIT, ARMED, ACTIVE, ACTIVE_DEFER).
      type: str
    phys_state:
      description: Physical state (Sleep, Polling, Disabled, PortConfigurationTraining, LinkUp, LinkErrorRecovery, Phy Test).
      type: str
    rate_gbps:
      description: Link rate in Gb/s.
      type: float
      sample: 400.0
    width:
      description: Link width, such as 4X.
      type: str
    speed_name:
      description: Lane speed name, such as NDR.
      type: str
    link_layer:
      description: InfiniBand or Ethernet.
      type: str
    lid:
      description: Port LID (0 when unassigned or on Ethernet).
      type: int
    sm_lid:
      description: LID of the subnet manager (0 when none is seen).
      type: int
    netdev:
      description: Network device of the port (IPoIB or RoCE), or null.
      type: str
    mtu:
      description: MTU of that netdev, or null.
      type: int
    node_guid:
      description: HCA node GUID.
      type: str
    fw_ver:
      description: HCA firmware version.
      type: str
    board_id:
      description: HCA board id (PSID).
      type: str
    hca_type:
      description: HCA model, such as MT4129.
      type: str
    numa_node:
      description: NUMA node of the HCA (-1 when the platform does not say).
      type: int
    pcie:
      description: PCIe link of the HCA, speed in GT/s and width, current and maximum; null values when sysfs has none.
      type: dict
    counters:
      description: Every port counter, name to value; null for one whose file holds no decimal count (its limit then fails).
      type: dict
checks:
  description:
    - Every check with its verdict; per-port checks use subject C(<device>/<port>), per-HCA ones C(<device>).
    - Each check is the record every validator of this collection returns (docs/validate.md) with C(name), C(subject),
      C(status) (C(pass), C(fail), C(warn) or C(skip)), C(expected), C(actual) and C(message) (one sentence for
      people).
    - C(name) is one of C(hca_count), C(state), C(phys_state), C(rate), C(link_layer), C(mtu), C(counters), C(netdev),
      C(sm), C(pcie_link), C(fw_consistency).
    - C(subject) is what was checked.
  returned: always
  type: list
  elements: dict
healthy:
  description: True when no port or HCA check failed (warnings allowed).
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmforge.cluster.plugins.module_utils import _module_errors as errors
from ansible_collections.llmforge.cluster.plugins.module_utils import _rdma_links as rdma


def main():
    module = AnsibleModule(
        argument_spec=errors.validator_options(
            sysfs_root=dict(type='path', default='/sys'),
            expected=dict(type='dict', default={}),
        ),
        supports_check_mode=True,
    )
    empty = dict(rdma.EMPTY_RESULT)
    what = f"sysfs under {module.params['sysfs_root']} against expected {module.params['expected']!r}"
    errors.run_validator(module, lambda current: rdma.module_work(module.params, current),
                         (rdma.RdmaLinksError,), rdma.failure_summary, what, **empty)


if __name__ == '__main__':
    main()
