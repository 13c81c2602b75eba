# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read NVIDIA GPU facts from `nvidia-smi -q -x` and `nvidia-smi topo -m` and judge them.

Pure Python (standard library only, no Ansible import) so the same code runs in the
`llmforge.cluster.gpu_topology` module and in Slurm's HealthCheckProgram on the nodes.
Nothing here changes GPU state: it reads two command outputs and compares.
"""

from __future__ import annotations

import re
import typing as t
import xml.etree.ElementTree as ET

from ansible_collections.llmforge.cluster.plugins.module_utils import _gpu_catalog, _proc as proc
from ansible_collections.llmforge.cluster.plugins.module_utils import _validators as validators
from ansible_collections.llmforge.cluster.plugins.module_utils._checks import (
    FAIL, PASS, SKIP, WARN, check as _check, failure_summary as _failure_summary, healthy, per_subject, skip as _skip)

# nvidia-smi topo -m distances, nearest first.
HOPS = ('NV', 'PIX', 'PXB', 'PHB', 'NODE', 'SYS')
_ANSI_ESCAPE = re.compile(r'\x1b\[[0-9;]*[A-Za-z]')
# Bounded, ASCII digits only: a damaged line with a huge or non-ASCII index is not a device.
_NVLINK = re.compile(r'^NV([0-9]{1,4})$')
_DEVICE = re.compile(r'^(GPU|NIC)[0-9]{1,4}$')
# A driver version as nvidia-smi prints it (580.159.04): bounded ASCII numbers, so int() reads every part.
_DRIVER_VERSION = re.compile(r'[0-9]{1,9}(?:\.[0-9]{1,9}){0,3}')
# A reading of NaN or infinity is broken output, not a measurement: no check may compare it.
_NON_FINITE = re.compile(r'^[-+]?(?:nan|inf)', re.IGNORECASE)
# Readings of -q -x are at most a few million (MiB, W, counts); more digits than this is a damaged value.
_MAX_DIGITS = 20
# Active clock-event reasons that mean the hardware is protecting itself, not idling or capped by software.
SLOWDOWN_REASONS = ('hw_slowdown', 'hw_thermal_slowdown', 'hw_power_brake_slowdown', 'sw_thermal_slowdown')


class GpuTopologyError(Exception):
    """Bad input or an unusable command result; the message says which and why."""


class CommandTimeout(GpuTopologyError):
    """A command did not finish within its timeout."""


# --- expectations -------------------------------------------------------------------------------

EXPECTED_TYPES: dict[str, type | tuple[type, ...]] = {
    'gpu_count': int,
    'model': str,
    'min_memory_mib': int,
    'nvlinks_per_pair': int,
    'pcie_gen': int,
    'pcie_width': int,
    'persistence_mode': bool,
    'ecc_enabled': bool,
    'mig_enabled': bool,
    'max_ecc_uncorrected': int,
    'driver_version': str,
    'gpu_nic_affinity': list,
}


def resolve_expectation(profile: t.Optional[str], expected: t.Optional[t.Mapping[str, t.Any]]) -> dict[str, t.Any]:
    """The profile's expectation (from the GPU catalog) with `expected` laid over it; unknown names and wrong types
    are errors."""
    result: dict[str, t.Any] = {}
    if profile:
        if profile not in _gpu_catalog.CATALOG:
            raise GpuTopologyError(f"unknown profile '{profile}'; known profiles: {', '.join(_gpu_catalog.profiles())}")
        result.update(_gpu_catalog.expectation(profile))
    for key, value in (expected or {}).items():
        if key not in EXPECTED_TYPES:
            raise GpuTopologyError(f"unknown key 'expected.{key}'; known keys: {', '.join(sorted(EXPECTED_TYPES))}")
        result[key] = _checked_expectation(key, value)
    return result


def _checked_expectation(key: str, value: t.Any) -> t.Any:
    if value is None:
        return None
    wanted = EXPECTED_TYPES[key]
    if wanted is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise GpuTopologyError(f"expected.{key} must be a whole number, got {value!r}")
    if not isinstance(value, wanted):
        raise GpuTopologyError(f"expected.{key} must be a {wanted.__name__}, got {value!r}")
    if key == 'model':
        try:
            re.compile(value)
        except re.error as err:
            raise GpuTopologyError(f"expected.model is not a valid regular expression: {err}") from None
    if key == 'driver_version' and not _DRIVER_VERSION.fullmatch(value):
        raise GpuTopologyError(f"expected.driver_version must look like 535.104.05, got {value!r}")
    if key == 'gpu_nic_affinity':
        for index, item in enumerate(value):
            if not isinstance(item, t.Mapping) or not {'gpu', 'nic'} <= set(item):
                raise GpuTopologyError(f"expected.gpu_nic_affinity[{index}] needs 'gpu' and 'nic', got {item!r}")
            unknown = set(item) - {'gpu', 'nic', 'max_hops'}
            if unknown:
                raise GpuTopologyError(f"expected.gpu_nic_affinity[{index}] has unknown keys: {', '.join(sorted(unknown))}")
            if str(item.get('max_hops', 'PIX')) not in HOPS[1:]:
                raise GpuTopologyError(f"expected.gpu_nic_affinity[{index}].max_hops must be one of "
                                       f"{', '.join(HOPS[1:])}, got {item.get('max_hops')!r}")
    return value


# --- parsing -------------------------------------------------------------------------------------

def _text(node: t.Optional[ET.Element], path: str) -> t.Optional[str]:
    found = node.find(path) if node is not None else None
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    return None if value in ('', 'N/A', '[N/A]', 'Unknown Error') else value


def _number(value: t.Optional[str], cast: t.Callable[[str], t.Any] = int, field: str = 'a value') -> t.Any:
    """`143771 MiB` -> 143771, `16x` -> 16, `700.00 W` -> 700.0; None when absent or N/A.

    A number with more than _MAX_DIGITS digits before the point is a damaged reading: GpuTopologyError naming the field.
    """
    if value is None:
        return None
    if _NON_FINITE.match(value):
        raise GpuTopologyError(f'nvidia-smi -q -x: {field} is not a finite number: {value[:60]!r}')
    match = re.match(r'^-?([0-9]+)(\.[0-9]+)?', value)
    if match and len(match.group(1)) > _MAX_DIGITS:
        raise GpuTopologyError(f'nvidia-smi -q -x: {field} is not a plausible number: {value[:60]!r}')
    return cast(float(match.group(0))) if match else None


def _field(node: t.Optional[ET.Element], path: str, cast: t.Callable[[str], t.Any] = int) -> t.Any:
    """The number at `path` under `node` (see _number), the path named when it is damaged."""
    return _number(_text(node, path), cast, path)


def _enabled(value: t.Optional[str]) -> t.Optional[bool]:
    if value is None:
        return None
    lowered = value.lower()
    if lowered in ('enabled', 'yes', 'active'):
        return True
    if lowered in ('disabled', 'no', 'not active'):
        return False
    return None


def _sum_present(values: t.Iterable[t.Optional[int]]) -> t.Optional[int]:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _ecc_counts(gpu: ET.Element, scope: str) -> tuple[t.Optional[int], t.Optional[int]]:
    """(uncorrected, corrected) volatile or aggregate counts, DRAM + SRAM, across driver generations."""
    base = gpu.find(f'ecc_errors/{scope}')
    if base is None:
        return None, None

    def count(tag: str) -> t.Optional[int]:
        return _number(_text(base, tag), int, f'ecc_errors/{scope}/{tag}')

    uncorrected = _sum_present(count(tag) for tag in (
        'dram_uncorrectable', 'sram_uncorrectable', 'sram_uncorrectable_parity', 'sram_uncorrectable_secded'))
    corrected = _sum_present(count(tag) for tag in ('dram_correctable', 'sram_correctable'))
    if uncorrected is None and corrected is None:
        # Drivers before R525 report single_bit/double_bit totals.
        uncorrected = count('double_bit/total')
        corrected = count('single_bit/total')
    return uncorrected, corrected


def _gpu_facts(index: int, gpu: ET.Element) -> dict[str, t.Any]:
    uncorrected, corrected = _ecc_counts(gpu, 'volatile')
    reasons = gpu.find('clocks_event_reasons')
    if reasons is None:
        reasons = gpu.find('clocks_throttle_reasons')  # name before driver R535
    active = sorted(re.sub(r'^clocks?_(event|throttle)_reasons?_', '', child.tag)
                    for child in (reasons if reasons is not None else [])
                    if (child.text or '').strip() == 'Active')
    power = _text(gpu, 'gpu_power_readings/current_power_limit') or _text(gpu, 'power_readings/power_limit')
    return {
        'index': index,
        'name': _text(gpu, 'product_name'),
        'uuid': _text(gpu, 'uuid'),
        'serial': _text(gpu, 'serial'),
        'pci_bus_id': _text(gpu, 'pci/pci_bus_id') or gpu.get('id'),
        'memory_total_mib': _field(gpu, 'fb_memory_usage/total'),
        'memory_used_mib': _field(gpu, 'fb_memory_usage/used'),
        # The processes holding a context on the GPU (compute and graphics), by pid.
        'processes': [_number(_text(item, 'pid'), int, 'processes/process_info/pid')
                      for item in gpu.findall('processes/process_info') if _text(item, 'pid')],
        'persistence_mode': _enabled(_text(gpu, 'persistence_mode')),
        'ecc_enabled': _enabled(_text(gpu, 'ecc_mode/current_ecc')),
        'ecc_uncorrected_volatile': uncorrected,
        'ecc_corrected_volatile': corrected,
        'remapped_rows_pending': _enabled(_text(gpu, 'remapped_rows/remapped_row_pending')),
        'remapped_rows_failure': _enabled(_text(gpu, 'remapped_rows/remapped_row_failure')),
        'mig_enabled': _enabled(_text(gpu, 'mig_mode/current_mig')),
        'pcie_gen_current': _field(gpu, 'pci/pci_gpu_link_info/pcie_gen/current_link_gen'),
        'pcie_gen_max': _field(gpu, 'pci/pci_gpu_link_info/pcie_gen/max_link_gen'),
        'pcie_width_current': _field(gpu, 'pci/pci_gpu_link_info/link_widths/current_link_width'),
        'pcie_width_max': _field(gpu, 'pci/pci_gpu_link_info/link_widths/max_link_width'),
        'temperature_c': _field(gpu, 'temperature/gpu_temp'),
        'power_limit_w': _number(power, float, 'power_limit'),
        'recovery_action': _text(gpu, 'gpu_recovery_action'),
        'clocks_event_reasons': active,
    }


def parse_smi_xml(text: str) -> dict[str, t.Any]:
    """Driver/CUDA versions and per-GPU facts from `nvidia-smi -q -x`."""
    if isinstance(text, bytes):
        text = text.decode('utf-8', 'replace')
    if not isinstance(text, str) or not text.strip():
        raise GpuTopologyError('nvidia-smi -q -x printed nothing')
    # Characters that cannot be encoded (lone surrogates of undecodable bytes) become '?' before the XML parser sees them.
    text = text.encode('utf-8', 'replace').decode('utf-8')
    # The DOCTYPE names a DTD file that is never fetched; ElementTree ignores it.
    try:
        root = ET.fromstring(text)
    except (ET.ParseError, ValueError, LookupError, RecursionError) as err:
        raise GpuTopologyError(f'nvidia-smi -q -x printed malformed XML: {err}') from None
    if root.tag != 'nvidia_smi_log':
        raise GpuTopologyError(f"nvidia-smi -q -x: expected <nvidia_smi_log>, found <{root.tag}>")
    gpus = [_gpu_facts(index, gpu) for index, gpu in enumerate(root.findall('gpu'))]
    return {
        'driver_version': _text(root, 'driver_version'),
        'cuda_version': _text(root, 'cuda_version'),
        'attached_gpus': _field(root, 'attached_gpus'),
        'gpus': gpus,
    }


def parse_topo_matrix(text: str) -> dict[str, t.Any]:
    """`nvidia-smi topo -m` as {'topology': {dev: {peer: rel}}, 'nics': {NICn: name}, 'affinity': {...}}."""
    lines = [_ANSI_ESCAPE.sub('', line) for line in text.splitlines()]
    header_at = next((i for i, line in enumerate(lines) if re.search(r'\tGPU0(\t|$)', line)), None)
    if header_at is None:
        raise GpuTopologyError('nvidia-smi topo -m: no header row with GPU0 found')
    header = [cell.strip() for cell in lines[header_at].split('\t')[1:]]
    devices = [cell for cell in header if _DEVICE.match(cell)]
    extra_columns = [cell for cell in header if cell and not _DEVICE.match(cell)]
    topology: dict[str, dict[str, str]] = {}
    affinity: dict[str, dict[str, t.Optional[str]]] = {}
    for line in lines[header_at + 1:]:
        if not line.strip():
            break
        cells = line.split('\t')
        name = cells[0].strip()
        if not _DEVICE.match(name):
            raise GpuTopologyError(f'nvidia-smi topo -m: unexpected row {line.strip()!r}')
        values = [cell.strip() for cell in cells[1:]]
        if len(values) < len(devices):
            raise GpuTopologyError(f'nvidia-smi topo -m: row {name} has {len(values)} cells, '
                                   f'expected at least {len(devices)}')
        topology[name] = {peer: rel for peer, rel in zip(devices, values) if peer != name}
        # GPU rows carry affinity cells (nvidia-smi leaves one empty cell among them); NIC rows carry none.
        rest = [v for v in values[len(devices):] if v != '']
        if name.startswith('GPU') and rest:
            affinity[name] = {col: (None if val == 'N/A' else val) for col, val in zip(extra_columns, rest)}
    nics = {}
    for line in lines:
        match = re.match(r'^\s+(NIC[0-9]+):\s+(\S+)\s*$', line)
        if match:
            nics[match.group(1)] = match.group(2)
    return {'topology': topology, 'nics': nics, 'affinity': affinity}


# --- judging -------------------------------------------------------------------------------------

def version_tuple(version: str) -> tuple[int, ...]:
    """(580, 159, 4) of 580.159.04; the caller checks the text against _DRIVER_VERSION first."""
    return tuple(int(part) for part in version.split('.'))


def _per_gpu(name: str, gpus: list[dict[str, t.Any]], expected: t.Any,
             judge: t.Callable[[dict[str, t.Any]], tuple[str, t.Any, str]]) -> list[dict[str, t.Any]]:
    checks = per_subject(name, gpus, expected, lambda gpu: f"GPU{gpu['index']}", judge)
    return checks or [_check(name, FAIL, 'node', expected, None, 'no GPUs found')]


def _equals(field: str, label: str, want: t.Optional[bool]) -> t.Callable[[dict[str, t.Any]], tuple[str, t.Any, str]]:
    def judge(gpu: dict[str, t.Any]) -> tuple[str, t.Any, str]:
        actual = gpu[field]
        if actual is None:
            return SKIP, None, f'{label} is not reported by this GPU'
        state = 'enabled' if actual else 'disabled'
        if actual == want:
            return PASS, actual, f'{label} {state}'
        return FAIL, actual, f"{label} {state}, expected {'enabled' if want else 'disabled'}"
    return judge


def _check_gpu_count(facts: dict[str, t.Any], want: t.Optional[int]) -> list[dict[str, t.Any]]:
    if want is None:
        return [_skip('gpu_count')]
    actual = len(facts['gpus'])
    status = PASS if actual == want else FAIL
    return [_check('gpu_count', status, 'node', want, actual, f'{actual} GPUs visible, expected {want}')]


def _check_model(gpus: list[dict[str, t.Any]], pattern: t.Optional[str]) -> list[dict[str, t.Any]]:
    def judge(gpu: dict[str, t.Any]) -> tuple[str, t.Any, str]:
        ok = bool(gpu['name'] and re.search(pattern, gpu['name']))
        return (PASS if ok else FAIL), gpu['name'], f"product name {gpu['name']!r} {'matches' if ok else 'does not match'} {pattern!r}"
    return _per_gpu('model', gpus, pattern, judge)


def _check_memory(gpus: list[dict[str, t.Any]], minimum: t.Optional[int]) -> list[dict[str, t.Any]]:
    def judge(gpu: dict[str, t.Any]) -> tuple[str, t.Any, str]:
        actual = gpu['memory_total_mib']
        ok = actual is not None and actual >= minimum
        return (PASS if ok else FAIL), actual, f'{actual} MiB of memory, expected at least {minimum} MiB'
    return _per_gpu('memory', gpus, minimum, judge)


def _check_pcie(gpus: list[dict[str, t.Any]], what: str, minimum: t.Optional[int]) -> list[dict[str, t.Any]]:
    def judge(gpu: dict[str, t.Any]) -> tuple[str, t.Any, str]:
        current, best = gpu[f'pcie_{what}_current'], gpu[f'pcie_{what}_max']
        label = 'PCIe Gen' if what == 'gen' else 'PCIe x'
        if current is None:
            return SKIP, None, f'{label} not reported'
        if current >= minimum:
            return PASS, current, f'{label}{current} (max {best}), expected at least {minimum}'
        # An idle GPU lowers its link generation to save power; the width does not change that way.
        if what == 'gen' and 'gpu_idle' in gpu['clocks_event_reasons'] and (best or 0) >= minimum:
            return WARN, current, (f'{label}{current} while idle (max {best}); the link trains up under load, '
                                   f'expected at least {minimum}')
        return FAIL, current, f'{label}{current} (max {best}), expected at least {minimum}'
    return _per_gpu(f'pcie_{what}', gpus, minimum, judge)


def _check_ecc_errors(gpus: list[dict[str, t.Any]], maximum: t.Optional[int]) -> list[dict[str, t.Any]]:
    def judge(gpu: dict[str, t.Any]) -> tuple[str, t.Any, str]:
        actual = gpu['ecc_uncorrected_volatile']
        if actual is None:
            return SKIP, None, 'ECC error counts are not reported'
        status = PASS if actual <= maximum else FAIL
        return status, actual, f'{actual} uncorrectable ECC errors since the driver loaded, at most {maximum} allowed'
    return _per_gpu('ecc_errors', gpus, maximum, judge)


def _check_row_remap(gpus: list[dict[str, t.Any]]) -> list[dict[str, t.Any]]:
    def judge(gpu: dict[str, t.Any]) -> tuple[str, t.Any, str]:
        pending, failure = gpu['remapped_rows_pending'], gpu['remapped_rows_failure']
        actual = {'pending': pending, 'failure': failure}
        if pending is None and failure is None:
            return SKIP, actual, 'row remapping not reported (pre-Ampere GPU)'
        if failure:
            return FAIL, actual, 'a row remap failed: the GPU needs replacing'
        if pending:
            return WARN, actual, 'a row remap is pending: reset the GPU when it is idle'
        return PASS, actual, 'no row remap pending or failed'
    return _per_gpu('row_remap', gpus, {'pending': False, 'failure': False}, judge)


def _check_recovery_action(gpus: list[dict[str, t.Any]]) -> list[dict[str, t.Any]]:
    def judge(gpu: dict[str, t.Any]) -> tuple[str, t.Any, str]:
        action = gpu['recovery_action']
        if action is None:
            return SKIP, None, 'recovery action not reported by this driver'
        if action == 'None':
            return PASS, action, 'no recovery action required'
        return FAIL, action, f'the driver asks for recovery action {action!r}'
    return _per_gpu('recovery_action', gpus, 'None', judge)


def _check_clocks_event(gpus: list[dict[str, t.Any]]) -> list[dict[str, t.Any]]:
    def judge(gpu: dict[str, t.Any]) -> tuple[str, t.Any, str]:
        slowdowns = [r for r in gpu['clocks_event_reasons'] if r in SLOWDOWN_REASONS]
        if slowdowns:
            return WARN, slowdowns, f"clocks slowed by {', '.join(slowdowns)}"
        return PASS, slowdowns, 'no hardware or thermal slowdown active'
    return _per_gpu('clocks_event', gpus, [], judge)


def _check_driver(version: t.Optional[str], minimum: t.Optional[str]) -> list[dict[str, t.Any]]:
    if minimum is None:
        return [_skip('driver_version')]
    if version is None:
        return [_check('driver_version', FAIL, 'node', minimum, None, 'driver version not reported')]
    if not _DRIVER_VERSION.fullmatch(version):
        return [_check('driver_version', FAIL, 'node', minimum, version[:40],
                       f'driver {version[:40]!r} is not a driver version (such as 580.159.04)')]
    ok = version_tuple(version) >= version_tuple(minimum)
    return [_check('driver_version', PASS if ok else FAIL, 'node', minimum, version,
                   f"driver {version}, expected {minimum} or newer")]


def _check_nvlink(topology: dict[str, dict[str, str]], minimum: t.Optional[int]) -> list[dict[str, t.Any]]:
    if not minimum:
        return [_skip('nvlink', 'no NVLink requirement (nvlinks_per_pair is 0 or unset)')]
    gpus = sorted((d for d in topology if d.startswith('GPU')), key=lambda d: int(d[3:]))
    if len(gpus) < 2:
        return [_check('nvlink', FAIL, 'node', f'NV{minimum}', None, 'fewer than two GPUs in topo -m')]
    checks = []
    for i, left in enumerate(gpus):
        for right in gpus[i + 1:]:
            relation = topology[left].get(right)
            match = _NVLINK.match(relation or '')
            links = int(match.group(1)) if match else 0
            status = PASS if links >= minimum else FAIL
            checks.append(_check('nvlink', status, f'{left}-{right}', f'NV{minimum}', relation,
                                 f'{left} and {right} connected by {relation}, expected NV{minimum} or more'))
    return checks


def _hop_rank(relation: str) -> int:
    return 0 if _NVLINK.match(relation) else HOPS.index(relation) if relation in HOPS else len(HOPS)


def _check_affinity(topo: dict[str, t.Any], pairs: t.Optional[list[t.Mapping[str, t.Any]]]) -> list[dict[str, t.Any]]:
    if not pairs:
        return [_skip('gpu_nic_affinity')]
    by_name = {name: label for label, name in topo['nics'].items()}
    checks = []
    for pair in pairs:
        gpu, nic, max_hops = str(pair['gpu']), str(pair['nic']), str(pair.get('max_hops', 'PIX'))
        label = nic if nic in topo['topology'] else by_name.get(nic)
        subject = f'{gpu}-{nic}'
        relation = topo['topology'].get(gpu, {}).get(label) if label else None
        if relation is None:
            checks.append(_check('gpu_nic_affinity', FAIL, subject, max_hops, None,
                                 f'{gpu} or {nic} is not in nvidia-smi topo -m'))
            continue
        ok = _hop_rank(relation) <= HOPS.index(max_hops)
        checks.append(_check('gpu_nic_affinity', PASS if ok else FAIL, subject, max_hops, relation,
                             f'{gpu} reaches {nic} ({label}) through {relation}, expected {max_hops} or nearer'))
    return checks


def judge(facts: dict[str, t.Any], topo: dict[str, t.Any], want: t.Mapping[str, t.Any]) -> list[dict[str, t.Any]]:
    """Every check, in the documented order; expectations not set give one `skip`."""
    gpus = facts['gpus']
    return (
        _check_gpu_count(facts, want.get('gpu_count'))
        + _check_model(gpus, want.get('model'))
        + _check_memory(gpus, want.get('min_memory_mib'))
        + _check_nvlink(topo['topology'], want.get('nvlinks_per_pair'))
        + _check_pcie(gpus, 'gen', want.get('pcie_gen'))
        + _check_pcie(gpus, 'width', want.get('pcie_width'))
        + _per_gpu('persistence_mode', gpus, want.get('persistence_mode'),
                   _equals('persistence_mode', 'persistence mode', want.get('persistence_mode')))
        + _per_gpu('ecc_mode', gpus, want.get('ecc_enabled'), _equals('ecc_enabled', 'ECC', want.get('ecc_enabled')))
        + _check_ecc_errors(gpus, want.get('max_ecc_uncorrected'))
        + _check_row_remap(gpus)
        + _per_gpu('mig_mode', gpus, want.get('mig_enabled'), _equals('mig_enabled', 'MIG mode', want.get('mig_enabled')))
        + _check_driver(facts['driver_version'], want.get('driver_version'))
        + _check_recovery_action(gpus)
        + _check_clocks_event(gpus)
        + _check_affinity(topo, want.get('gpu_nic_affinity'))
    )


# What the module returns when it could not judge the node: its result's keys, empty.
EMPTY_RESULT: t.Mapping[str, t.Any] = {'gpus': [], 'topology': {}, 'nics': {}, 'driver_version': None,
                                       'cuda_version': None, 'checks': [], 'healthy': False}


def module_work(params: t.Mapping[str, t.Any], current: t.Any) -> dict[str, t.Any]:
    """The gpu_topology module's work (`params`: its options, nvidia_smi_path resolved): the expectation, nvidia-smi's
    two outputs, the checks. `current.what` names the input being handled, for an unexpected error's message."""
    current.what = f"profile {params['profile']!r} and expected {params['expected']!r}"
    want = resolve_expectation(params['profile'], params['expected'])
    nvidia_smi = params['nvidia_smi_path']
    current.what = f"the output of '{nvidia_smi} -q -x' and '{nvidia_smi} topo -m'"
    facts, topo = gather(nvidia_smi, params['timeout'])
    current.what = f"the GPU facts against profile {params['profile']!r} and expected {params['expected']!r}"
    return evaluate(facts, topo, want)


def failure_summary(checks: list[dict[str, t.Any]]) -> str:
    return _failure_summary(checks, 'GPU')


# --- gathering -----------------------------------------------------------------------------------

def run_command(argv: list[str], timeout: float) -> str:
    """stdout of argv; a missing program, a timeout or a non-zero exit raise GpuTopologyError naming argv."""
    command = ' '.join(argv)
    try:
        done = proc.run(argv, timeout)
    except proc.CommandError as err:
        if err.reason == proc.TIMEOUT:
            raise CommandTimeout(f"'{command}' did not finish within {timeout} s (a hung GPU or driver?)") from None
        if err.reason == proc.MISSING:
            raise GpuTopologyError(f'{argv[0]} not found: is the NVIDIA driver installed?') from None
        raise GpuTopologyError(str(err)) from None
    if done.rc != 0:
        detail = (done.stdout.strip() or done.stderr.strip()).splitlines()
        raise GpuTopologyError(f"'{command}' exited with {done.rc}: {detail[0] if detail else 'no output'}")
    return done.stdout


def gather(nvidia_smi: str, timeout: float) -> tuple[dict[str, t.Any], dict[str, t.Any]]:
    """Run exactly `nvidia-smi -q -x` and `nvidia-smi topo -m` and parse both."""
    facts = parse_smi_xml(run_command([nvidia_smi, '-q', '-x'], timeout))
    topo = parse_topo_matrix(run_command([nvidia_smi, 'topo', '-m'], timeout))
    return facts, topo


def evaluate(facts: dict[str, t.Any], topo: dict[str, t.Any], want: t.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """The module's result: facts, topology, checks and the verdict."""
    checks = judge(facts, topo, want)
    return {
        'gpus': facts['gpus'],
        'topology': topo['topology'],
        'nics': topo['nics'],
        'driver_version': facts['driver_version'],
        'cuda_version': facts['cuda_version'],
        'checks': checks,
        'healthy': healthy(checks),
    }


# --- as a node validator (_validators.py) ----------------------------------------------------------

_XML, _TOPO = 'nvidia-smi -q -x', 'nvidia-smi topo -m'


def _collect(settings: t.Mapping[str, t.Any], timeout: float) -> list[validators.Reading]:
    smi = settings['nvidia_smi']
    return [validators.Reading(_XML, lambda: run_command([smi, '-q', '-x'], timeout), timeout, _XML),
            validators.Reading(_TOPO, lambda: run_command([smi, 'topo', '-m'], timeout), timeout, _TOPO)]


def _judge(outputs: t.Mapping[str, t.Any], settings: t.Mapping[str, t.Any], current: t.Any) -> list[dict[str, t.Any]]:
    current.what = _XML
    facts = parse_smi_xml(outputs[_XML])
    current.what = _TOPO
    topo = parse_topo_matrix(outputs[_TOPO])
    current.what = f'{_XML} and topo -m'
    return judge(facts, topo, settings['want'])


def _prepare(settings: dict[str, t.Any]) -> dict[str, t.Any]:
    return dict(settings, want=resolve_expectation(settings['profile'] or None, settings['expected']))


VALIDATOR = validators.Validator(
    name='gpu_topology', title='GPUs, NVLinks, PCIe links, ECC, row remapping, clocks, driver, GPU-NIC affinity',
    settings=(
        validators.Setting('profile', 'text', None, 'A GPU profile of the catalog, or null.', nullable=True,
                           what='a profile name or null'),
        validators.Setting('expected', 'object', {}, 'Expectations laid over the profile, as the module takes them.'),
        validators.Setting('nvidia_smi', 'command', 'nvidia-smi', 'The nvidia-smi command.', nullable=True,
                           package='the NVIDIA driver'),
    ),
    collect=_collect, judge=_judge, prepare=_prepare, errors=(GpuTopologyError,), timeouts=(CommandTimeout,),
    module='gpu_topology')
