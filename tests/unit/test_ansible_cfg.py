# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The site's ansible.cfg (ansible.cfg.example, which README has users copy) runs as fast as the checkout's."""

from __future__ import annotations

import configparser
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The settings docs/scale.md describes; a site without them runs slower than bench/RESULTS.md says.
SPEED = {
    ('defaults', 'forks'): '50',
    ('defaults', 'gathering'): 'smart',
    ('defaults', 'inject_facts_as_vars'): 'False',
    ('connection', 'pipelining'): 'True',
    ('ssh_connection', 'pipelining'): 'True',
}


def read(name):
    config = configparser.ConfigParser(interpolation=None)
    assert config.read(REPO / name, encoding='utf-8') == [str(REPO / name)]
    return config


def test_the_site_config_and_the_checkout_config_have_the_speed_settings():
    for name in ('ansible.cfg', 'ansible.cfg.example'):
        config = read(name)
        found = {key: config.get(*key, fallback=None) for key in SPEED}
        assert found == SPEED, name


def test_the_site_config_names_the_inventory_readme_copies_and_ships():
    config = read('ansible.cfg.example')
    assert config.get('defaults', 'inventory') == 'inventories/mycluster'
    readme = (REPO / 'README.md').read_text(encoding='utf-8')
    assert 'llmforge/cluster/ansible.cfg.example ansible.cfg' in readme
    assert 'inventories/example inventories/mycluster' in readme
    ignored = (REPO / 'galaxy.yml').read_text(encoding='utf-8')
    assert '  - ansible.cfg.example' not in ignored
