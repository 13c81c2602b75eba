# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that compress and expand Slurm-style host lists.

``hostlist_compress`` turns ``['gpu001', 'gpu002', 'login1']`` into ``gpu[001-002],login1``,
and ``hostlist_expand`` turns such an expression back into a list of host names.
Their documentation lives beside this file in ``hostlist_compress.yml`` and ``hostlist_expand.yml``.
"""

from __future__ import annotations

import collections.abc
import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.plugin_utils._lazy_module_utils import module_utils

_hostlist = module_utils('_hostlist')


def _plain_type_name(value: object) -> str:
    """Name the builtin type behind a value, so Ansible's tagged or lazy subclasses read as 'list' or 'str'."""
    return next(cls.__name__ for cls in type(value).__mro__ if cls.__module__ == 'builtins')


def _is_list_of_names(value: object) -> bool:
    """Tell whether a value is a collection of names rather than one string or a mapping."""
    # Strings and mappings are iterable too, but iterating them yields characters or keys, never host names.
    return isinstance(value, collections.abc.Iterable) and not isinstance(value, (str, bytes, collections.abc.Mapping))


def hostlist_compress(names: t.Iterable[str]) -> str:
    """Compress a list of host names into a Slurm hostlist expression."""
    if not _is_list_of_names(names):
        raise AnsibleFilterError(f'hostlist_compress: expected a list of host names, got {_plain_type_name(names)} {names!r}')
    try:
        return _hostlist.compress(names)
    except ValueError as exc:
        raise AnsibleFilterError(f'hostlist_compress: {exc}', orig_exc=exc) from exc


def hostlist_expand(expr: str) -> list[str]:
    """Expand a Slurm hostlist expression into a list of host names."""
    if not isinstance(expr, str):
        raise AnsibleFilterError(f'hostlist_expand: expected a hostlist string, got {_plain_type_name(expr)} {expr!r}')
    try:
        return _hostlist.expand(expr)
    except ValueError as exc:
        raise AnsibleFilterError(f'hostlist_expand: {exc}', orig_exc=exc) from exc


class FilterModule:
    """Slurm hostlist filters."""

    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {
            'hostlist_compress': hostlist_compress,
            'hostlist_expand': hostlist_expand,
        }
