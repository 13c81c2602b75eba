# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""scripts/molecule_failures.py reads molecule's boxed, wrapped and coloured log back into the failures."""

from __future__ import annotations

import importlib.util
import pathlib

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / 'scripts' / 'molecule_failures.py'
SPEC = importlib.util.spec_from_file_location('molecule_failures', SCRIPT)
failures = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(failures)  # type: ignore[union-attr]

BOX = '  \x1b[2m│\x1b[0m '
VERIFY_LOG = '\n'.join([
    '\x1b[36mINFO    \x1b[0m \x1b[32mcluster\x1b[0m ➜ \x1b[33mverify\x1b[0m: Executing Testinfra tests',
    f'{BOX}E       AssertionError: assert 3 == 2',
    f'{BOX}=========================== short test summary info',
    f'{BOX}  ============================',
    f'{BOX}FAILED',
    f'{BOX}  ../cluster/tests/test_bare_nodes.py::test_a_node_with_fewer_gpus_than_gpu_',
    f'{BOX}  count_is_refused',
    f'{BOX}FAILED ../cluster/tests/test_cluster.py::test_short - assert 1',
    f'{BOX}====== 2 failed, 30 passed, 2 skipped in 197.70s (0:03:17)',
    f'{BOX}  ======',
    '\x1b[31mERROR   \x1b[0m \x1b[32mcluster\x1b[0m ➜ \x1b[33mverify\x1b[0m: \x1b[31mExecuted: Failed\x1b[0m',
    '\x1b[32mcluster\x1b[0m ➜ \x1b[33mverify\x1b[0m: \x1b[31mExecuted: Failed\x1b[0m',
])


def test_failed_tests_are_unwrapped_with_the_assertion_and_the_totals():
    assert failures.summary(VERIFY_LOG) == [
        'failed action: verify',
        'FAILED ../cluster/tests/test_bare_nodes.py::test_a_node_with_fewer_gpus_than_gpu_count_is_refused',
        'FAILED ../cluster/tests/test_cluster.py::test_short - assert 1',
        '  E       AssertionError: assert 3 == 2',
        '2 failed, 30 passed, 2 skipped in 197.70s (0:03:17)',
    ]


def test_a_failed_play_names_its_hosts():
    log = '\n'.join([f'{BOX}fatal: [gpu2]: FAILED! => {{"msg": "boom"}}', f'{BOX}fatal: [gpu1]: FAILED! => {{}}',
                     'monitoring ➜ prepare: Executed: Failed'])
    assert failures.summary(log) == ['failed action: prepare', 'fatal on: gpu1, gpu2']


def test_a_verify_stopped_at_the_deadline_names_the_failures_its_progress_lines_reported():
    log = '\n'.join([
        f'{BOX}tests/test_validate.py::test_check_mode_says_it_would_drain PASSED  14.2s',
        f'{BOX}tests/test_validate.py::test_the_slurm_path_and_the_ansible_path_give_the_sa',
        f'{BOX}  me_report FAILED  301.5s',
        f'{BOX}tests/test_validate.py::test_admin_drain_survives_a_validate_run PASSED  12.0s',
        "== molecule test --scenario-name cluster stopped at make test's deadline, 4650 s after it started",
    ])
    assert failures.summary(log) == [
        'FAILED tests/test_validate.py::test_the_slurm_path_and_the_ansible_path_give_the_same_report',
        "molecule test --scenario-name cluster stopped at make test's deadline, 4650 s after it started",
    ]


def test_unreadable_logs_are_named(tmp_path, capsys):
    assert failures.main([str(tmp_path / 'absent.log')]) == 0
    assert 'absent.log' in capsys.readouterr().out
