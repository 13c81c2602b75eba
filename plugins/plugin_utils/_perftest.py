# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parse the bandwidth report of perftest's ``ib_write_bw``, ``ib_read_bw`` and ``ib_send_bw`` and judge it.

Pure Python with no Ansible import, so modules, filters and tests can all share it.
Output without a result row raises ``PerftestError`` (a ``ValueError``) quoting perftest's own error line.

The layout follows linux-rdma/perftest ``src/perftest_parameters.h`` and ``src/perftest_parameters.c``:

* the settings block opens with ``RESULT_LINE`` (dashes) and a banner such as ``RDMA_Write BW Test``
  (``testsStr[verb]``, then ``Bidirectional``/``Post List`` when set, then ``BW Test``);
* ``Device         : mlx5_0`` shares its line with ``Dual-port``; ``Link type       : IB`` has its own;
* the result header is ``RESULT_FMT`` (``BW peak[MB/sec]``) or, with ``--report_gbits``, ``RESULT_FMT_G``
  (``BW peak[Gb/sec]``); ``--report-per-port`` adds port columns after ``MsgRate[Mpps]``,
  ``--cpu_util`` adds ``CPU_Util[%]`` and ``--raw_qos`` puts ``#sl`` between ``#bytes`` and ``#iterations``;
* each row is ``REPORT_FMT`` ``" %-7lu    %-10lu       %-7.2lf            %-7.2lf\\t\\t   %-7.6lf"``:
  bytes, iterations, peak, average, message rate; ``-a`` prints one row per size.
  In duration mode (``-D``) perftest forces ``noPeak``, so the peak column reads 0.00.
"""

from __future__ import annotations

import math
import re
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils._checks import finite

GBITS_UNIT = 'Gb/sec'
MBYTES_UNIT = 'MB/sec'

# perftest divides bytes per second by format_factor = (report_fmt == MBS) ? 0x100000 : 125000000
# (print_report_bw in perftest_parameters.c), so its "MB/sec" is MiB/s (2**20 bytes) and its "Gb/sec" is 10**9 bits/s.
# One perftest MB/sec is therefore 2**20 * 8 / 10**9 Gb/s = 0.008388608 Gb/s, not 8 / 1000.
BYTES_PER_PERFTEST_MB = 0x100000
GBPS_PER_PERFTEST_MBPS = BYTES_PER_PERFTEST_MB * 8 / 1e9

_UNIT_TO_GBPS = {GBITS_UNIT: 1.0, MBYTES_UNIT: GBPS_PER_PERFTEST_MBPS}

_HEADER = re.compile(r'^\s*#bytes\s+(?P<sl>#sl\s+)?#iterations\s+BW peak\[(?P<unit>[^\]]+)\]\s+BW average\[(?P<average_unit>[^\]]+)\]')
# printf's %lf writes inf and nan for a zero-length measurement; keep them so judging sees them rather than skipping the row.
_NUMBER = r'[-+]?(?:[0-9]+(?:\.[0-9]*)?|inf|nan)'
_ROW = re.compile(rf'^\s*(?P<bytes>[0-9]+)\s+(?P<iterations>[0-9]+)\s+(?P<peak>{_NUMBER})\s+(?P<average>{_NUMBER})\s+(?P<rate>{_NUMBER})(?:\s|$)')
_QOS_ROW = re.compile(rf'^\s*(?P<bytes>[0-9]+)\s+(?P<sl>[0-9]+)\s+(?P<iterations>[0-9]+)\s+(?P<peak>{_NUMBER})\s+(?P<average>{_NUMBER})'
                      rf'\s+(?P<rate>{_NUMBER})(?:\s|$)')
_BANNER = re.compile(r'^\s*((?:Send|RDMA_Write|RDMA_Read|Atomic)\b.*\bTest)\s*$')
_DEVICE = re.compile(r'\bDevice\s*:\s*(\S+)')
_LINK_TYPE = re.compile(r'^\s*Link type\s*:\s*(\S+)')
_ERROR_LINE = re.compile(r"couldn't|unable|failed|error", re.IGNORECASE)

# More digits than any byte count, iteration count or bandwidth perftest prints: a damaged row.
_MAX_DIGITS = 20

NO_ROWS_MESSAGE = 'no result rows in perftest output'


class PerftestError(ValueError):
    """perftest output that holds no bandwidth result, or holds one that cannot be read."""


def _checked(value: str, field: str, line: str) -> str:
    """`value` when its whole part has at most _MAX_DIGITS digits; a longer one is damaged output, not a measurement."""
    if len(value.lstrip('+-').split('.', 1)[0]) > _MAX_DIGITS:
        raise PerftestError(f'perftest {field} {value[:40]!r} is not a plausible number in the result row {line.strip()[:200]!r}')
    return value


def _to_gbps(value: str, unit: str, field: str, line: str) -> float:
    return float(_checked(value, field, line)) * _UNIT_TO_GBPS[unit]


def _header_unit(match: t.Match[str], line: str) -> str:
    unit = match.group('unit')
    if unit not in _UNIT_TO_GBPS or match.group('average_unit') != unit:
        raise PerftestError(f'unknown bandwidth unit in perftest header {line.strip()!r}')
    return unit


def parse_bw(text: str) -> dict:
    """Parse the output of an ``ib_*_bw`` client or server into its settings and result rows.

    Bandwidths come back in Gb/s whichever unit perftest printed; ``unit`` says which one it printed.
    ``best`` is the row with the largest message size (the last such row when a size repeats).
    """
    if not isinstance(text, str):
        raise PerftestError(f'perftest output must be a string, got {type(text).__name__}')
    test = device = link_type = unit = None
    qos_columns = False
    first_error = None
    rows = []
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            header_unit = _header_unit(header, line)
            if unit is not None and header_unit != unit:
                raise PerftestError(f'perftest output mixes {unit} and {header_unit} result headers')
            unit = header_unit
            qos_columns = header.group('sl') is not None
            continue
        if unit is not None:
            row = (_QOS_ROW if qos_columns else _ROW).match(line)
            if row:
                rows.append({
                    'bytes': int(_checked(row.group('bytes'), '#bytes', line)),
                    'iterations': int(_checked(row.group('iterations'), '#iterations', line)),
                    'peak_gbps': _to_gbps(row.group('peak'), unit, 'BW peak', line),
                    'average_gbps': _to_gbps(row.group('average'), unit, 'BW average', line),
                    'msg_rate_mpps': float(_checked(row.group('rate'), 'MsgRate', line)),
                })
                continue
        if test is None:
            banner = _BANNER.match(line)
            if banner:
                test = banner.group(1)
                continue
        if device is None:
            found = _DEVICE.search(line)
            if found:
                device = found.group(1)
                continue
        if link_type is None:
            found = _LINK_TYPE.match(line)
            if found:
                link_type = found.group(1)
                continue
        if first_error is None and _ERROR_LINE.search(line):
            first_error = line.strip()
    if not rows:
        raise PerftestError(first_error or NO_ROWS_MESSAGE)
    best = max(reversed(rows), key=lambda row: row['bytes'])
    return {'test': test, 'device': device, 'link_type': link_type, 'unit': unit, 'rows': rows, 'best': best}


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def judge_bw(result: dict, expected_gbps: float, tolerance: float = 0.9) -> dict:
    """Pass a parsed result when its ``best`` row averages at least ``expected_gbps * tolerance``.

    A nan or infinite average fails. Raises ``ValueError`` for a tolerance outside (0, 1] or a non-positive expectation.
    """
    if not _is_number(tolerance) or not 0 < tolerance <= 1:
        raise ValueError(f'tolerance {tolerance!r} is not in (0, 1]')
    if not _is_number(expected_gbps) or not 0 < expected_gbps < math.inf:
        raise ValueError(f'expected_gbps {expected_gbps!r} is not a positive number')
    if not isinstance(result, dict) or not isinstance(result.get('best'), dict):
        raise ValueError(f'result {result!r} has no best row; pass the output of parse_bw')
    best = result['best']
    average = best['average_gbps']
    threshold = expected_gbps * tolerance
    # printf writes inf for a run of no time: a bandwidth that cannot be judged fails, it never passes as "fast".
    if finite(average) is None:
        passed = False
        message = (f"the average at {best['bytes']} bytes, {average}, is not a finite number: no bandwidth to judge "
                   f'against the {threshold:.2f} Gb/s threshold')
    else:
        passed = average >= threshold
        comparison = '>=' if passed else 'below'
        message = (f"{average:.2f} Gb/s average at {best['bytes']} bytes {comparison} the {threshold:.2f} Gb/s "
                   f'threshold ({tolerance * 100:g}% of {expected_gbps:g} Gb/s)')
    return {'status': 'pass' if passed else 'fail', 'average_gbps': average, 'threshold_gbps': threshold, 'message': message}
