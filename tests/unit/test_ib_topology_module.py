# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ib_topology module: through the real ansible CLI (saved output, a command, a timeout), and each failure's
message with main() run in this process, which is many times faster."""

from __future__ import annotations

import json
import pathlib
import stat

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmforge.cluster.plugins.modules import ib_topology
from module_runner import run_module

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / 'fixtures' / 'ibnetdiscover'
TWO_LEVEL = FIXTURES / 'ibsim-2level-rail0.txt'
EIGHT_RAILS = FIXTURES / 'ibsim-2level-8rails.txt'


def script(directory: pathlib.Path, body: str) -> str:
    path = directory / 'fake-ibnetdiscover'
    path.write_text(f'#!/bin/sh\n{body}\n', encoding='utf-8')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def run_in_process(args: dict, capsys) -> dict:
    """The module's main() with these arguments; its JSON result."""
    with patch_module_args(args), pytest.raises(SystemExit):
        ib_topology.main()
    return json.loads(capsys.readouterr().out)


def test_saved_output_with_inventory_in_check_mode():
    hosts = [f'gpu{n:04d}' for n in range(1, 9)] + ['gpu0100']
    result = run_module('ib_topology', {'ibnetdiscover_output': str(TWO_LEVEL), 'hosts': hosts}, check=True)
    assert not result.get('failed') and result['changed'] is False
    assert result['topology_conf'] == [
        'SwitchName=r0-leaf001 Nodes=gpu[0001-0004]', 'SwitchName=r0-leaf002 Nodes=gpu[0005-0008]',
        'SwitchName=r0-spine001 Switches=r0-leaf[001-002]', 'SwitchName=r0-spine002 Switches=r0-leaf[001-002]',
        'SwitchName=r0-spine003 Switches=r0-leaf[001-002]', 'SwitchName=r0-spine004 Switches=r0-leaf[001-002]']
    assert result['hosts_missing_from_fabric'] == ['gpu0100']
    assert result['fabric_hosts_not_in_inventory'] == [f'gpu{n:04d}' for n in range(9, 17)]
    assert result['rail'] == 'mlx5_0' and result['counts'] == {'switches': 8, 'cas': 16, 'routers': 0, 'links': 32}
    leaf = result['switches'][0]
    assert leaf == {'guid': '0xfc6a1c0300010000', 'name': 'r0-leaf001', 'description': 'MF0;r0-leaf001:MQM8700/U1',
                    'level': 0, 'hosts': ['gpu0001', 'gpu0002', 'gpu0003', 'gpu0004'], 'switches': []}


def test_command_printing_a_dump_and_a_rail_index(tmp_path):
    command = script(tmp_path, f'cat {EIGHT_RAILS}')
    result = run_module('ib_topology', {'command': [command], 'rail': 3})
    assert not result.get('failed'), result.get('msg')
    assert result['rail'] == 'mlx5_3' and len(result['rails']) == 8
    assert result['topology_conf'][0] == 'SwitchName=r3-leaf001 Nodes=gpu[0001-0004]'


@pytest.mark.parametrize('args, message', [
    ({'ibnetdiscover_output': '/nonexistent/fabric.txt'},
     'ibnetdiscover_output /nonexistent/fabric.txt does not exist'),
    ({'command': ['/nonexistent/ibnetdiscover']}, '/nonexistent/ibnetdiscover not found: install infiniband-diags'),
    ({'ibnetdiscover_output': str(TWO_LEVEL), 'rail': 'mlx5_9'},
     "rail 'mlx5_9' is not on the fabric; rails seen: mlx5_0"),
    ({'ibnetdiscover_output': str(TWO_LEVEL), 'timeout': 0}, 'timeout must be a positive number of seconds'),
    ({'command': []}, 'command must name a program'),
    ({'ibnetdiscover_output': str(TWO_LEVEL), 'host_pattern': '(['}, "host_pattern '([' is not a valid regular"),
    ({'ibnetdiscover_output': str(TWO_LEVEL), 'host_pattern': 'gpu'}, 'has no named group "host"'),
    ({'ibnetdiscover_output': str(TWO_LEVEL), 'host_pattern': '^(?P<host>cpu)'}, 'no hosts found'),
    ({'ibnetdiscover_output': '/dev/null'}, 'the ibnetdiscover output is empty'),
    ({'ibnetdiscover_output': str(TWO_LEVEL), 'command': ['ibnetdiscover']}, 'mutually exclusive'),
])
def test_failures_say_what_is_wrong(args, message, capsys):
    result = run_in_process(args, capsys)
    assert result['failed'] is True and message in result['msg'], result['msg']
    assert 'mutually exclusive' in message or result['topology_conf'] == []


def test_command_timeout(tmp_path):
    result = run_module('ib_topology', {'command': [script(tmp_path, 'sleep 30')], 'timeout': 1})
    assert result['failed'] is True and 'did not finish within 1 s' in result['msg']


def test_command_failure(tmp_path, capsys):
    result = run_in_process({'command': [script(tmp_path, 'echo "ibwarn: no port" >&2; exit 255')]}, capsys)
    assert result['failed'] is True and 'failed with rc 255: ibwarn: no port' in result['msg']


def test_malformed_output_names_the_source_and_line(tmp_path, capsys):
    dump = tmp_path / 'dump.txt'
    dump.write_text(TWO_LEVEL.read_text(encoding='utf-8').replace('[5]\t"S-', '[5]\t"X-', 1), encoding='utf-8')
    result = run_in_process({'ibnetdiscover_output': str(dump)}, capsys)
    assert result['failed'] is True
    assert result['msg'].startswith(f'{dump}: ibnetdiscover output line 15: a port line that is not'), result['msg']


def test_warnings_reach_the_user(tmp_path):
    # Through the CLI: in process, warnings live in ansible-core's global state, which other tests share.
    dump = tmp_path / 'dump.txt'
    dump.write_text(TWO_LEVEL.read_text(encoding='utf-8') + 'garbage\n', encoding='utf-8')
    result = run_module('ib_topology', {'ibnetdiscover_output': str(dump)})
    assert not result.get('failed') and any('skipped 1 line(s)' in warning for warning in result['warnings'])
