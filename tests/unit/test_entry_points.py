# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""No playbook or role includes another role's internal task file: every include_role/import_role tasks_from names
an entry point declared (and so documented and validated) in that role's meta/argument_specs.yml."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
INCLUDES = ('ansible.builtin.include_role', 'ansible.builtin.import_role')
# validate.yml's later stages, not yet entry points of the validate role.
NOT_YET_DECLARED = {('validate', name) for name in ('dcgm_quarantine', 'dcgm_long', 'dcgm_release', 'metrics', 'summary')}


def _declared(role: str) -> set[str]:
    path = REPO / 'roles' / role / 'meta' / 'argument_specs.yml'
    return set(yaml.safe_load(path.read_text(encoding='utf-8'))['argument_specs']) if path.exists() else set()


def _includes(node: Any) -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for key in INCLUDES:
            spec = node.get(key)
            if isinstance(spec, dict) and 'tasks_from' in spec:
                yield str(spec['name']), str(spec['tasks_from'])
        for value in node.values():
            yield from _includes(value)
    elif isinstance(node, list):
        for value in node:
            yield from _includes(value)


def _slurm_hosts_planned() -> Iterator[tuple[str, str]]:
    """slurm_hosts.yml's loop over the roles whose packages join a first converge's transaction."""
    play = yaml.safe_load((REPO / 'playbooks/slurm_hosts.yml').read_text(encoding='utf-8'))[0]
    for planned in play['vars']['__slurm_hosts_planned_roles']:
        yield planned['role'], planned.get('tasks_from', 'packages')


def _cases() -> list[tuple[str, str, str]]:
    cases = []
    files = sorted(REPO.glob('playbooks/*.yml')) + sorted(REPO.glob('roles/*/tasks/*.yml'))
    for path in files:
        for name, tasks_from in _includes(yaml.safe_load(path.read_text(encoding='utf-8'))):
            if '{{' in name or '{{' in tasks_from:
                continue
            cases.append((str(path.relative_to(REPO)), name, tasks_from))
    cases += [('playbooks/slurm_hosts.yml', name, tasks_from) for name, tasks_from in _slurm_hosts_planned()]
    return cases


CASES = _cases()


def test_the_includes_are_found():
    assert len(CASES) > 40
    assert ('playbooks/controller.yml', 'llmforge.cluster.slurm_common', 'node_facts') in CASES


@pytest.mark.parametrize('path, name, tasks_from', CASES, ids=[f'{c[0]}:{c[1].split(".")[-1]}.{c[2]}' for c in CASES])
def test_tasks_from_names_a_declared_entry_point(path, name, tasks_from):
    assert name.startswith('llmforge.cluster.'), f'{path}: {name} is not named by its FQCN'
    role = name.rsplit('.', 1)[-1]
    if (role, tasks_from) in NOT_YET_DECLARED:
        pytest.xfail(f'{role} does not declare {tasks_from} yet')
    assert tasks_from in _declared(role), (
        f'{path} includes {tasks_from} of {role}, which is not an entry point of its meta/argument_specs.yml')
