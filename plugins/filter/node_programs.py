# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter naming the module_utils files a node program needs, for the node_programs role to copy."""

from __future__ import annotations

import functools
import os

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.plugin_utils._lazy_module_utils import plugin_utils

_node_programs = plugin_utils('_node_programs')

# The module_utils directory of the collection Ansible loaded (a checkout's or an installed one's), beside this
# plugins/filter directory: the same files the modules ship to the nodes.
MODULE_UTILS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'module_utils')


@functools.lru_cache(maxsize=None)
def _source(path):
    """A module_utils file's text, read once per run however many hosts install it."""
    with open(path, encoding='utf-8') as stream:
        return stream.read()


def node_program_files(module):
    """[{src, dest, content}] for `module` (e.g. _nodecheck) and every module_utils module it imports.

    `src` is the file on the control host, `dest` its path below the Python directory of the node programs,
    `content` its text (the node_programs role writes them all in one llmforge.cluster.file_tree task).
    """
    try:
        names = _node_programs.closure(MODULE_UTILS_DIR, module)
    except _node_programs.NodeProgramError as err:
        raise AnsibleFilterError(f'node_program_files: {err}') from err
    return [{'src': os.path.join(MODULE_UTILS_DIR, name), 'dest': f'{_node_programs.PACKAGE_PATH}/{name}',
             'content': _source(os.path.join(MODULE_UTILS_DIR, name))} for name in names]


class FilterModule:
    """Node program filters."""

    def filters(self):
        return {'node_program_files': node_program_files}
