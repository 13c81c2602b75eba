# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which packages a host lacks, from its installed packages as ansible.builtin.package_facts gives them (standard
library only).

The roles read the installed packages once per host and run (common's packages_read) and compare each role's list
with them (`missing`), so that a role whose packages are all there skips the package manager; an install that
succeeded adds what it installed (`added`). Entries are written as apt takes them: ``name``, ``name:arch``,
``name=version``, ``name:arch=version``.
"""

from __future__ import annotations

import typing as t


class PackagesError(ValueError):
    """A package list or installed packages that are not what package_facts and apt take."""


def missing(wanted: t.Iterable[str], installed: t.Mapping[str, t.Any], version: str | None = None) -> list[str]:
    """The entries of `wanted` that `installed` (package_facts' structure) lacks, in their order, each once.

    An entry is a package name, optionally with an architecture (``name:arch``) and/or a version (``name=version``,
    ``name:arch=version``) as apt takes them; `version`, when given, is the version every entry without its own must
    be installed at. An entry counts as installed when one of the installed instances of its name matches all it
    names. Raises PackagesError for an entry that is not a non-empty string and for an `installed` that is not a
    mapping of names to lists of packages."""
    if isinstance(wanted, (str, bytes)) or not isinstance(wanted, t.Iterable):
        raise PackagesError(f'the packages to look for must be a list of names, not {type(wanted).__name__}')
    if not isinstance(installed, t.Mapping):
        raise PackagesError(f'the installed packages must be a mapping of names (package facts), not {type(installed).__name__}')
    result: list[str] = []
    for entry in wanted:
        if not isinstance(entry, str) or not entry.strip():
            raise PackagesError(f'{entry!r} in the packages to look for is not a package name')
        if entry in result:
            continue
        spec, pinned = entry.partition('=')[::2]
        name, arch = spec.partition(':')[::2]
        want_version = pinned or version
        instances = installed.get(name) or []
        if not isinstance(instances, t.Sequence) or isinstance(instances, (str, bytes)):
            raise PackagesError(f'the installed packages list {name!r} as {type(instances).__name__}, not a list of packages')
        if not any(_matches(instance, arch, want_version) for instance in instances):
            result.append(entry)
    return result


def added(installed: t.Mapping[str, t.Any], wanted: t.Iterable[str]) -> dict[str, list[dict[str, t.Any]]]:
    """`installed` (package_facts' structure) with the entries of `wanted` that it lacks added, as a package install
    that just succeeded leaves them; a new mapping, `installed` is not changed.

    An entry (``name``, ``name:arch``, ``name=version``, ``name:arch=version``) replaces the instances of its name
    with one of the architecture and version it names, or empty strings for those it does not name: a later
    `missing` that asks for a particular architecture or version then finds it missing (and the install runs,
    finding nothing to do), never present when it is not. Raises PackagesError as `missing` does."""
    new = missing(wanted, installed)
    result = {name: list(instances) for name, instances in installed.items()}
    for entry in new:
        spec, version = entry.partition('=')[::2]
        name, arch = spec.partition(':')[::2]
        result[name] = [{'name': name, 'version': version, 'arch': arch, 'source': 'apt'}]
    return result


def _matches(instance: t.Any, arch: str, version: str | None) -> bool:
    """Whether one installed instance (a package_facts entry) has the architecture and version asked for, if any."""
    if not isinstance(instance, t.Mapping):
        return False
    if arch and instance.get('arch') not in (arch, 'all'):
        return False
    return not version or str(instance.get('version')) == version
