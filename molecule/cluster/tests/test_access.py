# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who reaches which node: the login node submits without slurmd, and SSH to a compute node needs a job there.

login1 is a Slurm login node (slurm_login: client commands, munge, sackd, no slurmd). The GPU nodes run
pam_slurm_adopt (slurm_node): alice, an ordinary directory user, gets in only while a job of hers runs on the node,
and her session lands in that job's extern step; carol, in the admin group hpcadmins, gets in without a job. Both
come from the scenario's LDAP server with their homes on /shared, where this module puts their SSH keys.
"""

from __future__ import annotations

import re
import shlex

import pytest

from conftest import CONTROLLER, LOGIN, NODES
from scenario_helpers import wait_for

NODE = NODES[0]
USER, ADMIN = 'alice', 'carol'
SSH = 'timeout 30 ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new -o ConnectTimeout=10'
DENIED = 'Access denied by pam_slurm_adopt'
OPTION = re.compile(r'(?<![\w-])--[a-z][a-z0-9-]*')

pytestmark = pytest.mark.skipif(not LOGIN, reason='this scenario has no login node')


@pytest.fixture(scope='module')
def login(hosts):
    return hosts[LOGIN]


def as_user(host, user, command):
    """Run a shell command as a directory user, from a directory every user may read."""
    return host.run(f'runuser -u {user} -- sh -c {shlex.quote("cd /tmp && " + command)}')


def ssh(host, user, target, command):
    return as_user(host, user, f'{SSH} {target} {shlex.quote(command)}')


def output(result):
    return result.stdout + result.stderr


@pytest.fixture(scope='module')
def ssh_keys(login):
    """Each test user's key pair in their home on shared storage, authorized for their own logins on every node."""
    for user in (USER, ADMIN):
        entry = login.run(f'getent passwd {user}')
        assert entry.rc == 0, f'{user} is not a user on {LOGIN} (the scenario LDAP users come through SSSD)'
        home = entry.stdout.strip().split(':')[5]
        login.check_output(f'test -d {home} || install -d -m 0700 -o {user} -g "$(id -gn {user})" {home}')
        script = ('mkdir -p -m 0700 ~/.ssh'
                  ' && { test -f ~/.ssh/id_ed25519 || ssh-keygen -q -t ed25519 -N "" -f ~/.ssh/id_ed25519; }'
                  ' && { grep -qxF "$(cat ~/.ssh/id_ed25519.pub)" ~/.ssh/authorized_keys 2>/dev/null'
                  '      || cat ~/.ssh/id_ed25519.pub >> ~/.ssh/authorized_keys; }'
                  ' && chmod 0600 ~/.ssh/authorized_keys')
        result = as_user(login, user, script)
        assert result.rc == 0, output(result)
    return (USER, ADMIN)


def jobs_of(login, user):
    return login.check_output(f'squeue -h -u {user} -o %i').split()


def test_login_node_submits_jobs_without_slurmd(login):
    assert not login.package('slurmd').is_installed
    assert not login.process.filter(comm='slurmd')
    # Configless: sackd fetched the files from slurmctld, and no local slurm.conf hides them.
    assert login.service('sackd').is_running
    assert login.file('/run/slurm/conf/slurm.conf').exists
    assert not login.file('/etc/slurm/slurm.conf').exists
    nodes = login.run('timeout 30 sinfo -h -N -o %N')
    assert nodes.rc == 0 and set(NODES) <= set(nodes.stdout.split()), output(nodes)
    assert login.run('timeout 30 squeue -h').rc == 0
    job = login.run('cd /tmp && timeout 120 sbatch --parsable --wait -N1 -o /dev/null --wrap true')
    assert job.rc == 0, output(job)


def test_sackd_was_configured_before_its_package_started_it(login):
    # slurm_login writes /etc/default/sackd (where the controller is) before it installs the package, whose
    # postinst starts sackd: dpkg kept the file as a changed conffile, and that first start found slurmctld instead
    # of retrying DNS SRV lookups until systemd's start timeout (90 s of every login node's bring-up).
    log = login.run('grep -h "/etc/default/sackd" /var/log/dpkg.log')
    assert 'conffile /etc/default/sackd keep' in log.stdout, (
        f'/etc/default/sackd was not in place when dpkg configured sackd; dpkg.log says: {log.stdout!r}')
    journal = login.run('journalctl --no-pager -o cat -u sackd')
    assert journal.rc == 0 and 'resolve_ctls_from_dns_srv' not in journal.stdout, journal.stdout[-2000:]


def test_srun_offers_the_same_options_on_the_login_and_compute_nodes(login, hosts):
    on_login = login.run('timeout 30 srun --help')
    on_node = hosts[NODE].run('timeout 30 srun --help')
    assert on_login.rc == 0 and on_node.rc == 0, output(on_login) + output(on_node)
    login_options, node_options = set(OPTION.findall(on_login.stdout)), set(OPTION.findall(on_node.stdout))
    assert '--container' in node_options
    assert login_options == node_options, (
        f'only on {LOGIN}: {sorted(login_options - node_options)}; only on {NODE}: {sorted(node_options - login_options)}')


def test_ssh_to_a_compute_node_without_a_job_is_denied(login, ssh_keys):
    assert not jobs_of(login, USER), f'{USER} has jobs left over: {jobs_of(login, USER)}'
    result = ssh(login, USER, NODE, 'true')
    assert result.rc != 0 and DENIED in result.stderr, output(result)


def test_ssh_session_is_adopted_into_the_job_and_ends_with_it(login, hosts, ssh_keys):
    node = hosts[NODE]
    granted = as_user(login, USER, f'timeout 60 salloc -N1 -w {NODE} --no-shell -J adopt-test')
    found = re.search(r'Granted job allocation (\d+)', output(granted))
    assert granted.rc == 0 and found, output(granted)
    job = found.group(1)
    try:
        # PrologFlags=Contain: the job's extern step exists from the allocation on, and the session joins it.
        adopted = wait_for(lambda: ssh(login, USER, NODE, 'cat /proc/self/cgroup'), timeout=30, interval=3)
        assert adopted.rc == 0, output(adopted)
        assert re.search(rf'/job_{job}/step_extern(/|$)', adopted.stdout, re.M), adopted.stdout
        # A session left open: the job's end must end it too (it loses the job's GPUs with its processes).
        as_user(login, USER, f'setsid {SSH} {NODE} "sleep 240" </dev/null >/dev/null 2>&1 &')
        assert wait_for(lambda: node.run(f'pgrep -u {USER} -f "sleep 240"').rc == 0, timeout=30), \
            f'the background session of {USER} never started on {NODE}'
    finally:
        login.run(f'timeout 30 scancel {job}')
    assert wait_for(lambda: job not in jobs_of(login, USER), timeout=60), f'job {job} is still in the queue'
    assert wait_for(lambda: node.run(f'pgrep -u {USER} -f "sleep 240"').rc != 0, timeout=60), \
        f'the session of {USER} on {NODE} outlived job {job}'
    again = ssh(login, USER, NODE, 'true')
    assert again.rc != 0 and DENIED in again.stderr, output(again)


def test_admin_group_logs_in_without_a_job(login, ssh_keys):
    assert not jobs_of(login, ADMIN)
    result = ssh(login, ADMIN, NODE, 'id -nG; cat /proc/self/cgroup')
    assert result.rc == 0, output(result)
    assert 'hpcadmins' in result.stdout.split('\n')[0].split()
    assert 'step_extern' not in result.stdout


def test_ssh_to_the_login_node_needs_no_job(login, ssh_keys):
    assert not jobs_of(login, USER)
    result = ssh(login, USER, LOGIN, 'hostname; id -u; echo "$XDG_RUNTIME_DIR"; test -d "$XDG_RUNTIME_DIR" && echo ok')
    assert result.rc == 0, output(result)
    hostname, uid, runtime_dir, exists = result.stdout.split()
    assert hostname == LOGIN, output(result)
    # pam_systemd (libpam-systemd, installed with the SSH server) gives the session its logind runtime directory.
    assert runtime_dir == f'/run/user/{uid}' and exists == 'ok', output(result)


def test_compute_node_sshd_runs_adopt_without_pam_systemd(hosts):
    node = hosts[NODE]
    lines = [line.split('#')[0].split() for line in node.file('/etc/pam.d/sshd').content_string.splitlines()]
    lines = [fields for fields in lines if fields]
    account = [fields for fields in lines if fields[0] in ('account', '-account')]
    # The admins' exemption, then adopt, last in the account stack.
    assert account[-2][1:3] == ['sufficient', 'pam_access.so'], account
    assert account[-1][1] == 'required' and account[-1][2].endswith('/pam_slurm_adopt.so'), account
    assert node.file(account[-1][2]).exists
    assert 'action_no_jobs=deny' in account[-1]
    assert ['@include', 'common-session-noninteractive'] in lines
    assert ['@include', 'common-session'] not in lines
    assert not any('pam_systemd.so' in fields for fields in lines)
    assert '+:(hpcadmins):ALL' in node.file('/etc/security/llmforge-adopt-access.conf').content_string
    assert node.run('systemctl is-enabled systemd-logind').stdout.strip() == 'masked'
    assert node.run('sshd -t').rc == 0
    # sshd on the management address only.
    listening = node.check_output("ss -Hltn 'sport = :22'")
    assert listening and '0.0.0.0:22' not in listening and '[::]:22' not in listening, listening


def test_controllers_and_login_nodes_never_adopt(hosts, login):
    # PrologFlags=Contain (shown as Alloc,Contain): the extern step adopt needs.
    flags = hosts[CONTROLLER].check_output('scontrol show config | grep -i "^PrologFlags"')
    assert 'Contain' in [flag.strip() for flag in flags.split('=', 1)[1].split(',')], flags
    for name, host in ((CONTROLLER, hosts[CONTROLLER]), (LOGIN, login)):
        pam = host.file('/etc/pam.d/sshd')
        assert not pam.exists or 'pam_slurm_adopt' not in pam.content_string, name
        assert host.run('systemctl is-enabled systemd-logind').stdout.strip() != 'masked', name
