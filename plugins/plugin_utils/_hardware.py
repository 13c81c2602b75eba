# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The per-host hardware description of the inventory, checked in one place.

The roles and playbooks read these variables of a host: gpu_profile, the node's entry in the GPU catalog
(module_utils/_gpu_catalog.py), from which gpu_type and gpu_count follow (slurm_controller's NodeName and gres.conf
lines, gpu_driver's open modules and Fabric Manager, slurm_node's device check) unless set, and then they must agree;
slurm_node's health check and validate.yml (gpu_profile, gpu_expected, rdma_expected), infiniband (node_index for IPoIB
addresses) and monitoring (monitoring_address for scrape targets). `problems` checks them all with the same rules the
code that reads them applies, so a wrong value stops the play before anything changes. Pure Python with no Ansible
import.
"""

from __future__ import annotations

import re
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils import _gpu_catalog, _gpu_topology, _rdma_links

VARIABLES = ('gpu_type', 'gpu_count', 'gpu_profile', 'gpu_expected', 'rdma_expected', 'node_index', 'monitoring_address')

# A host name or IPv4 address, or an IPv6 address in brackets: Prometheus scrapes <address>:<port>.
_ADDRESS = re.compile(r'^(?:[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?|\[[0-9A-Fa-f:.]+(?:%[A-Za-z0-9_.-]+)?\])$')


def set_variables(names: t.Iterable[t.Any]) -> list[str]:
    """The names among `names` that are hardware variables (VARIABLES), in the order of VARIABLES."""
    present = {str(name) for name in names}
    return [name for name in VARIABLES if name in present]


def problems(host: str, values: t.Mapping[str, t.Any]) -> list[str]:
    """What is wrong with a host's hardware variables, one sentence each naming the variable and the host.

    values holds the host's variables (at least those of VARIABLES it sets); unset and null values are not checked.
    """
    found: list[str] = []
    given = {name: values[name] for name in VARIABLES if name in values and values[name] is not None}

    _checked(found, _gpu_catalog.parse_gpu_type, host, given.get('gpu_type'))
    if 'gpu_count' in given:
        _checked(found, _gpu_catalog.parse_gpu_count, host, given['gpu_count'])
    profile = given.get('gpu_profile') or None
    if profile is not None and (not isinstance(profile, str) or profile not in _gpu_catalog.CATALOG):
        found.append(f"host '{host}': gpu_profile {profile!r} is not a profile of the GPU catalog; known profiles: "
                     f"{', '.join(_gpu_catalog.profiles())}")
    _gpu_expectation(found, host, profile if not found else None, given.get('gpu_expected'))
    if not found:
        # The catalog's rule: gpu_type and gpu_count follow gpu_profile (and gpu_expected's gpu_count), or agree.
        _checked(found, _gpu_catalog.node_gpus, host, given)
    _rdma_expectation(found, host, given.get('rdma_expected'))
    _node_index(found, host, given.get('node_index'))
    _monitoring_address(found, host, given.get('monitoring_address'))
    return found


def _checked(found: list[str], parse: t.Callable[[str, t.Any], t.Any], host: str, value: t.Any) -> t.Any:
    """parse(host, value), or None with its message added to found."""
    try:
        return parse(host, value)
    except ValueError as err:
        found.append(str(err))
        return None


def _gpu_expectation(found: list[str], host: str, profile: t.Optional[str], expected: t.Any) -> None:
    if expected is not None and not isinstance(expected, t.Mapping):
        found.append(f"host '{host}': gpu_expected must be a mapping of gpu_topology expectations, got {expected!r}")
        return
    try:
        _gpu_topology.resolve_expectation(profile, expected)
    except _gpu_topology.GpuTopologyError as err:
        found.append(f"host '{host}': gpu_expected: {err}")


def _rdma_expectation(found: list[str], host: str, expected: t.Any) -> None:
    if expected is not None and not isinstance(expected, t.Mapping):
        found.append(f"host '{host}': rdma_expected must be a mapping of rdma_links expectations, got {expected!r}")
        return
    try:
        _rdma_links.resolve_expectation(expected)
    except _rdma_links.RdmaLinksError as err:
        found.append(f"host '{host}': rdma_expected: {err}")


def _node_index(found: list[str], host: str, value: t.Any) -> None:
    if value is None:
        return
    index = None
    if not isinstance(value, bool) and isinstance(value, (int, str)):
        try:
            index = int(value)
        except ValueError:
            pass
    if index is None or index < 0:
        found.append(f"host '{host}': node_index must be a whole number of 0 or more (the host's place in its IPoIB "
                     f"group), got {value!r}")


def _monitoring_address(found: list[str], host: str, value: t.Any) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not _ADDRESS.fullmatch(value):
        found.append(f"host '{host}': monitoring_address must be the host name or IP address Prometheus reaches the "
                     f"host at (an IPv6 address in brackets), without scheme or port, got {value!r}")
