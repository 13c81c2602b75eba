# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roles share one scaffold (llmforge.cluster.common) and one set of naming rules.

What every role repeats lives in common only: loading vars/ per OS, deciding whether the host is a container, the apt
refresh and apt sources. A role reads another role's public variables, never its _<role>_ names; __ marks registered
results only; preflight runs under every tag; per-OS task files end in the package manager's name.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ROLES_DIR = REPO / 'roles'
ROLES = sorted(path.name for path in ROLES_DIR.iterdir() if (path / 'tasks').is_dir())
SCAFFOLD = 'common'


def _role_files(role: str, suffixes: tuple[str, ...] = ('.yml', '.j2')) -> list[Path]:
    return sorted(path for path in (ROLES_DIR / role).rglob('*') if path.is_file() and path.suffix in suffixes)


def _text(role: str) -> str:
    """The role's YAML and templates without their comments."""
    text = '\n'.join(path.read_text(encoding='utf-8') for path in _role_files(role))
    text = re.sub(r'\{#.*?#\}', '', text, flags=re.S)
    return re.sub(r'^\s*#[^\n]*', '', text, flags=re.M)


@pytest.mark.parametrize('role', ROLES)
def test_a_role_reads_no_private_name_of_another_role(role):
    others = '|'.join(re.escape(other) for other in ROLES if other != role)
    found = sorted(set(re.findall(rf'(?<![\w.])_{{1,2}}(?:{others})_\w+', _text(role))))
    assert not found, f'roles/{role} reads private names of other roles: {found}'


@pytest.mark.parametrize('role', ROLES)
def test_double_underscore_names_are_registered_results(role):
    text = _text(role)
    registered = set(re.findall(r'^\s*register:\s*(__\w+)', text, re.M))
    used = set(re.findall(r'(?<![\w.])(__[a-z]\w*[a-z0-9])(?!\w)', text))
    # Prometheus's own relabelling labels (__param_<name>, __meta_*) in a scrape configuration are not Ansible names.
    used = {name for name in used if not name.startswith(('__param_', '__meta_'))}
    assert not used - registered, f'roles/{role}: __ names that no task registers: {sorted(used - registered)}'


@pytest.mark.parametrize('role', [role for role in ROLES if role != SCAFFOLD])
def test_only_the_scaffold_loads_os_files_and_detects_containers(role):
    text = _text(role)
    for pattern in ('include_vars', 'first_found', 'containerd', 'update_cache', 'deb822_repository'):
        assert pattern not in text, f'roles/{role} does itself what llmforge.cluster.common does ({pattern})'


@pytest.mark.parametrize('role', [role for role in ROLES if (ROLES_DIR / role / 'tasks' / 'preflight.yml').exists()])
def test_preflight_runs_under_every_tag(role):
    tasks = yaml.safe_load((ROLES_DIR / role / 'tasks' / 'main.yml').read_text(encoding='utf-8'))
    imports = [task for task in tasks if task.get('ansible.builtin.import_tasks') == 'preflight.yml']
    assert len(imports) == 1, f'roles/{role}/tasks/main.yml imports preflight.yml {len(imports)} times'
    assert imports[0].get('tags') == [f'{role}_preflight', 'always']


def _check_os_vars(role: str) -> None:
    tasks = yaml.safe_load((ROLES_DIR / role / 'tasks' / 'os_vars.yml').read_text(encoding='utf-8'))
    includes = [task['ansible.builtin.include_role'] for task in tasks if task.get('ansible.builtin.include_role')]
    assert len(includes) == 1, f'roles/{role}/tasks/os_vars.yml includes {len(includes)} roles'
    include = includes[0]
    assert include.get('apply', {}).get('tags') == ['always']
    if include.get('tasks_from') == 'setup':
        assert include['name'] == f'llmforge.cluster.{SCAFFOLD}'
        return
    assert include.get('tasks_from') == 'os_vars', f'roles/{role}/tasks/os_vars.yml includes {include}'
    other = include['name'].removeprefix('llmforge.cluster.')
    assert other != role and other in ROLES and (ROLES_DIR / other / 'tasks' / 'os_vars.yml').exists()
    assert include.get('public') is True, f'roles/{role} reads {other} names: the include must be public'
    _check_os_vars(other)


@pytest.mark.parametrize('role', [role for role in ROLES if (ROLES_DIR / role / 'tasks' / 'os_vars.yml').exists()])
def test_os_names_come_from_the_scaffold_under_every_tag(role):
    """A role's os_vars.yml runs the scaffold's setup, or another role's os_vars.yml that does (the Slurm roles share
    slurm_common's names), once and under every tag."""
    _check_os_vars(role)


def test_per_os_task_files_are_named_after_the_package_manager():
    family_named = sorted(str(path.relative_to(REPO)) for path in ROLES_DIR.glob('*/tasks/*.yml')
                          if re.search(r'_(Debian|RedHat|Ubuntu)\.yml$', path.name))
    assert not family_named, f'per-OS task files go by package manager (_apt.yml, _dnf.yml): {family_named}'


def test_the_scaffold_refuses_to_run_on_its_own():
    tasks = yaml.safe_load((ROLES_DIR / SCAFFOLD / 'tasks' / 'main.yml').read_text(encoding='utf-8'))
    assert [next(key for key in task if key != 'name') for task in tasks] == ['ansible.builtin.fail']


SET_FILTERS = re.compile(r'\|\s*(intersect|difference|union|symmetric_difference)\(')


def test_no_ordered_list_is_built_through_a_set_filter():
    """Ansible's intersect, difference, union and symmetric_difference go through a Python set: their order changes
    from run to run (string hashing is randomised per process), so a node list built with them prints, loops and
    renders in a different order each time. Only a `| length` of their result is allowed; select/reject('in', ...)
    keep the order."""
    found = []
    for path in sorted([*REPO.glob('roles/*/tasks/*.yml'), *REPO.glob('roles/*/vars/*.yml'),
                        *REPO.glob('roles/*/defaults/*.yml'), *REPO.glob('roles/*/templates/*.j2'),
                        *REPO.glob('playbooks/*.yml')]):
        for number, line in enumerate(path.read_text(encoding='utf-8').splitlines(), 1):
            if SET_FILTERS.search(line) and not re.search(r'\|\s*length\s*(==|>|<|!=)', line):
                found.append(f'{path.relative_to(REPO)}:{number}: {line.strip()}')
    assert not found, found


def _strings(node):
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


def test_no_jinja_expression_relies_on_a_backslash_escape():
    """Jinja does not turn '\\n' into a newline: only a double-quoted YAML string does, before Jinja sees it. A
    `'\\n'` inside an expression of a plain or block scalar writes a backslash and an n (a CA file ending in `\\n`
    that SSSD cannot read), so such an expression must take the text from a double-quoted variable instead. A regex
    argument may hold escapes: the regex engine reads them."""
    found = []
    for path in sorted([*REPO.glob('roles/*/tasks/*.yml'), *REPO.glob('roles/*/handlers/*.yml'),
                        *REPO.glob('roles/*/vars/*.yml'), *REPO.glob('roles/*/defaults/*.yml'),
                        *REPO.glob('playbooks/*.yml')]):
        for text in _strings(yaml.safe_load(path.read_text(encoding='utf-8'))):
            for expression in re.findall(r'\{\{.*?\}\}', text, flags=re.S):
                # Text joined or concatenated, not a regex (whose engine reads the escape itself).
                if re.search(r'''~\s*(['"])[^'"]*\\[nt]|(['"])[^'"]*\\[nt][^'"]*\2\s*~|join\(\s*(['"])\\[nt]''',
                             expression):
                    found.append(f'{path.relative_to(REPO)}: {expression[:100]}')
    assert not found, found
