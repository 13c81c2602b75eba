# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Role argument specs agree with defaults/main.yml, are fully described, and the READMEs document them."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import typing as t
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ROLES_DIR = REPO / 'roles'
VALID_TYPES = {'str', 'list', 'dict', 'bool', 'int', 'float', 'path', 'raw', 'jsonarg', 'json', 'bytes', 'bits'}


@dataclass(frozen=True)
class RoleCase:
    name: str
    entry_points: frozenset[str]
    # Entry point that must list every key of defaults/main.yml (None: the union of entry points must).
    full_entry_point: t.Optional[str]
    # entry point -> options that are required and have no default.
    required: dict[str, frozenset[str]] = field(default_factory=dict)
    # Options that hold secrets and must be no_log.
    secrets: frozenset[str] = frozenset()
    # Names the README must mention besides the spec options.
    readme_mentions: frozenset[str] = frozenset()
    # Secrets that are optional yet have no default anywhere in the collection (they come from Vault when used).
    secrets_without_default: frozenset[str] = frozenset()


ROLE_CASES = [
    RoleCase(
        name='slurm_common',
        entry_points=frozenset({'main', 'os_vars', 'install', 'hosts', 'munge', 'munge_preflight', 'node_facts'}),
        full_entry_point='main',
        required={'install': frozenset({'slurm_common_install_packages'})},
        secrets=frozenset({'slurm_common_munge_key'}),
        readme_mentions=frozenset({'Internal role', 'munge -n | unmunge'}),
    ),
    RoleCase(
        name='slurm_controller',
        entry_points=frozenset({'main', 'packages'}),
        full_entry_point='main',
        required={'main': frozenset({'slurm_controller_db_password'})},
        secrets=frozenset({'slurm_controller_db_password'}),
        readme_mentions=frozenset({'gpu_count', 'gpu_type', 'slurm_node_config', 'scontrol reconfigure',
                                   'llmforge.cluster.slurm_controller'}),
    ),
    RoleCase(
        name='slurm_node',
        entry_points=frozenset({'main'}),
        full_entry_point='main',
        readme_mentions=frozenset({'KillMode=process', 'llmforge.cluster.slurm_node', 'pam_slurm_adopt',
                                   'Reload the SSH server'}),
    ),
    RoleCase(
        name='slurm_login',
        entry_points=frozenset({'main'}),
        full_entry_point='main',
        readme_mentions=frozenset({'llmforge.cluster.slurm_login', 'sackd', 'playbooks/login.yml', 'Restart sackd'}),
    ),
    RoleCase(
        name='nccl',
        entry_points=frozenset({'main', 'packages'}),
        full_entry_point='main',
        readme_mentions=frozenset({'llmforge.cluster.nccl', 'NCCL_TOPO_FILE', 'NCCL_IB_HCA'}),
    ),
    RoleCase(
        name='gpu_driver',
        entry_points=frozenset({'main', 'sources'}),
        full_entry_point='main',
        readme_mentions=frozenset({'llmforge.cluster.gpu_driver', 'serial', 'gpu_profile'}),
    ),
    RoleCase(
        name='monitoring',
        entry_points=frozenset({'main', 'packages'}),
        full_entry_point='main',
        secrets=frozenset({'monitoring_alertmanager_receivers', 'monitoring_alertmanager_smtp', 'monitoring_web_users',
                           'monitoring_tls_key', 'monitoring_grafana_admin_password', 'monitoring_grafana_secret_key'}),
        readme_mentions=frozenset({'llmforge.cluster.monitoring', 'Reload Prometheus', 'metrics/openmetrics', 'monitoring_address'}),
    ),
    RoleCase(
        name='infiniband',
        entry_points=frozenset({'main'}),
        full_entry_point='main',
        readme_mentions=frozenset({'llmforge.cluster.infiniband', 'node_index', 'llmforge.cluster.ipoib_addresses'}),
    ),
    RoleCase(
        name='local_scratch',
        entry_points=frozenset({'main'}),
        full_entry_point='main',
        readme_mentions=frozenset({'llmforge.cluster.local_scratch', 'llmforge.cluster.scratch_devices',
                                   'job_container/tmpfs', 'Rebuild the initramfs'}),
    ),
    RoleCase(
        name='lustre_client',
        entry_points=frozenset({'main'}),
        full_entry_point='main',
        readme_mentions=frozenset({'llmforge.cluster.lustre_client', 'infiniband_ipoib_networks', 'llmforge-checkpoint-prune'}),
    ),
    RoleCase(
        name='ceph_client',
        entry_points=frozenset({'main'}),
        full_entry_point='main',
        secrets=frozenset({'ceph_client_key'}),
        secrets_without_default=frozenset({'ceph_client_key'}),
        readme_mentions=frozenset({'llmforge.cluster.ceph_client', 'fuse.ceph', 'x-systemd.automount', 'ceph_clients'}),
    ),
    RoleCase(
        name='checkpoint_archive',
        entry_points=frozenset({'main'}),
        full_entry_point='main',
        secrets=frozenset({'checkpoint_archive_access_key', 'checkpoint_archive_secret_key'}),
        secrets_without_default=frozenset({'checkpoint_archive_access_key', 'checkpoint_archive_secret_key'}),
        readme_mentions=frozenset({'llmforge.cluster.checkpoint_archive', 'llmforge-restore', 'checkpoint_archivers'}),
    ),
    RoleCase(
        name='common',
        entry_points=frozenset({'main', 'setup', 'packages', 'packages_read', 'packages_plan', 'apt_cache', 'apt_source',
                                'hold'}),
        full_entry_point='main',
        required={'apt_source': frozenset({'common_apt_source_name', 'common_apt_source_uris', 'common_apt_source_suites',
                                           'common_apt_source_signed_by'})},
        readme_mentions=frozenset({'Internal role', 'llmforge.cluster.common', 'common_in_container',
                                   'Refresh the apt package index', 'Rebuild the initramfs', 'gpu_profile'}),
    ),
    RoleCase(
        name='ansible_node',
        entry_points=frozenset({'main'}),
        full_entry_point='main',
        readme_mentions=frozenset({'ansible-node.lock', 'llmforge-pull-node', 'no-ansible'}),
    ),
    RoleCase(
        name='pull',
        entry_points=frozenset({'main', 'plan', 'run', 'resume'}),
        full_entry_point='main',
        readme_mentions=frozenset({'llmforge_pulled', 'llmforge-pull-node', 'last-run.json', 'cluster.json'}),
    ),
    RoleCase(
        name='node_programs',
        entry_points=frozenset({'main'}),
        full_entry_point='main',
        required={'main': frozenset({'node_programs_module'})},
        readme_mentions=frozenset({'Internal role', 'llmforge.cluster.node_program_files', '_report'}),
    ),
    RoleCase(
        name='containers',
        entry_points=frozenset({'main', 'oci_conf', 'packages'}),
        full_entry_point='main',
        readme_mentions=frozenset({'llmforge.cluster.containers', 'oci.conf', 'Prolog=/etc/slurm/prolog.d/*'}),
    ),
    RoleCase(
        name='training_env',
        entry_points=frozenset({'main', 'packages'}),
        full_entry_point='main',
        readme_mentions=frozenset({'llmforge.cluster.training_env', 'llmforge-train.sbatch', '--require-hashes',
                                   'llmforge-checkpoint-prune'}),
    ),
    RoleCase(
        name='sssd',
        entry_points=frozenset({'main', 'packages'}),
        full_entry_point='main',
        secrets=frozenset({'sssd_ldap_bind_password'}),
        secrets_without_default=frozenset({'sssd_ldap_bind_password'}),
        readme_mentions=frozenset({'llmforge.cluster.sssd', 'llmforge.cluster.sssd_problems',
                                   'llmforge.cluster.secret_problems', 'pam-auth-update', 'sss_cache -E',
                                   'playbooks/users.yml'}),
    ),
    RoleCase(
        name='firewall',
        entry_points=frozenset({'main'}),
        full_entry_point='main',
        readme_mentions=frozenset({'llmforge.cluster.firewall', 'cluster_admin_cidrs', 'cluster_networks',
                                   'flush ruleset', 'nft -c', 'Load the host firewall'}),
    ),
    RoleCase(
        name='validate',
        entry_points=frozenset({'main', 'hardware_plan', 'hardware', 'nccl', 'training', 'report', 'slurm', 'fabric_round',
                                'storage', 'dcgm', 'fleet', 'metrics_slurm'}),
        # Each stage's entry point documents its own options: together they hold every default.
        full_entry_point=None,
        readme_mentions=frozenset({'llmforge.cluster.validate', 'playbooks/validate.yml', 'playbooks/validate_fabric.yml',
                                   'validate_preflight', 'llmforge_validate.prom', 'monitoring_textfile_dir'}),
    ),
]
CASE_PARAMS = [pytest.param(case, id=case.name) for case in ROLE_CASES]


def _load_yaml(path: Path) -> t.Any:
    with path.open(encoding='utf-8') as handle:
        return yaml.safe_load(handle)


def _specs(role: str) -> dict[str, t.Any]:
    return _load_yaml(ROLES_DIR / role / 'meta' / 'argument_specs.yml')['argument_specs']


def _defaults(role: str) -> dict[str, t.Any]:
    return _load_yaml(ROLES_DIR / role / 'defaults' / 'main.yml') or {}


def _same(left: t.Any, right: t.Any) -> bool:
    """Equal values of equal types: True is not 1, '1' is not 1; key order does not matter."""
    return json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)


def _options(specs: dict[str, t.Any]) -> t.Iterator[tuple[str, str, dict[str, t.Any]]]:
    for entry_point, spec in specs.items():
        for name, option in ((spec or {}).get('options') or {}).items():
            yield entry_point, name, option


def _walk(options: dict[str, t.Any], prefix: str = '') -> t.Iterator[tuple[str, dict[str, t.Any]]]:
    """Every option and suboption, with a dotted path."""
    for name, option in (options or {}).items():
        yield prefix + name, option
        if isinstance(option, dict) and option.get('options'):
            yield from _walk(option['options'], f'{prefix}{name}.')


def _placeholders(options: dict[str, t.Any], params: dict[str, t.Any]) -> dict[str, t.Any]:
    """Stand-in values for required options the params do not set."""
    return {name: ['pkg'] if opt['type'] == 'list' else 'a-placeholder-secret'
            for name, opt in options.items() if opt.get('required') and name not in params}


def _role_docs():
    spec = importlib.util.spec_from_file_location('role_docs', REPO / 'scripts' / 'role_docs.py')
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault('role_docs', module)
    spec.loader.exec_module(module)
    return module


def test_every_role_is_in_the_table():
    roles = {path.parent.parent.name for path in ROLES_DIR.glob('*/defaults/main.yml')}
    roles |= {path.parent.parent.name for path in ROLES_DIR.glob('*/meta/argument_specs.yml')}
    assert roles == {case.name for case in ROLE_CASES}


@pytest.mark.parametrize('case', CASE_PARAMS)
def test_entry_points(case):
    specs = _specs(case.name)
    assert set(specs) == case.entry_points
    for entry_point, spec in specs.items():
        assert (spec or {}).get('short_description'), f'{entry_point}: no short_description'


@pytest.mark.parametrize('case', CASE_PARAMS)
def test_every_default_is_an_option_with_the_same_default(case):
    specs, defaults = _specs(case.name), _defaults(case.name)
    entry_points = [case.full_entry_point] if case.full_entry_point else list(specs)
    for key, value in defaults.items():
        found = [specs[ep]['options'][key] for ep in entry_points if key in (specs[ep].get('options') or {})]
        assert found, f'{key} (defaults/main.yml) is in no entry point of {entry_points}'
        for option in found:
            assert 'default' in option, f'{key}: no default in the spec'
            assert _same(option['default'], value), f"{key}: spec default {option['default']!r} != {value!r}"


@pytest.mark.parametrize('case', CASE_PARAMS)
def test_every_option_default_matches_defaults_main(case):
    specs, defaults = _specs(case.name), _defaults(case.name)
    for entry_point, name, option in _options(specs):
        where = f'{entry_point}.{name}'
        if option.get('required'):
            assert 'default' not in option, f'{where}: required options take no default'
            assert name not in defaults, f'{where}: required but defaults/main.yml sets it'
            continue
        if name in case.secrets_without_default:
            assert name in case.secrets, f'{where}: only secrets may go without a default'
            assert 'default' not in option and name not in defaults, f'{where}: a secret without default has one'
            continue
        assert 'default' in option, f'{where}: optional options need a default'
        assert name in defaults, f'{where}: has a default but defaults/main.yml does not set it'
        assert _same(option['default'], defaults[name]), (
            f"{where}: spec default {option['default']!r} != defaults/main.yml {defaults[name]!r}")


@pytest.mark.parametrize('case', CASE_PARAMS)
def test_required_and_secret_options(case):
    specs = _specs(case.name)
    required = {ep: {name for _entry, name, opt in _options({ep: specs[ep]}) if opt.get('required')} for ep in specs}
    assert {ep: names for ep, names in required.items() if names} == {ep: set(n) for ep, n in case.required.items()}
    for entry_point, name, option in _options(specs):
        if name in case.secrets:
            assert option.get('no_log') is True, f'{entry_point}.{name}: secrets must be no_log'


@pytest.mark.parametrize('case', CASE_PARAMS)
def test_every_option_has_a_type_and_a_description(case):
    for entry_point, spec in _specs(case.name).items():
        for path, option in _walk(spec.get('options') or {}):
            where = f'{entry_point}.{path}'
            assert isinstance(option, dict), where
            assert option.get('type') in VALID_TYPES, f'{where}: type {option.get("type")!r}'
            description = option.get('description')
            if isinstance(description, list):
                description = ' '.join(description)
            assert isinstance(description, str) and description.strip(), f'{where}: no description'
            if option['type'] == 'list':
                assert option.get('elements') in VALID_TYPES, f'{where}: lists need elements'
            if 'choices' in option and 'default' in option:
                default = option['default'] if option['type'] == 'list' else [option['default']]
                assert all(item in option['choices'] for item in default), f'{where}: default not among the choices'


@pytest.mark.parametrize('case', CASE_PARAMS)
def test_defaults_validate_against_the_spec(case):
    """The defaults pass Ansible's own validation (types, choices, list elements, suboptions)."""
    validator_module = pytest.importorskip('ansible.module_utils.common.arg_spec')
    defaults = _defaults(case.name)
    for entry_point, spec in _specs(case.name).items():
        options = spec.get('options') or {}
        params = {name: defaults[name] for name in options if name in defaults}
        params.update(_placeholders(options, params))
        result = validator_module.ArgumentSpecValidator(options).validate(params, validate_role_argument_spec=True)
        assert not result.error_messages, f'{entry_point}: {result.error_messages}'


@pytest.mark.parametrize('inventory', sorted(p.name for p in (REPO / 'inventories').iterdir() if p.is_dir()))
def test_inventory_group_vars_validate_against_the_specs(inventory):
    """Values an inventory sets for role options have the types the specs declare."""
    validator_module = pytest.importorskip('ansible.module_utils.common.arg_spec')
    settings: dict[str, t.Any] = {}
    for path in sorted((REPO / 'inventories' / inventory).glob('group_vars/**/*.yml')):
        data = _load_yaml(path)
        if isinstance(data, dict):  # a vaulted file loads as a string
            settings.update(data)
    for case in ROLE_CASES:
        for entry_point, spec in _specs(case.name).items():
            options = spec.get('options') or {}
            params = {name: settings[name] for name in options if name in settings}
            params.update(_placeholders(options, params))
            result = validator_module.ArgumentSpecValidator(options).validate(params, validate_role_argument_spec=True)
            assert not result.error_messages, f'{case.name}.{entry_point}: {result.error_messages}'


@pytest.mark.parametrize('case', CASE_PARAMS)
def test_readme_lists_every_option(case):
    readme = (ROLES_DIR / case.name / 'README.md').read_text(encoding='utf-8')
    names = {name for _entry, name, _opt in _options(_specs(case.name))} | set(case.readme_mentions)
    missing = sorted(name for name in names if name not in readme)
    assert not missing, f'roles/{case.name}/README.md does not mention {missing}'
    assert len(readme.splitlines()) <= 170, 'keep the README short'  # validate: 15 stages, 170 lines


@pytest.mark.parametrize('case', CASE_PARAMS)
def test_readme_variables_section_is_generated_and_current(case):
    problems = _role_docs().check([ROLES_DIR / case.name])
    assert not problems, '\n'.join(problems)


def test_role_docs_check_catches_drift_and_write_fixes_it(tmp_path):
    role_docs = _role_docs()
    role = tmp_path / 'slurm_node'
    shutil.copytree(ROLES_DIR / 'slurm_node', role)
    assert role_docs.check([role]) == []
    spec_path = role / 'meta' / 'argument_specs.yml'
    data = _load_yaml(spec_path)
    data['argument_specs']['main']['options']['slurm_node_restart_delay']['description'] = 'Changed | text.'
    spec_path.write_text(yaml.safe_dump(data), encoding='utf-8')
    assert len(role_docs.check([role])) == 1
    assert role_docs.main(['--check', str(role)]) == 1
    assert role_docs.write([role]) == [role / 'README.md']
    assert role_docs.check([role]) == []
    assert 'Changed \\| text.' in (role / 'README.md').read_text(encoding='utf-8')


def test_role_docs_check_reports_missing_markers(tmp_path):
    role_docs = _role_docs()
    role = tmp_path / 'slurm_node'
    shutil.copytree(ROLES_DIR / 'slurm_node', role)
    (role / 'README.md').write_text('# no markers\n', encoding='utf-8')
    problems = role_docs.check([role])
    assert len(problems) == 1 and 'BEGIN VARIABLES' in problems[0]
