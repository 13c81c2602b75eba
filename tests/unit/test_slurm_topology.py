# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""topology.conf from an explicit switch tree: the lines, and every mistake named by its entry."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.filter.slurm_config import FilterModule
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _slurm_config

GROUPS = {'gpu_nodes': [f'gpu{number:03d}' for number in range(1, 65)], 'cpu_nodes': ['cpu1']}
NODE_GROUPS = ['gpu_nodes', 'cpu_nodes']
TREE = [
    {'name': 'leaf1', 'nodes': 'gpu[001-032]'},
    {'name': 'leaf2', 'nodes': ['gpu[033-064]', 'cpu1']},
    {'name': 'spine1', 'switches': 'leaf[1-2]'},
]


def lines(switches, groups=None):
    return FilterModule().filters()['slurm_topology_lines'](switches, groups or GROUPS, NODE_GROUPS)


def test_leaves_and_spine_render_compressed():
    assert lines(TREE) == [
        'SwitchName=leaf1 Nodes=gpu[001-032]',
        'SwitchName=leaf2 Nodes=cpu1,gpu[033-064]',
        'SwitchName=spine1 Switches=leaf[1-2]',
    ]


def test_three_levels_and_several_roots():
    tree = [{'name': f'leaf{index}', 'nodes': f'gpu[{index * 16 - 15:03d}-{index * 16:03d}]'} for index in (1, 2, 3, 4)]
    tree += [{'name': 'leaf5', 'nodes': 'cpu1'},
             {'name': 'spine1', 'switches': ['leaf1', 'leaf2']}, {'name': 'spine2', 'switches': 'leaf[3-4]'},
             {'name': 'core1', 'switches': 'spine[1-2]'}]
    result = lines(tree)
    assert result[-1] == 'SwitchName=core1 Switches=spine[1-2]'
    assert 'SwitchName=leaf5 Nodes=cpu1' in result


@pytest.mark.parametrize('switches, message', [
    ([], 'must be a non-empty list'),
    ('leaf1', 'must be a non-empty list'),
    (['leaf1'], r"slurm_controller_topology_switches\[0\] must be a dict"),
    ([{'name': 'leaf 1', 'nodes': 'gpu001'}], r"\[0\]: name 'leaf 1' must be letters"),
    ([{'name': 'leaf1', 'nodes': 'gpu[001-064],cpu1', 'speed': 1}], r'\[0\]: unknown key speed'),
    ([{'name': 'leaf1'}], r"\[0\] \('leaf1'\): give either nodes .* not neither"),
    ([{'name': 'leaf1', 'nodes': 'gpu001', 'switches': 'x'}], 'not both'),
    ([{'name': 'leaf1', 'nodes': 'gpu[001-064],cpu1'}, {'name': 'leaf1', 'nodes': 'gpu001'}],
     r"\[1\]: switch 'leaf1' is already defined at slurm_controller_topology_switches\[0\]"),
    ([{'name': 'leaf1', 'nodes': 'gpu[001-064],cpu1,gpu900'}], r'gpu900 not compute nodes of this cluster'),
    ([{'name': 'leaf1', 'nodes': 'gpu[001-064],cpu1'}, {'name': 'leaf2', 'nodes': 'gpu007'}],
     r"\[1\] \('leaf2'\): node gpu007 is already under switch 'leaf1'"),
    ([{'name': 'leaf1', 'nodes': 'gpu[001-064'}], r"nodes 'gpu\[001-064' is not a valid hostlist"),
    ([{'name': 'leaf1', 'nodes': 5}], 'nodes must be a hostlist string or a list of names'),
    (TREE + [{'name': 'spine2', 'switches': 'leaf9'}], r"\('spine2'\): switch 'leaf9' is not defined"),
    (TREE + [{'name': 'spine2', 'switches': 'leaf1'}], r"switch 'leaf1' is already under switch 'spine1'"),
    (TREE + [{'name': 'core1', 'switches': 'spine1'}, {'name': 'loop', 'switches': 'core1'},
             {'name': 'top', 'switches': 'loop'}], None),
    ([{'name': 'leaf1', 'nodes': 'gpu[001-060]'}], r'compute nodes cpu1,gpu\[061-064\] are under no switch'),
])
def test_mistakes_are_named(switches, message):
    if message is None:
        assert lines(switches)[-1] == 'SwitchName=top Switches=loop'
        return
    with pytest.raises(AnsibleFilterError, match=message):
        lines(switches)


def test_cycle_is_refused():
    tree = [{'name': 'leaf1', 'nodes': 'gpu[001-064],cpu1'}, {'name': 'a', 'switches': 'b'},
            {'name': 'b', 'switches': 'a'}]
    with pytest.raises(ValueError, match="switch 'a' is its own ancestor"):
        _slurm_config.topology_lines(tree, GROUPS['gpu_nodes'] + GROUPS['cpu_nodes'])


def test_variable_name_is_the_callers():
    with pytest.raises(ValueError, match='^my_tree must be'):
        _slurm_config.topology_lines({}, ['gpu001'], 'my_tree')
