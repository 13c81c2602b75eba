# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""validate.yml's hardware stage on one node, whichever way it is started.

Standard library only, no Ansible import. The stage runs three validators on a node: gpu_topology, rdma_links and
kernel_faults. It is started either by Ansible (the validate role's hardware tasks run the three modules, each a
task registered as ``__validate_<name>``) or through Slurm (one `srun` step across the nodes runs
``llmforge-validate-node``, programs/_validate_node.py, which calls `node_results`). Both end here: the modules'
work functions (each validator's ``module_work``) and the result a module returns with
``fail_on_mismatch: false`` (`outcome`), so the two paths give the report the same results.

A stage's parameters are the modules' options, by validator name (``{"gpu_topology": {"profile": "h100-sxm"},
...}``); an option left out takes the module's default (DEFAULTS). The DCGM stage's fast tier (the dcgm_diag module,
``dcgmi diag -r <fast level>``) is OPTIONAL: it runs in the same step when its options are given (validate.yml with
validate_dcgm), so a node on the Slurm path needs no Ansible task for it either.
"""

from __future__ import annotations

import traceback
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils import _dcgm_diag as dcgm
from ansible_collections.llmforge.cluster.plugins.module_utils import _gpu_topology as gpu
from ansible_collections.llmforge.cluster.plugins.module_utils import _kernel_log as kernel_log
from ansible_collections.llmforge.cluster.plugins.module_utils import _rdma_links as rdma
from ansible_collections.llmforge.cluster.plugins.module_utils import _validators as validators
from ansible_collections.llmforge.cluster.plugins.module_utils._module_errors import Input, describe

# Each validator's options as its module declares them, with the module's defaults.
DEFAULTS: t.Mapping[str, t.Mapping[str, t.Any]] = {
    'gpu_topology': {'profile': None, 'expected': {}, 'nvidia_smi_path': 'nvidia-smi', 'timeout': 30},
    'rdma_links': {'sysfs_root': '/sys', 'expected': {}},
    'kernel_faults': {'source': kernel_log.JOURNAL, 'journalctl_path': 'journalctl', 'state_file': None,
                      'since': None, 'boot_id_file': kernel_log.DEFAULT_BOOT_ID_FILE, 'gpus': None,
                      'nvidia_smi_path': 'nvidia-smi', 'sysfs_root': '/sys', 'timeout': 30},
    'dcgm_diag': {'level': 1, 'timeout': None, 'dcgmi_path': 'dcgmi', 'output': None, 'gpus': None,
                  'reason_prefix': dcgm.REASON_PREFIX},
}
# Each validator's work (the function its module runs) and its empty result (for the options it ran with).
WORK: t.Mapping[str, t.Callable[[t.Mapping[str, t.Any], Input], dict[str, t.Any]]] = {
    'gpu_topology': gpu.module_work,
    'rdma_links': rdma.module_work,
    'kernel_faults': kernel_log.module_work,
    'dcgm_diag': dcgm.module_work,
}
EMPTY: t.Mapping[str, t.Callable[[t.Mapping[str, t.Any], Input], t.Mapping[str, t.Any]]] = {
    'gpu_topology': lambda params, current: gpu.EMPTY_RESULT,
    'rdma_links': lambda params, current: rdma.EMPTY_RESULT,
    'kernel_faults': lambda params, current: kernel_log.EMPTY_RESULT,
    'dcgm_diag': lambda params, current: dcgm.empty_result(params['level'], current.argv),
}
# The validators every run of the stage has, and the ones it runs when their options are given.
STAGE = ('gpu_topology', 'rdma_links', 'kernel_faults')
OPTIONAL = ('dcgm_diag',)
# The errors that mean bad input or a failed reading, by validator (the node validators' registry has the others).
ERRORS: t.Mapping[str, tuple[type, ...]] = {'dcgm_diag': (dcgm.DcgmDiagError,)}


class StageError(ValueError):
    """The stage's parameters are unusable; the message names the validator and the option."""


def command_path(name: str) -> str:
    """A command's path as the modules run it: as given when it has a '/', else the first of that name in the
    system directories, else the bare name (whose run then fails naming it)."""
    if '/' in name:
        return name
    return validators.find_command(name) or name


def outcome(name: str, params: t.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """What the `name` module returns with ``fail_on_mismatch: false`` as a dict: its result and ``changed``, or
    ``failed`` with ``msg`` and the empty result when it could not judge the node."""
    current = Input()
    # The exceptions that mean bad input or a failed reading (the registry's, as the module's): their message.
    errors = ERRORS.get(name) or validators.registry()[name].errors
    try:
        result = WORK[name](params, current)
    except errors as err:
        return dict(EMPTY[name](params, current), failed=True, msg=str(err))
    except Exception as err:  # pylint: disable=broad-except  # the modules' last resort, as a result
        return dict(EMPTY[name](params, current), failed=True, msg=describe(err, current.what),
                    exception=traceback.format_exc())
    return dict(result, changed=result.get('changed', False))


def checked_params(given: t.Any) -> dict[str, dict[str, t.Any]]:
    """The stage's parameters with the modules' defaults filled in; StageError names a wrong validator or option."""
    if not isinstance(given, t.Mapping):
        raise StageError(f'the hardware stage parameters must be an object of validator name to options, got {given!r}')
    unknown = sorted(set(given) - set(STAGE) - set(OPTIONAL))
    if unknown:
        raise StageError(f"unknown validator(s) {', '.join(map(str, unknown))}; the hardware stage runs "
                         f"{', '.join(STAGE)} and, when given, {', '.join(OPTIONAL)}")
    params = {}
    for name in STAGE + tuple(name for name in OPTIONAL if name in given):
        options = given.get(name) or {}
        if not isinstance(options, t.Mapping):
            raise StageError(f'{name}: its options must be an object, got {options!r}')
        extra = sorted(set(options) - set(DEFAULTS[name]))
        if extra:
            raise StageError(f"{name}: unknown option(s) {', '.join(map(str, extra))}; known: {', '.join(DEFAULTS[name])}")
        merged = dict(DEFAULTS[name], **{key: value for key, value in options.items() if value is not None})
        for option in ('nvidia_smi_path', 'journalctl_path', 'dcgmi_path'):
            if option in merged:
                merged[option] = command_path(str(merged[option]))
        params[name] = merged
    return params


def node_results(given: t.Any) -> dict[str, dict[str, t.Any]]:
    """`{validator: result}` of this node: the three modules' results (and the fast DCGM diagnostic's when its
    options are given), as the Ansible path registers them."""
    params = checked_params(given)
    return {name: outcome(name, params[name]) for name in params}
