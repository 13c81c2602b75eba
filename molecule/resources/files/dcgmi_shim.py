#!/usr/bin/env python3
# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test stand-in for `dcgmi diag` in containers without GPUs: replays a chosen `dcgmi diag -j` fixture.

Install it as `dcgmi` (copy it with mode 0755, or a wrapper `exec python3 .../dcgmi_shim.py "$@"`) and put the
fixtures of tests/fixtures/dcgm/ (*.json, *.txt and exit_codes.json) in a fixture directory, the first found of:
  1. $DCGMI_SHIM_FIXTURES
  2. <state directory>/dcgm-fixtures
  3. dcgm-fixtures/ beside this file (after following symlinks)
The state directory is $DCGMI_SHIM_STATE, default /etc/llmforge-sim.

Which fixture a level replays: the file <state directory>/dcgmi-diag-<level> (level 1-4) holds a fixture name
(`l1-fail`, or with its extension) and optionally an exit status (`l3-fail 226`), or `hang`. Without that file a
level replays `l<level>-pass`. `hang` sleeps until killed, so that a caller's timeout is what ends it.

Exit status, as real dcgmi: the one on the selection line, else the fixture's entry in exit_codes.json, else 0 for
results without a failure and 226 (DCGM_ST_NVVS_ERROR) for results with one. 205 is DCGM_ST_NVVS_ISOLATE_ERROR,
235 DCGM_ST_CONNECTION_NOT_VALID (-21 as an 8-bit status).

Command line: `dcgmi diag -r|--run <1-4|quick|short|medium|long|xlong> -j|--json [-i|--entity-id|--gpuList
0,1,...]`; -v/--verbose and --fail-early are accepted, --host, -g/--group, --timeout, -p/--parameters and
-c/--configfile take a value that is ignored. `-i` keeps only the results of those GPUs. Without -j: exit 2 (only
JSON is simulated); a named test instead of a level, or anything else: a message on stderr and exit 2.
When $DCGMI_SHIM_LOG is set, each call appends its arguments as one line to that file.
"""

import json
import os
import sys
import time

LEVEL_NAMES = {'1': 1, '2': 2, '3': 3, '4': 4, 'quick': 1, 'short': 1, 'medium': 2, 'long': 3, 'xlong': 4}
VALUE_FLAGS = {'--host', '-g', '--group', '--timeout', '-p', '--parameters', '-c', '--configfile'}
BOOL_FLAGS = {'-v', '--verbose', '--fail-early'}
NVVS_ERROR = 226


def usage(message):
    sys.stderr.write(f'dcgmi_shim: {message}\n')
    return 2


def parse_args(argv):
    """(level, gpu list or None) from `diag ...` arguments; ValueError with the message for stderr."""
    if not argv or argv[0] != 'diag':
        raise ValueError(f"only 'dcgmi diag' is simulated, got {' '.join(argv) or 'no arguments'}")
    level, gpus, as_json = None, None, False
    args = iter(argv[1:])
    for arg in args:
        if arg in ('-r', '--run'):
            value = next(args, '')
            if value.lower() not in LEVEL_NAMES:
                raise ValueError(f'-r {value!r}: only levels 1-4 (quick, short, medium, long, xlong) are simulated')
            level = LEVEL_NAMES[value.lower()]
        elif arg in ('-j', '--json'):
            as_json = True
        elif arg in ('-i', '--entity-id', '--gpuList'):
            value = next(args, '')
            try:
                gpus = sorted({int(part) for part in value.split(',') if part.strip()})
            except ValueError:
                raise ValueError(f'-i {value!r}: a comma-separated list of GPU indices is simulated') from None
        elif arg in VALUE_FLAGS:
            next(args, None)
        elif arg not in BOOL_FLAGS:
            raise ValueError(f'unknown argument {arg!r}')
    if level is None:
        raise ValueError('-r <level> is required')
    if not as_json:
        raise ValueError('only JSON output (-j) is simulated')
    return level, gpus


def state_dir():
    return os.environ.get('DCGMI_SHIM_STATE') or '/etc/llmforge-sim'


def fixture_dir():
    for candidate in (os.environ.get('DCGMI_SHIM_FIXTURES'), os.path.join(state_dir(), 'dcgm-fixtures'),
                      os.path.join(os.path.dirname(os.path.realpath(__file__)), 'dcgm-fixtures')):
        if candidate and os.path.isdir(candidate):
            return candidate
    raise FileNotFoundError('no fixture directory: set DCGMI_SHIM_FIXTURES or create '
                            f"{os.path.join(state_dir(), 'dcgm-fixtures')}")


def selection(level):
    """(fixture name or 'hang', exit status or None) for a level."""
    path = os.path.join(state_dir(), f'dcgmi-diag-{level}')
    try:
        with open(path, encoding='utf-8') as handle:
            words = handle.read().split()
    except FileNotFoundError:
        return f'l{level}-pass', None
    if not words or len(words) > 2:
        raise ValueError(f'{path} must hold a fixture name and optionally an exit status, got {words!r}')
    if len(words) == 2 and not words[1].isdigit():
        raise ValueError(f'{path}: the exit status must be a number, got {words[1]!r}')
    return words[0], (int(words[1]) if len(words) == 2 else None)


def fixture_path(directory, name):
    if '/' in name or name.startswith('.'):
        raise ValueError(f'fixture names are plain file names, got {name!r}')
    for candidate in (name, name + '.json', name + '.txt'):
        path = os.path.join(directory, candidate)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f'fixture {name!r} not found in {directory}')


def only_gpus(text, gpus):
    """The document without the results of other GPUs, printed again (tab-indented, not jsoncpp's exact layout)."""
    document = json.loads(text)
    for root_key in ('DCGM Diagnostic', 'DCGM GPU Diagnostic'):
        for category in (document.get(root_key) or {}).get('test_categories') or []:
            for test in (category or {}).get('tests') or []:
                if test and isinstance(test.get('results'), list):
                    test['results'] = [result for result in test['results'] if keep(result, gpus)]
    for group in document.get('entity_groups') or []:
        if group.get('entity_group') == 'GPU':
            group['entities'] = [entity for entity in group.get('entities', []) if entity.get('entity_id') in gpus]
    return json.dumps(document, indent='\t', sort_keys=True) + '\n'


def keep(result, gpus):
    if 'entity_id' in result:
        return result.get('entity_group', 'GPU') != 'GPU' or result['entity_id'] in gpus
    gpu = result.get('gpu_id', result.get('gpu_ids'))
    return gpu is None or ',' in str(gpu) or int(gpu) in gpus


def exit_status(directory, path, text, explicit):
    if explicit is not None:
        return explicit
    name = os.path.splitext(os.path.basename(path))[0]
    try:
        with open(os.path.join(directory, 'exit_codes.json'), encoding='utf-8') as handle:
            codes = json.load(handle)
    except FileNotFoundError:
        codes = {}
    if name in codes:
        return int(codes[name])
    return NVVS_ERROR if '"Fail"' in text else 0


def main(argv):
    log = os.environ.get('DCGMI_SHIM_LOG')
    if log:
        with open(log, 'a', encoding='utf-8') as handle:
            handle.write(' '.join(argv) + '\n')
    try:
        level, gpus = parse_args(argv)
        name, explicit = selection(level)
        if name == 'hang':
            while True:
                time.sleep(3600)
        directory = fixture_dir()
        path = fixture_path(directory, name)
    except (ValueError, FileNotFoundError) as err:
        return usage(str(err))
    with open(path, encoding='utf-8') as handle:
        text = handle.read()
    rc = exit_status(directory, path, text, explicit)
    if gpus is not None and path.endswith('.json') and 'test_categories' in text:
        text = only_gpus(text, set(gpus))
    sys.stdout.write(text)
    sys.stdout.flush()
    return rc


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
