# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's module_utils and plugin_utils for its filter plugins, imported when a filter first uses one.

To find one filter by name, Ansible imports every filter file of the collection, and it does so again in each worker
process it forks for a task on a host; collection code is compiled from source on every import (no bytecode cache).
A filter file that imported its parsing module at the top therefore made every task that uses any llmforge filter
compile all of them (27 modules, ~8,000 lines, 0.1-0.2 s of CPU per task and host). Through `module_utils(name)`
and `plugin_utils(name)` only the modules a filter actually calls are imported, once per process. Splitting the
planners into plugin_utils does not make this unnecessary: the filters still call about 30 modules of both parts,
and every filter file is still imported in every worker.
"""

from __future__ import annotations

import importlib
import types
import typing as t

PLUGINS = 'ansible_collections.llmforge.cluster.plugins'
PACKAGE = f'{PLUGINS}.module_utils'

# The default of a filter argument whose value is a module_utils constant: the filter reads the constant when it runs
# (a default expression would import the module when the file loads). Not None, so that an explicit None is still
# passed on and refused by the check it always met.
UNSET: t.Any = object()


class _LazyModule:
    """Stands for a module_utils module; imports it at the first attribute read and then passes reads to it."""

    def __init__(self, name: str) -> None:
        self._name = name  # the full dotted module name
        self._module: types.ModuleType | None = None

    def __getattr__(self, attr: str) -> t.Any:
        # Only called for names this object lacks, so never for _name and _module once __init__ set them.
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)

    def __repr__(self) -> str:
        return f'<{self._name}, {"imported" if self._module else "not imported yet"}>'


def module_utils(name: str) -> t.Any:
    """The module `plugins/module_utils/<name>.py` of this collection (a node-side check, or with `programs.` a node
    program), imported on first use."""
    return _LazyModule(f'{PACKAGE}.{name}')


def plugin_utils(name: str) -> t.Any:
    """The module `plugins/plugin_utils/<name>.py` of this collection (controller-side planning), imported on first
    use."""
    return _LazyModule(f'{PLUGINS}.plugin_utils.{name}')
