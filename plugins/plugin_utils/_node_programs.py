# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which module_utils files a node program needs: the import closure of its module, read from the sources.

Standard library only, no Ansible import. The node programs (llmforge-nodecheck, llmforge-slurm-metrics,
llmforge-checkpoint-prune) are a ``main()`` in a module of ``plugins/module_utils/programs/``; the node_programs
role installs that module and every module_utils module it imports, found by `closure`, under ``<python dir>/
ansible_collections/llmforge/cluster/plugins/module_utils/`` on the node, so the programs import them by the same
names as on the controller. Modules are named relative to module_utils with dots (``programs._nodecheck``,
``_checks``). A node has no
Ansible and only the system Python: an import of anything but the standard library and these modules is refused.
"""

from __future__ import annotations

import ast
import os
import re
import sys
import typing as t

PACKAGE = 'ansible_collections.llmforge.cluster.plugins.module_utils'
# Where the package lies below the Python directory a program puts on sys.path.
PACKAGE_PATH = PACKAGE.replace('.', '/')
_MODULE_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*')


class NodeProgramError(ValueError):
    """A module that cannot run on a node; the message names the module and the import."""


def _imported(tree: ast.AST, where: str) -> t.Iterator[t.Tuple[str, str]]:
    """(module_utils module, import text) for each import of this package; refuses other non-standard imports."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from _resolve(alias.name, None, where)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                raise NodeProgramError(f'{where}: relative import (level {node.level}); import the modules by their '
                                       f'full names ({PACKAGE}...)')
            if node.module != '__future__':
                yield from _resolve(node.module or '', [alias.name for alias in node.names], where)


def _module_of(dotted: str, names: t.Optional[t.List[str]]) -> t.Iterator[str]:
    """The modules (named relative to module_utils) that `from <PACKAGE>.<dotted> import <names>` loads: the path
    up to its first module (a name with a leading underscore; packages such as ``programs`` have none), else each
    imported name below the package."""
    parts = dotted.split('.') if dotted else []
    for index, part in enumerate(parts):
        if part.startswith('_'):
            yield '.'.join(parts[:index + 1])
            return
    yield from ('.'.join(parts + [name]) for name in names or [])


def _resolve(module: str, names: t.Optional[t.List[str]], where: str) -> t.Iterator[t.Tuple[str, str]]:
    text = f'from {module} import {", ".join(names)}' if names is not None else f'import {module}'
    if module == PACKAGE or module.startswith(PACKAGE + '.'):
        yield from ((name, text) for name in _module_of(module[len(PACKAGE) + 1:], names))
    elif module.split('.')[0] not in sys.stdlib_module_names:
        raise NodeProgramError(f'{where}: `{text}` is neither the standard library nor this collection\'s module_utils, '
                               'and a node has only those')


def imports(source: str, where: str = '<source>') -> t.Set[str]:
    """The module_utils modules a module's source imports (anywhere in it, conditional imports included)."""
    try:
        tree = ast.parse(source, filename=where)
    except SyntaxError as err:
        raise NodeProgramError(f'{where}: cannot be parsed: {err}') from None
    return {module for module, _text in _imported(tree, where)}


def closure(directory: str, module: str) -> t.List[str]:
    """The paths below module_utils, sorted, of `module` and of every module_utils module it imports directly or
    indirectly (programs/_nodecheck.py, _checks.py, ...)."""
    if not isinstance(module, str) or not _MODULE_NAME.fullmatch(module):
        raise NodeProgramError(f'{module!r} is not a module name (e.g. programs._nodecheck)')
    needed: t.Set[str] = set()
    pending = [(module, 'the program')]
    while pending:
        name, wanted_by = pending.pop()
        if name in needed:
            continue
        path = os.path.join(directory, *name.split('.')) + '.py'
        try:
            with open(path, encoding='utf-8') as handle:
                source = handle.read()
        except FileNotFoundError:
            raise NodeProgramError(f'{name}: no such module in {directory} (imported by {wanted_by})') from None
        needed.add(name)
        pending.extend((imported, name) for imported in sorted(imports(source, path)))
    return sorted('/'.join(name.split('.')) + '.py' for name in needed)
