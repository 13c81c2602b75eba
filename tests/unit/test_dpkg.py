# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The installed packages read from dpkg-query: real output of a converged node, statuses, errors, the role's query."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.filter.dpkg import FilterModule
from ansible_collections.llmforge.cluster.plugins.module_utils import _dpkg

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / 'tests/fixtures/dpkg/debian13-gpu-node.txt'
dpkg_packages = FilterModule().filters()['dpkg_packages']


def test_a_converged_gpu_node():
    text = FIXTURE.read_text(encoding='utf-8')
    packages = _dpkg.parse(text)
    assert len(packages) == sum(1 for line in text.splitlines() if line[1] == 'i')
    assert packages['slurmd'] == [{'name': 'slurmd', 'version': '24.11.5-4+deb13u1', 'arch': 'amd64', 'source': 'apt'}]
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
