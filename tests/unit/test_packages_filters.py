# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which packages a host lacks, from package_facts' structure (real output and a converged GPU node), and the
installed packages after an install: versions and architectures as apt takes them, bad input named."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.filter.packages import FilterModule
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _packages

FIXTURES = Path(__file__).resolve().parents[2] / 'tests/fixtures/packages'
# Real package_facts output (apt) and the converged GPU node's packages in its structure.
PACKAGE_FACTS = json.loads((FIXTURES / 'package_facts-apt.json').read_text(encoding='utf-8'))
GPU_NODE = json.loads((FIXTURES / 'debian13-gpu-node.json').read_text(encoding='utf-8'))
missing_packages = FilterModule().filters()['missing_packages']
packages_added = FilterModule().filters()['packages_added']


def test_real_package_facts_output_is_read_as_it_comes():
    bash = PACKAGE_FACTS['bash'][0]
    assert _packages.missing(['bash', 'python3-apt', 'not-there'], PACKAGE_FACTS) == ['not-there']
    assert _packages.missing([f"bash:{bash['arch']}={bash['version']}"], PACKAGE_FACTS) == []
    assert _packages.missing([f"bash={bash['version']}x"], PACKAGE_FACTS) == [f"bash={bash['version']}x"]
    # An architecture-independent package is installed for every architecture asked for.
    assert PACKAGE_FACTS['ca-certificates'][0]['arch'] == 'all'
    assert _packages.missing(['ca-certificates:arm64'], PACKAGE_FACTS) == []


def test_missing_packages_keeps_the_list_order_and_names_each_once():
    wanted = ['zz-not-there', 'slurmd', 'aa-not-there', 'bash', 'zz-not-there']
    assert _packages.missing(wanted, GPU_NODE) == ['zz-not-there', 'aa-not-there']
    assert _packages.missing([], GPU_NODE) == []
    assert _packages.missing(('slurmd', 'munge'), {}) == ['slurmd', 'munge']


def test_versions_and_architectures_as_apt_takes_them():
    installed = {
        'libc6': [{'name': 'libc6', 'version': '2.41-12', 'arch': 'amd64', 'source': 'apt'},
                  {'name': 'libc6', 'version': '2.41-12', 'arch': 'i386', 'source': 'apt'}],
        'libnccl2': [{'name': 'libnccl2', 'version': '2.22.3-1-1', 'arch': 'amd64', 'source': 'apt'}],
        'nvidia-smi': [{'name': 'nvidia-smi', 'version': '560.35.03-1', 'arch': 'all', 'source': 'apt'}],
    }
    assert _packages.missing(['libnccl2=2.22.3-1-1', 'libnccl2=2.21.5-1-1'], installed) == ['libnccl2=2.21.5-1-1']
    assert _packages.missing(['libc6:i386', 'libc6:arm64', 'nvidia-smi:amd64'], installed) == ['libc6:arm64']
    assert _packages.missing(['libc6:i386=2.41-12', 'libc6:i386=2.41-11'], installed) == ['libc6:i386=2.41-11']


def test_a_version_for_the_whole_list():
    # The NCCL role: every package at the pinned version, the one of them at another version is to be installed.
    installed = {
        'libnccl2': [{'name': 'libnccl2', 'version': '2.22.3-1', 'arch': 'amd64', 'source': 'apt'}],
        'libnccl-dev': [{'name': 'libnccl-dev', 'version': '2.21.5-1', 'arch': 'amd64', 'source': 'apt'}],
    }
    assert _packages.missing(['libnccl2', 'libnccl-dev', 'nccl-tests'], installed, '2.22.3-1') == ['libnccl-dev', 'nccl-tests']
    # An entry's own version wins over the list's.
    assert _packages.missing(['libnccl-dev=2.21.5-1'], installed, '2.22.3-1') == []


def test_package_facts_of_rpm_hosts_are_read_the_same():
    # package_facts on RHEL: version and release apart; the pinned version is compared with the version field.
    installed = {'libnccl': [{'name': 'libnccl', 'version': '2.22.3', 'release': '1+cuda12.6', 'epoch': None,
                              'arch': 'x86_64', 'source': 'rpm'}]}
    assert _packages.missing(['libnccl'], installed, '2.22.3') == []
    assert _packages.missing(['libnccl:x86_64', 'libnccl:aarch64'], installed) == ['libnccl:aarch64']


@pytest.mark.parametrize('wanted, installed, message', [
    pytest.param('slurmd', {}, 'must be a list of names, not str', id='a-string'),
    pytest.param(None, {}, 'must be a list of names, not NoneType', id='none'),
    pytest.param(['slurmd', ''], {}, "'' in the packages to look for is not a package name", id='empty-name'),
    pytest.param(['slurmd', 3], {}, '3 in the packages to look for is not a package name', id='a-number'),
    pytest.param(['slurmd'], ['slurmd'], 'must be a mapping of names (package facts), not list', id='facts-a-list'),
    pytest.param(['slurmd'], {'slurmd': 'x'}, "list 'slurmd' as str, not a list of packages", id='entry-a-string'),
])
def test_bad_input_is_named(wanted, installed, message):
    with pytest.raises(_packages.PackagesError, match=re.escape(message)):
        _packages.missing(wanted, installed)


def test_the_missing_packages_filter():
    assert missing_packages(['bash', 'munge', 'slurmctld'], GPU_NODE) == ['slurmctld']
    assert missing_packages(['bash'], None) == ['bash']
    assert missing_packages(['libnccl2'], GPU_NODE, version='2.22.3-1-1') == []
    with pytest.raises(AnsibleFilterError, match='^missing_packages: the packages to look for must be a list'):
        missing_packages('bash', GPU_NODE)


def test_an_install_that_succeeded_adds_what_was_missing_and_nothing_else():
    after = packages_added(GPU_NODE, ['bash', 'sackd', 'libnccl2'])
    assert missing_packages(['bash', 'sackd', 'libnccl2', 'slurmctld'], after) == ['slurmctld']
    # What was there is kept as it was read; the input is left unchanged.
    assert after['libnccl2'] == GPU_NODE['libnccl2']
    assert 'sackd' not in GPU_NODE
    assert after['sackd'] == [{'name': 'sackd', 'version': '', 'arch': '', 'source': 'apt'}]
    assert after['bash'] is not GPU_NODE['bash'] and after['bash'] == GPU_NODE['bash']


def test_an_added_package_counts_only_for_what_its_entry_named():
    after = packages_added({}, ['crun', 'libnccl2=2.22.3-1-1', 'libfoo:i386'])
    assert missing_packages(['crun', 'libnccl2', 'libnccl2=2.22.3-1-1', 'libfoo:i386'], after) == []
    # Asked for a version or an architecture the entry did not name: missing, so the install runs again.
    assert missing_packages(['crun=1.21-1', 'libfoo:amd64'], after) == ['crun=1.21-1', 'libfoo:amd64']
    assert missing_packages(['libnccl2'], after, version='2.23.4-1') == ['libnccl2']


def test_an_upgrade_to_a_pinned_version_replaces_the_old_instance():
    before = {'libnccl2': [{'name': 'libnccl2', 'version': '2.21.5-1', 'arch': 'amd64', 'source': 'apt'}]}
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
