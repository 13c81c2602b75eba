#!/usr/bin/python
# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_topology
short_description: Prove a node's NVIDIA GPUs, links and error state match what was bought
version_added: "0.1.0"
description:
  - Reads C(nvidia-smi -q -x) and C(nvidia-smi topo -m) and judges the GPUs against a declarative
    expectation (count, model, memory, NVLink between every GPU pair, PCIe generation and width,
    persistence, ECC mode and uncorrectable errors, row remapping, MIG mode, driver version, the
    driver's recovery action, hardware/thermal clock slowdowns and GPU-to-NIC PCIe distance).
  - Read-only, it never changes GPU settings. Remediation belongs in roles and playbooks.
  - Every check is returned with a status C(pass), C(fail), C(warn) or C(skip) so a playbook, a report or
    Slurm's health check can act on it.
  - The parsers live in C(plugins/module_utils/_gpu_topology.py), which has no Ansible import, so the
    same code runs on nodes outside Ansible.
options:
  profile:
    description:
      - Built-in expectation for a known node type, a profile of the GPU catalog
        C(plugins/module_utils/_gpu_catalog.py), which documents each profile and the source of its numbers
        (the filter C(llmforge.cluster.gpu_model) returns a profile's record; C(docs/validate.md) has a table).
      - A profile whose catalog record says C(tested) false comes from public specifications and has never run
        on the hardware.
    type: str
    choices: [a100-sxm4-80gb-8, b200-sxm-8, b300-sxm-8, gb200-nvl72-4, h100-sxm-8, h200-1, h200-sxm-8]
  expected:
    description:
      - Expectations laid over the profile (or used alone). An unknown key is an error.
      - C(gpu_count) (int), C(model) (regular expression searched in the product name), C(min_memory_mib)
        (int), C(nvlinks_per_pair) (int, every GPU pair must show C(NV<n>) with n at least this; 0 means
        no requirement), C(pcie_gen) (int, minimum current generation), C(pcie_width) (int, minimum current
        width), C(persistence_mode) (bool), C(ecc_enabled) (bool), C(mig_enabled) (bool),
        C(max_ecc_uncorrected) (int, volatile DRAM+SRAM uncorrectable errors, default 0 in profiles),
        C(driver_version) (str, minimum), C(gpu_nic_affinity) (list of C({gpu, nic, max_hops}) where
        C(nic) is C(NIC0) or an HCA name such as C(mlx5_0) and C(max_hops) one of C(PIX), C(PXB),
        C(PHB), C(NODE), C(SYS), default C(PIX)).
    type: dict
    default: {}
  nvidia_smi_path:
    description: Path or name (searched in PATH) of C(nvidia-smi).
    type: path
    default: nvidia-smi
  timeout:
    description: Seconds each C(nvidia-smi) command may run before the module gives up and says which one hung.
    type: int
    default: 30
extends_documentation_fragment:
  - llmforge.cluster.validator
  - llmforge.cluster.validator.read_only
notes:
  - An idle GPU lowers its PCIe link generation to save power; a current generation below the expectation
    on an idle GPU whose maximum meets it is a C(warn), not a C(fail).
  - Row remap pending is a C(warn) (reset the GPU when idle); a row remap failure is a C(fail).
requirements:
  - C(nvidia-smi) from the NVIDIA driver on the managed node, found through O(nvidia_smi_path)
author:
  - llmforge.cluster maintainers (@llmforge)
"""

EXAMPLES = r"""
- name: Prove an HGX H200 node
  llmforge.cluster.gpu_topology:
    profile: h200-sxm-8

- name: Prove GPU-NIC placement and a minimum driver, report instead of failing
  llmforge.cluster.gpu_topology:
    profile: h100-sxm-8
    expected:
      driver_version: "550.54.15"
      gpu_nic_affinity:
        - {gpu: GPU0, nic: mlx5_0, max_hops: PIX}
        - {gpu: GPU4, nic: mlx5_4, max_hops: PIX}
    fail_on_mismatch: false
  register: gpu_report

- name: Show the failing checks
  ansible.builtin.debug:
    msg: "{{ gpu_report.checks | selectattr('status', 'equalto', 'fail') | list }}"
"""

RETURN = r"""
gpus:
  description: Facts per GPU, in nvidia-smi order.
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: Position in nvidia-smi output, the n of GPU<n> in topo -m.
      type: int
    name:
      description: Product name.
      type: str
      sample: NVIDIA H200
    uuid:
      description: GPU UUID.
      type: str
    serial:
      description: Board serial number.
      type: str
    pci_bus_id:
      description: PCI bus id.
      type: str
      sample: "00000000:18:00.0"
    memory_total_mib:
      description: Framebuffer memory in MiB.
      type: int
      sample: 143771
    persistence_mode:
      description: Persistence mode enabled.
      type: bool
    ecc_enabled:
      description: ECC currently enabled.
      type: bool
    ecc_uncorrected_volatile:
      description: Uncorrectable DRAM and SRAM ECC errors since the driver loaded.
      type: int
    ecc_corrected_volatile:
      description: Correctable DRAM and SRAM ECC errors since the driver loaded.
      type: int
    remapped_rows_pending:
      description: A row remap waits for a GPU reset.
      type: bool
    remapped_rows_failure:
      description: A row remap failed.
      type: bool
    mig_enabled:
      description: MIG mode currently enabled.
      type: bool
    pcie_gen_current:
      description: Current PCIe link generation.
      type: int
    pcie_gen_max:
      description: Maximum PCIe link generation.
      type: int
    pcie_width_current:
      description: Current PCIe link width.
      type: int
    pcie_width_max:
      description: Maximum PCIe link width.
      type: int
    temperature_c:
      description: GPU temperature in Celsius.
      type: int
    power_limit_w:
      description: Current power limit in watts.
      type: float
    recovery_action:
      description: Recovery action the driver asks for; C(None) when healthy.
      type: str
    clocks_event_reasons:
      description: Active clock event reasons, such as C(gpu_idle) or C(hw_thermal_slowdown).
      type: list
      elements: str
topology:
  description: The C(nvidia-smi topo -m) matrix, device to peer to relation (NV<n>, PIX, PXB, PHB, NODE, SYS).
  returned: always
  type: dict
  sample: {"GPU0": {"GPU1": "NV18", "NIC0": "PIX"}}
nics:
  description: NIC labels of C(topo -m) mapped to device names.
  returned: always
  type: dict
  sample: {"NIC0": "mlx5_0"}
driver_version:
  description: NVIDIA driver version.
  returned: always
  type: str
  sample: 580.159.04
cuda_version:
  description: CUDA version the driver supports.
  returned: always
  type: str
  sample: "13.0"
checks:
  description:
    - Every check with its verdict; per-GPU checks use subject C(GPU<n>), per-pair ones C(GPU0-GPU1).
    - Each check is the record every validator of this collection returns (docs/validate.md) with C(name), C(subject),
      C(status) (C(pass), C(fail), C(warn) or C(skip)), C(expected), C(actual) and C(message) (one sentence for
      people).
    - C(name) is one of C(gpu_count), C(model), C(memory), C(nvlink), C(pcie_gen), C(pcie_width), C(persistence_mode),
      C(ecc_mode), C(ecc_errors), C(row_remap), C(mig_mode), C(driver_version), C(recovery_action), C(clocks_event),
      C(gpu_nic_affinity).
    - C(subject) is what was checked, C(node), C(GPU<n>), C(GPU<a>-GPU<b>) or C(GPU<n>-<nic>).
  returned: always
  type: list
  elements: dict
healthy:
  description: True when no GPU check failed (warnings allowed).
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmforge.cluster.plugins.module_utils import _gpu_catalog
from ansible_collections.llmforge.cluster.plugins.module_utils import _gpu_topology as gpu
from ansible_collections.llmforge.cluster.plugins.module_utils import _module_errors as errors


def main():
    module = AnsibleModule(
        argument_spec=errors.validator_options(
            profile=dict(type='str', choices=_gpu_catalog.profiles()),
            expected=dict(type='dict', default={}),
            nvidia_smi_path=dict(type='path', default='nvidia-smi'),
            timeout=dict(type='int', default=30),
        ),
        supports_check_mode=True,
    )
    params = module.params
    empty = dict(gpu.EMPTY_RESULT)
    errors.positive(module, 'timeout', **empty)
    nvidia_smi = params['nvidia_smi_path']
    if '/' not in nvidia_smi:
        nvidia_smi = module.get_bin_path(nvidia_smi, opt_dirs=['/usr/bin', '/usr/local/bin']) or nvidia_smi
    options = dict(params, nvidia_smi_path=nvidia_smi)
    errors.run_validator(module, lambda current: gpu.module_work(options, current), (gpu.GpuTopologyError,),
                         gpu.failure_summary, **empty)


if __name__ == '__main__':
    main()
