# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the lustre_client role: check LNet networks, mounts, striped directories and the pruning policy.

Each raises AnsibleFilterError naming the variable and the bad item, so the role's preflight fails before
anything changes on the host.
"""

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.plugin_utils._lazy_module_utils import UNSET, module_utils, plugin_utils

prune = module_utils('programs._checkpoint_prune')
lustre = plugin_utils('_lustre')


def _wrap(func: t.Callable[..., t.Any], *args: t.Any, **kwargs: t.Any) -> t.Any:
    try:
        return func(*args, **kwargs)
    except ValueError as err:
        raise AnsibleFilterError(str(err)) from err


def _ipoib_interfaces(ipoib_networks: t.Any) -> t.Optional[list[str]]:
    """Interface names of infiniband_ipoib_networks, or None when the infiniband role configures no IPoIB here.

    Empty counts as not configured: it is the infiniband role's default, visible to every later role of a play.
    """
    if ipoib_networks is None or (isinstance(ipoib_networks, (list, tuple)) and not ipoib_networks):
        return None
    if not isinstance(ipoib_networks, (list, tuple)) or not all(isinstance(item, dict) and item.get('interface')
                                                                for item in ipoib_networks):
        raise AnsibleFilterError('infiniband_ipoib_networks must be a list of {interface, cidr} items; '
                                 f'got {ipoib_networks!r}')
    return [str(item['interface']) for item in ipoib_networks]


def lustre_lnet_networks(networks, ipoib_networks=None):
    """lustre_client_lnet_networks checked and normalised (o2ib -> o2ib0), against infiniband_ipoib_networks."""
    return _wrap(lustre.check_networks, networks, _ipoib_interfaces(ipoib_networks))


def lustre_mounts(mounts, networks, default_options=UNSET, automount=True):
    """lustre_client_mounts checked, each with its fstab source and options; networks from lustre_lnet_networks.

    default_options: the mount options of mounts that name none; default, lustre.DEFAULT_MOUNT_OPTIONS.
    """
    default_options = lustre.DEFAULT_MOUNT_OPTIONS if default_options is UNSET else default_options
    return _wrap(lustre.check_mounts, mounts, list(networks), list(default_options), bool(automount))


def lustre_stripe_dirs(items, mounts, default_count=4, default_size='4M'):
    """lustre_client_stripe_dirs checked, with the stripe size in bytes; mounts from lustre_mounts."""
    return _wrap(lustre.check_stripe_dirs, items, list(mounts), default_count, default_size)


def lustre_lnet_conf(networks):
    """The net: section of /etc/lnet.conf for networks from lustre_lnet_networks."""
    return lustre.lnet_conf_yaml(list(networks))


def lustre_prune_config(settings):
    """The pruning program's configuration, checked as the program checks it; errors name lustre_client_prune_*."""
    try:
        prune.check_policy(settings.get('keep_last'), settings.get('keep_every'), settings.get('min_age'))
        prune.compile_pattern(settings.get('pattern'))
    except prune.PruneConfigError as err:
        raise AnsibleFilterError(f'lustre_client_prune_{err}') from err
    roots = settings.get('roots')
    if not isinstance(roots, (list, tuple)) or not roots or not all(isinstance(root, str) and root.startswith('/') for root in roots):
        raise AnsibleFilterError(f'lustre_client_prune_roots: {roots!r} must be a non-empty list of absolute paths')
    marker = settings.get('complete_marker')
    if not isinstance(marker, str) or '/' in marker:
        raise AnsibleFilterError(f'lustre_client_prune_complete_marker: {marker!r} must be a file name (or empty)')
    return dict(settings)


class FilterModule:
    """Lustre client filters."""

    def filters(self):
        return {
            'lustre_lnet_networks': lustre_lnet_networks,
            'lustre_mounts': lustre_mounts,
            'lustre_stripe_dirs': lustre_stripe_dirs,
            'lustre_lnet_conf': lustre_lnet_conf,
            'lustre_prune_config': lustre_prune_config,
        }
