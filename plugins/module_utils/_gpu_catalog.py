# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU catalog: one record per GPU model and form factor (a profile), and the node facts derived from it.

Everything the collection knows about a kind of GPU node lives here: GPU count, memory, NVLink/NVSwitch topology,
whether Fabric Manager and the open kernel modules are needed, the Slurm GRES type name, the PCIe link, and what the
gpu_topology validator expects. The inventory names a node's profile in `gpu_profile`; `gpu_type` and `gpu_count`
follow from it (`node_gpus`), and an explicit value must agree. Adding a GPU profile is one record below, its test
and a changelog fragment. Pure Python with no Ansible import.
"""

from __future__ import annotations

import dataclasses
import re
import typing as t

# The catalog's GRES type names: lower-case ASCII letters, digits, '_' and '-' (gres.conf Type=, Gres=gpu:<type>:<n>).
GRES_TYPE = re.compile(r'^[a-z0-9][a-z0-9_-]*$')


class GpuCatalogError(ValueError):
    """An unknown profile or a node description that disagrees with its profile; the message names the variable."""


@dataclasses.dataclass(frozen=True)
class GpuModel:
    """One GPU model in one form factor, as a node carries it; numbers as nvidia-smi reports them."""

    profile: str
    description: str
    architecture: str
    form_factor: str
    # GPUs per node (per compute tray for rack-scale systems).
    gpu_count: int
    # Slurm GRES type name: Gres=gpu:<gres_type>:<gpu_count>, and the gpu_type a node gets.
    gres_type: str
    # Regular expression searched in nvidia-smi's product name.
    product_name: str
    # Memory per GPU as sold, and the floor the validator accepts (nvidia-smi's fb_memory_usage/total, MiB).
    memory_gib: int
    min_memory_mib: int
    # NVLink links every GPU pair shows in `nvidia-smi topo -m` (NV<n>); 0: no NVLink peers.
    nvlinks_per_pair: int
    # NVSwitch chips on the node itself; 0 where there are none or they sit in separate switch trays.
    nvswitch_count: int
    # GPUs that share one NVLink domain (8 on an HGX board, 72 in an NVL72 rack, 1 for a lone card).
    nvlink_domain_gpus: int
    # Whether the node runs NVIDIA Fabric Manager (nvidia-fabricmanager) for its NVSwitches.
    fabric_manager: bool
    # Whether the collection installs only the open NVIDIA kernel modules for these GPUs.
    open_kernel_module: bool
    # Host link of each GPU: the generation and width the validator expects at least; None: not judged.
    pcie_gen: t.Optional[int]
    pcie_width: t.Optional[int]
    # False: built from public specifications and never run on the hardware; its numbers may need correcting.
    tested: bool
    sources: str


# Sources: NVLink counts per GPU pair from `nvidia-smi topo -m` on HGX boards (H100/H200/B200 SXM: NV18, A100 SXM4:
# NV12); memory from the vendor datasheets as nvidia-smi reports it (H100 80GB: 81559 MiB, H200 141GB: 143771 MiB in
# our own capture, A100 80GB: 81920 MiB, B200 180GB: ~183 GiB), with headroom for driver reservations; PCIe generation
# and width from the datasheets (host link of an SXM module); NVSwitch counts and Fabric Manager from NVIDIA's Fabric
# Manager user guide (HGX A100: 6 NVSwitches, HGX H100/H200: 4, HGX B200: 2); the open kernel modules are the only
# ones NVIDIA supports for Blackwell and recommended for Hopper, so the collection requires them for both.
CATALOG: dict[str, GpuModel] = {model.profile: model for model in (
    GpuModel(
        profile='h100-sxm-8', description='HGX H100 board: 8 H100 SXM5 80GB on 4 NVSwitches',
        architecture='Hopper', form_factor='SXM5', gpu_count=8, gres_type='h100', product_name=r'H100',
        memory_gib=80, min_memory_mib=80000, nvlinks_per_pair=18, nvswitch_count=4, nvlink_domain_gpus=8,
        fabric_manager=True, open_kernel_module=True, pcie_gen=5, pcie_width=16, tested=True,
        sources='HGX H100 datasheet; NVIDIA Fabric Manager user guide (HGX H100 baseboard)'),
    GpuModel(
        profile='h200-sxm-8', description='HGX H200 board: 8 H200 SXM5 141GB on 4 NVSwitches',
        architecture='Hopper', form_factor='SXM5', gpu_count=8, gres_type='h200', product_name=r'H200',
        memory_gib=141, min_memory_mib=140000, nvlinks_per_pair=18, nvswitch_count=4, nvlink_domain_gpus=8,
        fabric_manager=True, open_kernel_module=True, pcie_gen=5, pcie_width=16, tested=True,
        sources='HGX H200 datasheet; our H200 capture (143771 MiB, PCIe Gen5 x16)'),
    GpuModel(
        profile='a100-sxm4-80gb-8', description='HGX A100 board: 8 A100 SXM4 80GB on 6 NVSwitches',
        architecture='Ampere', form_factor='SXM4', gpu_count=8, gres_type='a100', product_name=r'A100.*80GB',
        memory_gib=80, min_memory_mib=80000, nvlinks_per_pair=12, nvswitch_count=6, nvlink_domain_gpus=8,
        fabric_manager=True, open_kernel_module=False, pcie_gen=4, pcie_width=16, tested=True,
        sources='HGX A100 datasheet; NVIDIA Fabric Manager user guide (HGX A100 baseboard)'),
    GpuModel(
        profile='b200-sxm-8', description='HGX B200 board: 8 B200 SXM 180GB on 2 NVSwitches',
        architecture='Blackwell', form_factor='SXM', gpu_count=8, gres_type='b200', product_name=r'B200',
        memory_gib=180, min_memory_mib=178000, nvlinks_per_pair=18, nvswitch_count=2, nvlink_domain_gpus=8,
        fabric_manager=True, open_kernel_module=True, pcie_gen=5, pcie_width=16, tested=True,
        sources='HGX B200 datasheet; NVIDIA Fabric Manager user guide (HGX B200 baseboard)'),
    # One H200 on PCIe with no NVLink peers, as in our real single-GPU capture (Gen5 x16 host link).
    GpuModel(
        profile='h200-1', description='one H200 141GB on PCIe, no NVLink peers',
        architecture='Hopper', form_factor='PCIe', gpu_count=1, gres_type='h200', product_name=r'H200',
        memory_gib=141, min_memory_mib=140000, nvlinks_per_pair=0, nvswitch_count=0, nvlink_domain_gpus=1,
        fabric_manager=False, open_kernel_module=True, pcie_gen=5, pcie_width=16, tested=True,
        sources='our H200 capture (tests/fixtures/gpu/h200-1gpu-vm)'),
    # Untested: from the HGX B300 specifications (8 Blackwell Ultra GPUs, 288 GB HBM3e each, NVLink 5 through 2
    # NVSwitch chips on the board, 18 links per GPU); nvidia-smi's exact memory figure is not known to us yet, and
    # the expected host link is Gen5, what a Gen6-capable GPU trains to on a Gen5 host.
    GpuModel(
        profile='b300-sxm-8', description='HGX B300 board: 8 B300 SXM 288GB on 2 NVSwitches (untested)',
        architecture='Blackwell Ultra', form_factor='SXM', gpu_count=8, gres_type='b300', product_name=r'B300',
        memory_gib=288, min_memory_mib=270000, nvlinks_per_pair=18, nvswitch_count=2, nvlink_domain_gpus=8,
        fabric_manager=True, open_kernel_module=True, pcie_gen=5, pcie_width=16, tested=False,
        sources='HGX B300 specifications (public datasheet)'),
    # Untested: one GB200 NVL72 compute tray (2 Grace CPUs, 4 B200 GPUs of 186 GB usable HBM3e). The GPUs reach the
    # 72-GPU NVLink domain through the rack's 9 NVLink switch trays, whose NMX controller runs the fabric manager; the
    # compute trays run no Fabric Manager (they run the IMEX service for cross-tray memory). Grace reaches its GPUs
    # over NVLink-C2C, so the PCIe figures nvidia-smi prints are not judged.
    GpuModel(
        profile='gb200-nvl72-4', description='GB200 NVL72 compute tray: 4 B200 GPUs in a 72-GPU NVLink domain '
                                             '(untested)',
        architecture='Blackwell', form_factor='NVL72 compute tray', gpu_count=4, gres_type='gb200',
        product_name=r'GB200', memory_gib=186, min_memory_mib=176000, nvlinks_per_pair=18, nvswitch_count=0,
        nvlink_domain_gpus=72, fabric_manager=False, open_kernel_module=True, pcie_gen=None, pcie_width=None,
        tested=False, sources='GB200 NVL72 specifications; NVIDIA multi-node NVLink (MNNVL) user guide'),
)}

# What a healthy node shows on every profile (the validator's defaults, overridable through gpu_expected).
HEALTHY_DEFAULTS: dict[str, t.Any] = {
    'persistence_mode': True,
    'ecc_enabled': True,
    'mig_enabled': False,
    'max_ecc_uncorrected': 0,
}

# The inventory variables this catalog derives a node's GPUs from.
VARIABLES = ('gpu_profile', 'gpu_type', 'gpu_count', 'gpu_expected')


def profiles() -> list[str]:
    """The catalog's profile names, sorted."""
    return sorted(CATALOG)


def model(profile: t.Any, variable: str = 'gpu_profile') -> GpuModel:
    """The record of `profile`; GpuCatalogError naming `variable` and the known profiles when there is none."""
    if not isinstance(profile, str) or profile not in CATALOG:
        raise GpuCatalogError(f"{variable} {profile!r} is not a profile of the GPU catalog; known profiles: "
                              f"{', '.join(profiles())}")
    return CATALOG[profile]


def as_dict(record: GpuModel) -> dict[str, t.Any]:
    """The record as a plain dict (for filters and reports)."""
    return dataclasses.asdict(record)


def expectation(profile: str) -> dict[str, t.Any]:
    """What gpu_topology expects of a node of `profile` (its keys are those of _gpu_topology.EXPECTED_TYPES)."""
    record = model(profile, 'profile')
    return dict(HEALTHY_DEFAULTS, gpu_count=record.gpu_count, model=record.product_name,
                min_memory_mib=record.min_memory_mib, nvlinks_per_pair=record.nvlinks_per_pair,
                pcie_gen=record.pcie_gen, pcie_width=record.pcie_width)


def parse_gpu_count(host: str, gpu_count: t.Any) -> int:
    """gpu_count as a non-negative int; floats, booleans and words are refused, not truncated."""
    if isinstance(gpu_count, bool) or isinstance(gpu_count, float) and not gpu_count.is_integer():
        raise ValueError(f"host '{host}': gpu_count must be a whole number, got {gpu_count!r}")
    try:
        count = int(gpu_count)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"host '{host}': gpu_count must be a whole number, got {gpu_count!r}") from None
    if count < 0:
        raise ValueError(f"host '{host}': gpu_count must not be negative, got {count}")
    return count


def parse_gpu_type(host: str, gpu_type: t.Any) -> t.Optional[str]:
    """gpu_type as a string of letters, digits, '_' and '-' (a GRES type), or None when unset."""
    if gpu_type in (None, ''):
        return None
    gpu_type = str(gpu_type)
    if not gpu_type.replace('_', '').replace('-', '').isalnum():
        raise ValueError(f"host '{host}': gpu_type {gpu_type!r} may hold only letters, digits, '_' and '-'")
    return gpu_type


def _set(values: t.Mapping[str, t.Any], name: str) -> t.Any:
    value = values.get(name) if name in values else None
    return None if value in (None, '') else value


def node_gpus(host: str, values: t.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """A node's GPUs from its variables: {'profile', 'gpu_type', 'gpu_count', 'record'}, None where unknown.

    With gpu_profile, gpu_type is the profile's GRES type and gpu_count its GPU count (or gpu_expected's gpu_count where
    set); a gpu_type or gpu_count set as well must equal them. Without gpu_profile, gpu_type and gpu_count are taken as
    set, and `record` is the one catalog record with that GRES type and count, if any. ValueError naming the variable,
    the host and the profile's value otherwise.
    """
    profile = _set(values, 'gpu_profile')
    gpu_type = parse_gpu_type(host, _set(values, 'gpu_type'))
    raw_count = _set(values, 'gpu_count')
    gpu_count = None if raw_count is None else parse_gpu_count(host, raw_count)
    expected = _set(values, 'gpu_expected')
    expected_count = expected.get('gpu_count') if isinstance(expected, t.Mapping) else None
    if expected_count is not None:
        expected_count = parse_gpu_count(host, expected_count)

    if profile is None:
        if gpu_count is not None and expected_count is not None and gpu_count != expected_count:
            raise ValueError(f"host '{host}': gpu_count is {gpu_count}, but gpu_expected expects {expected_count} "
                             f"GPUs; the validators would drain a node Slurm offers with {gpu_count}")
        if gpu_count is None:
            gpu_count = expected_count
        return {'profile': None, 'gpu_type': gpu_type, 'gpu_count': gpu_count,
                'record': infer(gpu_type, gpu_count)}

    try:
        record = model(profile)
    except GpuCatalogError as err:
        raise ValueError(f"host '{host}': {err}") from None
    if gpu_type is not None and gpu_type != record.gres_type:
        raise ValueError(f"host '{host}': gpu_type is {gpu_type!r}, but gpu_profile {profile} has GRES type "
                         f"{record.gres_type!r}; leave gpu_type unset (it follows gpu_profile) or set the profile "
                         f"of the node's GPUs")
    derived_count = record.gpu_count if expected_count is None else expected_count
    if gpu_count is not None and gpu_count != derived_count:
        source = f'gpu_profile {profile}' + (' with gpu_expected' if expected_count is not None else '')
        raise ValueError(f"host '{host}': gpu_count is {gpu_count}, but {source} expects {derived_count} GPUs; "
                         f"leave gpu_count unset (it follows gpu_profile): the validators would drain a node "
                         f"Slurm offers with {gpu_count}")
    return {'profile': profile, 'gpu_type': record.gres_type, 'gpu_count': derived_count, 'record': record}


def infer(gpu_type: t.Optional[str], gpu_count: t.Optional[int]) -> t.Optional[GpuModel]:
    """The one catalog record with this GRES type and GPU count (an inventory without gpu_profile), else None."""
    if gpu_type is None or gpu_count is None:
        return None
    found = [record for record in CATALOG.values()
             if record.gres_type == gpu_type.lower() and record.gpu_count == gpu_count]
    return found[0] if len(found) == 1 else None


def node_facts(host: str, values: t.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """node_gpus with the record flattened for roles: profile, gpu_type, gpu_count, fabric_manager, open_kernel_module,
    nvswitch_count, tested and the rest of the record (None where the node matches no catalog record)."""
    gpus = node_gpus(host, values)
    record = gpus['record']
    facts = {field.name: None for field in dataclasses.fields(GpuModel)}
    if record is not None:
        facts.update(as_dict(record))
    facts.update(profile=gpus['profile'] or (record.profile if record else None), gpu_type=gpus['gpu_type'],
                 gpu_count=gpus['gpu_count'], fabric_manager=bool(record and record.fabric_manager),
                 open_kernel_module=bool(record and record.open_kernel_module))
    return facts


# --- Xid and SXid classes: what a fault the driver logs means for the node -------------------------------------------

# The repairs a fault can need, cheapest first: `none` (an application fault: restart the application), `reset`
# (reset the GPU: nvidia-smi -r, or a reboot where a reset is not possible), `reboot` (reboot the node), `rma`
# (hands on the hardware: contact support / the vendor). A class's tier is the cheapest repair that clears it.
TIERS = ('none', 'reset', 'reboot', 'rma')


@dataclasses.dataclass(frozen=True)
class FaultClass:
    """What one Xid (or NVSwitch SXid) code means for the node.

    ``node_fault``: the GPU (or switch) cannot be trusted with the next job until repaired (the node drains);
    False for application faults, which end the job that caused them and leave the GPU healthy. ``tier``: the
    cheapest repair that clears it (TIERS). ``hardware``: the class is a hardware failure, so a repeat after the
    repair means the part goes back (RMA). ``action``: NVIDIA's resolution bucket (immediate action) the record
    follows, ``sources`` where that comes from and why the record departs from it, if it does.
    """

    code: int
    title: str
    node_fault: bool
    tier: str
    hardware: bool
    action: str
    sources: str


_XID_CATALOG = "NVIDIA Xid catalog (docs.nvidia.com/deploy/xid-errors, Ampere and newer): immediate action"


def _xid(code: int, title: str, node_fault: bool, tier: str, hardware: bool, action: str, why: str = '') -> FaultClass:
    sources = f'{_XID_CATALOG} {action}' + (f'; {why}' if why else '')
    return FaultClass(code, title, node_fault, tier, hardware, action, sources)


def _app(code: int, title: str, action: str = 'RESTART_APP', why: str = '') -> FaultClass:
    """An application fault: the job that caused it ends, the GPU stays healthy."""
    return _xid(code, title, False, 'none', False, action, why)


# One record per Xid code the driver logs on Ampere and newer GPUs (codes NVIDIA lists as unused are left out).
# Unknown codes (not below: a newer driver's, or one NVIDIA lists as unused) are a node fault with tier `reboot` and
# hardware false (`xid_class`): a node that logs what we cannot judge is drained and rebooted, not trusted, and a
# person reads the log before anything goes back to the vendor.
XID_RECORDS: tuple[FaultClass, ...] = (
    _app(8, 'GPU stopped processing (channel idle timeout)'),
    _app(11, 'Invalid or corrupted push buffer stream'),
    _app(13, 'Graphics Engine Exception (an out-of-range address or illegal instruction in the application)'),
    _app(25, 'Invalid or illegal push buffer stream'),
    _app(31, 'GPU memory page fault (an illegal address in the application)'),
    _app(32, 'Invalid or corrupted push buffer stream (DMA controller)'),
    _app(37, 'Driver firmware error (unimplemented method)', 'IGNORE'),
    _app(38, 'Driver firmware error (watchdog timeout)', 'IGNORE'),
    *(_app(code, f'Copy Engine {number} exception') for number, code in
      enumerate((39, 40, 41, 70, 71, 72, 75, 76, 77, 85, 126, 127, 128, 129, 130, 131, 132, 133, 134, 135))),
    _app(43, 'GPU stopped processing (the application hit a software-induced fault; the GPU stays healthy)', 'IGNORE'),
    _app(44, 'Graphics Engine fault during context switch', 'IGNORE'),
    _app(45, 'Preemptive cleanup after a previous error or an aborted application', 'WORKFLOW_XID_45',
         'alone it is an application torn down (Ctrl-C, kill); with another Xid, that one is judged'),
    _xid(46, 'GPU stopped processing (GPU timeout)', True, 'reset', False, 'RESET_GPU'),
    _xid(48, 'Double Bit ECC Error (uncorrectable memory error)', True, 'reset', True, 'WORKFLOW_XID_48',
         'a GPU reset or a reboot clears it; repeated, the memory is failing'),
    _xid(54, 'Auxiliary power is not connected to the GPU board', True, 'rma', True, 'CHECK_MECHANICALS',
         'hands on the node: a power cable'),
    _app(60, 'Video processor exception'),
    _xid(62, 'Internal micro-controller halt', True, 'reset', False, 'RESET_GPU'),
    _xid(63, 'GPU memory row remapping event (a row is marked for remapping)', True, 'reset', True, 'IGNORE',
         'the remap takes effect only after a GPU reset, so the GPU is reset before the next job'),
    _xid(64, 'GPU memory row remapping failure', True, 'reset', True, 'RESET_GPU',
         'investigatory action CONTACT_SUPPORT: a repeat sends the GPU back'),
    _app(66, 'Illegal access by driver (register access violation)', 'IGNORE'),
    _app(67, 'Illegal access by driver (verification violation)', 'IGNORE'),
    _app(68, 'NVDEC0 exception'),
    _app(69, 'Graphics Engine class error'),
    _xid(74, 'NVLink error', True, 'reset', True, 'WORKFLOW_NVLINK_ERR',
         'a GPU reset or a reboot clears it; repeated, the link or the GPU at either end is failing'),
    _xid(79, 'GPU has fallen off the bus', True, 'reboot', True, 'RESTART_BM',
         'investigatory action CONTACT_SUPPORT'),
    _app(80, 'Corrupted data sent to GPU'),
    *(_app(code, f'{engine} error') for code, engine in (
        (82, 'NVJPG0'), (83, 'NVDEC1'), (84, 'NVDEC2'), (88, 'NVDEC3'), (89, 'NVDEC4'), (96, 'NVDEC5'), (97, 'NVDEC6'),
        (98, 'NVDEC7'), (99, 'NVJPG1'), (100, 'NVJPG2'), (101, 'NVJPG3'), (102, 'NVJPG4'), (103, 'NVJPG5'),
        (104, 'NVJPG6'), (105, 'NVJPG7'), (86, 'OFA0'), (139, 'OFA1'))),
    _xid(92, 'High single-bit ECC error rate', True, 'reset', True, 'IGNORE',
         'investigatory action CONTACT_SUPPORT: the memory is degrading, so the node drains until a reset and a '
         'repeat sends the GPU back'),
    _app(93, 'Non-fatal violation of the provisioned InfoROM wear limit', 'IGNORE'),
    _xid(94, 'Contained memory error (one application ended)', True, 'reset', True, 'RESTART_APP',
         'NVIDIA recommends a GPU reset when convenient: the node drains so that it happens before the next job'),
    _xid(95, 'Uncontained memory error', True, 'reset', True, 'RESET_GPU'),
    _app(106, 'SMBPBI test message', 'IGNORE'),
    _app(107, 'SMBPBI test message (silent)', 'IGNORE'),
    _xid(109, 'Context switch timeout error', True, 'reset', False, 'RESET_GPU'),
    _xid(110, 'Security fault error', True, 'reboot', True, 'RESET_GPU',
         'the catalog asks for a cold reset of the system and says it is uncommon unless the hardware failed'),
    _xid(119, 'GSP RPC timeout', True, 'reset', False, 'RESET_GPU'),
    _xid(120, 'GSP error', True, 'reset', False, 'RESET_GPU'),
    _app(121, 'C2C NVLink corrected errors (no operational impact)', 'IGNORE'),
    _xid(136, 'NVLink link training failed', True, 'reset', True, 'RESET_GPU',
         'investigatory action INVESTIGATE_LINK_SI (signal integrity)'),
    _app(137, 'NVLink privilege error (an illegal peer-to-peer access by the application)', 'IGNORE'),
    _xid(140, 'ECC unrecovered error (page offlining or row remapping interrupted)', True, 'reset', True, 'RESET_GPU'),
    _app(141, 'CUDA fast path error', 'IGNORE'),
    _xid(143, 'GPU initialization error', True, 'reset', False, 'RESET_GPU'),
    *(_xid(code, f'NVLink {unit} error', True, 'reset', True, 'WORKFLOW_NVLINK5_ERR',
           'the severity depends on the sub-code the line carries; every one is drained until a GPU reset')
      for code, unit in ((144, 'SAW'), (145, 'RLW'), (146, 'TLW'), (147, 'TREX'), (148, 'NVLPW_CTRL'), (149, 'NETIR'),
                         (150, 'MSE'))),
    _xid(154, 'GPU recovery action changed', True, 'reboot', False, 'XID_154',
         'it names the action another Xid needs ("... to 0x2 (Node Reboot Required)"): the line text decides '
         '(kernel_faults reads it), this record stands for a text it cannot read'),
    _xid(155, 'NVLink software-defined error (link down)', True, 'reset', False, 'RESET_GPU'),
    _xid(156, 'Resource retirement event', True, 'reset', True, 'RESET_GPU'),
    _app(157, 'Resource retirement failure (no spare resources left)', 'IGNORE'),
    _xid(158, 'GPU fatal timeout', True, 'reset', False, 'RESET_GPU'),
    _app(160, 'Channel retirement event', 'IGNORE'),
    _app(161, 'Channel retirement failure', 'IGNORE'),
)
XID_CLASSES: dict[int, FaultClass] = {record.code: record for record in XID_RECORDS}

# Xid 154's text names the recovery action the driver now asks for: the class of each.
RECOVERY_ACTIONS: dict[str, tuple[bool, str]] = {
    'none': (False, 'none'),
    'drain p2p': (True, 'reset'),
    'drain and reset': (True, 'reset'),
    'gpu reset required': (True, 'reset'),
    'node reboot required': (True, 'reboot'),
}

_SXID_SOURCES = ('NVIDIA Xid and SXid errors (docs.nvidia.com/deploy/xid-errors) and the Fabric Manager user guide: '
                 'the driver prints each SXid as Fatal or Non-fatal; a fatal one leaves the NVSwitch (and the GPUs '
                 'behind it) unusable until the switches and GPUs are reset, which on an HGX board is a reboot')


def xid_class(code: int) -> FaultClass:
    """The class of Xid `code`; an unknown code is a node fault with tier `reboot`, not hardware (see XID_CLASSES)."""
    found = XID_CLASSES.get(code)
    if found is not None:
        return found
    return FaultClass(code, f'unknown Xid {code}', True, 'reboot', False, 'UNKNOWN',
                      'not in the catalog this collection carries: drained and rebooted until someone reads the log')


def xid154_class(text: str) -> FaultClass:
    """Xid 154's class from its text (`GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)`)."""
    base = XID_CLASSES[154]
    lowered = text.lower()
    target = lowered.rsplit(' to ', 1)[-1] if ' to ' in lowered else ''
    for words, (node_fault, tier) in RECOVERY_ACTIONS.items():
        if f'({words})' in target:
            return dataclasses.replace(base, title=f'{base.title}: {words}', node_fault=node_fault, tier=tier)
    return base


def sxid_class(code: int, fatal: bool) -> FaultClass:
    """The class of NVSwitch SXid `code` as the driver printed it: fatal is a node fault (tier reboot), non-fatal
    is not (the switch corrected or contained it; counted, not drained)."""
    if fatal:
        return FaultClass(code, f'NVSwitch fatal error (SXid {code})', True, 'reboot', False, 'RESTART_BM', _SXID_SOURCES)
    return FaultClass(code, f'NVSwitch non-fatal error (SXid {code})', False, 'none', False, 'IGNORE', _SXID_SOURCES)
