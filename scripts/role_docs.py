#!/usr/bin/env python
# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render each role README's variables section from its meta/argument_specs.yml.

The text between ``<!-- BEGIN VARIABLES -->`` and ``<!-- END VARIABLES -->`` in
``roles/<role>/README.md`` is generated: one markdown table (variable | type | default |
required | description) per entry point. Edit the argument specs, then run::

    python scripts/role_docs.py           # rewrite the READMEs
    python scripts/role_docs.py --check   # exit 1 when a README is out of date (CI, unit tests)

Python 3.11 and PyYAML only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Iterable

import yaml

BEGIN = '<!-- BEGIN VARIABLES -->'
END = '<!-- END VARIABLES -->'
REPO_ROOT = Path(__file__).resolve().parent.parent
ROLES_DIR = REPO_ROOT / 'roles'
# Entry points in this order first, the rest alphabetically.
ENTRY_POINT_ORDER = ('main', 'setup', 'packages', 'os_vars', 'install', 'munge', 'node_facts')


class DocsError(Exception):
    """A README or argument spec that cannot be processed."""


def load_specs(role_dir: Path) -> dict[str, Any]:
    """The ``argument_specs`` mapping of a role (entry point name -> spec)."""
    path = role_dir / 'meta' / 'argument_specs.yml'
    if not path.is_file():
        raise DocsError(f'{path}: missing')
    with path.open(encoding='utf-8') as handle:
        data = yaml.safe_load(handle) or {}
    specs = data.get('argument_specs')
    if not isinstance(specs, dict) or not specs:
        raise DocsError(f'{path}: no argument_specs mapping')
    return specs


def _ordered_entry_points(specs: dict[str, Any]) -> list[str]:
    known = [name for name in ENTRY_POINT_ORDER if name in specs]
    return known + sorted(name for name in specs if name not in ENTRY_POINT_ORDER)


def _cell(text: str) -> str:
    """Text safe inside one markdown table cell."""
    return ' '.join(str(text).split()).replace('|', '\\|')


def _code(value: Any) -> str:
    """A value as inline code, in JSON spelling (unambiguous: "" vs null, true vs "true")."""
    rendered = json.dumps(value, ensure_ascii=False)
    return f'`{rendered}`'.replace('|', '\\|')


def _description(spec: dict[str, Any]) -> str:
    desc = spec.get('description', '')
    if isinstance(desc, list):
        desc = ' '.join(str(item) for item in desc)
    return ' '.join(str(desc).split())


def _type(spec: dict[str, Any]) -> str:
    kind = spec.get('type', 'str')
    if spec.get('elements'):
        kind = f"{kind} of {spec['elements']}"
    return kind


def _suboptions(spec: dict[str, Any]) -> str:
    """One sentence per suboption, appended to the parent's description."""
    parts = []
    for name, sub in (spec.get('options') or {}).items():
        flags = [_type(sub)]
        if sub.get('required'):
            flags.append('required')
        if 'default' in sub:
            flags.append(f"default {_code(sub['default'])}")
        parts.append(f"`{name}` ({', '.join(flags)}): {_description(sub)}")
    return (' Item keys: ' + ' '.join(parts)) if parts else ''


def option_row(name: str, spec: dict[str, Any], seen_in: str | None = None) -> str:
    """One table row; `seen_in` names an earlier entry point documenting the identical option."""
    required = bool(spec.get('required'))
    default = '' if required or 'default' not in spec else _code(spec['default'])
    if seen_in:
        cells = [f'`{name}`', _cell(_type(spec)), default, 'yes' if required else 'no',
                 f'As in entry point `{seen_in}`.']
        return '| ' + ' | '.join(cells) + ' |'
    extras = []
    if spec.get('choices'):
        extras.append('Choices: ' + ', '.join(_code(choice) for choice in spec['choices']) + '.')
    if spec.get('no_log'):
        extras.append('Secret: never logged (no_log).')
    description = ' '.join([_description(spec) + _suboptions(spec)] + extras)
    cells = [f'`{name}`', _cell(_type(spec)), default, 'yes' if required else 'no', _cell(description)]
    return '| ' + ' | '.join(cells) + ' |'


def render_entry_point(name: str, spec: dict[str, Any], heading: bool,
                       seen: dict[str, tuple[str, Any]] | None = None) -> list[str]:
    """Markdown for one entry point; `seen` maps option names already documented to (entry point, spec)."""
    seen = {} if seen is None else seen
    lines = []
    if heading:
        lines += [f'### Entry point `{name}`', '']
        if spec.get('short_description'):
            lines += [_cell(spec['short_description']), '']
    options = spec.get('options') or {}
    if not options:
        return lines + ['No options.', '']
    lines += ['| Variable | Type | Default | Required | Description |', '| --- | --- | --- | --- | --- |']
    for option, option_spec in options.items():
        earlier = seen.get(option)
        same = earlier is not None and earlier[1] == option_spec
        lines.append(option_row(option, option_spec, earlier[0] if same else None))
        if not same:
            seen[option] = (name, option_spec)
    return lines + ['']


def render(role_dir: Path) -> str:
    """The generated block for one role, markers excluded."""
    specs = load_specs(role_dir)
    entry_points = _ordered_entry_points(specs)
    headings = entry_points != ['main']
    lines = ['<!-- Generated by scripts/role_docs.py from meta/argument_specs.yml; do not edit by hand. -->', '']
    seen: dict[str, tuple[str, Any]] = {}
    for entry_point in entry_points:
        lines += render_entry_point(entry_point, specs[entry_point] or {}, headings, seen)
    return '\n'.join(lines).rstrip('\n') + '\n'


def _split(readme: Path) -> tuple[str, str, str]:
    text = readme.read_text(encoding='utf-8')
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < 0 or end < start or text.count(BEGIN) != 1 or text.count(END) != 1:
        raise DocsError(f'{readme}: needs exactly one {BEGIN} ... {END} pair')
    return text[:start + len(BEGIN)], text[start + len(BEGIN):end], text[end:]


def updated_readme(role_dir: Path) -> tuple[str, str]:
    """(current README text, README text with a freshly generated variables block)."""
    readme = role_dir / 'README.md'
    if not readme.is_file():
        raise DocsError(f'{readme}: missing')
    head, _middle, tail = _split(readme)
    current = readme.read_text(encoding='utf-8')
    return current, f'{head}\n{render(role_dir)}{tail}'


def role_dirs(roles_dir: Path = ROLES_DIR) -> list[Path]:
    """Every role with an argument spec."""
    return sorted(path.parent.parent for path in roles_dir.glob('*/meta/argument_specs.yml'))


def check(dirs: Iterable[Path] | None = None) -> list[str]:
    """Problems found: one line per README that is missing, malformed or out of date. Empty: all current."""
    problems = []
    for role_dir in (role_dirs() if dirs is None else dirs):
        try:
            current, wanted = updated_readme(role_dir)
        except (DocsError, OSError, yaml.YAMLError) as err:
            problems.append(str(err))
            continue
        if current != wanted:
            problems.append(f'{role_dir / "README.md"}: variables section is out of date; '
                            'run python scripts/role_docs.py')
    return problems


def write(dirs: Iterable[Path] | None = None) -> list[Path]:
    """Rewrite out-of-date READMEs; returns the ones changed."""
    changed = []
    for role_dir in (role_dirs() if dirs is None else dirs):
        current, wanted = updated_readme(role_dir)
        if current != wanted:
            (role_dir / 'README.md').write_text(wanted, encoding='utf-8')
            changed.append(role_dir / 'README.md')
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--check', action='store_true', help='exit 1 when a README is out of date; change nothing')
    parser.add_argument('roles', nargs='*', type=Path, help='role directories (default: every roles/* with argument specs)')
    args = parser.parse_args(argv)
    dirs = [path.resolve() for path in args.roles] or None
    if args.check:
        problems = check(dirs)
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    try:
        changed = write(dirs)
    except (DocsError, OSError, yaml.YAMLError) as err:
        print(err, file=sys.stderr)
        return 1
    for path in changed:
        print(f'updated {path}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
