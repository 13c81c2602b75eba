# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The systemd units that go with a role's files: what `systemctl show` says of them and the `systemctl` steps that
make them enabled, running, stopped or masked as asked. No Ansible import: config_files runs the commands."""

from __future__ import annotations

import re

# What is read of every unit, in one `systemctl show` for all of them.
SHOW_PROPERTIES = ('Id', 'LoadState', 'UnitFileState', 'ActiveState', 'NeedDaemonReload')
# `systemctl is-enabled` exits 0 for these (systemctl(1)): nothing to enable.
ENABLED = frozenset({'enabled', 'enabled-runtime', 'alias', 'static', 'indirect', 'generated', 'transient'})
# What `systemctl disable` undoes.
DISABLE = frozenset({'enabled', 'enabled-runtime', 'linked', 'linked-runtime'})
MASKED = frozenset({'masked', 'masked-runtime'})
RUNNING = frozenset({'active', 'activating', 'reloading', 'refreshing'})
# A file written or removed below one of these is a unit or a drop-in: systemd reloads before the units are asked.
UNIT_DIRECTORIES = ('/etc/systemd/system/', '/run/systemd/system/', '/usr/local/lib/systemd/system/',
                    '/usr/lib/systemd/system/', '/lib/systemd/system/')
# The order of the steps: a unit is unmasked before it is enabled or started, masked before it is stopped.
VERBS = ('unmask', 'enable', 'disable', 'mask', 'start', 'stop')
_SUFFIXES = ('.service', '.socket', '.timer', '.target', '.path', '.mount', '.automount', '.swap', '.slice', '.scope')
_NAME = re.compile(r'^[A-Za-z0-9:_.\\@-]+$')


class UnitError(ValueError):
    """Input or `systemctl` output that cannot be acted on; the message names the field or the unit."""


def unit_name(name: str, field: str) -> str:
    """The unit's full name (`.service` added when it has no unit suffix); refuses what systemctl would read as an
    option or a path."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name.startswith('-'):
        raise UnitError(f"{field}: '{name}' is not a systemd unit name")
    return name if name.endswith(_SUFFIXES) else f'{name}.service'


def check_wanted(services: list[dict]) -> list[dict]:
    """The services option with full unit names; refuses contradictions (masked and enabled or started) and a unit
    listed twice."""
    wanted, seen = [], {}
    for index, entry in enumerate(services):
        field = f'services[{index}]'
        name = unit_name(entry.get('name'), f'{field}.name')
        if name in seen:
            raise UnitError(f'{field}.name: {name} is already services[{seen[name]}]')
        seen[name] = index
        masked, enabled, state = entry.get('masked'), entry.get('enabled'), entry.get('state')
        if masked and (enabled or state == 'started'):
            raise UnitError(f'{field}: {name} cannot be masked and {"enabled" if enabled else "started"}')
        if masked is None and enabled is None and state is None:
            raise UnitError(f'{field}: {name} needs one of enabled, state, masked')
        wanted.append({'name': name, 'field': field, 'masked': masked, 'enabled': enabled, 'state': state})
    return wanted


def parse_show(text: str, names: list[str]) -> dict[str, dict[str, str]]:
    """`systemctl show --property=... -- <names>` output: one block of KEY=value lines per unit, in the order asked,
    blocks separated by an empty line. The properties of each name."""
    blocks, current = [], {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
                current = {}
            continue
        key, sep, value = line.partition('=')
        if not sep:
            raise UnitError(f"systemctl show: unexpected line '{line}'")
        current[key] = value
    if current:
        blocks.append(current)
    if len(blocks) != len(names):
        raise UnitError(f'systemctl show: {len(blocks)} blocks for {len(names)} units ({", ".join(names)})')
    return dict(zip(names, blocks))


def needs_reload(states: dict[str, dict[str, str]], changed_paths: list[str]) -> bool:
    """Whether systemd must reload its units first: a unit file or drop-in among `changed_paths`, or a unit that says
    its file changed on disk."""
    return (any(path.startswith(UNIT_DIRECTORIES) for path in changed_paths)
            or any(state.get('NeedDaemonReload') == 'yes' for state in states.values()))


def plan(wanted: list[dict], states: dict[str, dict[str, str]], check_mode: bool) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """The `systemctl` steps, in the order of VERBS, each with its units in the order of `wanted`; and the units
    that change. A unit systemd does not know (LoadState not-found) fails unless in check mode, where an earlier step
    (a package, a unit file) would have brought it."""
    steps = {verb: [] for verb in VERBS}
    changed = []
    for entry in wanted:
        name = entry['name']
        state = states[name]
        if state.get('LoadState') == 'not-found' and not check_mode and (entry['enabled'] or entry['state'] == 'started'):
            raise UnitError(f"{entry['field']}.name: systemd has no unit {name} on this host (LoadState not-found)")
        file_state = state.get('UnitFileState', '')
        running = state.get('ActiveState', '') in RUNNING
        verbs = []
        if entry['masked'] is True and file_state not in MASKED:
            verbs.append('mask')
        unmasked = entry['masked'] is False and file_state in MASKED
        if unmasked:
            verbs.append('unmask')
        # After an unmask the unit's enablement is what it was before the mask: enable again when asked.
        if entry['enabled'] is True and (unmasked or file_state not in ENABLED):
            verbs.append('enable')
        if entry['enabled'] is False and file_state in DISABLE:
            verbs.append('disable')
        if entry['state'] == 'started' and not running:
            verbs.append('start')
        if entry['state'] == 'stopped' and running:
            verbs.append('stop')
        for verb in verbs:
            steps[verb].append(name)
        if verbs:
            changed.append(name)
    return [(verb, steps[verb]) for verb in VERBS if steps[verb]], changed
