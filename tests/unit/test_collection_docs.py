# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every filter the collection exports has its documentation beside it, as ansible-doc reads it.

A filter plugin file (plugins/filter/<file>.py) may export several filters; each one's docs live in
plugins/filter/<filter name>.yml. A new filter without such a file, or a file whose options drift from the
function's parameters, fails here rather than showing up as UNDOCUMENTED in `ansible-doc -t filter -l`.
"""

from __future__ import annotations

import importlib
import inspect
import pathlib

import pytest
import yaml

FILTER_DIR = pathlib.Path(__file__).resolve().parents[2] / 'plugins' / 'filter'


def _exported() -> dict[str, tuple[str, object]]:
    """{filter name: (plugin file, function)} for every filter every plugins/filter/*.py exports."""
    found: dict[str, tuple[str, object]] = {}
    for path in sorted(FILTER_DIR.glob('*.py')):
        module = importlib.import_module(f'ansible_collections.llmforge.cluster.plugins.filter.{path.stem}')
        for name, func in module.FilterModule().filters().items():
            assert name not in found, f'{name} is exported by both {found[name][0]} and {path.name}'
            found[name] = (path.name, func)
    return found


EXPORTED = _exported()


def _docs(name: str) -> dict:
    path = FILTER_DIR / f'{name}.yml'
    assert path.is_file(), f'filter {name} ({EXPORTED[name][0]}) has no documentation: write plugins/filter/{name}.yml'
    return yaml.safe_load(path.read_text(encoding='utf-8'))


def test_filters_are_found():
    assert {'hostlist_expand', 'slurm_conf_lines', 'llmforge_report'} <= set(EXPORTED)


@pytest.mark.parametrize('name', sorted(EXPORTED))
def test_filter_is_documented(name):
    docs = _docs(name)
    assert set(docs) >= {'DOCUMENTATION', 'EXAMPLES', 'RETURN'}
    documentation = docs['DOCUMENTATION']
    assert documentation['name'] == name
    assert documentation.get('author') == 'llmforge.cluster maintainers (@llmforge)', f'{name}: author'
    short = documentation.get('short_description')
    assert isinstance(short, str) and short.strip(), f'{name}: no short_description'
    assert not short.endswith('.'), f'{name}: short_description is a title, without a final period'
    assert documentation.get('description'), f'{name}: no description'
    assert f'llmforge.cluster.{name}' in docs['EXAMPLES'], f'{name}: the examples never use the filter'
    assert '_value' in docs['RETURN']


@pytest.mark.parametrize('name', sorted(EXPORTED))
def test_filter_options_are_the_function_parameters(name):
    """The piped value is _input; every other parameter is an option of the same name, and nothing else is."""
    options = _docs(name)['DOCUMENTATION']['options']
    parameters = list(inspect.signature(EXPORTED[name][1]).parameters.values())
    expected = ['_input'] + [parameter.name for parameter in parameters[1:]]
    assert sorted(options) == sorted(expected)
    for parameter in parameters[1:]:
        required = parameter.default is inspect.Parameter.empty
        assert bool(options[parameter.name].get('required')) == required, f'{name}: {parameter.name} required?'
    positional = [item.strip() for item in _docs(name)['DOCUMENTATION']['positional'].split(',')]
    assert positional == expected[:len(positional)], f'{name}: positional must follow the parameter order'


def test_no_documentation_without_a_filter():
    orphans = sorted(path.name for path in FILTER_DIR.glob('*.yml') if path.stem not in EXPORTED)
    assert orphans == []
