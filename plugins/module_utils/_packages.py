# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The installed packages of a Debian host, read from dpkg-query's output (standard library only).

`QUERY` is the command the roles run; `parse` turns its output into the structure of Ansible's package_facts
(``{name: [{'name', 'version', 'arch', 'source'}]}``), so that the code that reads ``common_installed_packages``
reads either. dpkg-query starts in a fraction of the time package_facts needs to open apt's cache.
"""

from __future__ import annotations

import typing as t

# One line per package dpkg knows: the abbreviated status (desired, current, error), name, version, architecture.
# dpkg-query expands the backslash-n itself.
QUERY = ['dpkg-query', '--show', '--showformat=${db:Status-Abbrev} ${Package} ${Version} ${Architecture}\\n']


# The first letter of the abbreviated status, the package's selection, as dpkg-query's ${db:Status-Want} names it.
SELECTIONS = {'u': 'unknown', 'i': 'install', 'h': 'hold', 'r': 'deinstall', 'p': 'purge'}


class DpkgError(ValueError):
    """A line that is not what QUERY prints."""


def parse(text: str) -> dict[str, list[dict[str, t.Any]]]:
    """The fully installed packages (current status 'i') of dpkg-query's output, by name, as package_facts gives them.

    Packages only known to dpkg (removed with their configuration left, half-installed, unpacked but not
    configured) are left out: an install of them must run. Each entry also has its dpkg selection ('install',
    'hold', ...; apt-mark sets it), which package_facts does not give. Raises DpkgError naming the line for any other
    line."""
    packages: dict[str, list[dict[str, t.Any]]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) != 4 or len(fields[0]) not in (2, 3):
            raise DpkgError(f"line {number}: {line!r} is not '<status> <package> <version> <architecture>'")
        status, name, version, arch = fields
        if status[1] != 'i':
            continue
        packages.setdefault(name, []).append({'name': name, 'version': version, 'arch': arch, 'source': 'apt',
                                              'selection': SELECTIONS.get(status[0], 'unknown')})
    return packages


def selections(names: t.Iterable[str], installed: t.Mapping[str, t.Any]) -> list[str] | None:
    """'<name> <selection>' of each installed instance of `names`, sorted, as dpkg-query prints them with
    '${Package} ${db:Status-Want}' (common's hold step), from installed packages `parse` read.

    None when that list cannot tell: a name it does not have (not installed when it was read), or entries without a
    selection (package_facts')."""
    if isinstance(names, (str, bytes)) or not isinstance(names, t.Iterable):
        raise DpkgError(f'the packages must be a list of names, not {type(names).__name__}')
    if not isinstance(installed, t.Mapping):
        raise DpkgError(f'the installed packages must be a mapping of names, not {type(installed).__name__}')
    lines = []
    for name in names:
        instances = installed.get(name)
        if not isinstance(instances, t.Sequence) or isinstance(instances, (str, bytes)) or not instances:
            return None
        for instance in instances:
            if not isinstance(instance, t.Mapping) or not instance.get('selection'):
                return None
            lines.append(f"{name} {instance['selection']}")
    return sorted(lines)


def missing(wanted: t.Iterable[str], installed: t.Mapping[str, t.Any], version: str | None = None) -> list[str]:
    """The entries of `wanted` that `installed` (package_facts' structure) lacks, in their order, each once.

    An entry is a package name, optionally with an architecture (``name:arch``) and/or a version (``name=version``,
    ``name:arch=version``) as apt takes them; `version`, when given, is the version every entry without its own must
    be installed at. An entry counts as installed when one of the installed instances of its name matches all it
    names. Raises DpkgError for an entry that is not a non-empty string and for an `installed` that is not a
    mapping of names to lists of packages."""
    if isinstance(wanted, (str, bytes)) or not isinstance(wanted, t.Iterable):
        raise DpkgError(f'the packages to look for must be a list of names, not {type(wanted).__name__}')
    if not isinstance(installed, t.Mapping):
        raise DpkgError(f'the installed packages must be a mapping of names (package facts), not {type(installed).__name__}')
    result: list[str] = []
    for entry in wanted:
        if not isinstance(entry, str) or not entry.strip():
            raise DpkgError(f'{entry!r} in the packages to look for is not a package name')
        if entry in result:
            continue
        spec, pinned = entry.partition('=')[::2]
        name, arch = spec.partition(':')[::2]
        want_version = pinned or version
        instances = installed.get(name) or []
        if not isinstance(instances, t.Sequence) or isinstance(instances, (str, bytes)):
            raise DpkgError(f'the installed packages list {name!r} as {type(instances).__name__}, not a list of packages')
        if not any(_matches(instance, arch, want_version) for instance in instances):
            result.append(entry)
    return result


def added(installed: t.Mapping[str, t.Any], wanted: t.Iterable[str]) -> dict[str, list[dict[str, t.Any]]]:
    """`installed` (package_facts' structure) with the entries of `wanted` that it lacks added, as a package install
    that just succeeded leaves them; a new mapping, `installed` is not changed.

    An entry (``name``, ``name:arch``, ``name=version``, ``name:arch=version``) replaces the instances of its name
    with one of the architecture and version it names, or empty strings for those it does not name: a later
    `missing` that asks for a particular architecture or version then finds it missing (and the install runs,
    finding nothing to do), never present when it is not. The new instances have no selection, so `selections`
    cannot tell for them. Raises DpkgError as `missing` does."""
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
