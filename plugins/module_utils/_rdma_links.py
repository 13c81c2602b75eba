# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read InfiniBand/RoCE ports from sysfs and judge them against an expectation.

Pure Python (standard library only, no Ansible import): the `llmforge.cluster.rdma_links` module and a
node's Slurm health check share it. Only files are read; nothing under sysfs is written.
"""

from __future__ import annotations

import os
import re
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils import _validators as validators
from ansible_collections.llmforge.cluster.plugins.module_utils._checks import (
    FAIL, PASS, SKIP, WARN, check, failure_summary as _failure_summary, finite, healthy, per_subject, skip)

# Bit width of each error counter: the kernel stops counting at the maximum, so a saturated value means
# "at least this many".
COUNTER_BITS = {
    'symbol_error': 16, 'port_rcv_errors': 16, 'port_rcv_remote_physical_errors': 16, 'port_xmit_discards': 16,
    'VL15_dropped': 16, 'port_rcv_switch_relay_errors': 16, 'port_xmit_constraint_errors': 8,
    'port_rcv_constraint_errors': 8, 'link_error_recovery': 8, 'link_downed': 8,
    'local_link_integrity_errors': 4, 'excessive_buffer_overrun_errors': 4,
}

# Allowed counts since the counters were last cleared. Zero where any occurrence means a fault (buffer
# overruns, local integrity); small non-zero values where links see a few events at bring-up (a link
# trains, the SM sweeps) and public health checks alert only on growth beyond a handful.
DEFAULT_MAX_COUNTERS = {
    'symbol_error': 10,
    'link_error_recovery': 10,
    'link_downed': 2,
    'port_rcv_errors': 10,
    'port_rcv_remote_physical_errors': 10,
    'excessive_buffer_overrun_errors': 0,
    'local_link_integrity_errors': 0,
    'port_xmit_discards': 100,
}

EXPECTED_TYPES: dict[str, type | tuple[type, ...]] = {
    'hca_count': int,
    'devices': str,
    'link_layer': str,
    'rate_gbps': (int, float),
    'state': str,
    'phys_state': str,
    'mtu': int,
    'max_counters': dict,
    'require_netdev': bool,
    'require_sm': bool,
}
DEFAULTS = {'state': 'ACTIVE', 'phys_state': 'LinkUp'}
STATES = ('NOP', 'DOWN', 'INIT', 'ARMED', 'ACTIVE', 'ACTIVE_DEFER')
PHYS_STATES = ('Sleep', 'Polling', 'Disabled', 'PortConfigurationTraining', 'LinkUp', 'LinkErrorRecovery', 'Phy Test')
# ASCII digits, bounded: float() reads other scripts' digits, and a long run of digits as inf, a rate that passes.
_RATE = re.compile(r'^(?P<gbps>[0-9]{1,6}(?:\.[0-9]{1,6})?) Gb/sec'
                   r'(?: \((?P<width>[0-9]{1,2})X(?: (?P<speed>[A-Za-z0-9_]+))?\))?$')
_PCIE_SPEED = re.compile(r'^([0-9]{1,6}(?:\.[0-9]{1,6})?) GT/s')
_DECIMAL = re.compile(r'[0-9]{1,20}')
_SIGNED = re.compile(r'-?[0-9]{1,20}')
_HEX = re.compile(r'(?:0[xX])?[0-9a-fA-F]{1,16}')


class RdmaLinksError(Exception):
    """Bad input or an unreadable tree; the message names the key or path."""


def resolve_expectation(expected: t.Optional[t.Mapping[str, t.Any]]) -> dict[str, t.Any]:
    """Defaults with `expected` laid over them; unknown keys, wrong types and bad values are errors."""
    want: dict[str, t.Any] = dict(DEFAULTS, max_counters=dict(DEFAULT_MAX_COUNTERS))
    for key, value in (expected or {}).items():
        if key not in EXPECTED_TYPES:
            raise RdmaLinksError(f"unknown key 'expected.{key}'; known keys: {', '.join(sorted(EXPECTED_TYPES))}")
        if value is None:
            want[key] = None
            continue
        wanted = EXPECTED_TYPES[key]
        if isinstance(value, bool) and wanted is not bool or not isinstance(value, wanted):
            names = ' or '.join(w.__name__ for w in (wanted if isinstance(wanted, tuple) else (wanted,)))
            raise RdmaLinksError(f'expected.{key} must be {names}, got {value!r}')
        if key == 'max_counters':
            want[key] = dict(DEFAULT_MAX_COUNTERS, **_checked_counters(value))
        else:
            want[key] = value
    _check_values(want)
    return want


def _checked_counters(value: t.Mapping[str, t.Any]) -> dict[str, int]:
    for name, limit in value.items():
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise RdmaLinksError(f'expected.max_counters.{name} must be a whole number >= 0, got {limit!r}')
    return dict(value)


def _check_values(want: dict[str, t.Any]) -> None:
    if want.get('devices') is not None:
        try:
            re.compile(want['devices'])
        except re.error as err:
            raise RdmaLinksError(f'expected.devices is not a valid regular expression: {err}') from None
    rate = want.get('rate_gbps')
    if rate is not None and (finite(rate) is None or rate < 0):
        raise RdmaLinksError(f'expected.rate_gbps must be a finite number >= 0 (Gb/s), got {rate!r}')
    if want.get('link_layer') not in (None, 'InfiniBand', 'Ethernet'):
        raise RdmaLinksError(f"expected.link_layer must be InfiniBand or Ethernet, got {want['link_layer']!r}")
    if want.get('state') not in (None,) + STATES:
        raise RdmaLinksError(f"expected.state must be one of {', '.join(STATES)}, got {want['state']!r}")
    if want.get('phys_state') not in (None,) + PHYS_STATES:
        raise RdmaLinksError(f"expected.phys_state must be one of {', '.join(PHYS_STATES)}, got {want['phys_state']!r}")


# --- reading sysfs --------------------------------------------------------------------------------

def _read(path: str) -> t.Optional[str]:
    """A sysfs attribute's text, or None when it is absent or the kernel refuses to read it.

    Bytes that are not UTF-8 are replaced (U+FFFD); a NUL byte is never in a sysfs attribute the kernel prints,
    so one there is a malformed value: RdmaLinksError naming the file.
    """
    try:
        with open(path, encoding='utf-8', errors='replace') as handle:
            text = handle.read().strip()
    except OSError:
        return None
    if '\x00' in text:
        raise RdmaLinksError(f'{path} holds a NUL byte: {text[:60]!r} is not a value the kernel prints')
    return text


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _enum_name(value: t.Optional[str]) -> t.Optional[str]:
    """`4: ACTIVE` -> ACTIVE, `7: Phy Test` -> Phy Test."""
    if value is None:
        return None
    return value.split(':', 1)[1].strip() if ':' in value else value


def _int(value: t.Optional[str], base: int = 10, signed: bool = False) -> t.Optional[int]:
    """A sysfs number in ASCII digits (hex for base 16, a sign only where the kernel prints one), else None."""
    pattern = _HEX if base == 16 else _SIGNED if signed else _DECIMAL
    return int(value, base) if value is not None and pattern.fullmatch(value) else None


def parse_rate(value: t.Optional[str]) -> dict[str, t.Any]:
    """`400 Gb/sec (4X NDR)` -> {'rate_gbps': 400.0, 'width': '4X', 'speed_name': 'NDR'}."""
    match = _RATE.match(value or '')
    if not match:
        return {'rate_gbps': None, 'width': None, 'speed_name': None}
    return {'rate_gbps': float(match.group('gbps')),
            'width': f"{match.group('width')}X" if match.group('width') else None,
            'speed_name': match.group('speed')}


def _pcie(device_dir: str) -> dict[str, t.Any]:
    def speed(name: str) -> t.Optional[float]:
        match = _PCIE_SPEED.match(_read(os.path.join(device_dir, name)) or '')
        return float(match.group(1)) if match else None
    return {'speed': speed('current_link_speed'), 'width': _int(_read(os.path.join(device_dir, 'current_link_width'))),
            'max_speed': speed('max_link_speed'), 'max_width': _int(_read(os.path.join(device_dir, 'max_link_width')))}


def _netdev(sysfs_root: str, hca_dir: str, port: int) -> t.Optional[str]:
    named = _read(os.path.join(hca_dir, 'ports', str(port), 'gid_attrs', 'ndevs', '0'))
    if named:
        return named
    net_dir = os.path.join(hca_dir, 'device', 'net')
    for name in _listdir(net_dir):
        dev_port = _int(_read(os.path.join(net_dir, name, 'dev_port')))
        if dev_port in (None, port - 1):
            return name
    return None


def _counters(port_dir: str) -> dict[str, t.Optional[int]]:
    """The counters the kernel lets us read; one whose text is not a count is kept as None, to fail its limit."""
    counters_dir = os.path.join(port_dir, 'counters')
    texts = {name: _read(os.path.join(counters_dir, name)) for name in _listdir(counters_dir)}
    return {name: _int(text) for name, text in texts.items() if text is not None}


def read_ports(sysfs_root: str) -> list[dict[str, t.Any]]:
    """Every port of every RDMA device under `<sysfs_root>/class/infiniband`, in device/port order."""
    ib_dir = os.path.join(sysfs_root, 'class', 'infiniband')
    if not os.path.isdir(ib_dir):
        return []
    ports = []
    for device in _listdir(ib_dir):
        hca_dir = os.path.join(ib_dir, device)
        if not os.access(hca_dir, os.R_OK | os.X_OK):
            raise RdmaLinksError(f'{hca_dir} is not readable')
        common = {
            'node_guid': _read(os.path.join(hca_dir, 'node_guid')),
            'fw_ver': _read(os.path.join(hca_dir, 'fw_ver')),
            'board_id': _read(os.path.join(hca_dir, 'board_id')),
            'hca_type': _read(os.path.join(hca_dir, 'hca_type')),
            'numa_node': _int(_read(os.path.join(hca_dir, 'device', 'numa_node')), signed=True),
            'pcie': _pcie(os.path.join(hca_dir, 'device')),
        }
        for port_name in sorted(_listdir(os.path.join(hca_dir, 'ports')), key=lambda p: _int(p) or 0):
            port = _int(port_name)
            if port is None:
                continue
            port_dir = os.path.join(hca_dir, 'ports', port_name)
            netdev = _netdev(sysfs_root, hca_dir, port)
            mtu = _int(_read(os.path.join(sysfs_root, 'class', 'net', netdev, 'mtu'))) if netdev else None
            if mtu is None and netdev:
                mtu = _int(_read(os.path.join(hca_dir, 'device', 'net', netdev, 'mtu')))
            ports.append(dict(
                {'device': device, 'port': port,
                 'state': _enum_name(_read(os.path.join(port_dir, 'state'))),
                 'phys_state': _enum_name(_read(os.path.join(port_dir, 'phys_state'))),
                 'link_layer': _read(os.path.join(port_dir, 'link_layer')),
                 'lid': _int(_read(os.path.join(port_dir, 'lid')), 16),
                 'sm_lid': _int(_read(os.path.join(port_dir, 'sm_lid')), 16),
                 'netdev': netdev, 'mtu': mtu,
                 'counters': _counters(port_dir)},
                **parse_rate(_read(os.path.join(port_dir, 'rate'))), **common))
    return ports


# --- judging --------------------------------------------------------------------------------------

Port = t.Dict[str, t.Any]


def _subject(port: Port) -> str:
    return f"{port['device']}/{port['port']}"


def select_ports(ports: list[Port], want: t.Mapping[str, t.Any]) -> list[Port]:
    """Ports of the devices matching `expected.devices` (all when unset)."""
    return [p for p in ports if not want.get('devices') or re.search(want['devices'], p['device'])]


def _per_port(name: str, ports: list[Port], expected: t.Any,
              judge: t.Callable[[Port], tuple[str, t.Any, str]]) -> list[dict[str, t.Any]]:
    return per_subject(name, ports, expected, _subject, judge)


def _equal(field: str, want: t.Any) -> t.Callable[[Port], tuple[str, t.Any, str]]:
    def judge(port: Port) -> tuple[str, t.Any, str]:
        actual = port[field]
        return (PASS if actual == want else FAIL), actual, f'{field} is {actual}, expected {want}'
    return judge


def _judge_rate(minimum: float) -> t.Callable[[Port], tuple[str, t.Any, str]]:
    def judge(port: Port) -> tuple[str, t.Any, str]:
        # A port that is not up may still print its last or maximum rate; only an active link's rate counts.
        if port['state'] != 'ACTIVE':
            return SKIP, port['rate_gbps'], f"port is {port['state']}: rate judged only on ACTIVE ports"
        actual = port['rate_gbps']
        ok = actual is not None and actual >= minimum
        return (PASS if ok else FAIL), actual, f'{actual} Gb/s ({port["width"]} {port["speed_name"]}), expected at least {minimum}'
    return judge


def _judge_mtu(minimum: int) -> t.Callable[[Port], tuple[str, t.Any, str]]:
    def judge(port: Port) -> tuple[str, t.Any, str]:
        if port['mtu'] is None:
            return SKIP, None, 'no netdev MTU to read for this port'
        ok = port['mtu'] >= minimum
        return (PASS if ok else FAIL), port['mtu'], f"MTU {port['mtu']} on {port['netdev']}, expected at least {minimum}"
    return judge


def _judge_counters(limits: t.Mapping[str, int]) -> t.Callable[[Port], tuple[str, t.Any, str]]:
    def judge(port: Port) -> tuple[str, t.Any, str]:
        over = {}
        notes = []
        for name, limit in limits.items():
            if name not in port['counters']:
                continue
            value = port['counters'][name]
            if value is None:
                over[name] = None
                notes.append(f'{name} is not a count (the kernel prints a decimal number)')
                continue
            if value <= limit:
                continue
            over[name] = value
            bits = COUNTER_BITS.get(name)
            saturated = bits is not None and value >= 2 ** bits - 1
            notes.append(f'{name} {"at least " if saturated else ""}{value} (max {limit})'
                         + (f', saturated at its {bits}-bit maximum' if saturated else ''))
        if over:
            return FAIL, over, 'error counters over their limits: ' + '; '.join(notes)
        return PASS, {}, 'error counters within their limits'
    return judge


def _judge_netdev(port: Port) -> tuple[str, t.Any, str]:
    if port['netdev']:
        return PASS, port['netdev'], f"maps to netdev {port['netdev']}"
    return FAIL, None, 'no netdev maps to this port (RoCE and IPoIB need one)'


def _judge_sm(port: Port) -> tuple[str, t.Any, str]:
    if port['link_layer'] != 'InfiniBand':
        return SKIP, port['sm_lid'], f"{port['link_layer']} port: no subnet manager involved"
    if port['sm_lid']:
        return PASS, port['sm_lid'], f"subnet manager at LID {port['sm_lid']:#x}"
    return FAIL, port['sm_lid'], 'no subnet manager seen (sm_lid 0): is opensm or the switch SM running?'


def _check_hca_count(ports: list[Port], want: t.Optional[int]) -> list[dict[str, t.Any]]:
    if want is None:
        return [skip('hca_count')]
    status = PASS if len(ports) == want else FAIL
    return [check('hca_count', status, 'node', want, len(ports), f'{len(ports)} ports selected, expected {want}')]


def _check_pcie_link(ports: list[Port]) -> list[dict[str, t.Any]]:
    checks = []
    for device in sorted({p['device'] for p in ports}):
        pcie = next(p['pcie'] for p in ports if p['device'] == device)
        if pcie['speed'] is None or pcie['width'] is None:
            checks.append(check('pcie_link', SKIP, device, None, pcie, 'PCIe link attributes not in sysfs'))
            continue
        expected = {'speed': pcie['max_speed'], 'width': pcie['max_width']}
        down = (pcie['max_speed'] is not None and pcie['speed'] < pcie['max_speed']) or \
            (pcie['max_width'] is not None and pcie['width'] < pcie['max_width'])
        message = (f"PCIe {pcie['speed']} GT/s x{pcie['width']}, capable of {pcie['max_speed']} GT/s x{pcie['max_width']}")
        checks.append(check('pcie_link', FAIL if down else PASS, device, expected,
                            {'speed': pcie['speed'], 'width': pcie['width']},
                            message + (': the HCA link trained down' if down else '')))
    return checks


def _check_fw_consistency(ports: list[Port]) -> list[dict[str, t.Any]]:
    by_model: dict[str, dict[str, str]] = {}
    for port in ports:
        by_model.setdefault(port['hca_type'] or 'unknown', {})[port['device']] = port['fw_ver']
    checks = []
    for model, versions in sorted(by_model.items()):
        distinct = sorted({v for v in versions.values() if v})
        if len(distinct) > 1:
            detail = ', '.join(f'{dev} {ver}' for dev, ver in sorted(versions.items()))
            checks.append(check('fw_consistency', WARN, model, 'one firmware version', distinct,
                                f'{model} HCAs run different firmware: {detail}'))
        else:
            checks.append(check('fw_consistency', PASS, model, 'one firmware version', distinct,
                                f"{len(versions)} {model} HCA(s) on firmware {distinct[0] if distinct else 'unknown'}"))
    return checks


def judge(ports: list[Port], want: t.Mapping[str, t.Any]) -> list[dict[str, t.Any]]:
    """Every check, in the documented order, over the selected ports."""
    return (
        _check_hca_count(ports, want.get('hca_count'))
        + _per_port('state', ports, want.get('state'), _equal('state', want.get('state')))
        + _per_port('phys_state', ports, want.get('phys_state'), _equal('phys_state', want.get('phys_state')))
        + _per_port('rate', ports, want.get('rate_gbps'), _judge_rate(want.get('rate_gbps') or 0))
        + _per_port('link_layer', ports, want.get('link_layer'), _equal('link_layer', want.get('link_layer')))
        + _per_port('mtu', ports, want.get('mtu'), _judge_mtu(want.get('mtu') or 0))
        + _per_port('counters', ports, want.get('max_counters'), _judge_counters(want.get('max_counters') or {}))
        + _per_port('netdev', ports, True if want.get('require_netdev') else None, _judge_netdev)
        + _per_port('sm', ports, True if want.get('require_sm') else None, _judge_sm)
        + _check_pcie_link(ports)
        + _check_fw_consistency(ports)
    )


def evaluate(sysfs_root: str, expected: t.Optional[t.Mapping[str, t.Any]]) -> dict[str, t.Any]:
    """The module's result: ports, checks and the verdict."""
    want = resolve_expectation(expected)
    if not os.path.isdir(sysfs_root):
        raise RdmaLinksError(f'sysfs_root {sysfs_root} does not exist or is not a directory')
    ib_dir = os.path.join(sysfs_root, 'class', 'infiniband')
    if not os.path.isdir(ib_dir):
        checks = [check('hca_count', FAIL, 'node', want.get('hca_count'), 0,
                        f'no RDMA devices: {ib_dir} does not exist (no HCA, or the driver is not loaded)')]
        return {'ports': [], 'checks': checks, 'healthy': False}
    ports = select_ports(read_ports(sysfs_root), want)
    checks = judge(ports, want)
    return {'ports': ports, 'checks': checks, 'healthy': healthy(checks)}


# What the module returns when it could not judge the node: its result's keys, empty.
EMPTY_RESULT: t.Mapping[str, t.Any] = {'ports': [], 'checks': [], 'healthy': False}


def module_work(params: t.Mapping[str, t.Any], current: t.Any) -> dict[str, t.Any]:
    """The rdma_links module's work (`params`: its options): every HCA and port under sysfs_root, judged."""
    current.what = f"sysfs under {params['sysfs_root']} against expected {params['expected']!r}"
    return evaluate(params['sysfs_root'], params['expected'])


def failure_summary(checks: list[dict[str, t.Any]]) -> str:
    return _failure_summary(checks, 'RDMA')


# --- as a node validator (_validators.py) ----------------------------------------------------------

def _collect(settings: t.Mapping[str, t.Any], timeout: float) -> list[validators.Reading]:
    root = settings['sysfs_root']
    return [validators.Reading(f'sysfs {root}', lambda: evaluate(root, settings['expected']), timeout, 'rdma_links')]


def _judge(outputs: t.Mapping[str, t.Any], settings: t.Mapping[str, t.Any], current: t.Any) -> list[dict[str, t.Any]]:
    (result,) = outputs.values()
    return list(result['checks'])


def _prepare(settings: dict[str, t.Any]) -> dict[str, t.Any]:
    resolve_expectation(settings['expected'])
    return settings


VALIDATOR = validators.Validator(
    name='rdma_links', title='InfiniBand/RoCE ports from sysfs: state, rate, MTU, error counters, HCA count',
    settings=(
        validators.Setting('sysfs_root', 'directory', '/sys', 'Where sysfs is mounted.', nullable=True),
        validators.Setting('expected', 'object', {}, 'The expectation, as the rdma_links module takes it.'),
    ),
    collect=_collect, judge=_judge, prepare=_prepare, errors=(RdmaLinksError,), module='rdma_links')
