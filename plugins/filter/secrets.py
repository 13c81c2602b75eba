# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""secret_problems: what is wrong with a secret from the inventory (see plugin_utils/_secrets.py)."""

from __future__ import annotations

from jinja2 import Undefined

from ansible.errors import AnsibleFilterError
from ansible.template import AnsibleUndefined, accept_args_markers

from ansible_collections.llmforge.cluster.plugins.plugin_utils._lazy_module_utils import plugin_utils

_secrets = plugin_utils('_secrets')


@accept_args_markers
def secret_problems(value, name, min_length=16, kind='text', min_bytes=32, forbidden_characters=''):
    """One sentence per problem with the secret `value` of variable `name`, none quoting it; [] when it is fine."""
    if not isinstance(name, str) or not name:
        raise AnsibleFilterError('secret_problems: the name of the variable (first argument) must be a non-empty string')
    if isinstance(value, AnsibleUndefined):
        # Jinja's own attribute: the name that was looked up and not found (the same one its error messages use).
        undefined_name = getattr(value, '_undefined_name', None)
        value = _secrets.Missing(undefined_name if isinstance(undefined_name, str) else None)
    elif isinstance(value, Undefined):
        # A failed lookup, an undecryptable vault value, ...: its own error says more than a problem sentence.
        return value
    for option, given in (('min_length', min_length), ('min_bytes', min_bytes)):
        if isinstance(given, bool) or not isinstance(given, int) or given < 1:
            raise AnsibleFilterError(f'secret_problems: {option} must be a positive integer, got {given!r}')
    if not isinstance(forbidden_characters, str):
        raise AnsibleFilterError('secret_problems: forbidden_characters must be a string of characters')
    try:
        return _secrets.problems(value, name, min_length=min_length, kind=kind, min_bytes=min_bytes,
                                 forbidden_characters=forbidden_characters)
    except ValueError as err:
        raise AnsibleFilterError(str(err)) from err


class FilterModule:
    """Secret checks."""

    def filters(self):
        return {'secret_problems': secret_problems}
