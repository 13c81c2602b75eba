# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests for the perftest bandwidth report parser and judge, over inline outputs and the captured fixtures."""

from __future__ import annotations

import math
import pathlib

import pytest

from ansible_collections.llmforge.cluster.plugins.plugin_utils import _perftest
from ansible_collections.llmforge.cluster.plugins.plugin_utils._perftest import PerftestError

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / 'fixtures' / 'perftest'
MB = _perftest.GBPS_PER_PERFTEST_MBPS

# Formats copied from linux-rdma/perftest src/perftest_parameters.h (C %lu/%lf written as Python %d/%f).
RESULT_LINE = '-' * 87
RESULT_FMT = ' #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]'
RESULT_FMT_G = ' #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]'
RESULT_FMT_G_QOS = ' #bytes    #sl      #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]'
RESULT_FMT_G_PER_PORT = (' #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]   BW Port1[Gb/sec]'
                         '   MsgRate Port1[Mpps]   BW Port2[Gb/sec]   MsgRate Port2[Mpps]')
REPORT_FMT = ' %-7d    %-10d       %-7.2f            %-7.2f\t\t   %-7.6f'
REPORT_FMT_EXT = ' %-7d    %d           %-7.6f            %-7.6f            %-7.6f'
REPORT_FMT_QOS = ' %-7d    %d           %d           %-7.2f            %-7.2f                  %-7.6f'
REPORT_FMT_PER_PORT = ' %-7d    %-10d     %-7.2f            %-7.2f\t\t   %-7.6f        %-7.2f            %-7.6f              %-7.2f            %-7.6f'


def row(size: int, iterations: int, peak: float, average: float, rate: float, fmt: str = REPORT_FMT) -> str:
    return fmt % (size, iterations, peak, average, rate)


def settings(banner: str = 'RDMA_Write BW Test', device: str = 'mlx5_0', link: str = 'IB', client: bool = True,
             extra: tuple[str, ...] = (' Max inline data : 0[B]',)) -> list[str]:
    """The settings block ctx_print_test_info prints, and the address exchange after it."""
    lines = [
        RESULT_LINE,
        f'                    {banner}',
        f' Dual-port       : OFF\t\tDevice         : {device}',
        ' Number of qps   : 1\t\tTransport type : IB',
        ' Connection type : RC\t\tUsing SRQ      : OFF',
        ' PCIe relax order: ON',
        ' ibv_wr* API     : ON',
    ]
    if client:
        lines.append(' TX depth        : 128')
    lines += [' CQ Moderation   : 1', ' Mtu             : 4096[B]', f' Link type       : {link}']
    if link == 'Ethernet':
        lines.append(' GID index       : 3')
    lines += list(extra) + [' rdma_cm QPs\t : OFF', ' Data ex. method : Ethernet', RESULT_LINE]
    lines += [' local address: LID 0x05 QPN 0x0128 PSN 0x6f1d3b RKey 0x1fffbd VAddr 0x007f3c8c5b0000',
              ' remote address: LID 0x06 QPN 0x0129 PSN 0x2b3a9c RKey 0x1fffbe VAddr 0x007f8a2f7a0000',
              RESULT_LINE]
    return lines


def output(*parts: list[str] | str) -> str:
    lines: list[str] = []
    for part in parts:
        lines += [part] if isinstance(part, str) else part
    return '\n'.join(lines) + '\n'


WAITING = ['', '************************************', '* Waiting for client to connect... *', '************************************']

CLIENT_GBITS = output(settings(), RESULT_FMT_G, row(65536, 5000, 392.45, 392.31, 0.748272), RESULT_LINE)
SERVER_GBITS = output(WAITING, settings(client=False), RESULT_FMT_G, row(65536, 5000, 392.45, 392.31, 0.748272), RESULT_LINE)
CLIENT_MBYTES = output(settings(device='mlx5_3'), RESULT_FMT, row(65536, 5000, 46789.12, 46738.29, 0.747813), RESULT_LINE)
SWEEP_SIZES = [2 ** power for power in range(1, 24)]
SWEEP = output(settings(), RESULT_FMT_G, [row(size, 5000, size / 20000, size / 21000, 10.0 / power)
                                          for power, size in enumerate(SWEEP_SIZES, 1)], RESULT_LINE)
READ_ROCE = output(settings('RDMA_Read BW Test', device='mlx5_1', link='Ethernet', extra=(' Outstand reads  : 16',)),
                   RESULT_FMT_G, row(65536, 1000, 196.50, 196.17, 0.374166), RESULT_LINE)
SLOW = output(settings(), RESULT_FMT_G, row(65536, 5000, 99.87, 98.12, 0.187149), RESULT_LINE)
DURATION = output(' WARNING: BW peak won\'t be measured in this run.', settings(), RESULT_FMT_G,
                  row(65536, 7480000, 0.0, 391.98, 0.747646), RESULT_LINE)
CPU_WARNING = output(settings('Send BW Test'), RESULT_FMT_G,
                     'Conflicting CPU frequency values detected: 1500.000000 != 3500.000000. CPU Frequency is not max.',
                     row(65536, 5000, 392.01, 391.87, 0.747433), RESULT_LINE)
TINY = output(settings(), RESULT_FMT_G, row(2, 5000, 0.07, 0.065, 4.05, fmt=REPORT_FMT_EXT), RESULT_LINE)
QOS = output(settings(), RESULT_FMT_G_QOS, REPORT_FMT_QOS % (65536, 3, 5000, 390.11, 389.95, 0.743770), RESULT_LINE)
PER_PORT = output(settings(), RESULT_FMT_G_PER_PORT,
                  REPORT_FMT_PER_PORT % (65536, 10000, 780.2, 779.9, 1.487, 390.0, 0.7435, 389.9, 0.7435), RESULT_LINE)
CPU_UTIL = output(settings(), RESULT_FMT_G + '    CPU_Util[%]', row(65536, 5000, 392.45, 392.31, 0.748272) + '\t    12.34', RESULT_LINE)
BIDIRECTIONAL = output(settings('RDMA_Write Bidirectional BW Test'), RESULT_FMT_G, row(65536, 10000, 784.9, 784.6, 1.496544), RESULT_LINE)
NO_LINK_OR_DEVICE = output(RESULT_FMT_G, row(65536, 5000, 392.45, 392.31, 0.748272))
RUN_INFINITELY = output(settings(), RESULT_FMT_G, row(65536, 5000, 392.0, 380.0, 0.7), row(65536, 5000, 392.0, 391.0, 0.7))


PARSE_CASES = [
    pytest.param(CLIENT_GBITS, 'RDMA_Write BW Test', 'mlx5_0', 'IB', 'Gb/sec', [(65536, 5000, 392.45, 392.31, 0.748272)], id='client-gbits'),
    pytest.param(SERVER_GBITS, 'RDMA_Write BW Test', 'mlx5_0', 'IB', 'Gb/sec', [(65536, 5000, 392.45, 392.31, 0.748272)], id='server-gbits'),
    pytest.param(CLIENT_MBYTES, 'RDMA_Write BW Test', 'mlx5_3', 'IB', 'MB/sec', [(65536, 5000, 46789.12 * MB, 46738.29 * MB, 0.747813)],
                 id='client-mbytes'),
    pytest.param(READ_ROCE, 'RDMA_Read BW Test', 'mlx5_1', 'Ethernet', 'Gb/sec', [(65536, 1000, 196.50, 196.17, 0.374166)], id='read-roce'),
    pytest.param(SLOW, 'RDMA_Write BW Test', 'mlx5_0', 'IB', 'Gb/sec', [(65536, 5000, 99.87, 98.12, 0.187149)], id='slow-link'),
    pytest.param(DURATION, 'RDMA_Write BW Test', 'mlx5_0', 'IB', 'Gb/sec', [(65536, 7480000, 0.0, 391.98, 0.747646)], id='duration-no-peak'),
    pytest.param(CPU_WARNING, 'Send BW Test', 'mlx5_0', 'IB', 'Gb/sec', [(65536, 5000, 392.01, 391.87, 0.747433)], id='cpu-warning-ignored'),
    pytest.param(TINY, 'RDMA_Write BW Test', 'mlx5_0', 'IB', 'Gb/sec', [(2, 5000, 0.07, 0.065, 4.05)], id='six-decimals-below-0.1'),
    pytest.param(QOS, 'RDMA_Write BW Test', 'mlx5_0', 'IB', 'Gb/sec', [(65536, 5000, 390.11, 389.95, 0.743770)], id='raw-qos-sl-column'),
    pytest.param(PER_PORT, 'RDMA_Write BW Test', 'mlx5_0', 'IB', 'Gb/sec', [(65536, 10000, 780.2, 779.9, 1.487)], id='per-port-columns'),
    pytest.param(CPU_UTIL, 'RDMA_Write BW Test', 'mlx5_0', 'IB', 'Gb/sec', [(65536, 5000, 392.45, 392.31, 0.748272)], id='cpu-util-column'),
    pytest.param(BIDIRECTIONAL, 'RDMA_Write Bidirectional BW Test', 'mlx5_0', 'IB', 'Gb/sec', [(65536, 10000, 784.9, 784.6, 1.496544)],
                 id='bidirectional'),
    pytest.param(NO_LINK_OR_DEVICE, None, None, None, 'Gb/sec', [(65536, 5000, 392.45, 392.31, 0.748272)], id='bare-report'),
    pytest.param(CLIENT_GBITS.replace('\n', '\r\n'), 'RDMA_Write BW Test', 'mlx5_0', 'IB', 'Gb/sec', [(65536, 5000, 392.45, 392.31, 0.748272)],
                 id='crlf'),
]


@pytest.mark.parametrize(('text', 'test', 'device', 'link_type', 'unit', 'rows'), PARSE_CASES)
def test_parse_bw(text, test, device, link_type, unit, rows):
    parsed = _perftest.parse_bw(text)
    assert (parsed['test'], parsed['device'], parsed['link_type'], parsed['unit']) == (test, device, link_type, unit)
    got = [(r['bytes'], r['iterations'], r['peak_gbps'], r['average_gbps'], r['msg_rate_mpps']) for r in parsed['rows']]
    assert got == [pytest.approx(expected) for expected in rows]
    assert parsed['best'] is parsed['rows'][-1]
    assert set(parsed['best']) == {'bytes', 'iterations', 'peak_gbps', 'average_gbps', 'msg_rate_mpps'}


def test_parse_bw_sweep_best_is_largest_size():
    parsed = _perftest.parse_bw(SWEEP)
    assert [r['bytes'] for r in parsed['rows']] == SWEEP_SIZES
    assert parsed['best']['bytes'] == 8388608
    assert parsed['best']['average_gbps'] == pytest.approx(round(8388608 / 21000, 2))


def test_parse_bw_sweep_out_of_order_best_is_still_largest():
    shuffled = output(settings(), RESULT_FMT_G, row(4096, 5000, 300.0, 299.0, 9.1), row(65536, 5000, 392.0, 391.0, 0.7),
                      row(1024, 5000, 100.0, 99.0, 12.0))
    assert _perftest.parse_bw(shuffled)['best']['bytes'] == 65536


def test_parse_bw_repeated_size_best_is_last():
    assert _perftest.parse_bw(RUN_INFINITELY)['best']['average_gbps'] == pytest.approx(391.0)


def test_mb_factor_is_perftest_mebibyte():
    # perftest_parameters.c print_report_bw: format_factor = (report_fmt == MBS) ? 0x100000 : 125000000.
    assert _perftest.BYTES_PER_PERFTEST_MB == 1048576
    assert MB == pytest.approx(0.008388608)
    assert _perftest.parse_bw(CLIENT_MBYTES)['best']['average_gbps'] == pytest.approx(392.07, abs=0.01)


def test_parse_bw_nan_and_inf_kept():
    parsed = _perftest.parse_bw(output(RESULT_FMT_G, ' 65536      5000             inf                -nan\t\t   0.000000'))
    assert math.isinf(parsed['best']['peak_gbps'])
    assert math.isnan(parsed['best']['average_gbps'])


REFUSED_CLIENT = output("Couldn't connect to 10.0.0.2:18515", ' Unable to init the socket connection')
NO_DEVICE = output(' IB device mlx5_9 not found', ' Unable to find the Infiniband/RoCE device')
PORT_DOWN = output(settings(), ' Port number 1 state is Down', " Couldn't set the link layer", " Couldn't get context for the device")
SERVER_TIMEOUT = output(WAITING)
LATENCY_ONLY = output(settings('RDMA_Write Latency Test'),
                      ' #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]',
                      ' 2       1000          0.98           3.01         1.01     \t       1.03     \t0.05')
ROWS_BEFORE_HEADER = output(row(65536, 5000, 392.45, 392.31, 0.748272))
QP_FAILURE = output(settings(), 'Failed to modify QP 2345 to RTR', ' Unable to Connect the HCA\'s through the link')
ERROR_WORD = output(settings(), 'ibv_poll_cq error: IBV_WC_RETRY_EXC_ERR', RESULT_LINE)

PARSE_ERRORS = [
    pytest.param(REFUSED_CLIENT, "Couldn't connect to 10.0.0.2:18515", id='connection-refused'),
    pytest.param(NO_DEVICE, 'Unable to find the Infiniband/RoCE device', id='no-device'),
    pytest.param(PORT_DOWN, "Couldn't set the link layer", id='port-down'),
    pytest.param(QP_FAILURE, 'Failed to modify QP 2345 to RTR', id='qp-failure'),
    pytest.param(ERROR_WORD, 'ibv_poll_cq error: IBV_WC_RETRY_EXC_ERR', id='completion-error'),
    pytest.param(SERVER_TIMEOUT, _perftest.NO_ROWS_MESSAGE, id='server-never-connected'),
    pytest.param(LATENCY_ONLY, _perftest.NO_ROWS_MESSAGE, id='latency-output'),
    pytest.param(ROWS_BEFORE_HEADER, _perftest.NO_ROWS_MESSAGE, id='row-without-header'),
    pytest.param('', _perftest.NO_ROWS_MESSAGE, id='empty'),
    pytest.param(output(RESULT_FMT_G), _perftest.NO_ROWS_MESSAGE, id='header-only'),
    pytest.param(output(RESULT_FMT_G.replace('Gb/sec', 'KB/sec')), "'#bytes", id='unknown-unit'),
    pytest.param(output(RESULT_FMT_G, row(1, 1, 1, 1, 1), RESULT_FMT, row(1, 1, 1, 1, 1)), 'mixes Gb/sec and MB/sec', id='mixed-units'),
    pytest.param(b'bytes', 'bytes', id='bytes-input'),
]


@pytest.mark.parametrize(('text', 'message'), PARSE_ERRORS)
def test_parse_bw_rejects(text, message):
    with pytest.raises(PerftestError) as excinfo:
        _perftest.parse_bw(text)
    assert message in str(excinfo.value)
    assert isinstance(excinfo.value, ValueError)


def test_refused_message_is_exact():
    with pytest.raises(PerftestError, match=r"^Couldn't connect to 10\.0\.0\.2:18515$"):
        _perftest.parse_bw(REFUSED_CLIENT)


# judge_bw -----------------------------------------------------------------------

JUDGE_CASES = [
    pytest.param(CLIENT_GBITS, 400.0, 0.9, 'pass', 360.0, id='full-rate'),
    pytest.param(SLOW, 400.0, 0.9, 'fail', 360.0, id='slow-link'),
    pytest.param(CLIENT_GBITS, 400.0, 1.0, 'fail', 400.0, id='strict'),
    pytest.param(CLIENT_GBITS, 392.31, 1.0, 'pass', 392.31, id='exactly-at-threshold'),
    pytest.param(CLIENT_MBYTES, 400.0, 0.95, 'pass', 380.0, id='mbytes-converted'),
    pytest.param(READ_ROCE, 200.0, 0.95, 'pass', 190.0, id='read-200g'),
    pytest.param(DURATION, 400.0, 0.9, 'pass', 360.0, id='duration-judged-on-average-not-zero-peak'),
    pytest.param(SWEEP, 400.0, 0.9, 'pass', 360.0, id='sweep-judged-on-largest-size'),
]


@pytest.mark.parametrize(('text', 'expected', 'tolerance', 'status', 'threshold'), JUDGE_CASES)
def test_judge_bw(text, expected, tolerance, status, threshold):
    parsed = _perftest.parse_bw(text)
    judged = _perftest.judge_bw(parsed, expected, tolerance)
    assert judged['status'] == status
    assert judged['threshold_gbps'] == pytest.approx(threshold)
    assert judged['average_gbps'] == parsed['best']['average_gbps']
    assert set(judged) == {'status', 'average_gbps', 'threshold_gbps', 'message'}


def test_judge_bw_message():
    judged = _perftest.judge_bw(_perftest.parse_bw(SLOW), 400, 0.9)
    assert judged['message'] == '98.12 Gb/s average at 65536 bytes below the 360.00 Gb/s threshold (90% of 400 Gb/s)'
    judged = _perftest.judge_bw(_perftest.parse_bw(CLIENT_GBITS), 400)
    assert judged['message'] == '392.31 Gb/s average at 65536 bytes >= the 360.00 Gb/s threshold (90% of 400 Gb/s)'


def test_judge_bw_nan_fails():
    parsed = _perftest.parse_bw(output(RESULT_FMT_G, ' 65536      5000             inf                -nan\t\t   0.000000'))
    assert _perftest.judge_bw(parsed, 400)['status'] == 'fail'


@pytest.mark.parametrize('average', ['inf', '+inf', '-inf', 'nan', '-nan'])
def test_judge_bw_non_finite_average_fails(average):
    parsed = _perftest.parse_bw(output(RESULT_FMT_G, f' 65536      5000             400.00                {average}\t\t   0.000000'))
    judged = _perftest.judge_bw(parsed, 400)
    assert judged['status'] == 'fail' and 'not a finite number' in judged['message']


JUDGE_ERRORS = [
    pytest.param(0, 'tolerance 0', id='zero-tolerance'),
    pytest.param(-0.5, 'tolerance -0.5', id='negative-tolerance'),
    pytest.param(1.01, 'tolerance 1.01', id='tolerance-above-one'),
    pytest.param(90, 'tolerance 90', id='percent-not-fraction'),
    pytest.param(float('nan'), 'tolerance nan', id='nan-tolerance'),
    pytest.param('0.9', "tolerance '0.9'", id='string-tolerance'),
    pytest.param(True, 'tolerance True', id='bool-tolerance'),
]


@pytest.mark.parametrize(('tolerance', 'bad_part'), JUDGE_ERRORS)
def test_judge_bw_rejects_tolerance(tolerance, bad_part):
    with pytest.raises(ValueError) as excinfo:
        _perftest.judge_bw(_perftest.parse_bw(CLIENT_GBITS), 400, tolerance)
    assert bad_part in str(excinfo.value)


@pytest.mark.parametrize('expected', [0, -400, float('inf'), float('nan'), '400', None])
def test_judge_bw_rejects_expected(expected):
    with pytest.raises(ValueError, match='expected_gbps'):
        _perftest.judge_bw(_perftest.parse_bw(CLIENT_GBITS), expected)


@pytest.mark.parametrize('result', [{}, {'best': None}, None, 'text'])
def test_judge_bw_rejects_result(result):
    with pytest.raises(ValueError, match='no best row'):
        _perftest.judge_bw(result, 400)


# captured fixtures -------------------------------------------------------------------

FIXTURE_FILES = sorted(path for path in FIXTURES.glob('*') if path.is_file() and path.suffix in ('', '.txt', '.out', '.log')) \
    if FIXTURES.is_dir() else []


@pytest.mark.skipif(not FIXTURE_FILES, reason='no perftest fixtures captured yet')
@pytest.mark.parametrize('path', FIXTURE_FILES, ids=[path.name for path in FIXTURE_FILES])
def test_fixture_parses_or_names_its_error(path):
    text = path.read_text(encoding='utf-8')
    try:
        parsed = _perftest.parse_bw(text)
    except PerftestError as err:
        assert str(err), f'{path.name}: empty error'
        return
    assert parsed['rows'], path.name
    assert parsed['unit'] in ('Gb/sec', 'MB/sec')
    assert parsed['best']['bytes'] == max(r['bytes'] for r in parsed['rows'])


FIXTURE_CASES = [
    pytest.param('ib_write_bw_client_gbits.txt', 'RDMA_Write BW Test', 'mlx5_0', 'Gb/sec', 1, (65536, 5000, 391.62, 391.41, 0.746555), 'pass',
                 id='write-client'),
    pytest.param('ib_write_bw_server_gbits.txt', 'RDMA_Write BW Test', 'mlx5_0', 'Gb/sec', 1, (65536, 5000, 391.62, 391.41, 0.746555), 'pass',
                 id='write-server'),
    pytest.param('ib_write_bw_mbsec.txt', 'RDMA_Write BW Test', 'mlx5_0', 'MB/sec', 1,
                 (65536, 5000, 46658.10 * MB, 46650.33 * MB, 0.746405), 'pass', id='write-mbsec'),
    pytest.param('ib_write_bw_sweep_gbits.txt', 'RDMA_Write BW Test', 'mlx5_0', 'Gb/sec', 23, (8388608, 5000, 392.43, 392.17, 0.005844), 'pass',
                 id='write-sweep'),
    pytest.param('ib_read_bw_client_gbits.txt', 'RDMA_Read BW Test', 'mlx5_0', 'Gb/sec', 1, (65536, 1000, 371.86, 371.24, 0.708084), 'pass',
                 id='read-client'),
    pytest.param('ib_write_bw_slow_gbits.txt', 'RDMA_Write BW Test', 'mlx5_5', 'Gb/sec', 1, (65536, 5000, 196.38, 196.12, 0.374069), 'fail',
                 id='slow-link'),
    pytest.param('ib_write_bw_duration_gbits.txt', 'RDMA_Write BW Test', 'mlx5_0', 'Gb/sec', 1, (65536, 4477844, 0.0, 391.28, 0.746307), 'pass',
                 id='duration'),
]


@pytest.mark.skipif(not FIXTURES.is_dir(), reason='no perftest fixtures captured yet')
@pytest.mark.parametrize(('name', 'test', 'device', 'unit', 'row_count', 'best', 'status'), FIXTURE_CASES)
def test_fixture(name, test, device, unit, row_count, best, status):
    parsed = _perftest.parse_bw((FIXTURES / name).read_text(encoding='utf-8'))
    assert (parsed['test'], parsed['device'], parsed['link_type'], parsed['unit']) == (test, device, 'IB', unit)
    assert len(parsed['rows']) == row_count
    got = parsed['best']
    assert (got['bytes'], got['iterations'], got['peak_gbps'], got['average_gbps'], got['msg_rate_mpps']) == pytest.approx(best)
    assert _perftest.judge_bw(parsed, 400, 0.9)['status'] == status


@pytest.mark.skipif(not FIXTURES.is_dir(), reason='no perftest fixtures captured yet')
def test_fixture_sweep_keeps_six_decimal_first_row():
    rows = _perftest.parse_bw((FIXTURES / 'ib_write_bw_sweep_gbits.txt').read_text(encoding='utf-8'))['rows']
    assert [r['bytes'] for r in rows] == SWEEP_SIZES
    assert (rows[0]['peak_gbps'], rows[0]['average_gbps']) == pytest.approx((0.089555, 0.089234))


@pytest.mark.skipif(not FIXTURES.is_dir(), reason='no perftest fixtures captured yet')
def test_fixture_mbsec_agrees_with_gbits_capture():
    # The same link measured in MB/sec and in Gb/sec: only the 2**20-byte perftest MB makes them agree (10**6 would give 373 Gb/s).
    mbsec = _perftest.parse_bw((FIXTURES / 'ib_write_bw_mbsec.txt').read_text(encoding='utf-8'))['best']['average_gbps']
    gbits = _perftest.parse_bw((FIXTURES / 'ib_write_bw_client_gbits.txt').read_text(encoding='utf-8'))['best']['average_gbps']
    assert mbsec == pytest.approx(gbits, rel=0.005)


@pytest.mark.skipif(not FIXTURES.is_dir(), reason='no perftest fixtures captured yet')
def test_fixture_connection_refused():
    with pytest.raises(PerftestError, match=r"^Couldn't connect to 10\.10\.1\.2:18515$"):
        _perftest.parse_bw((FIXTURES / 'ib_write_bw_conn_refused.txt').read_text(encoding='utf-8'))
