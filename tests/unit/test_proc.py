# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one subprocess runner (_proc.run): outputs, exit status, and the one error type with its reasons."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils import _proc as proc


def script(tmp_path, body, name='tool', mode=0o755):
    path = tmp_path / name
    path.write_text(f'#!/bin/sh\n{body}\n', encoding='utf-8')
    path.chmod(mode)
    return str(path)


def test_outputs_and_exit_status_whatever_the_status(tmp_path):
    done = proc.run([script(tmp_path, 'echo out; echo err >&2; exit 3'), 'a b'], timeout=10)
    assert done == (3, 'out\n', 'err\n') and done.rc == 3


def test_arguments_are_not_given_to_a_shell(tmp_path):
    done = proc.run([sys.executable, '-c', 'import sys; print(sys.argv[1:])', '$HOME; ls', '*'], timeout=30)
    assert done.stdout == "['$HOME; ls', '*']\n"


def test_undecodable_output_is_replaced_not_fatal(tmp_path):
    done = proc.run([script(tmp_path, r"printf 'caf\351\n'")], timeout=10)
    assert done.stdout == 'caf\ufffd\n'


@pytest.mark.parametrize(('argv', 'reason', 'message'), [
    (['/nonexistent/tool', '-x'], proc.MISSING, '/nonexistent/tool not found'),
    (['/'], proc.DENIED, '/ is not executable'),
])
def test_programs_that_cannot_start(argv, reason, message):
    with pytest.raises(proc.CommandError) as caught:
        proc.run(argv, timeout=5)
    assert caught.value.reason == reason and str(caught.value) == message and caught.value.argv == argv


def test_not_executable_file(tmp_path):
    with pytest.raises(proc.CommandError) as caught:
        proc.run([script(tmp_path, 'exit 0', mode=0o644)], timeout=5)
    assert caught.value.reason == proc.DENIED


def test_other_start_failures_name_the_program(tmp_path):
    bad = tmp_path / 'garbage'
    bad.write_bytes(b'\x7fELF\x00not really')
    bad.chmod(0o755)
    with pytest.raises(proc.CommandError) as caught:
        proc.run([str(bad)], timeout=5)
    assert caught.value.reason == proc.FAILED and str(caught.value).startswith(f'{bad} cannot be run: ')


def test_timeout_kills_the_command_and_names_it(tmp_path):
    started = time.monotonic()
    with pytest.raises(proc.CommandError) as caught:
        proc.run(['sleep', '30'], timeout=0.5)
    assert time.monotonic() - started < 5
    assert caught.value.reason == proc.TIMEOUT and str(caught.value) == "'sleep 30' did not finish within 0.5 s"
    assert caught.value.command == 'sleep 30' and caught.value.timeout == 0.5


def test_timeout_in_its_own_session_also_ends_what_it_started(tmp_path):
    pid_file = tmp_path / 'child.pid'
    launcher = script(tmp_path, f'sleep 30 & echo $! > {pid_file}; wait')
    started = time.monotonic()
    with pytest.raises(proc.CommandError) as caught:
        proc.run([launcher], timeout=0.5, own_session=True)
    assert caught.value.reason == proc.TIMEOUT and time.monotonic() - started < 5
    child = int(pid_file.read_text(encoding='utf-8'))
    deadline = time.monotonic() + 5
    while alive(child):
        assert time.monotonic() < deadline, f'the grandchild {child} survived the timeout'
        time.sleep(0.1)


def test_own_session_false_is_still_accepted_and_the_group_is_killed(tmp_path):
    pid_file = tmp_path / 'child.pid'
    launcher = script(tmp_path, f'sleep 30 & echo $! > {pid_file}; wait')
    with pytest.raises(proc.CommandError) as caught:
        proc.run([launcher], timeout=0.5, own_session=False)
    assert caught.value.reason == proc.TIMEOUT
    assert_ends(int(pid_file.read_text(encoding='utf-8')))


@pytest.fixture
def leftovers():
    """Pids a test records in a file; whatever still runs of them is killed when the test ends."""
    pid_files = []
    yield pid_files
    for pid_file in pid_files:
        if pid_file.exists():
            for pid in pid_file.read_text(encoding='utf-8').split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass


def assert_times_out_within(argv, timeout, limit):
    started = time.monotonic()
    with pytest.raises(proc.CommandError) as caught:
        proc.run(argv, timeout=timeout)
    elapsed = time.monotonic() - started
    assert caught.value.reason == proc.TIMEOUT and f'did not finish within {timeout:g} s' in str(caught.value)
    assert elapsed < limit, f'the timeout verdict took {elapsed:.1f} s'


def test_a_wrapper_script_that_does_not_exec_is_killed_with_its_child(tmp_path, leftovers):
    pid_file = tmp_path / 'pids'
    leftovers.append(pid_file)
    wrapper = script(tmp_path, f'echo $$ > {pid_file}\nsleep 60\necho done')
    assert_times_out_within([wrapper], timeout=1, limit=1 + 2)
    assert_ends(int(pid_file.read_text(encoding='utf-8')))


def test_a_setsid_grandchild_holding_the_pipes_does_not_hold_the_verdict(tmp_path, leftovers):
    pid_file = tmp_path / 'pids'
    leftovers.append(pid_file)
    # The grandchild leaves the process group, so no group kill reaches it, and keeps stdout and stderr open.
    holder = script(tmp_path, f'setsid sleep 60 &\necho $! > {pid_file}\nsleep 60')
    assert_times_out_within([holder], timeout=1, limit=1 + 2)


def test_an_interrupted_run_ends_the_command(tmp_path, leftovers):
    pid_file = tmp_path / 'pids'
    leftovers.append(pid_file)
    wrapper = script(tmp_path, f'echo $$ > {pid_file}\nsleep 60\necho done')

    def interrupt(_signum, _frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    try:
        with pytest.raises(KeyboardInterrupt):
            proc.run([wrapper], timeout=30)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert_ends(int(pid_file.read_text(encoding='utf-8')))


def test_a_command_that_ends_in_time_is_waited_for_with_its_output(tmp_path):
    done = proc.run([script(tmp_path, 'sleep 0.3; echo late; exit 7')], timeout=10)
    assert done == (7, 'late\n', '')


def assert_ends(pid: int) -> None:
    deadline = time.monotonic() + 5
    while alive(pid):
        assert time.monotonic() < deadline, f'{pid} survived the timeout'
        time.sleep(0.1)


def alive(pid: int) -> bool:
    """Running: a killed orphan is gone or, where nothing reaps it yet, a zombie (state Z)."""
    try:
        with open(f'/proc/{pid}/stat', encoding='utf-8') as handle:
            return handle.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except FileNotFoundError:
        return False
