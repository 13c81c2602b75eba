# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render a role's template for every host of a synthetic inventory with Ansible's own templating.

The role's defaults, vars/main.yml and vars/<os_family>.yml are laid under and over the inventory as a play would
(defaults < inventory < role vars < set_fact < extra vars), and the assert and set_fact tasks of a task file (its
preflight) run first: run_once ones on the first host, with their loops, `vars` and `when`. Filters resolve through
the collection loader, so `llmforge.cluster.*` filters are the collection's own.

It installs Ansible's collection finder, so it runs in a child process (``render``), never inside pytest's own.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import typing as t

ROOT = pathlib.Path(__file__).resolve().parents[2]


def render(role: str, template: str, inventory: dict[str, t.Any], tasks: str = 'preflight.yml',
           os_family: str = 'Debian', extra_vars: t.Optional[dict[str, t.Any]] = None,
           render_hosts: t.Optional[list[str]] = None, base_roles: t.Sequence[str] = (),
           published: t.Optional[dict[str, str]] = None, text: t.Optional[str] = None) -> dict[str, t.Any]:
    """{'hosts': {host: rendered text}} for every host of inventory['hosts'], or {'error': the first refusal}.

    template: a file of the role's templates/; text: template text given here instead (template is then ignored).

    inventory: {'hosts': {host: {variables, ansible_facts ...}}, 'groups': {group: [hosts]}}.
    render_hosts: only these hosts run the tasks and render (the controller of a 4,096-node inventory).
    base_roles: roles whose defaults and vars lie under the role's own (slurm_common under slurm_controller);
    published: facts those roles publish, as templates (`{'slurm_common_os': '{{ _slurm_common_os }}'}`).
    """
    request = {'role': role, 'template': template, 'tasks': tasks, 'os_family': os_family,
               'inventory': inventory, 'extra_vars': extra_vars or {}, 'render_hosts': render_hosts,
               'base_roles': list(base_roles), 'published': published or {}, 'text': text}
    proc = subprocess.run([sys.executable, __file__], input=json.dumps(request), capture_output=True, text=True,
                          timeout=900, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f'role_render failed (rc {proc.returncode}): {proc.stderr[-3000:]}')
    return json.loads(proc.stdout)


class Refused(Exception):
    """An assert of the task file failed, or a template raised."""


def _main() -> None:  # pragma: no cover - runs in the child process
    import yaml
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template
    from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder

    _AnsibleCollectionFinder(paths=[str(ROOT / 'collections')])._install()
    request = json.load(sys.stdin)
    role_dir = ROOT / 'roles' / request['role']

    def load(path: pathlib.Path) -> t.Any:
        return yaml.safe_load(path.read_text(encoding='utf-8')) if path.is_file() else None

    def trusted(value: t.Any) -> t.Any:
        """Role files' strings are templates, as Ansible trusts them."""
        if isinstance(value, str):
            return trust_as_template(value)
        if isinstance(value, list):
            return [trusted(item) for item in value]
        if isinstance(value, dict):
            return {key: trusted(item) for key, item in value.items()}
        return value

    def role_layers(directory: pathlib.Path) -> tuple[dict[str, t.Any], dict[str, t.Any]]:
        return (trusted(load(directory / 'defaults' / 'main.yml') or {}),
                trusted({**(load(directory / 'vars' / f"{request['os_family']}.yml") or {}),
                         **(load(directory / 'vars' / 'main.yml') or {})}))

    defaults: dict[str, t.Any] = {}
    for base in request.get('base_roles') or []:
        base_defaults, base_vars = role_layers(ROOT / 'roles' / base)
        defaults.update({**base_defaults, **base_vars})
    defaults.update(trusted(request.get('published') or {}))
    own_defaults, role_vars = role_layers(role_dir)
    defaults.update(own_defaults)
    tasks = load(role_dir / 'tasks' / request['tasks']) or []
    inventory = request['inventory']
    groups = {'all': list(inventory['hosts']), **inventory['groups']}
    hostvars = {}
    for host, host_vars in inventory['hosts'].items():
        group_names = sorted(group for group, members in groups.items() if host in members and group != 'all')
        hostvars[host] = {**host_vars, 'inventory_hostname': host, 'group_names': group_names}
    facts: dict[str, dict[str, t.Any]] = {host: {} for host in hostvars}
    loader = DataLoader()

    def templar_for(host: str, extra: t.Optional[dict[str, t.Any]] = None) -> Templar:
        variables = {**defaults, **hostvars[host], **role_vars, **facts[host], **request['extra_vars'], **(extra or {}),
                     'hostvars': hostvars, 'groups': groups, 'ansible_play_hosts_all': list(hostvars),
                     'ansible_play_hosts': list(hostvars),
                     'ansible_check_mode': False, 'ansible_managed': 'Ansible managed'}
        return Templar(loader=loader, variables=variables)

    def value(templar: Templar, data: t.Any) -> t.Any:
        return templar.template(trusted(data))

    def true(templar: Templar, condition: t.Any) -> bool:
        if isinstance(condition, bool):
            return condition
        return value(templar, '{% if ' + str(condition) + ' %}yes{% else %}no{% endif %}') == 'yes'

    def run_task(task: dict[str, t.Any], host: str) -> None:
        action = next((key for key in ('ansible.builtin.assert', 'ansible.builtin.set_fact') if key in task), None)
        if action is None:
            return
        base = templar_for(host, trusted(task.get('vars') or {}))
        control = task.get('loop_control') or {}
        items = value(base, task['loop']) if 'loop' in task else [None]
        for index, item in enumerate(items):
            extra = dict(trusted(task.get('vars') or {}))
            if 'loop' in task:
                extra[control.get('loop_var', 'item')] = item
                if 'index_var' in control:
                    extra[control['index_var']] = index
            templar = templar_for(host, extra)
            conditions = task.get('when', [])
            if not all(true(templar, condition) for condition in (conditions if isinstance(conditions, list) else [conditions])):
                continue
            args = task[action]
            if action == 'ansible.builtin.set_fact':
                new_facts = {name: value(templar, data) for name, data in args.items()}
                for target in (list(hostvars) if task.get('run_once') else [host]):
                    facts[target].update(new_facts)
                    # As in Ansible, a host's facts are seen by the others through hostvars.
                    hostvars[target].update(new_facts)
                continue
            that = args['that'] if isinstance(args['that'], list) else [args['that']]
            if not all(true(templar, condition) for condition in that):
                raise Refused(value(templar, args.get('fail_msg', 'assertion failed')))

    result: dict[str, t.Any] = {}
    targets = request.get('render_hosts') or list(hostvars)
    try:
        for task in tasks:
            for host in (targets[:1] if task.get('run_once') else targets):
                run_task(task, host)
        text = request.get('text') or (role_dir / 'templates' / request['template']).read_text(encoding='utf-8')
        result['hosts'] = {host: templar_for(host).template(trust_as_template(text)) for host in targets}
    except Exception as err:  # pylint: disable=broad-exception-caught
        result = {'error': str(err)}
    json.dump(result, sys.stdout)


if __name__ == '__main__':
    _main()
