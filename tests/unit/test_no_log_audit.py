# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every task that handles a secret is no_log, and no task name shows one.

The audit reads every task of roles/ and playbooks/ (tasks, handlers, plays' pre_tasks/tasks/post_tasks/handlers,
blocks with their rescue and always parts) and finds the variables their Jinja templates use. A variable is a
secret when its name looks like one (SECRET_NAME, less the ALLOWED names below, each with the reason it is not a
secret) or when its value is built from a secret: role defaults and vars, play vars, task vars, set_fact and the
results registered by no_log tasks.

A task that uses a secret in its arguments, its loop, its environment or the template it renders (its content would
show in --diff) must be no_log, itself or through an enclosing block or play. Conditions (when, changed_when,
failed_when, until, an assert's that) are not: Ansible prints their text, never the values. Neither is a secret
passed straight into llmforge.cluster.secret_problems, whose sentences never quote it. A task name may never use a
secret: no_log does not hide names.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
import re
import typing as t
import warnings

import jinja2
import pytest
import yaml
from jinja2 import nodes

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROLES = ROOT / 'roles'
PLAYBOOKS = ROOT / 'playbooks'

SECRET_NAME = re.compile(r'password|passwd|secret|munge_key|token|private_key|bind_password|_key$', re.IGNORECASE)

# Names SECRET_NAME matches that hold no secret.
ALLOWED = {
    '_slurm_common_munge_key_path': 'the path of the munge key file, not the key',
    '_slurm_common_munge_key_bytes': "the generated munge key's size in bytes",
    '_slurm_common_munge_key_min_bytes': "munge's smallest key size in bytes",
    '_gpu_driver_cuda_repo_key': "the CUDA repository's public signing key: its file name and fingerprint",
    '__common_apt_source_key': "gpg's listing of a repository's public signing key (fingerprints)",
    'validate_training_min_tokens_per_s': 'a throughput threshold in tokens per second',
    '_monitoring_web_client_password_file': "the path of Prometheus's own client password file, not the password",
    '_monitoring_secret_problems': 'sentences naming the weak monitoring secrets, set by a no_log task from '
                                   'secret_problems; they name variables, never values',
    '_pull_cluster': "a pull bundle's cluster.json and its checksum: what the pulled nodes share, which "
                     'pull_bundle_content never makes of a secret (those go to each node\'s own file)',
    '_pull_manifest': "a pull bundle's manifest: checksums, the playbook and ansible-playbook's path",
}

# Names SECRET_NAME does not match that hold secrets.
SECRET_HOLDERS = {
    'monitoring_alertmanager_smtp': 'holds auth_password, the SMTP password',
    'monitoring_alertmanager_receivers': 'webhook and Slack URLs carry their tokens',
}

# Task keywords that are conditions: Ansible evaluates them to a boolean and shows their text, never the values.
CONDITIONS = frozenset({'when', 'changed_when', 'failed_when', 'until'})
# Task keywords that neither print nor pass on values.
INERT = frozenset({'name', 'no_log', 'register', 'tags', 'notify', 'listen', 'become', 'become_user', 'check_mode',
                   'diff', 'ignore_errors', 'ignore_unreachable', 'run_once', 'retries', 'delay', 'throttle',
                   'any_errors_fatal', 'timeout', 'vars'})
BLOCK_PARTS = ('block', 'rescue', 'always')
PLAY_TASK_LISTS = ('pre_tasks', 'tasks', 'post_tasks', 'handlers')
# Keys of an assert whose values are conditions.
ASSERT_MODULES = frozenset({'assert', 'ansible.builtin.assert', 'ansible.legacy.assert'})
TEMPLATE_MODULES = frozenset({'template', 'ansible.builtin.template', 'ansible.legacy.template'})
SET_FACT_MODULES = frozenset({'set_fact', 'ansible.builtin.set_fact', 'ansible.legacy.set_fact'})
# Filters that judge a secret without passing it on.
# sssd_problems judges the LDAP settings with the bind password among them and never quotes it (tests/unit/test_sssd.py);
# config_value_problems names the variable and the character at fault, never the value (tests/unit/test_rendered_values.py).
JUDGING_FILTERS = frozenset({'llmforge.cluster.secret_problems', 'secret_problems',
                             'llmforge.cluster.sssd_problems', 'sssd_problems',
                             'llmforge.cluster.config_value_problems', 'config_value_problems'})

_JINJA = jinja2.Environment(extensions=['jinja2.ext.do', 'jinja2.ext.loopcontrols'])


def referenced(value: t.Any, origin: str) -> set[str]:
    """The variable and attribute names the Jinja templates in value (strings, lists, dicts) use.

    A name used only as the input of a secret-judging filter is left out.
    """
    found: set[str] = set()
    if isinstance(value, str):
        if '{{' in value or '{%' in value:
            try:
                found |= _template_names(value)
            except jinja2.TemplateSyntaxError as err:
                pytest.fail(f'{origin}: cannot parse the template {value!r}: {err}')
    elif isinstance(value, dict):
        for key, item in value.items():
            found |= referenced(key, origin) | referenced(item, origin)
    elif isinstance(value, list):
        for item in value:
            found |= referenced(item, origin)
    return found


@functools.lru_cache(maxsize=None)
def _template_names(template: str) -> frozenset[str]:
    with warnings.catch_warnings():
        # Jinja unescapes string literals such as regular expressions ('\s') with a deprecated codec.
        warnings.simplefilter('ignore', DeprecationWarning)
        tree = _JINJA.parse(template)
    found: set[str] = set()
    _names(tree, found)
    return frozenset(found)


def judges(value: t.Any) -> bool:
    """Whether value uses a secret-judging filter."""
    if isinstance(value, str):
        return any(re.search(r'\|\s*' + re.escape(name) + r'\b', value) for name in JUDGING_FILTERS)
    if isinstance(value, dict):
        return any(judges(item) for item in value.values())
    if isinstance(value, list):
        return any(judges(item) for item in value)
    return False


def expression_names(expression: str, origin: str) -> set[str]:
    """The names a bare expression (a condition) uses."""
    return referenced('{{ ' + expression + ' }}', origin) if isinstance(expression, str) else set()


def _names(node: nodes.Node, found: set[str]) -> None:
    if isinstance(node, nodes.Filter) and node.name in JUDGING_FILTERS:
        children = [*node.args, *node.kwargs] + ([node.dyn_args] if node.dyn_args else []) \
            + ([node.dyn_kwargs] if node.dyn_kwargs else [])
        for child in children:
            _names(child, found)
        return
    if isinstance(node, nodes.Name):
        found.add(node.name)
    elif isinstance(node, nodes.Getattr):
        found.add(node.attr)
    elif isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
        found.add(node.arg.value)
    for child in node.iter_child_nodes():
        _names(child, found)


@dataclasses.dataclass
class Task:
    path: pathlib.Path
    role: t.Optional[str]
    data: dict
    no_log: bool

    @property
    def label(self) -> str:
        return f"{self.path.relative_to(ROOT)}: task {self.data.get('name', '(unnamed)')!r}"


def _load(path: pathlib.Path) -> t.Any:
    return yaml.safe_load(path.read_text(encoding='utf-8'))


def _role_of(path: pathlib.Path) -> t.Optional[str]:
    parts = path.relative_to(ROOT).parts
    return parts[1] if parts[0] == 'roles' else None


def _walk_tasks(items: t.Any, path: pathlib.Path, no_log: bool) -> t.Iterator[Task]:
    for item in items or []:
        if not isinstance(item, dict):
            continue
        here = no_log or item.get('no_log') is True
        if any(part in item for part in BLOCK_PARTS):
            for part in BLOCK_PARTS:
                yield from _walk_tasks(item.get(part), path, here)
            # The block's own keywords (vars, environment, when) are judged like a task's.
            yield Task(path, _role_of(path), {key: value for key, value in item.items() if key not in BLOCK_PARTS}, here)
        else:
            yield Task(path, _role_of(path), item, here)


def _plays(path: pathlib.Path) -> list[dict]:
    return [play for play in _load(path) or [] if isinstance(play, dict) and 'hosts' in play]


def all_tasks() -> list[Task]:
    tasks: list[Task] = []
    for path in sorted(ROLES.glob('*/tasks/**/*.yml')) + sorted(ROLES.glob('*/handlers/**/*.yml')):
        tasks += _walk_tasks(_load(path), path, False)
    for path in sorted(PLAYBOOKS.glob('*.yml')):
        for play in _plays(path):
            play_no_log = play.get('no_log') is True
            for key in PLAY_TASK_LISTS:
                tasks += _walk_tasks(play.get(key), path, play_no_log)
            # Roles applied by the play: their vars are judged like an include's.
            for role in play.get('roles') or []:
                if isinstance(role, dict):
                    tasks.append(Task(path, None, dict(role, name=f"role {role.get('role', role.get('name'))}"),
                                      play_no_log or role.get('no_log') is True))
    return tasks


def variable_definitions() -> list[tuple[str, t.Any, str]]:
    """(name, value, where) of every variable roles/ and playbooks/ define outside tasks' module arguments."""
    found = []
    for path in sorted(ROLES.glob('*/defaults/**/*.yml')) + sorted(ROLES.glob('*/vars/**/*.yml')):
        for name, value in (_load(path) or {}).items():
            found.append((name, value, str(path.relative_to(ROOT))))
    for path in sorted(PLAYBOOKS.glob('*.yml')):
        for play in _plays(path):
            for name, value in (play.get('vars') or {}).items():
                found.append((name, value, str(path.relative_to(ROOT))))
    return found


def _module(task: dict) -> t.Optional[str]:
    for key in task:
        if key in TEMPLATE_MODULES | SET_FACT_MODULES | ASSERT_MODULES:
            return key
    return None


def secret_names(tasks: list[Task]) -> set[str]:
    """Names that hold a secret: by their name, or built from one (to a fixed point)."""
    definitions = variable_definitions()
    for task in tasks:
        definitions += [(name, value, task.label) for name, value in (task.data.get('vars') or {}).items()]
        if _module(task.data) in SET_FACT_MODULES and isinstance(task.data[_module(task.data)], dict):
            definitions += [(name, value, task.label) for name, value in task.data[_module(task.data)].items()
                            if name != 'cacheable']
    every_name = {name for name, _value, _where in definitions}
    for task in tasks:
        every_name |= referenced(task.data, task.label) | exposed(task)
    # A name defined only as a judgement of secrets (their problems) holds sentences about them, not the secrets.
    judgements = {name for name, value, _where in definitions if judges(value)} - {
        name for name, value, _where in definitions if not judges(value)}
    secrets = {name for name in every_name if SECRET_NAME.search(name) and name not in set(ALLOWED) | judgements}
    secrets |= set(SECRET_HOLDERS)
    # The results of no_log tasks hold what the task hid.
    secrets |= {task.data['register'] for task in tasks if task.no_log and isinstance(task.data.get('register'), str)}
    while True:
        grown = {name for name, value, where in definitions
                 if name not in set(ALLOWED) | judgements and referenced(value, where) & secrets} - secrets
        if not grown:
            return secrets
        secrets |= grown


def _template_sources(task: Task) -> list[pathlib.Path]:
    """The role templates a template task renders; a templated src (grafana-{{ item }}.yml.j2) names them all."""
    args = task.data.get(_module(task.data) or '') if _module(task.data) in TEMPLATE_MODULES else None
    src = args.get('src') if isinstance(args, dict) else None
    if not isinstance(src, str) or task.role is None:
        return []
    templates = ROLES / task.role / 'templates'
    loop = task.data.get('loop', task.data.get('with_items'))
    if isinstance(loop, list) and all(isinstance(item, str) for item in loop) and re.search(r'\{\{\s*item\s*\}\}', src):
        names = [re.sub(r'\{\{\s*item\s*\}\}', item, src) for item in loop]
        return [templates / name for name in names if (templates / name).is_file()]
    return sorted(templates.glob(re.sub(r'\{\{.*?\}\}', '*', src)))


def exposed(task: Task) -> set[str]:
    """Names the task passes to a module, a loop or an environment, or renders through its template."""
    names: set[str] = set()
    for key, value in task.data.items():
        if key in CONDITIONS or key in INERT:
            continue
        if key in ASSERT_MODULES and isinstance(value, dict):
            value = {option: item for option, item in value.items() if option != 'that'}
        names |= referenced(value, task.label)
    for source in _template_sources(task):
        names |= referenced(source.read_text(encoding='utf-8'), str(source.relative_to(ROOT)))
    return names


def problems(tasks: list[Task], secrets: set[str]) -> list[str]:
    found = []
    for task in tasks:
        in_name = referenced(task.data.get('name', ''), task.label) & secrets
        if in_name:
            found.append(f'{task.label}: its name shows {", ".join(sorted(in_name))} (no_log does not hide names)')
        used = exposed(task) & secrets
        if used and not task.no_log:
            found.append(f'{task.label}: uses {", ".join(sorted(used))} without no_log: true')
    return found


TASKS = all_tasks()
SECRETS = secret_names(TASKS)


def test_the_audit_reads_the_roles_and_playbooks():
    assert len(TASKS) > 200
    assert any(task.path.parent == PLAYBOOKS for task in TASKS)
    assert any(task.path.parent.name == 'handlers' for task in TASKS)
    assert {'slurm_controller_db_password', 'slurm_common_munge_key', '__slurm_common_munge_cluster_key'} <= SECRETS


def test_every_task_handling_a_secret_is_no_log():
    found = problems(TASKS, SECRETS)
    assert not found, 'Tasks that could print a secret:\n' + '\n'.join(found)


def test_every_allowed_name_is_used():
    """An allow-list entry whose name nothing uses any more is stale: remove it."""
    used = {name for name, _value, _where in variable_definitions()}
    for task in TASKS:
        used |= referenced(task.data, task.label) | _condition_names(task)
        if isinstance(task.data.get('register'), str):
            used.add(task.data['register'])
    assert sorted(set(ALLOWED) - used) == []


def _condition_names(task: Task) -> set[str]:
    names: set[str] = set()
    for key in CONDITIONS:
        value = task.data.get(key)
        for expression in value if isinstance(value, list) else [value]:
            names |= expression_names(expression, task.label)
    return names


def _fake_tasks(tasks: list[dict], role: str = 'example') -> list[Task]:
    """Tasks as if they were in roles/<role>/tasks/main.yml."""
    return list(_walk_tasks(tasks, ROLES / role / 'tasks' / 'main.yml', False))


@pytest.mark.parametrize(('task', 'flagged'), [
    ({'name': 'Write it', 'ansible.builtin.copy': {'content': '{{ site_db_password }}', 'dest': '/x'}}, True),
    ({'name': 'Write it', 'ansible.builtin.copy': {'content': '{{ site_db_password }}', 'dest': '/x'}, 'no_log': True},
     False),
    ({'name': 'Loop', 'ansible.builtin.debug': {'msg': '{{ item }}'}, 'loop': '{{ [site.api_token] }}'}, True),
    ({'name': 'Env', 'ansible.builtin.command': 'true', 'environment': {'X': "{{ hostvars[h]['ldap_bind_password'] }}"}},
     True),
    ({'name': 'Only a condition', 'ansible.builtin.debug': {'msg': 'x'}, 'when': 'site_db_password | length > 0'}, False),
    ({'name': 'Judged', 'ansible.builtin.fail': {'msg': '{{ p | join }}'},
      'vars': {'p': "{{ site_db_password | llmforge.cluster.secret_problems('site_db_password') }}"}}, False),
    ({'name': 'Passed on through task vars', 'ansible.builtin.command': {'argv': ['x', '{{ pw }}']},
      'vars': {'pw': '{{ site_db_password }}'}}, True),
    ({'name': 'Assert that', 'ansible.builtin.assert': {'that': ['site_db_password | length > 16'], 'fail_msg': 'short'}},
     False),
    ({'name': 'Assert message', 'ansible.builtin.assert': {'that': ['true'], 'fail_msg': '{{ site_db_password }}'}}, True),
    ({'block': [{'name': 'Inside', 'ansible.builtin.copy': {'content': '{{ site_db_password }}', 'dest': '/x'}}],
      'no_log': True}, False),
    ({'name': 'Public key', 'ansible.builtin.get_url': {'url': '{{ _gpu_driver_cuda_repo_key.file }}', 'dest': '/x'}},
     False),
])
def test_the_audit_flags_what_it_should(task, flagged):
    tasks = _fake_tasks([task])
    secrets = secret_names(TASKS + tasks)
    assert bool(problems(tasks, secrets)) is flagged, problems(tasks, secrets)


def test_a_template_holding_a_secret_needs_no_log():
    """slurmdbd.conf.j2 writes the database password: rendering it shows the password in --diff."""
    render = {'name': 'Render', 'ansible.builtin.template': {'src': 'slurmdbd.conf.j2', 'dest': '/x'}}
    assert problems(_fake_tasks([render], 'slurm_controller'), SECRETS) == [
        "roles/slurm_controller/tasks/main.yml: task 'Render': uses slurm_controller_db_password without no_log: true"]
    assert problems(_fake_tasks([dict(render, no_log=True)], 'slurm_controller'), SECRETS) == []
    looped = {'name': 'Render', 'ansible.builtin.template': {'src': 'slurmdbd.{{ item }}.j2', 'dest': '/x'}}
    assert problems(_fake_tasks([looped], 'slurm_controller'), SECRETS)


def test_a_name_showing_a_secret_is_flagged_even_with_no_log():
    tasks = _fake_tasks([{'name': 'Set {{ site_db_password }}', 'ansible.builtin.command': 'true', 'no_log': True}])
    assert problems(tasks, secret_names(TASKS + tasks)) == [
        "roles/example/tasks/main.yml: task 'Set {{ site_db_password }}': its name shows site_db_password "
        "(no_log does not hide names)"]


def test_results_of_no_log_tasks_are_secrets():
    tasks = _fake_tasks([
        {'name': 'Read', 'ansible.builtin.slurp': {'src': '/etc/x'}, 'register': 'site_blob', 'no_log': True},
        {'name': 'Show', 'ansible.builtin.debug': {'msg': '{{ site_blob.content | b64decode }}'}},
    ])
    assert problems(tasks, secret_names(TASKS + tasks)) == [
        "roles/example/tasks/main.yml: task 'Show': uses site_blob without no_log: true"]


def test_values_built_from_secrets_are_secrets():
    tasks = _fake_tasks([
        {'name': 'Build', 'ansible.builtin.set_fact': {'site_dsn': 'mysql://u:{{ site_db_password }}@db/x'}},
        {'name': 'Use', 'ansible.builtin.command': {'argv': ['connect', '{{ site_dsn }}']}},
    ])
    assert problems(tasks, secret_names(TASKS + tasks)) == [
        "roles/example/tasks/main.yml: task 'Build': uses site_db_password without no_log: true",
        "roles/example/tasks/main.yml: task 'Use': uses site_dsn without no_log: true"]
