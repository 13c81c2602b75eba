# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The installed packages of a Debian host, read from dpkg-query's output (standard library only).

`QUERY` is the command the roles run; `parse` turns its output into the structure of Ansible's package_facts
(``{name: [{'name', 'version', 'arch', 'source'}]}``), so that the code that reads ``ansible_facts['packages']``
reads either. dpkg-query starts in a fraction of the time package_facts needs to open apt's cache.
"""

from __future__ import annotations

import typing as t

# One line per package dpkg knows: the abbreviated status (desired, current, error), name, version, architecture.
# dpkg-query expands the backslash-n itself.
QUERY = ['dpkg-query', '--show', '--showformat=${db:Status-Abbrev} ${Package} ${Version} ${Architecture}\\n']


class DpkgError(ValueError):
    """A line that is not what QUERY prints."""


def parse(text: str) -> dict[str, list[dict[str, t.Any]]]:
    """The fully installed packages (current status 'i') of dpkg-query's output, by name, as package_facts gives them.

    Packages only known to dpkg (removed with their configuration left, half-installed, unpacked but not
    configured) are left out: an install of them must run. Raises DpkgError naming the line for any other line."""
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
        packages.setdefault(name, []).append({'name': name, 'version': version, 'arch': arch, 'source': 'apt'})
    return packages
