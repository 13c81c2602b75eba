# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A stand-in for systemctl in unit tests: units and their states in the JSON file $FAKE_SYSTEMCTL_STATE, every call
appended to $FAKE_SYSTEMCTL_LOG. Knows show, daemon-reload, enable, disable, mask, unmask, start and stop."""

from __future__ import annotations

import json
import os
import sys

EFFECT = {'enable': ('UnitFileState', 'enabled'), 'disable': ('UnitFileState', 'disabled'),
          'mask': ('UnitFileState', 'masked'), 'unmask': ('UnitFileState', 'disabled'),
          'start': ('ActiveState', 'active'), 'stop': ('ActiveState', 'inactive')}


def main() -> int:
    state_file = os.environ['FAKE_SYSTEMCTL_STATE']
    with open(state_file, encoding='utf-8') as stream:
        units = json.load(stream)
    with open(os.environ['FAKE_SYSTEMCTL_LOG'], 'a', encoding='utf-8') as stream:
        stream.write(' '.join(sys.argv[1:]) + '\n')
    verb, args = sys.argv[1], [arg for arg in sys.argv[2:] if not arg.startswith('-')]
    if verb == 'show':
        properties = next(arg for arg in sys.argv if arg.startswith('--property=')).split('=', 1)[1].split(',')
        blocks = []
        for name in args:
            unit = units.get(name, {'LoadState': 'not-found', 'UnitFileState': '', 'ActiveState': 'inactive'})
            values = dict({'Id': name, 'NeedDaemonReload': 'no'}, **unit)
            blocks.append('\n'.join(f'{key}={values.get(key, "")}' for key in properties) + '\n')
        sys.stdout.write('\n'.join(blocks))
        return 0
    if verb == 'daemon-reload':
        for unit in units.values():
            unit['NeedDaemonReload'] = 'no'
    elif verb in EFFECT:
        for name in args:
            if name not in units and verb != 'mask':
                sys.stderr.write(f'Failed to {verb} unit: Unit file {name} does not exist.\n')
                return 1
            if units.get(name, {}).get(f'fail_{verb}'):
                sys.stderr.write(f'Job for {name} failed because the control process exited with error code.\n')
                return 1
            key, value = EFFECT[verb]
            units.setdefault(name, {'LoadState': 'masked', 'ActiveState': 'inactive'})[key] = value
    else:
        sys.stderr.write(f'unknown verb {verb}\n')
        return 1
    with open(state_file, 'w', encoding='utf-8') as stream:
        json.dump(units, stream)
    return 0


if __name__ == '__main__':
    sys.exit(main())
