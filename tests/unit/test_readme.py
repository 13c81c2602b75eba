# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""README stays a user's manual: short, its figures traceable to bench/RESULTS.md, its links and the docs' alive."""

from __future__ import annotations

import pathlib
import re

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
README = REPO / 'README.md'
RESULTS = REPO / 'bench' / 'RESULTS.md'
MARKDOWN = [README, RESULTS, *sorted((REPO / 'docs').glob('*.md'))]
LINK = re.compile(r'\]\(([^)#\s]+)(?:#[^)]*)?\)')
DECIMAL = re.compile(r'\d+\.\d+')


def section(text: str, title: str) -> str:
    return text.split(f'\n## {title}\n', 1)[1].split('\n## ', 1)[0]


def test_readme_is_short():
    assert len(README.read_text(encoding='utf-8').splitlines()) <= 400, 'README: move depth into docs/'


def test_every_speed_figure_has_its_entry_in_bench_results():
    table = section(README.read_text(encoding='utf-8'), 'Speed and scale')
    results = RESULTS.read_text(encoding='utf-8')
    rows = [line.split(' | ') for line in table.splitlines() if line.startswith('| ') and ' --- ' not in line][1:]
    assert rows, 'README: "Speed and scale" has no table'
    for row in rows:
        what, figure, command = row[0].lstrip('| '), row[1], row[2]
        missing = [number for number in DECIMAL.findall(figure) if number not in results]
        assert not missing, f'README figure(s) {missing} for "{what}" are not in bench/RESULTS.md'
        script = re.search(r'bench/(bench_\w+\.py)', command)
        assert script and (REPO / 'bench' / script.group(1)).is_file(), f'README: no bench script for "{what}"'


@pytest.mark.parametrize('page', MARKDOWN, ids=lambda page: str(page.relative_to(REPO)))
def test_relative_links_resolve(page):
    targets = LINK.findall(page.read_text(encoding='utf-8'))
    broken = [target for target in targets
              if '://' not in target and not (page.parent / target).resolve().exists()]
    assert not broken, f'{page.relative_to(REPO)}: links to missing {broken}'
