# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build a Python virtual environment from a hash-checked pip lock, all or nothing (standard library only).

The venv_from_lock module calls ``build``. An environment is complete once its marker file exists; the marker is
written last, through a rename, so a directory without one is what an interrupted build left, and it is removed and
built again from scratch. When creating the environment or installing the lock fails, the new directory is removed
and ``BuildError`` says why, with the last lines pip printed; nothing outside the directory (a link to the
environment in use, other environments beside it) is touched.
"""

from __future__ import annotations

import json
import os
import shutil
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils import _proc

LOCK_FILE = 'llmforge-lock.txt'
MARKER_FILE = 'llmforge-env.json'
# Lines of pip's output a failure message quotes: enough for "No matching distribution" or a hash mismatch.
TAIL_LINES = 6


class BuildError(Exception):
    """The environment could not be built; the half-built directory was removed."""


class Settings(t.NamedTuple):
    path: str
    lock: str = ''
    python: str = '/usr/bin/python3'
    system_site_packages: bool = False
    wheelhouse: str = ''
    index_url: str = ''
    marker: t.Mapping[str, t.Any] = {}
    timeout: float = 3600.0


def marker_path(path: str) -> str:
    return os.path.join(path, MARKER_FILE)


def is_complete(path: str) -> bool:
    """The environment at `path` was built to the end (its marker exists)."""
    return os.path.isfile(marker_path(path))


def settings_problems(settings: Settings) -> list[str]:
    """What is wrong with the settings, each naming the option; empty when the build may start."""
    problems = []
    if not settings.path.startswith('/') or os.path.normpath(settings.path) in ('/', '//'):
        problems.append(f'path must be an absolute directory other than /, got {settings.path!r}')
    if not settings.python.startswith('/'):
        problems.append(f'python must be the absolute path of an interpreter, got {settings.python!r}')
    if settings.wheelhouse and not settings.wheelhouse.startswith('/'):
        problems.append(f'wheelhouse must be an absolute directory, got {settings.wheelhouse!r}')
    if settings.timeout <= 0:
        problems.append(f'timeout must be positive, got {settings.timeout:g}')
    return problems


def pip_source(settings: Settings) -> list[str]:
    """pip's options for where the packages come from: the wheelhouse only, else the index, else pip's own config."""
    if settings.wheelhouse:
        return ['--no-index', '--find-links', settings.wheelhouse]
    if settings.index_url:
        return ['--index-url', settings.index_url]
    return []


def source_text(settings: Settings) -> str:
    if settings.wheelhouse:
        return f'the wheelhouse {settings.wheelhouse}'
    if settings.index_url:
        return f'the index {settings.index_url}'
    return "the node's configured index"


def has_requirements(lock: str) -> bool:
    return any(line.strip() and not line.lstrip().startswith('#') for line in lock.splitlines())


def build(settings: Settings) -> None:
    """Build the environment at settings.path from scratch and write its marker last; BuildError on failure."""
    path = settings.path.rstrip('/')
    parent = os.path.dirname(path)
    old_umask = os.umask(0o022)
    try:
        _remove(path)
        _make_parent(parent)
        try:
            _create(path, settings)
        except BaseException:
            _remove(path)
            raise
    finally:
        os.umask(old_umask)


def _create(path: str, settings: Settings) -> None:
    venv = [settings.python, '-m', 'venv'] + (['--system-site-packages'] if settings.system_site_packages else [])
    _run(venv + [path], settings.timeout, f'{settings.python} -m venv could not create {path}')
    lock_file = os.path.join(path, LOCK_FILE)
    with open(lock_file, 'w', encoding='utf-8') as handle:
        handle.write(settings.lock)
    if has_requirements(settings.lock):
        pip = [os.path.join(path, 'bin', 'python'), '-m', 'pip', 'install', '--require-hashes', '--no-input',
               '--disable-pip-version-check', '--no-cache-dir', '--only-binary=:all:']
        _run(pip + pip_source(settings) + ['--requirement', lock_file], settings.timeout,
             f'pip could not install the lock from {source_text(settings)}')
    marker = marker_path(path)
    with open(marker + '.tmp', 'w', encoding='utf-8') as handle:
        handle.write(json.dumps(dict(settings.marker), indent=4, sort_keys=True) + '\n')
    os.replace(marker + '.tmp', marker)


def _run(argv: list[str], timeout: float, what: str) -> None:
    try:
        done = _proc.run(argv, timeout)
    except _proc.CommandError as err:
        raise BuildError(f'{what}: {err}') from None
    if done.rc != 0:
        output = (done.stderr.strip() or done.stdout.strip()).splitlines()[-TAIL_LINES:]
        raise BuildError(f'{what} (exit status {done.rc}): {" | ".join(output) or "no output"}')


def _make_parent(parent: str) -> None:
    """The environments' directory, made when missing; root's and 0755 when run as root, as the build leaves it."""
    os.makedirs(parent, mode=0o755, exist_ok=True)
    if os.geteuid() == 0:
        os.chown(parent, 0, 0)
        os.chmod(parent, 0o755)


def _remove(path: str) -> None:
    if os.path.islink(path) or os.path.isfile(path):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)
