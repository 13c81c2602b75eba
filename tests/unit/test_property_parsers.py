# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Property tests: every parser and validator, fed damaged real inputs, returns or raises its own error.

The inputs are the captured outputs in tests/fixtures (nvidia-smi -q -x and topo -m, perftest, nccl-tests, lsblk
JSON, sinfo/squeue, dcgmi diag JSON, the trainer's output, a fake sysfs tree) and the valid inventory values of the unit tests.
Each example applies one to three mutations (tests/unit/mutations.py): truncation at any point, a flipped byte, a
deleted or duplicated line, a number replaced by a hostile one (400 or 5000 digits, 1e400, inf, nan, -0, negative,
a superscript, Arabic-Indic or fullwidth digit), a NUL byte or bytes that are not UTF-8 inserted; for JSON and inventory values, a value anywhere
swapped for one of the wrong type or a hostile number, or a key removed. The property: the call returns, or raises
the parser's own error class with a non-empty message; any other exception fails. The seed is fixed
(derandomize) and no example database is written.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import typing as t

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ansible_collections.llmforge.cluster.plugins.module_utils import (
    _dcgm_diag, _gpu_topology, _nccl_tests, _rdma_links, _scratch_devices, _slurm_drain)
from ansible_collections.llmforge.cluster.plugins.module_utils.programs import _slurm_metrics
from ansible_collections.llmforge.cluster.plugins.plugin_utils import (
    _fabric_plan, _hardware, _ipoib, _lustre, _nccl_fleet, _perftest, _pip_lock, _slurm_config, _training_fleet)

from mutations import assert_own_error, mutated_bytes, mutated_structure, mutated_text

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / 'tests' / 'fixtures'


def fixtures(pattern: str) -> list[bytes]:
    found = [path.read_bytes() for path in sorted(FIXTURES.glob(pattern)) if path.is_file()]
    assert found, pattern
    return found


def examples(count: int) -> t.Callable:
    return settings(max_examples=count, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# --- GPU: nvidia-smi -q -x and topo -m ---------------------------------------------------------------------

SMI_XML = fixtures('gpu/*/smi_q.xml')
TOPO = fixtures('gpu/*/topo_m*.txt')
GPU_WANT = [_gpu_topology.resolve_expectation('h200-sxm-8', None), _gpu_topology.resolve_expectation('h200-1', None)]


@examples(300)
@example(SMI_XML[0].decode().replace('<gpu_temp>', '<gpu_temp>' + '1' * 400, 1), GPU_WANT[1])
@example(SMI_XML[0].replace(b'H200', b'H\xff00').decode('utf-8', 'surrogateescape'), GPU_WANT[1])
@given(mutated_text(SMI_XML), st.sampled_from(GPU_WANT))
def test_smi_xml(text, want):
    topo = _gpu_topology.parse_topo_matrix(TOPO[0].decode())
    assert_own_error(lambda: _gpu_topology.evaluate(_gpu_topology.parse_smi_xml(text), topo, want), _gpu_topology.GpuTopologyError)


@examples(400)
@given(mutated_text(TOPO), st.sampled_from(GPU_WANT))
def test_topo_matrix(text, want):
    facts = _gpu_topology.parse_smi_xml(SMI_XML[0].decode())
    assert_own_error(lambda: _gpu_topology.evaluate(facts, _gpu_topology.parse_topo_matrix(text), want), _gpu_topology.GpuTopologyError)


# --- perftest and nccl-tests -------------------------------------------------------------------------------

PERFTEST = fixtures('perftest/*.txt')
NCCL = fixtures('nccl-tests/*.txt')


def _replace_first_row_field(text: str, column: int, value: str) -> str:
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[:1] and line.split()[0].isdigit() and len(line.split()) >= 5)
    fields = lines[at].split()
    fields[column] = value
    lines[at] = '  '.join(fields)
    return '\n'.join(lines)


@examples(600)
@example(_replace_first_row_field(PERFTEST[0].decode(), 0, '9' * 5000))
@example(_replace_first_row_field('#bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]\n65536 5000 1 1 1\n', 3, '1' * 400))
@given(mutated_text(PERFTEST))
def test_perftest(text):
    def call():
        result = _perftest.parse_bw(text)
        _perftest.judge_bw(result, 400.0)
    assert_own_error(call, _perftest.PerftestError)


NCCL_8GPU = (FIXTURES / 'nccl-tests' / 'all_reduce_perf_8gpu.txt').read_text()


@examples(600)
@example(_replace_first_row_field(NCCL_8GPU, 8, 'inf'), 100.0)
@example(_replace_first_row_field(NCCL_8GPU, 12, 'nan'), 100.0)
@example(_replace_first_row_field(NCCL_8GPU, 0, '1' * 5000), None)
@given(mutated_text(NCCL), st.sampled_from([None, 100.0]))
def test_nccl_tests(text, minimum):
    assert_own_error(lambda: _nccl_tests.evaluate(_nccl_tests.parse_output(text), minimum, exit_code=0), _nccl_tests.NcclTestsError)


# --- dcgmi diag -j ----------------------------------------------------------------------------------------

DCGM = fixtures('dcgm/l*.json') + fixtures('dcgm/error-*.json')
DCGM_V3 = {'DCGM GPU Diagnostic': {'test_categories': [{'category': 'Hardware', 'tests': [
    {'name': 'GPU Memory', 'results': [{'gpu_id': '3', 'status': 'Fail', 'warnings': [{'warning': 'x', 'error_id': 52}]},
                                       {'gpu_ids': '0,1,2', 'status': 'Pass'}]}]}]}, 'version': '3.1.0'}


def _dcgm_text(gpu_id: str) -> str:
    return json.dumps({'DCGM GPU Diagnostic': {'test_categories': [{'category': 'Hardware', 'tests': [
        {'name': 'GPU Memory', 'results': [{'gpu_id': gpu_id, 'status': 'Fail'}]}]}]}})


@examples(400)
@example(_dcgm_text('\u00b2'), 0)
@example(_dcgm_text('\u0663'), 226)
@example(_dcgm_text('9' * 5000), 0)
@example(DCGM[0].decode().replace('"entity_id" : 0', '"entity_id" : ' + '9' * 5000, 1), 0)
@example(DCGM[0].decode().replace('"entity_id" : 0', '"entity_id" : NaN', 1), 0)
@given(mutated_text(DCGM), st.sampled_from([0, 226, 235]))
def test_dcgm_diag(text, rc):
    assert_own_error(lambda: _dcgm_diag.as_check(_dcgm_diag.judge_run(1, rc, text)), _dcgm_diag.DcgmDiagError)


@examples(300)
@given(mutated_structure([json.loads(data) for data in DCGM] + [DCGM_V3]))
def test_dcgm_diag_wrong_types(document):
    assert_own_error(lambda: _dcgm_diag.parse(json.dumps(document), 1), _dcgm_diag.DcgmDiagError)


# --- lsblk, /proc/mounts, mdadm.conf -----------------------------------------------------------------------

LSBLK = fixtures('lsblk/*.json')


def _select(text):
    roots = _scratch_devices.parse_lsblk(text)
    _scratch_devices.select(roots, min_size=1, sources=['/dev/nvme0n1p2'])


@examples(400)
@given(mutated_text(LSBLK))
def test_lsblk_text(text):
    assert_own_error(lambda: _select(text), _scratch_devices.ScratchDevicesError)


@examples(500)
@given(mutated_structure([json.loads(data) for data in LSBLK]))
def test_lsblk_wrong_types(document):
    assert_own_error(lambda: _select(json.dumps(document)), _scratch_devices.ScratchDevicesError)


MOUNTS = b'/dev/nvme0n1p2 / ext4 rw,relatime 0 0\n/dev/nvme0n1p1 /boot/efi vfat rw 0 0\n/dev/md/scratch /scratch xfs rw 0 0\n'
SWAPS = b'Filename Type Size Used Priority\n/dev/nvme0n1p3 partition 8388604 0 -2\n'
MDADM = b'ARRAY /dev/md/scratch metadata=1.2 name=gpu1:scratch UUID=0a1b2c3d:4e5f6071:8293a4b5:c6d7e8f9\n'


@examples(200)
@given(mutated_text([MOUNTS]), mutated_text([SWAPS]), mutated_text([MDADM]))
def test_mounts_swaps_mdadm(mounts, swaps, mdadm):
    assert_own_error(lambda: (_scratch_devices.system_sources(mounts, swaps), _scratch_devices.scratch_array_uuids(mdadm, 'scratch')),
                     _scratch_devices.ScratchDevicesError)


# --- Slurm: sinfo, squeue, scontrol show node ----------------------------------------------------------------

SINFO = fixtures('slurm/*sinfo.txt')
SQUEUE = fixtures('slurm/*squeue.txt')
SCONTROL = [b'NodeName=gpu1 Arch=x86_64 CoresPerSocket=48 CPUAlloc=0 CPUTot=96 State=IDLE+DRAIN ThreadsPerCore=1 '
            b'Reason=llmforge: gpu_topology ecc_errors gpu3 [root@2026-11-30T01:00:00]\n']


@examples(400)
@given(mutated_text(SINFO), mutated_text(SQUEUE))
def test_sinfo_squeue(sinfo, squeue):
    def call():
        nodes = _slurm_metrics.parse_sinfo(sinfo)
        jobs = _slurm_metrics.parse_squeue(squeue)
        _slurm_metrics.render_metrics(nodes, jobs, cluster='c', timestamp=1.0)
    assert_own_error(call, _slurm_metrics.SlurmMetricsError)


CHECKS = [{'name': 'ecc_errors', 'status': 'fail', 'subject': 'gpu3', 'expected': 0, 'actual': 2, 'message': 'm'},
          {'name': 'busbw', 'status': 'pass', 'subject': 'node', 'expected': 1, 'actual': 2, 'message': 'm'}]


@examples(300)
@given(mutated_text(SCONTROL), mutated_structure([CHECKS]))
def test_scontrol_node_and_drain(text, checks):
    def call():
        node = _slurm_drain.parse_node(text)
        _slurm_drain.drain_action(checks, node)
        _slurm_drain.drain_reason(checks)
    assert_own_error(call, ValueError)


# --- sysfs (RDMA) ------------------------------------------------------------------------------------------

_spec = importlib.util.spec_from_file_location('make_sysfs_trees', FIXTURES / 'rdma' / 'make_sysfs_trees.py')
_trees = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_trees)
RDMA_WANT = {'hca_count': 8, 'rate_gbps': 400, 'mtu': 4096}


@pytest.fixture(scope='module')
def sysfs(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('sysfs'))
    _trees.build('ndr8_healthy', root)
    files = sorted(os.path.join(d, f) for d, _dirs, names in os.walk(root) for f in names)
    return root, {path: open(path, 'rb').read() for path in files}


@examples(250)
@given(st.data())
def test_rdma_sysfs(sysfs, data):
    root, originals = sysfs
    path = data.draw(st.sampled_from(sorted(originals)))
    with open(path, 'wb') as handle:
        handle.write(data.draw(mutated_bytes([originals[path]])))
    try:
        assert_own_error(lambda: _rdma_links.evaluate(root, RDMA_WANT), _rdma_links.RdmaLinksError)
    finally:
        with open(path, 'wb') as handle:
            handle.write(originals[path])


def test_rdma_sysfs_nul_byte_names_the_file(sysfs):
    root, originals = sysfs
    path = next(path for path in sorted(originals) if path.endswith(os.path.join('ports', '1', 'state')))
    with open(path, 'wb') as handle:
        handle.write(b'4: ACT\x00IVE\n')
    try:
        with pytest.raises(_rdma_links.RdmaLinksError, match='state holds a NUL byte'):
            _rdma_links.evaluate(root, RDMA_WANT)
    finally:
        with open(path, 'wb') as handle:
            handle.write(originals[path])


# --- the trainer's output, the pip lock --------------------------------------------------------------------

TRAINING = fixtures('training/*.txt')
PLANNED = {'timeout': 900, 'nodes': ['gpu1'], 'tasks': 1, 'tasks_per_node': 1, 'gpus': 1, 'steps': 30}
LOCK = [(ROOT / 'molecule' / 'resources' / 'files' / 'training-cp311.lock').read_bytes()]


@examples(300)
@given(mutated_text(TRAINING), st.sampled_from([0, 1, 124, None]))
def test_trainer_output(stdout, rc):
    assert_own_error(lambda: _training_fleet.parse_run({'rc': rc, 'stdout': stdout, 'stderr': ''}, PLANNED),
                     _training_fleet.TrainingFleetError)


@examples(300)
@given(mutated_text(LOCK))
def test_pip_lock(text):
    assert_own_error(lambda: _pip_lock.plan(text, '/opt/llmforge/envs', 'llmforge-train'), _pip_lock.LockError)


# --- planners and validators fed from the inventory ----------------------------------------------------------

IPOIB = {'networks': [{'interface': 'ib0', 'cidr': '10.10.0.0/16'}, {'interface': 'ib1', 'cidr': '10.11.0.0/16', 'mtu': 2044}],
         'hosts': ['gpu001', 'gpu002', 'gpu003'], 'node_indexes': {'gpu001': 100, 'gpu003': '7'},
         'management': {'gpu001': ['192.168.0.10/24']}, 'host_offset': 1, 'mtu': 4092, 'mode': 'datagram'}
IPOIB_EDGE = dict(IPOIB, networks=[{'interface': 'ib0', 'cidr': '0.0.0.0/0'}], host_offset=-5)


@examples(500)
@example(IPOIB_EDGE)
@given(mutated_structure([IPOIB, IPOIB_EDGE]))
def test_ipoib(values):
    def call():
        values_ = values if isinstance(values, dict) else {}
        _ipoib.compute_addresses(values_.get('networks'), values_.get('hosts', []), node_indexes=values_.get('node_indexes'),
                                 management=values_.get('management'), host_offset=values_.get('host_offset', 1),
                                 mtu=values_.get('mtu', 4092), mode=values_.get('mode', 'datagram'))
    assert_own_error(call, ValueError)


LUSTRE = {'networks': ['o2ib0(ib0)', 'tcp0(eth0)'],
          'mounts': [{'fsname': 'scratch', 'mgs_nids': ['10.0.0.1@o2ib,10.1.0.1@tcp', '10.0.0.2@o2ib'], 'mount_point': '/lustre/scratch/'},
                     {'fsname': 'home', 'mgs_nids': '10.0.0.1@o2ib1:10.0.0.3@tcp', 'mount_point': '/home/lustre',
                      'options': ['_netdev', 'localflock'], 'automount': False}],
          'stripes': [{'path': '/lustre/scratch/ckpt', 'count': 8, 'size': '4M'}]}


@examples(400)
@example(dict(LUSTRE, networks=['o2ib' + '9' * 5000 + '(ib0)']))
@example(dict(LUSTRE, networks=['o2ib\u00b2(ib0)', 'tcp\u0663(eth0)']))
@example(dict(LUSTRE, mounts=[dict(LUSTRE['mounts'][0], mgs_nids='10.0.0.\u00b2@o2ib')]))
@example(dict(LUSTRE, mounts=[dict(LUSTRE['mounts'][0], mgs_nids='10.0.0.1@o2ib' + '9' * 5000)]))
@example(dict(LUSTRE, stripes=[{'path': '/lustre/scratch/ckpt', 'count': 8, 'size': '\u0664M'}]))
@example(dict(LUSTRE, stripes=[{'path': '/lustre/scratch/ckpt', 'count': float('nan'), 'size': '9' * 5000}]))
@given(mutated_structure([LUSTRE]))
def test_lustre(values):
    def call():
        values_ = values if isinstance(values, dict) else {}
        networks = _lustre.check_networks(values_.get('networks'), ['ib0', 'ib1'])
        mounts = _lustre.check_mounts(values_.get('mounts'), networks)
        _lustre.check_stripe_dirs(values_.get('stripes'), mounts)
        _lustre.lnet_conf_yaml(networks)
    assert_own_error(call, _lustre.LustreConfigError)


NCCL_RESULT = _nccl_tests.evaluate(_nccl_tests.parse_output((FIXTURES / 'nccl-tests' / 'all_reduce_perf_8gpu.txt').read_text()), exit_code=0)
NCCL_RUNS = [{'test': 'all_reduce_perf', 'kind': kind, 'nodes': nodes, 'result': NCCL_RESULT}
             for kind, nodes in (('single', ['gpu1']), ('single', ['gpu2']), ('single', ['gpu3']), ('pair', ['gpu1', 'gpu2']),
                                 ('pair', ['gpu3', 'gpu1']))]
NCCL_OPTIONS = {'tests': ['all_reduce_perf'], 'repeats': 2, 'bin_dir': '/opt/nccl-tests/bin', 'timeout': 600,
                'immediate': 300, 'srun_args': [], 'sizes': ['-b', '8', '-e', '8G', '-f', '2']}


@examples(200)
@given(mutated_structure([{'runs': NCCL_RUNS, 'thresholds': {'all_reduce_perf': {'single': 400, 'pair': 300}}, 'tolerance': 10,
                           'nodes': ['gpu1', 'gpu2', 'gpu3'], 'gpus': {'gpu1': 8, 'gpu2': 8, 'gpu3': 8}, 'options': NCCL_OPTIONS}]))
def test_nccl_fleet(values):
    def call():
        values_ = values if isinstance(values, dict) else {}
        verdicts = _nccl_fleet.judge_tests(values_.get('runs'), values_.get('thresholds'), values_.get('tolerance'))
        _nccl_fleet.plan_bisection(verdicts)
        _nccl_fleet.node_results(values_.get('nodes'), verdicts)
        _nccl_fleet.plan_runs(values_.get('nodes'), values_.get('gpus'), values_.get('options'))
        _nccl_fleet.plan_retest_runs(verdicts, values_.get('gpus'), values_.get('options'))
    assert_own_error(call, _nccl_fleet.NcclFleetError)


FABRIC_ROUNDS = _fabric_plan.plan_pairs(['n1', 'n2', 'n3', 'n4'], 2)
FABRIC_RESULTS = [dict(test, status='fail' if index == 1 else 'pass') for index, test in enumerate(x for r in FABRIC_ROUNDS for x in r)]


@examples(400)
@given(mutated_structure([{'nodes': ['n1', 'n2', 'n3', 'n4'], 'rails': 2, 'pattern': 'ring', 'results': FABRIC_RESULTS,
                           'devices': ['mlx5_0', 'mlx5_1'], 'addresses': {'n1': '10.0.0.1', 'n2': '10.0.0.2'}, 'duration': 5}]))
def test_fabric_plan(values):
    def call():
        values_ = values if isinstance(values, dict) else {}
        rounds = _fabric_plan.plan_pairs(values_.get('nodes'), values_.get('rails'), values_.get('pattern', 'ring'))
        _fabric_plan.round_commands(rounds[0], 'n1', values_.get('devices'), values_.get('addresses'), 'ib_write_bw', values_.get('duration'))
        results = values_.get('results')
        _fabric_plan.known_good_nodes(results)
        retests = [test for tests in _fabric_plan.plan_retests(results) for test in tests]
        for failed in results:
            if isinstance(failed, dict) and failed.get('status') == 'fail':
                _fabric_plan.classify(failed, [dict(test, status='pass') for test in retests])
    assert_own_error(call, ValueError)


TRAINING_SETTINGS = {name: {'gpus': 8, 'tasks': None, 'trainer': '/opt/llmforge/envs/llmforge-train/bin/llmforge-train',
                            'run_root': '/shared/runs'} for name in ('gpu1', 'gpu2')}
TRAINING_OPTIONS = {'repeats': 1, 'timeout': 900, 'immediate': 300, 'srun_args': [], 'args': ['--steps', '30'], 'local_root': '/tmp'}


@examples(300)
@given(mutated_structure([{'settings': TRAINING_SETTINGS, 'options': TRAINING_OPTIONS, 'tolerance': 10, 'min': 0}]),
       mutated_text(TRAINING))
def test_training_fleet(values, stdout):
    def call():
        values_ = values if isinstance(values, dict) else {}
        plan = _training_fleet.plan_runs(values_.get('settings'), values_.get('options'))
        results = [{'rc': 0, 'stdout': stdout, 'stderr': '', 'item': run} for run in plan['runs']]
        _training_fleet.judge(results, plan, values_.get('tolerance'), values_.get('min', 0))
    assert_own_error(call, _training_fleet.TrainingFleetError)


HARDWARE = {'gpu_type': 'h200', 'gpu_count': 8, 'gpu_profile': 'h200-sxm-8',
            'gpu_expected': {'gpu_count': 8, 'min_memory_mib': 140000, 'affinity': [{'gpu': 'GPU0', 'nic': 'NIC0', 'max_hops': 'PIX'}]},
            'rdma_expected': {'devices': '^mlx5_[0-7]$', 'hca_count': 8, 'rate_gbps': 400, 'counters': {'symbol_error': 0}},
            'node_index': 3, 'monitoring_address': '10.0.0.5'}


@examples(400)
@example(dict(HARDWARE, gpu_profile=[None]))
@example(dict(HARDWARE, gpu_profile={}, gpu_expected=[], rdma_expected=5, node_index=1e400))
@given(mutated_structure([HARDWARE]))
def test_hardware_problems(values):
    def call():
        found = _hardware.problems('gpu1', values if isinstance(values, dict) else {'gpu_count': values})
        assert isinstance(found, list) and all(isinstance(item, str) and item for item in found)
    assert_own_error(call, ())


FACTS = {'processor_vcpus': 96, 'processor_count': 2, 'processor_cores': 48, 'processor_threads_per_core': 1, 'memtotal_mb': 2063000}


@examples(400)
@given(mutated_structure([{'facts': FACTS, 'percent': 90, 'gpu_count': 8, 'gpu_type': 'h200', 'node_config': {'Weight': 10},
                           'cgroups': {'gpu1': {'ConstrainDevices': True}, 'gpu2': {'ConstrainDevices': 'yes'}}}]))
def test_slurm_config(values):
    def call():
        values_ = values if isinstance(values, dict) else {}
        gres = _slurm_config.gres_string('gpu1', values_.get('gpu_count'), values_.get('gpu_type'))
        attrs = _slurm_config.node_hardware('gpu1', values_.get('facts'), values_.get('percent'), gres, values_.get('node_config'))
        _slurm_config.render_line('NodeName', 'gpu1', attrs)
        _slurm_config.cgroup_constraints(values_.get('cgroups'))
    assert_own_error(call, ValueError)
