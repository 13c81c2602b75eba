# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the Molecule scenarios' testinfra tests share: re-running the converge playbook and reading its output.

Each scenario's molecule.yml puts this directory on the verifier's PYTHONPATH.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
import typing as t

import testinfra

RECAP = re.compile(r'^(\S+)\s+:\s+(ok=.*)$', re.M)
# The repository: Molecule names it; run by hand, it is three directories up from here, as from any scenario's tests.
PROJECT = os.environ.get('MOLECULE_PROJECT_DIRECTORY') or os.path.abspath(
    os.path.join(os.path.dirname(__file__), '..', '..', '..'))


def run_playbook(*args: str, playbook: t.Optional[str] = None, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run the scenario's converge playbook (or `playbook`) against the converged containers with extra arguments."""
    playbook = playbook or os.path.join(os.environ['MOLECULE_SCENARIO_DIRECTORY'], 'converge.yml')
    return subprocess.run(
        ['ansible-playbook', playbook, '-i', os.environ['MOLECULE_INVENTORY_FILE'], *args],
        capture_output=True, text=True, timeout=timeout, check=False,
        env=dict(os.environ, ANSIBLE_FORCE_COLOR='0', ANSIBLE_NOCOLOR='1'))


def docker_hosts(names: t.Iterable[str]) -> dict[str, t.Any]:
    """The scenario's containers as testinfra hosts, by name."""
    return {name: testinfra.get_host(f'docker://{name}') for name in names}


def reach(client, address: str, port: int, seconds: int = 4) -> str:
    """'open' when a TCP connection from inside `client` to address:port is accepted, 'filtered' when nothing
    answered within `seconds` (a firewall's drop), else 'refused: ' and what bash said."""
    result = client.run(f"timeout {seconds} bash -c 'exec 3<>/dev/tcp/{address}/{port}' 2>&1")
    if result.rc == 0:
        return 'open'
    return 'filtered' if result.rc == 124 else 'refused: ' + result.stdout.strip()


def said(result: subprocess.CompletedProcess) -> str:
    """Everything the play printed, on one line: the YAML callback wraps long messages."""
    return ' '.join((result.stdout + result.stderr).split())


def recaps(result: subprocess.CompletedProcess) -> dict[str, dict[str, int]]:
    """The PLAY RECAP counters of every host: {host: {'ok': 3, 'changed': 0, ...}}."""
    return {host: {key: int(value) for key, value in re.findall(r'(\w+)=(\d+)', counters)}
            for host, counters in RECAP.findall(result.stdout)}


def recap_of(node: str) -> t.Callable[[subprocess.CompletedProcess], dict[str, int]]:
    """A recap(result) reading the counters of one host, failing with the play's output when it has none."""
    def recap(result: subprocess.CompletedProcess) -> dict[str, int]:
        found = recaps(result)
        assert node in found, result.stdout[-3000:] + result.stderr[-3000:]
        return found[node]
    return recap


def wait_for(check, timeout=90, interval=2):
    """Poll `check` until it returns a truthy value; the last value is returned either way."""
    deadline = time.monotonic() + timeout
    result = check()
    while not result and time.monotonic() < deadline:
        time.sleep(interval)
        result = check()
    return result


def slurm_knows_user(ctl, user: str, timeout: int = 120) -> bool:
    """Make slurmctld on `ctl` map `user` to its uid; True once it does.

    slurmctld looks a user's uid up when it learns of the user's association: a user created on the controller after
    that (a test's local user, a directory user whose SSSD came later) has none, and Slurm refuses its jobs ("Invalid
    account or account/partition combination specified") until `scontrol reconfigure` or slurmctld's hourly refresh.
    """
    uid = ctl.check_output(f'id -u {user}').strip()

    def known() -> bool:
        out = ctl.run(f'scontrol show assoc_mgr users={user} flags=users').stdout
        return f'UserName={user}({uid})' in out

    if known():
        return True
    ctl.run('scontrol reconfigure')
    # Since Slurm 23.11 slurmctld restarts in place to reconfigure: wait for it to answer again.
    return bool(wait_for(lambda: ctl.run('scontrol ping').rc == 0 and known(), timeout=timeout))
