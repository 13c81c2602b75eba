#!/usr/bin/python
# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: kernel_faults
short_description: Find GPU, NVSwitch and PCIe faults in the kernel log and judge the node by them
version_added: "0.1.0"
description:
  - "Reads the kernel log (C(journalctl -k) of this boot, or a file holding kernel log text) and finds NVIDIA Xid
    lines, NVSwitch SXid lines, GPUs that fell off the bus (also the multi-line message newer drivers print without
    an Xid) and PCIe uncorrected errors (AER) of the node's GPUs and HCAs; corrected PCIe errors are counted."
  - "Each Xid is judged by the Xid classes of the collection's GPU catalog, which follow NVIDIA's Xid catalog:
    application faults (13, 31, 43, 45, 68, ...) are warnings; node faults (48, 63, 64, 74, 79, 92, 94, 95, 119,
    120, 136, 140, 143, 144-150, 155, ...) fail, with the cheapest repair that clears them (GPU reset, reboot,
    RMA). An unknown Xid is a node fault that needs a reboot. A fatal SXid is a node fault; a non-fatal one a
    warning."
  - "A failing check per faulty device gives the Slurm drain reason the collection uses
    (C(llmforge: xid GPU3 79), C(llmforge: sxid nvswitch1 12028), C(llmforge: aer 0000:18:00.0 fatal),
    C(llmforge: fallen_off_bus GPU3))."
  - "Reads journalctl's short formats (short, short-precise, short-iso, short-iso-precise), C(dmesg -T), raw
    C(dmesg) and C(/dev/kmsg) records in one pass, bounded in time and memory on any log (at most 1000 events are
    kept, node faults first; the rest are counted in RV(events_dropped))."
  - "With O(state_file), a look reads only what was logged since the last one (a journal cursor, or an offset into
    the file) and node faults persist across looks: the node stays unhealthy until the log starts over (a new boot;
    for a file, another file or one that shrank) or until O(clear) forgets them after a repair. Without it, every
    run reads the whole boot (or file)."
  - The code lives in C(plugins/module_utils/_kernel_log.py), which has no Ansible import; the node health check
    runs it as its C(kernel_faults) validator.
options:
  source:
    description:
      - C(journal) reads C(journalctl -k -b) (this boot); an absolute path reads a file holding kernel log text in
        any of the formats above (a saved C(dmesg) output, a simulated kernel log).
    type: str
    default: journal
  journalctl_path:
    description: Path or name (searched in PATH and the system directories) of C(journalctl).
    type: str
    default: journalctl
    aliases: [journalctl]
  state_file:
    description:
      - Where the bookmark (journal cursor or file offset) and the known node faults are kept, as JSON (0644).
      - It is written only when given and not in check mode; in check mode the look reads from the bookmark but
        does not move it. A state file that cannot be read is set aside (a warning) and rebuilt by reading the
        whole boot or file again, so no fault of this boot is lost.
    type: path
  since:
    description: Skip events logged before this Unix time (events of formats without a wall clock are kept).
    type: float
  boot_id_file:
    description: The kernel's boot id, read with O(source=journal) and O(state_file); a new one forgets the faults.
    type: path
    default: /proc/sys/kernel/random/boot_id
  gpus:
    description:
      - PCI bus id (C(00000000:18:00.0) or C(0000:18:00)) to GPU index.
      - Omitted, C(nvidia-smi -q -x) names them (its order is the index); when it fails, the devices bound to the
        nvidia driver in sysfs (in PCI order), else the GPUs are named by PCI address.
    type: dict
  nvidia_smi_path:
    description: Path or name (looked up in the system directories) of C(nvidia-smi).
    type: str
    default: nvidia-smi
    aliases: [nvidia_smi]
  sysfs_root:
    description: Root of the sysfs tree; the HCAs' PCI addresses are read under C(class/infiniband).
    type: path
    default: /sys
  timeout:
    description: Seconds the whole look may take (nvidia-smi, journalctl, reading the file).
    type: int
    default: 30
  clear:
    description:
      - Forget the known node faults of these GPU indexes (C(all) for every known fault, GPUs or not) before
        judging, after a repair (a successful GPU reset). Needs O(state_file).
    type: list
    elements: str
extends_documentation_fragment:
  - llmforge.cluster.validator
attributes:
  check_mode:
    support: full
    description: In check mode the log is read and judged but the state file is not written.
  diff_mode:
    support: none
    description: The state file is bookkeeping; there is nothing to diff.
notes:
  - C(changed) is true only when O(clear) forgot known faults; writing the bookmark is not a change.
  - O(fail_on_mismatch) fails the task when a node fault is known; the results are returned either way.
  - "Journald keeps the kernel's messages of the boots it has: O(source=journal) needs a journal (a node without
    journal files gives a warning, not a failure)."
requirements:
  - C(journalctl) (systemd) for O(source=journal)
author:
  - llmforge.cluster maintainers (@llmforge)
"""

EXAMPLES = r"""
- name: Judge this boot's kernel log
  llmforge.cluster.kernel_faults:
    fail_on_mismatch: false
  register: kernel

- name: A health check's look since the last one, faults kept until a reboot
  llmforge.cluster.kernel_faults:
    state_file: /var/lib/llmforge/nodecheck/kernel_faults.json

- name: GPU 3 was reset and passed its diagnostic; forget its faults
  llmforge.cluster.kernel_faults:
    state_file: /var/lib/llmforge/nodecheck/kernel_faults.json
    clear: [3]

- name: Judge a saved dmesg output
  llmforge.cluster.kernel_faults:
    source: /var/tmp/dmesg-gpu07.txt
    gpus: {"00000000:18:00.0": 0, "00000000:2A:00.0": 1}
    fail_on_mismatch: false
"""

RETURN = r"""
healthy:
  description: False exactly when a node fault is known (found now, or kept in O(state_file)).
  returned: always
  type: bool
  sample: false
reason:
  description: "The Slurm drain reason of the first failing check (C(llmforge: <check> <subject> <actual>)); empty
    when healthy."
  returned: always
  type: str
  sample: "llmforge: xid GPU3 79"
checks:
  description:
    - "One failing check per kind and faulty device: name C(xid), C(sxid), C(fallen_off_bus) or C(aer); subject
      C(GPU3), C(nvswitch1) or a PCI address; actual the codes (C(48,94)) or the severity (C(fatal))."
    - One C(warn) check per kind and device for application Xids and non-fatal SXids, a C(kernel_log) warning per
      note (a state file set aside, no journal files, GPU indexes unknown), and a C(pass) check for each kind
      without a failure.
  returned: always
  type: list
  elements: dict
  sample:
    - {"name": "xid", "status": "fail", "subject": "GPU3", "expected": "no node-fault Xid", "actual": "79",
       "message": "GPU3 (0000:5d:00): xid 79 (GPU has fallen off the bus) 2026-12-05T07:00:01+0000; repair: reboot"}
events:
  description: What this look found, in log order (at most 1000, node faults kept first).
  returned: always
  type: list
  elements: dict
  contains:
    type:
      description: C(xid), C(sxid), C(fallen_off_bus) or C(aer).
      type: str
    code:
      description: The Xid or SXid code; null for the other types.
      type: int
    pci:
      description: The PCI address as the line printed it (C(0000:18:00) for an Xid).
      type: str
    gpu:
      description: The GPU index; null when not a GPU or not known.
      type: int
    device:
      description: What the check names; C(GPU3), C(nvswitch1) or a PCI address.
      type: str
    fatal:
      description: Fatal SXid or PCIe error; for an Xid, whether it is a node fault.
      type: bool
    node_fault:
      description: Whether the node must be repaired before the next job.
      type: bool
    tier:
      description: The cheapest repair that clears it; C(none), C(reset), C(reboot) or C(rma).
      type: str
    hardware:
      description: A hardware failure, so a repeat after the repair means RMA.
      type: bool
    title:
      description: What the code means.
      type: str
    time:
      description: Unix time of the line when its format has a wall clock; else null.
      type: float
    boot_seconds:
      description: Seconds since boot, for raw C(dmesg) and C(/dev/kmsg) stamps; else null.
      type: float
    line:
      description: The log line (the lines of a multi-line message, joined by newlines).
      type: str
faults:
  description: Every node fault known for this boot (or file) after this look, one per fault, with its C(count).
  returned: always
  type: list
  elements: dict
events_dropped:
  description: Events found beyond the 1000 kept.
  returned: always
  type: int
  sample: 0
corrected_aer:
  description: Corrected PCIe errors of the node's GPUs and HCAs (counted, not judged).
  returned: always
  type: int
  sample: 0
lines_read:
  description: Lines read by this look.
  returned: always
  type: int
  sample: 1843
cursor:
  description: The journal cursor after this look (O(source=journal)), or the byte offset read up to (a file).
  returned: always
  type: raw
  sample: "s=3e4f...;i=1a2b;b=...;m=...;t=...;x=..."
cleared:
  description: Known faults forgotten by O(clear).
  returned: always
  type: int
  sample: 0
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmforge.cluster.plugins.module_utils import _kernel_log as kernel_log
from ansible_collections.llmforge.cluster.plugins.module_utils import _module_errors as errors


def _clear(module, empty):
    """O(clear) as read_faults takes it: False (none), True (all) or the GPU indexes."""
    given = module.params['clear']
    if not given:
        return False
    if not module.params['state_file']:
        module.fail_json(msg='clear needs state_file: the faults it forgets are those kept there', **empty)
    if [item.strip().lower() for item in given] == ['all']:
        return True
    indexes = []
    for item in given:
        text = item.strip()
        if not (text.isascii() and text.isdigit() and len(text) <= 6):
            module.fail_json(msg=f"clear must be 'all' or GPU indexes (0 or more), got {item!r}", **empty)
        indexes.append(int(text))
    return sorted(set(indexes))


def _gpus(module, empty):
    given = module.params['gpus']
    if not given:
        return {}
    gpus = {}
    for bus_id, index in given.items():
        text = str(index).strip()
        if isinstance(index, bool) or not (text.isascii() and text.isdigit() and len(text) <= 6):
            module.fail_json(msg=f'gpus must map PCI bus ids to GPU indexes (0 or more), got {bus_id}: {index!r}',
                             **empty)
        gpus[str(bus_id)] = int(text)
    return gpus


def main():
    module = AnsibleModule(
        argument_spec=errors.validator_options(
            source=dict(type='str', default=kernel_log.JOURNAL),
            journalctl_path=dict(type='str', default='journalctl', aliases=['journalctl']),
            state_file=dict(type='path'),
            since=dict(type='float'),
            boot_id_file=dict(type='path', default=kernel_log.DEFAULT_BOOT_ID_FILE),
            gpus=dict(type='dict'),
            nvidia_smi_path=dict(type='str', default='nvidia-smi', aliases=['nvidia_smi']),
            sysfs_root=dict(type='path', default='/sys'),
            timeout=dict(type='int', default=30),
            clear=dict(type='list', elements='str'),
        ),
        supports_check_mode=True,
    )
    params = module.params
    empty = dict(kernel_log.EMPTY_RESULT)
    errors.positive(module, 'timeout', **empty)
    source = params['source']
    if source != kernel_log.JOURNAL and not os.path.isabs(source):
        module.fail_json(msg=f"source must be 'journal' or the absolute path of a kernel log file, got {source!r}",
                         **empty)
    if params['since'] is not None and (params['since'] != params['since'] or params['since'] < 0):
        module.fail_json(msg=f"since must be a Unix time (0 or more), got {params['since']}", **empty)
    journalctl = params['journalctl_path']
    if source == kernel_log.JOURNAL and '/' not in journalctl:
        found = kernel_log.validators.find_command(journalctl) or module.get_bin_path(journalctl)
        if not found:
            module.fail_json(msg=f'journalctl_path {journalctl}: not found: is systemd installed? (looked in PATH and '
                                 f"{', '.join(kernel_log.validators.SYSTEM_DIRS)})", **empty)
        journalctl = found
    nvidia_smi = params['nvidia_smi_path']
    if '/' not in nvidia_smi:
        nvidia_smi = kernel_log.validators.find_command(nvidia_smi) or module.get_bin_path(nvidia_smi) or nvidia_smi
    options = dict(params, journalctl_path=journalctl, nvidia_smi_path=nvidia_smi, gpus=_gpus(module, empty))
    clear = _clear(module, empty)

    def work(current):
        return kernel_log.module_work(options, current, write_state=not module.check_mode, clear=clear)

    with errors.last_resort(module.fail_json, **empty) as current:
        try:
            result = work(current)
        except kernel_log.KernelLogError as err:
            module.fail_json(msg=str(err), **empty)
        if params['fail_on_mismatch'] and not result['healthy']:
            summary = kernel_log.failure_summary(result['checks'])
            module.fail_json(msg=summary, **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
