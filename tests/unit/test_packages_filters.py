# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The installed packages read from dpkg-query: real output of a converged node, statuses, errors, the role's query."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.filter.dpkg import FilterModule
from ansible_collections.llmforge.cluster.plugins.module_utils import _dpkg

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / 'tests/fixtures/dpkg/debian13-gpu-node.txt'
dpkg_packages = FilterModule().filters()['dpkg_packages']
missing_packages = FilterModule().filters()['missing_packages']
dpkg_selections = FilterModule().filters()['dpkg_selections']


def test_a_converged_gpu_node():
    text = FIXTURE.read_text(encoding='utf-8')
    packages = _dpkg.parse(text)
    assert len(packages) == sum(1 for line in text.splitlines() if line[1] == 'i')
    assert packages['slurmd'] == [{'name': 'slurmd', 'version': '24.11.5-4+deb13u1', 'arch': 'amd64', 'source': 'apt',
                                   'selection': 'install'}]
    assert packages['libnccl2'][0]['selection'] == 'hold'
    # Held packages are installed too.
    assert packages['libnccl2'][0]['version'] == '2.22.3-1-1'
    assert packages['nvidia-smi'][0]['arch'] == 'all'


def test_only_fully_installed_packages_count():
    text = '\n'.join([
        'ii  bash 5.2.37-2 amd64',
        'rc  nftables 1.1.3-1 amd64',      # removed, its configuration left
        'un  nvidia-smi <none> <none>',     # only known by name
        'iU  munge 0.5.16-1 amd64',         # unpacked, not configured
        'iF  sssd 2.10.2-1 amd64',          # half-configured
        'hi  libnccl2 2.22.3-1-1 amd64',
        'iiR libc6 2.41-12 amd64',          # installed, reinstallation required
        'ii  libc6 2.41-12 i386',           # a second architecture
        '',
    ])
    packages = _dpkg.parse(text)
    assert sorted(packages) == ['bash', 'libc6', 'libnccl2']
    assert [entry['arch'] for entry in packages['libc6']] == ['amd64', 'i386']


@pytest.mark.parametrize('text, line', [
    pytest.param('ii  bash 5.2.37-2 amd64\nbash 5.2.37-2 amd64\n', 2, id='no-status'),
    pytest.param('ii  bash 5.2.37-2\n', 1, id='no-architecture'),
    pytest.param('dpkg-query: error: failed to open package info file\n', 1, id='error-message'),
])
def test_other_lines_are_refused_by_number(text, line):
    with pytest.raises(_dpkg.DpkgError, match=f'^line {line}: '):
        _dpkg.parse(text)


def test_the_filter_names_itself():
    assert dpkg_packages('ii  bash 5.2.37-2 amd64\n')['bash'][0]['version'] == '5.2.37-2'
    with pytest.raises(AnsibleFilterError, match='^dpkg_packages: line 1: '):
        dpkg_packages('garbage\n')
    with pytest.raises(AnsibleFilterError, match='^dpkg_packages: expected the text'):
        dpkg_packages(None)


def test_the_role_runs_the_query_the_parser_reads():
    role_vars = yaml.safe_load((REPO / 'roles/common/vars/main.yml').read_text(encoding='utf-8'))
    assert role_vars['_common_dpkg_query'] == _dpkg.QUERY


# The converged GPU node's packages (real dpkg-query output), as the roles hold them in common_installed_packages.
GPU_NODE = _dpkg.parse(FIXTURE.read_text(encoding='utf-8'))


def test_missing_packages_keeps_the_list_order_and_names_each_once():
    wanted = ['zz-not-there', 'slurmd', 'aa-not-there', 'bash', 'zz-not-there']
    assert _dpkg.missing(wanted, GPU_NODE) == ['zz-not-there', 'aa-not-there']
    assert _dpkg.missing([], GPU_NODE) == []
    assert _dpkg.missing(('slurmd', 'munge'), {}) == ['slurmd', 'munge']


def test_a_package_only_dpkg_remembers_is_missing():
    installed = _dpkg.parse('rc  nftables 1.1.3-1 amd64\niU  munge 0.5.16-1 amd64\nii  bash 5.2.37-2 amd64\n')
    assert _dpkg.missing(['nftables', 'munge', 'bash'], installed) == ['nftables', 'munge']


def test_versions_and_architectures_as_apt_takes_them():
    installed = _dpkg.parse('\n'.join([
        'ii  libc6 2.41-12 amd64', 'ii  libc6 2.41-12 i386', 'hi  libnccl2 2.22.3-1-1 amd64',
        'ii  nvidia-smi 560.35.03-1 all', '']))
    assert _dpkg.missing(['libnccl2=2.22.3-1-1', 'libnccl2=2.21.5-1-1'], installed) == ['libnccl2=2.21.5-1-1']
    assert _dpkg.missing(['libc6:i386', 'libc6:arm64', 'nvidia-smi:amd64'], installed) == ['libc6:arm64']
    assert _dpkg.missing(['libc6:i386=2.41-12', 'libc6:i386=2.41-11'], installed) == ['libc6:i386=2.41-11']


def test_a_version_for_the_whole_list():
    # The NCCL role: every package at the pinned version, the one of them at another version is to be installed.
    installed = {
        'libnccl2': [{'name': 'libnccl2', 'version': '2.22.3-1', 'arch': 'amd64', 'source': 'apt'}],
        'libnccl-dev': [{'name': 'libnccl-dev', 'version': '2.21.5-1', 'arch': 'amd64', 'source': 'apt'}],
    }
    assert _dpkg.missing(['libnccl2', 'libnccl-dev', 'nccl-tests'], installed, '2.22.3-1') == ['libnccl-dev', 'nccl-tests']
    # An entry's own version wins over the list's.
    assert _dpkg.missing(['libnccl-dev=2.21.5-1'], installed, '2.22.3-1') == []


def test_package_facts_of_rpm_hosts_are_read_the_same():
    # package_facts on RHEL: version and release apart; the pinned version is compared with the version field.
    installed = {'libnccl': [{'name': 'libnccl', 'version': '2.22.3', 'release': '1+cuda12.6', 'epoch': None,
                              'arch': 'x86_64', 'source': 'rpm'}]}
    assert _dpkg.missing(['libnccl'], installed, '2.22.3') == []
    assert _dpkg.missing(['libnccl:x86_64', 'libnccl:aarch64'], installed) == ['libnccl:aarch64']


@pytest.mark.parametrize('wanted, installed, message', [
    pytest.param('slurmd', {}, 'must be a list of names, not str', id='a-string'),
    pytest.param(None, {}, 'must be a list of names, not NoneType', id='none'),
    pytest.param(['slurmd', ''], {}, "'' in the packages to look for is not a package name", id='empty-name'),
    pytest.param(['slurmd', 3], {}, '3 in the packages to look for is not a package name', id='a-number'),
    pytest.param(['slurmd'], ['slurmd'], 'must be a mapping of names (package facts), not list', id='facts-a-list'),
    pytest.param(['slurmd'], {'slurmd': 'x'}, "list 'slurmd' as str, not a list of packages", id='entry-a-string'),
])
def test_bad_input_is_named(wanted, installed, message):
    with pytest.raises(_dpkg.DpkgError, match=re.escape(message)):
        _dpkg.missing(wanted, installed)


def test_the_missing_packages_filter():
    assert missing_packages(['bash', 'munge', 'slurmctld'], GPU_NODE) == ['slurmctld']
    assert missing_packages(['bash'], None) == ['bash']
    assert missing_packages(['libnccl2'], GPU_NODE, version='2.22.3-1-1') == []
    with pytest.raises(AnsibleFilterError, match='^missing_packages: the packages to look for must be a list'):
        missing_packages('bash', GPU_NODE)


def test_selections_are_what_the_hold_step_would_read_from_dpkg_query():
    packages = _dpkg.parse(FIXTURE.read_text(encoding='utf-8'))
    assert dpkg_selections(['nvidia-smi', 'libnccl2', 'slurmd'], packages) == [
        'libnccl2 hold', 'nvidia-smi hold', 'slurmd install']
    two_arches = _dpkg.parse('hi  libc6 2.41-12 amd64\nii  libc6 2.41-12 i386\n')
    assert dpkg_selections(['libc6'], two_arches) == ['libc6 hold', 'libc6 install']


def test_selections_cannot_be_told_for_a_package_installed_since_or_from_package_facts():
    packages = _dpkg.parse('hi  libnccl2 2.22.3-1-1 amd64\n')
    assert dpkg_selections(['libnccl2', 'libnccl-dev'], packages) is None
    rpm_facts = {'libnccl': [{'name': 'libnccl', 'version': '2.22.3', 'arch': 'x86_64', 'source': 'rpm'}]}
    assert dpkg_selections(['libnccl'], rpm_facts) is None
    assert dpkg_selections([], None) == []


def test_selections_name_bad_input():
    with pytest.raises(AnsibleFilterError, match='^dpkg_selections: the packages must be a list'):
        dpkg_selections('libnccl2', {})
    with pytest.raises(AnsibleFilterError, match='^dpkg_selections: the installed packages must be a mapping'):
        dpkg_selections(['libnccl2'], ['libnccl2'])


packages_added = FilterModule().filters()['packages_added']


def test_an_install_that_succeeded_adds_what_was_missing_and_nothing_else():
    installed = _dpkg.parse(FIXTURE.read_text(encoding='utf-8'))
    after = packages_added(installed, ['bash', 'sackd', 'libnccl2'])
    assert missing_packages(['bash', 'sackd', 'libnccl2', 'slurmctld'], after) == ['slurmctld']
    # What was there is kept as it was read, selection and all; the input is left unchanged.
    assert after['libnccl2'] == installed['libnccl2'] and after['libnccl2'][0]['selection'] == 'hold'
    assert 'sackd' not in installed
    assert after['sackd'] == [{'name': 'sackd', 'version': '', 'arch': '', 'source': 'apt'}]
    assert after['bash'] is not installed['bash'] and after['bash'] == installed['bash']
    # A package installed since the read: the hold step must ask dpkg-query.
    assert dpkg_selections(['sackd'], after) is None


def test_an_added_package_counts_only_for_what_its_entry_named():
    after = packages_added({}, ['crun', 'libnccl2=2.22.3-1-1', 'libfoo:i386'])
    assert missing_packages(['crun', 'libnccl2', 'libnccl2=2.22.3-1-1', 'libfoo:i386'], after) == []
    # Asked for a version or an architecture the entry did not name: missing, so the install runs again.
    assert missing_packages(['crun=1.21-1', 'libfoo:amd64'], after) == ['crun=1.21-1', 'libfoo:amd64']
    assert missing_packages(['libnccl2'], after, version='2.23.4-1') == ['libnccl2']


def test_an_upgrade_to_a_pinned_version_replaces_the_old_instance():
    before = {'libnccl2': [{'name': 'libnccl2', 'version': '2.21.5-1', 'arch': 'amd64', 'source': 'apt',
                            'selection': 'hold'}]}
    after = packages_added(before, ['libnccl2=2.22.3-1-1'])
    assert after['libnccl2'] == [{'name': 'libnccl2', 'version': '2.22.3-1-1', 'arch': '', 'source': 'apt'}]
    assert before['libnccl2'][0]['version'] == '2.21.5-1'


@pytest.mark.parametrize('installed, wanted, message', [
    ({}, 'munge', 'must be a list of names'),
    ({}, [''], 'is not a package name'),
    ([], ['munge'], 'must be a mapping of names'),
])
def test_packages_added_names_bad_input(installed, wanted, message):
    with pytest.raises(AnsibleFilterError, match=f'packages_added: .*{message}'):
        packages_added(installed, wanted)
