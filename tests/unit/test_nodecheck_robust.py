# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""llmforge-nodecheck on input that used to crash it: odd bytes from nvidia-smi, a 400-digit number in `-q -x`,
NUL bytes in sysfs files, expectation files with wrong types. Each run is handled: the node is drained with a
reason (`llmforge: nodecheck error <what>: <exception>` when a validator raised), metrics and the state file are
written and the exit status follows the contract (0, or 1 with --strict; 2 bad expectation; 3 Slurm not handled).

The runs use the simulated node of test_nodecheck.py (nvidia-smi shim, sysfs tree, stand-in scontrol logging
every call); a property test feeds mutated expectations and hardware outputs to the check in this process.
"""

from __future__ import annotations

import json
import pathlib
import re
import shutil
import typing as t
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from ansible_collections.llmforge.cluster.plugins.module_utils import _gpu_topology as gpu
from ansible_collections.llmforge.cluster.plugins.module_utils.programs import _nodecheck as nc
from ansible_collections.llmforge.cluster.plugins.module_utils import _rdma_links as rdma
from ansible_collections.llmforge.cluster.plugins.module_utils import _slurm_drain as drain
from ansible_collections.llmforge.cluster.plugins.module_utils import _validators as validators
from test_nodecheck import GPU, IDLE, RDMA_EXPECTED, SHIM, make_sysfs_trees, node  # noqa: F401  pylint: disable=unused-import

HUGE = '9' * 400


def outputs_written(root: pathlib.Path) -> tuple[str, dict[str, t.Any]]:
    metrics = (root / 'textfile' / 'llmforge_nodecheck.prom').read_text()
    state = json.loads((root / 'nodecheck.json').read_text())
    return metrics, state


def drains(node) -> list[str]:  # pylint: disable=redefined-outer-name
    return [call for call in node.scontrol_calls() if 'State=DRAIN' in call]


def non_utf8(root: pathlib.Path) -> None:
    xml = root / 'gpu' / 'smi_q.xml'
    xml.write_bytes(xml.read_bytes().replace(b'<product_name>NVIDIA H200', b'<product_name>NVIDIA H\xff\xfe200', 1))


def huge_number(root: pathlib.Path) -> None:
    xml = root / 'gpu' / 'smi_q.xml'
    xml.write_text(re.sub(r'<total>\d+ MiB</total>', f'<total>{HUGE} MiB</total>', xml.read_text(), count=1))


def nul_netdev(root: pathlib.Path) -> None:
    # The netdev of mlx5_0's port: a name with a NUL byte, which the reader then uses in a path.
    ndevs = root / 'sys' / 'class' / 'infiniband' / 'mlx5_0' / 'ports' / '1' / 'gid_attrs' / 'ndevs'
    ndevs.mkdir(parents=True)
    (ndevs / '0').write_bytes(b'ibp24s0\x00\n')


def nul_state(root: pathlib.Path) -> None:
    (root / 'sys' / 'class' / 'infiniband' / 'mlx5_0' / 'ports' / '1' / 'state').write_bytes(b'4: ACTIVE\x00\n')


# Input, what the check may drain with (the parser's own error, or the health check's when the parser raised).
CRASHED = {
    'non-utf8-nvidia-smi': (non_utf8, ('llmforge: model GPU0 NVIDIA H??200', 'llmforge: nodecheck error nvidia-smi -q -x: ',
                                       'llmforge: run nvidia-smi ')),
    '400-digit-q-x': (huge_number, ('llmforge: nodecheck error nvidia-smi -q -x: OverflowError', 'llmforge: run nvidia-smi ',
                                    'llmforge: memory GPU0 ')),
    'nul-in-sysfs-netdev': (nul_netdev, ('llmforge: nodecheck error sysfs ', 'llmforge: netdev mlx5_0/1 ',
                                         'llmforge: mtu mlx5_0/1 ', 'llmforge: run rdma_links ')),
    'nul-in-sysfs-state': (nul_state, ('llmforge: state mlx5_0/1 ACTIVE', 'llmforge: run rdma_links ')),
}


@pytest.mark.parametrize('name', sorted(CRASHED))
def test_crashed_input_drains_writes_metrics_and_state_then_resumes(node, name, capsys):  # pylint: disable=redefined-outer-name
    spoil, reasons = CRASHED[name]
    spoil(node.root)
    if name == 'non-utf8-nvidia-smi':
        # model is only checked against an expectation; the profile has none.
        assert node.run(validators=dict(json.loads((node.root / 'nodecheck.json.in').read_text())['validators'],
                                        gpu_topology={'profile': 'h200-sxm-8', 'expected': {'model': '^NVIDIA H200$'},
                                                      'nvidia_smi': str(SHIM)})) == 1
    else:
        assert node.run() == 1
    reason = node.slurm_state()['reason']
    out = capsys.readouterr().out
    print(f'{name}: drained with {reason!r}')
    assert reason.startswith(reasons), reason
    assert drains(node) == [f'update NodeName=gpu1 State=DRAIN Reason={reason}'] and '\x00' not in reason and reason.isascii()
    assert f'FAILING {reason}' in out
    metrics, state = outputs_written(node.root)
    assert 'llmforge_validator_healthy{validator="nodecheck"} 0\n' in metrics
    assert state['healthy'] is False and state['reason'] == reason and state['slurm']['done'] is True
    # Without --strict a handled failing node exits 0.
    assert nc.main(['--config', str(node.root / 'config.json'), '--no-slurm']) == 0
    # Repaired: the next run lifts the drain it set.
    shutil.rmtree(node.root / 'gpu')
    shutil.copytree(GPU / 'hgx-h200-8', node.root / 'gpu')
    make_sysfs_trees.build('ndr8_healthy', node.root / 'sys')
    assert node.run() == 0
    assert node.slurm_state()['state'] == 'IDLE' and node.scontrol_calls()[-1] == 'update NodeName=gpu1 State=RESUME'


@pytest.mark.parametrize('target, what', [
    ('parse_smi_xml', 'nvidia-smi -q -x'),
    ('parse_topo_matrix', 'nvidia-smi topo -m'),
    ('judge', 'nvidia-smi -q -x and topo -m'),
])
def test_a_gpu_validator_that_raises_is_a_failing_run_check_and_a_nodecheck_error_drain(node, target, what):  # pylint: disable=redefined-outer-name
    def crash(*_args):
        raise OverflowError('int too large to convert to float')
    with mock.patch.object(gpu, target, crash):
        assert node.run() == 1
    reason = f'llmforge: nodecheck error {what}: OverflowError'
    assert node.slurm_state()['reason'] == reason and drains(node) == [f'update NodeName=gpu1 State=DRAIN Reason={reason}']
    metrics, state = outputs_written(node.root)
    assert 'llmforge_validator_check_failed{validator="nodecheck",check="run",subject="node"} 1' in metrics
    (failing,) = [c for c in state['checks'] if c['status'] == 'fail']
    assert failing == {'name': 'run', 'status': 'fail', 'subject': 'node', 'expected': None,
                       'actual': f'nodecheck error {what}: OverflowError',
                       'message': f'nodecheck error while reading {what}: unexpected OverflowError: int too large to convert to float'}
    # The RDMA checks still ran.
    assert any(c['name'] == 'rate' and c['status'] == 'pass' for c in state['checks'])
    assert node.run() == 0 and node.scontrol_calls()[-1] == 'update NodeName=gpu1 State=RESUME'


def test_the_rdma_error_names_the_file_being_read(node):  # pylint: disable=redefined-outer-name
    nul_netdev(node.root)
    result = nc.run(nc.load_config(str(node.root / 'nodecheck.json.in')), 'gpu1', use_slurm=False, dry_run=False)
    (failing,) = [c for c in result['checks'] if c['status'] == 'fail']
    if failing['actual'].startswith('nodecheck error'):  # the sysfs reader itself let the ValueError out
        sys_root = node.root / 'sys'
        assert failing['actual'] == f'nodecheck error sysfs {sys_root}: ValueError'
        assert failing['message'].startswith(f"nodecheck error while reading sysfs {sys_root} ('{sys_root}/class/net/ibp24s0\\x00/mtu')")
        assert 'unexpected ValueError: embedded null byte' in failing['message']


def test_an_error_drain_is_left_alone_while_failing_and_an_admin_drain_is_never_touched(node):  # pylint: disable=redefined-outer-name
    with mock.patch.object(rdma, 'read_ports', lambda _root: [{'device': None}]):
        assert node.run() == 1 and node.run() == 1
        assert len(drains(node)) == 1
        assert node.slurm_state()['reason'] == f"llmforge: nodecheck error sysfs {node.root / 'sys'}: TypeError"
        node.set_state('NodeName=gpu1 State=IDLE+DRAIN Reason=admin: fan swap [alice@now]')
        assert node.run() == 1
    assert node.run() == 0 and node.slurm_state()['reason'] == 'admin: fan swap'


def test_error_drain_reason_fits_the_rules():
    item = validators.error_check('nvidia-smi -q -x', OverflowError('x' * 500))
    assert drain.drain_reason([item]) == 'llmforge: nodecheck error nvidia-smi -q -x: OverflowError'
    assert len(item['message']) < 400
    long = validators.error_check('sysfs /' + 'a' * 200, ValueError('x'))
    assert len(drain.drain_reason([long])) == drain.MAX_REASON
    node_line = drain.parse_node('NodeName=gpu1 State=IDLE+DRAIN Reason=llmforge: nodecheck error sysfs /sys: ValueError [root@now]')
    assert drain.drain_action([], node_line)['action'] == 'resume'
    assert drain.drain_action([item], node_line)['action'] is None


@pytest.mark.parametrize('fields, message', [
    ({'validators': {'gpu_topology': {'profile': ['h200-sxm-8']}}}, 'validators.gpu_topology.profile must be a profile name or null, got array'),
    ({'validators': {'gpu_topology': {'profile': 'h200-sxm-8', 'nvidia_smi': 5}}},
     'validators.gpu_topology.nvidia_smi must be a command name or an absolute path, got number'),
    ({'validators': {'gpu_topology': {'nvidia_smi': 'bin/nvidia-smi'}}}, 'validators.gpu_topology.nvidia_smi must be a command name'),
    ({'validators': {'gpu_topology': {'expected': []}}}, 'validators.gpu_topology.expected must be an object, got array'),
    ({'validators': {'gpu_topology': {'expected': {'gpu_count': [8]}}}}, 'validators.gpu_topology: '),
    ({'validators': {'gpu_topology': {'profle': 'h200-sxm-8'}}}, 'validators.gpu_topology: unknown field(s) profle'),
    ({'validators': {'rdma_links': {'sysfs_root': ['/sys']}}}, 'validators.rdma_links.sysfs_root must be an absolute path or empty, got array'),
    ({'validators': {'rdma_links': {'expected': {'hca_count': HUGE}}}}, 'validators.rdma_links: '),
    ({'validators': {'rdma_links': 'yes'}}, 'validators.rdma_links must be an object, got string'),
    ({'node_name': 7}, 'node_name must be a string, got number'),
    ({'node_name': 'gpu1\u0000'}, 'node_name must be a string without control characters'),
    ({'scontrol': 'sbin/scontrol'}, "scontrol must be a command name (looked up in /usr/local/sbin, /usr/local/bin, /usr/sbin, "
                                    "/usr/bin, /sbin, /bin) or an absolute path, got the relative path 'sbin/scontrol'"),
    ({'squeue': None}, 'squeue must be a command name or an absolute path, got null'),
    ({'state_file': 'nodecheck.json'}, "state_file must be an absolute path or empty, got 'nodecheck.json'"),
    ({'textfile_dir': {}}, 'textfile_dir must be an absolute path or empty, got object'),
    ({'timeout': int(HUGE)}, 'timeout must be a number of seconds in (0, 50]'),
    ({'requeue': 1}, 'requeue must be true or false'),
])
def test_wrong_typed_fields_exit_2_naming_the_field(tmp_path, capsys, fields, message):
    path = tmp_path / 'nodecheck.json'
    path.write_text(json.dumps(dict({'node_name': 'gpu1'}, **fields)))
    assert nc.main(['--config', str(path), '--no-slurm']) == 2
    err = capsys.readouterr().err
    assert err.startswith(f'llmforge-nodecheck: {path}: ') and message in err, err
    assert 'Traceback' not in err


@pytest.mark.parametrize('text, message', [
    ('[' * 100000, 'cannot be read as JSON'),
    ('{"timeout": NaN}', 'timeout must be a number of seconds in (0, 50], got nan'),
    ('{"timeout": ' + '9' * 5000 + '}', 'cannot be read as JSON'),
    (b'{"node_name": "\xff"}', 'cannot be read as JSON'),
])
def test_unparsable_expectation_files_exit_2(tmp_path, capsys, text, message):
    path = tmp_path / 'nodecheck.json'
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    assert nc.main(['--config', str(path)]) == 2
    assert message in capsys.readouterr().err


# --- commands by absolute path ------------------------------------------------------------------------------

def stand_in(path: pathlib.Path, log: pathlib.Path, said: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\necho "{said} $*" >> {log}\n[ "$1" = show ] && echo "{IDLE}"\nexit 0\n')
    path.chmod(0o755)


def test_bare_command_names_are_found_in_the_system_directories_never_through_path(node, monkeypatch):  # pylint: disable=redefined-outer-name
    log = node.root / 'calls.log'
    stand_in(node.root / 'on-path' / 'scontrol', log, 'from-PATH')
    stand_in(node.root / 'usr-sbin' / 'scontrol', log, 'system')
    monkeypatch.setenv('PATH', f"{node.root / 'on-path'}:/usr/bin:/bin")
    monkeypatch.setattr(nc, 'SYSTEM_DIRS', (str(node.root / 'empty'), str(node.root / 'usr-sbin')))
    assert node.run(scontrol='scontrol') == 0
    assert log.read_text().splitlines() == ['system show node gpu1 -o']
    # Not in any of them: Slurm cannot be handled (exit 3), the directories named; checks, metrics, state still done.
    monkeypatch.setattr(nc, 'SYSTEM_DIRS', (str(node.root / 'empty'),))
    (node.root / 'nodecheck.json').unlink()
    assert node.run(scontrol='scontrol') == 3
    state = json.loads((node.root / 'nodecheck.json').read_text())
    assert state['slurm_error'] == f"scontrol not found in {node.root / 'empty'} (give its absolute path in the expectation file)"
    assert state['healthy'] is True


def test_a_bare_nvidia_smi_that_is_nowhere_fails_the_run_check(node, monkeypatch):  # pylint: disable=redefined-outer-name
    monkeypatch.setenv('PATH', str(SHIM.parent))
    monkeypatch.setattr(nc, 'SYSTEM_DIRS', (str(node.root / 'empty'),))
    validators = {'gpu_topology': {'profile': 'h200-sxm-8', 'nvidia_smi': SHIM.name}}
    assert node.run(validators=validators) == 1
    assert node.slurm_state()['reason'] == (f"llmforge: run nvidia-smi nvidia-smi-shim not found: is the NVIDIA driver installed? "
                                            f"(looked in {node.root / 'empty'})")[:drain.MAX_REASON].rstrip()


def test_odd_scontrol_output_is_slurm_not_handled_exit_3(node, monkeypatch):  # pylint: disable=redefined-outer-name
    def crash(_text):
        raise IndexError('list index out of range')
    monkeypatch.setattr(drain, 'parse_node', crash)
    assert node.run() == 3
    _metrics, state = outputs_written(node.root)
    assert state['slurm_error'] == ('unexpected IndexError: list index out of range while reading or updating the node '
                                    'in Slurm')


def test_metrics_that_cannot_be_rendered_still_leave_the_state_file(node, monkeypatch, capsys):  # pylint: disable=redefined-outer-name
    def crash(_result):
        raise ValueError('bad label')
    monkeypatch.setattr(nc, 'metrics_text', crash)
    assert node.run() == 0
    assert json.loads((node.root / 'nodecheck.json').read_text())['healthy'] is True
    assert 'llmforge_nodecheck.prom: unexpected ValueError: bad label' in capsys.readouterr().err


# --- property: mutated expectations and hardware outputs, in this process ------------------------------------

XML = (GPU / 'hgx-h200-8' / 'smi_q.xml').read_bytes()
TOPO = (GPU / 'hgx-h200-8' / 'topo_m.txt').read_bytes()
ODD = [b'\x00', b'\xff', b'\xfe\xfd', b'\xc3', HUGE.encode(), b'-' + HUGE.encode(), b'inf', b'nan', b'1e999', b'\xd9\xa3',
       b'<', b'>', b'&', b'\t', b'\n', b'N/A', b'-1', b'0x10']


@st.composite
def mutated(draw, data: bytes) -> str:
    """The bytes of a fixture with a few mutations, decoded as the health check decodes command output."""
    lines = data.split(b'\n')
    for _round in range(draw(st.integers(1, 3))):
        # Numbers most often: they reach the parsers' arithmetic, where structure mutations stop at the XML.
        op = draw(st.sampled_from(['truncate', 'flip', 'insert', 'delete', 'duplicate'] + ['number'] * 5))
        at = draw(st.integers(0, max(0, len(lines) - 1)))
        if op == 'number':
            numbered = [i for i, line in enumerate(lines) if re.search(rb'\d', line)]
            at = draw(st.sampled_from(numbered)) if numbered else at
        if op == 'truncate':
            lines = lines[:at]
        elif op == 'delete' and lines:
            del lines[at]
        elif op == 'duplicate' and lines:
            lines.insert(at, lines[at])
        elif op == 'number' and lines:
            lines[at] = re.sub(rb'\d+', draw(st.sampled_from(ODD)).replace(b'\\', b''), lines[at], count=1)
        elif lines:
            line = lines[at]
            pos = draw(st.integers(0, len(line)))
            if op == 'flip' and line:
                pos = min(pos, len(line) - 1)
                line = line[:pos] + bytes([line[pos] ^ (1 << draw(st.integers(0, 7)))]) + line[pos + 1:]
            else:
                line = line[:pos] + draw(st.sampled_from(ODD)) + line[pos:]
            lines[at] = line
    return b'\n'.join(lines).decode('utf-8', errors='replace')


# What a parser might let out on input nobody foresaw.
RAISED = [OverflowError('int too large'), ValueError('embedded null byte'), TypeError("'NoneType' object is not subscriptable"),
          KeyError('gpus'), IndexError('list index out of range'), ZeroDivisionError('division by zero'),
          UnicodeDecodeError('utf-8', b'\xff', 0, 1, 'invalid start byte'), RecursionError('maximum recursion depth exceeded'),
          AttributeError("'NoneType' object has no attribute 'text'"), MemoryError()]
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=6)
GOOD_CONFIG = {'node_name': 'gpu1', 'timeout': 3, 'drain': True, 'requeue': True, 'scontrol': '/usr/bin/scontrol',
               'squeue': 'squeue', 'textfile_dir': '', 'state_file': '',
               'validators': {'gpu_topology': {'profile': 'h200-sxm-8', 'expected': {'gpu_count': 8}, 'nvidia_smi': '/x/nvidia-smi'},
                              'rdma_links': {'sysfs_root': '/sys', 'expected': dict(RDMA_EXPECTED)}}}
FIELDS = ([(key,) for key in GOOD_CONFIG]
          + [('validators', name, key) for name, settings in GOOD_CONFIG['validators'].items() for key in settings]
          + [('validators', 'gpu_topology', 'expected', 'gpu_count'), ('validators', 'rdma_links', 'expected', 'hca_count'),
             ('validators', 'rdma_links', 'expected', 'rate_gbps')])


@seed(20261130)
@settings(database=None, deadline=None, max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(FIELDS), JSON)
def test_property_a_mutated_expectation_is_accepted_or_a_config_error(field, value):
    data = json.loads(json.dumps(GOOD_CONFIG))
    holder = data
    for key in field[:-1]:
        holder = holder[key]
    holder[field[-1]] = value
    try:
        config = nc.check_config(data)
    except nc.ConfigError as err:
        assert str(err)
    else:
        assert isinstance(config, dict) and set(GOOD_CONFIG) <= set(config)


@pytest.fixture(scope='module')
def sysfs_tree(tmp_path_factory):
    root = tmp_path_factory.mktemp('sysfs') / 'sys'
    make_sysfs_trees.build('ndr8_healthy', root)
    files = sorted(path for path in root.rglob('*') if path.is_file() and not path.is_symlink())
    return root, files


def handled(result: dict[str, t.Any]) -> None:
    """The run's result is whole: a verdict, checks, a drain reason by the rules, metrics, JSON and a summary."""
    assert isinstance(result['healthy'], bool) and result['checks']
    assert result['reason'] == drain.drain_reason(result['checks']) and (result['healthy'] or result['reason'].startswith('llmforge: '))
    assert result['reason'].isascii() and '\x00' not in result['reason']
    for action_node in (drain.parse_node(IDLE), drain.parse_node('NodeName=gpu1 State=IDLE+DRAIN Reason=llmforge: run node x')):
        assert drain.drain_action(result['checks'], action_node)['action'] in (None, 'drain', 'resume')
    assert nc.metrics_text(result).startswith('# HELP') and json.loads(nc._json_text(result))  # pylint: disable=protected-access
    assert nc.summary(result).startswith('llmforge-nodecheck gpu1: ')


def only(validator: str, **settings: t.Any) -> dict[str, t.Any]:
    """The expectation with one validator, checked as the program checks it."""
    validators = {validator: dict(GOOD_CONFIG['validators'][validator], **settings)}
    return nc.check_config(json.loads(json.dumps(dict(GOOD_CONFIG, validators=validators))))


@seed(20261130)
@settings(database=None, deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_property_mutated_nvidia_smi_output_gives_a_handled_result(data):
    outputs = {'-q': data.draw(mutated(XML)) if data.draw(st.booleans()) else XML.decode(),
               'topo': data.draw(mutated(TOPO)) if data.draw(st.booleans()) else TOPO.decode()}
    # Sometimes a step of the check raises what no parser should, whatever the input: the handler's paths.
    target, error = data.draw(st.sampled_from([
        (step, error) for step in ('run_command', 'parse_smi_xml', 'parse_topo_matrix', 'judge') for error in RAISED])
        if data.draw(st.booleans()) else st.just(('run_command', None)))

    def nvidia_smi(argv, _timeout):
        return outputs[argv[1]]
    real = nvidia_smi if target == 'run_command' else getattr(gpu, target)

    def step(*args):
        if error is not None:
            raise error
        return real(*args)
    with mock.patch.object(gpu, 'run_command', nvidia_smi), mock.patch.object(gpu, target, step), \
            mock.patch.object(nc, 'resolve_command', lambda command: command):
        result = nc.run(only('gpu_topology'), 'gpu1', use_slurm=False, dry_run=False)
    handled(result)
    if error is not None:
        # The step raised, unless an earlier one failed with the parser's own error.
        assert result['reason'].startswith(('llmforge: nodecheck error nvidia-smi ', 'llmforge: run nvidia-smi ')), result['reason']


@seed(20261130)
@settings(database=None, deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow,
                                                                                 HealthCheck.function_scoped_fixture])
@given(st.data())
def test_property_mutated_sysfs_files_give_a_handled_result(sysfs_tree, data):  # pylint: disable=redefined-outer-name
    root, files = sysfs_tree
    config = only('rdma_links', sysfs_root=str(root))
    spoilt = [data.draw(st.sampled_from(files)) for _count in range(data.draw(st.integers(1, 3)))]
    before = {path: path.read_bytes() for path in spoilt}
    target, error = data.draw(st.sampled_from([(step, error) for step in ('read_ports', 'judge') for error in RAISED])
                              if data.draw(st.booleans()) else st.just(('judge', None)))
    real = getattr(rdma, target)

    def step(*args):
        if error is not None:
            raise error
        return real(*args)
    try:
        for path in spoilt:
            path.write_bytes(data.draw(mutated(before[path])).encode('utf-8'))
        with mock.patch.object(rdma, target, step):
            result = nc.run(config, 'gpu1', use_slurm=False, dry_run=False)
    finally:
        for path, content in before.items():
            path.write_bytes(content)
    handled(result)
    if error is not None:
        # The step raised, unless reading a spoilt file failed first with the parser's own error.
        expected = f'llmforge: nodecheck error sysfs {root}: {type(error).__name__}'[:drain.MAX_REASON].rstrip()
        assert result['reason'] == expected or result['reason'].startswith('llmforge: run rdma_links '), result['reason']
