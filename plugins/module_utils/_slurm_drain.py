# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""When a node is drained or resumed in Slurm because of validation checks, and with which reason.

Pure Python, standard library only: used by the validate role (through the llmforge.cluster.drain_plan and
drain_decisions filters) and by the node health check llmforge-nodecheck, so both drain with the same reason and
follow the same rules:

- a failing node that is not drained yet is drained with `llmforge: <check> <subject> <actual>`, from its first
  failing check (compact, ASCII, quotes and control characters removed, at most 120 characters); a validator of
  llmforge-nodecheck that failed on input it could not handle gives a `run` check of the node whose actual value
  is `nodecheck error <what>`, and the reason `llmforge: nodecheck error <what>`;
- a drained node whose reason starts with `llmforge:` (ours) is resumed once the check named in that reason was
  evaluated again and nothing fails; a reason naming a check this run did not evaluate (e.g. an NCCL bandwidth
  drain seen by the node health check) is left alone;
- a check whose subject is part of what it proves (LEVELED_CHECKS: `dcgm L1` .. `dcgm L4`) is named with its
  subject: a drain for `llmforge: dcgm L3 ...` is lifted only when a level-3 diagnostic ran and passed, never by
  the health check's level 1;
- a node Slurm drained with its own generic reason for a failure of our job checks (SLURM_GENERIC_REASONS: a
  failing Epilog drains with `Epilog error`) gets the precise reason of the failing checks in its place; it is not
  resumed while healthy on that reason alone;
- a node drained for any other reason (an administrator's, another tool's) is never resumed nor re-drained.
"""

from __future__ import annotations

import json
import re
import typing as t

REASON_PREFIX = 'llmforge:'
MAX_REASON = 120
# Checks that stand for a whole validator that could not run (see llmforge-nodecheck): a drain for one of them is
# lifted when the validators ran and passed.
RUN_CHECKS = frozenset({'run', 'timeout', 'nodecheck'})
# The actual value of llmforge-nodecheck's `run` check for a validator that raised on unexpected input; its drain
# reason is `llmforge: nodecheck error <what>` (named by `nodecheck`, lifted as the other RUN_CHECKS are).
ERROR_REASON = 'nodecheck error'
# Checks named with their subject (the DCGM diagnostic level) in drain reasons and in what a run evaluated.
LEVELED_CHECKS = frozenset({'dcgm'})
# Reasons slurmctld gives a node when our Epilog (llmforge-jobcheck) fails: replaced by the precise one.
SLURM_GENERIC_REASONS = frozenset({'Epilog error'})

_STATE = re.compile(r'(?:^|\s)State=(\S+)')
# Reason runs to the next ` Key=` field (or the end); Slurm appends ` [user@time]`.
_REASON = re.compile(r'(?:^|\s)Reason=(.*?)(?: \[[^\]]*\])?(?=\s+[A-Za-z]+=|\s*$)')
_NODE_NAME = re.compile(r'(?:^|\s)NodeName=(\S+)')


def _actual_text(check: t.Mapping[str, t.Any]) -> str:
    actual = check.get('actual')
    if actual is None:
        return str(check.get('message') or '')
    if isinstance(actual, str):
        return actual
    return json.dumps(actual, separators=(',', ':'), default=str)


def _checks(checks: t.Any) -> list[t.Mapping[str, t.Any]]:
    """The checks of a node's report entry: a list whose items are mappings; ValueError otherwise."""
    if isinstance(checks, (str, bytes)) or not isinstance(checks, t.Sequence):
        raise ValueError(f'checks must be a list of check results, got {checks!r}')
    for item in checks:
        if not isinstance(item, t.Mapping):
            raise ValueError(f'a check result must be a mapping, got {item!r}')
    return list(checks)


def drain_reason(checks: t.Iterable[t.Mapping[str, t.Any]]) -> str:
    """`llmforge: <check> <subject> <actual>` of the first failing check; '' when nothing fails."""
    for item in _checks(checks):
        if item.get('status') == 'fail':
            actual = _actual_text(item)
            if item.get('name') == 'run' and actual.startswith(ERROR_REASON + ' '):
                text = f'{REASON_PREFIX} {actual}'
            else:
                text = f"{REASON_PREFIX} {item.get('name')} {item.get('subject') or 'node'} {actual}"
            # Control characters (a NUL byte read from sysfs) cannot go into scontrol's arguments: blanks; other
            # bytes outside ASCII (nvidia-smi's odd output) are question marks, whatever the node's locale.
            text = re.sub(r'[\s\x00-\x1f\x7f]+', ' ', text.replace('"', '').replace("'", '')).strip()
            text = text.encode('ascii', 'replace').decode('ascii')
            return text[:MAX_REASON].rstrip()
    return ''


def parse_node(text: str) -> dict[str, t.Any]:
    """Name, state, reason and drained flag from one `scontrol show node <name> -o` line."""
    name = _NODE_NAME.search(text)
    state = _STATE.search(text)
    reason = _REASON.search(text)
    state_text = state.group(1) if state else ''
    reason_text = reason.group(1).strip() if reason else ''
    if reason_text == '(null)':
        reason_text = ''
    return {
        'name': name.group(1) if name else None,
        'state': state_text,
        'reason': reason_text,
        'drained': 'DRAIN' in state_text.upper(),
    }


def reason_check(reason: str) -> t.Optional[str]:
    """The check named by one of our reasons (`pcie_width`; `dcgm L3` for LEVELED_CHECKS); None when the reason is not
    ours (an administrator's, or none)."""
    reason = str(reason or '')
    if not reason.startswith(REASON_PREFIX):
        return None
    words = reason[len(REASON_PREFIX):].split()
    if len(words) > 1 and words[0] in LEVELED_CHECKS:
        return f'{words[0]} {words[1]}'
    return words[0] if words else ''


def _evaluated(checks: t.Iterable[t.Mapping[str, t.Any]]) -> set[str]:
    """The names a drain reason may name that this run's checks evaluated (see LEVELED_CHECKS)."""
    names = set(RUN_CHECKS)
    for item in checks:
        name = str(item.get('name'))
        names.add(f"{name} {item.get('subject')}" if name in LEVELED_CHECKS else name)
    return names


def drain_action(checks: t.Sequence[t.Mapping[str, t.Any]], node: t.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """What to do with a node: {'action': 'drain'|'resume'|None, 'reason': ..., 'why': ...}.

    `checks` are this run's checks of the node (all validators), `node` is parse_node()'s result.
    """
    reason = drain_reason(checks)
    if not isinstance(node, t.Mapping):
        raise ValueError(f"the node's Slurm state must be a mapping (parse_node's result), got {node!r}")
    drained = bool(node.get('drained'))
    old = str(node.get('reason') or '')
    if reason:
        if drained and old in SLURM_GENERIC_REASONS:
            return {'action': 'drain', 'reason': reason, 'why': f'failing, drained by Slurm as "{old}": the precise reason instead'}
        if drained:
            return {'action': None, 'reason': reason, 'why': f'failing, already drained ({old or "no reason"})'}
        return {'action': 'drain', 'reason': reason, 'why': 'failing'}
    if not drained:
        return {'action': None, 'reason': '', 'why': 'healthy'}
    named = reason_check(old)
    if named is None:
        return {'action': None, 'reason': '', 'why': f'healthy, drained by someone else ({old or "no reason"}): left alone'}
    if named not in _evaluated(checks):
        return {'action': None, 'reason': '', 'why': f'healthy, but drained for a check not run here ({old}): left alone'}
    return {'action': 'resume', 'reason': '', 'why': f'healthy again (was drained for: {old})'}


def drain_plan(nodes: t.Iterable[t.Mapping[str, t.Any]], slurm_names: t.Mapping[str, t.Any]) -> list[dict[str, t.Any]]:
    """What the Slurm stage needs of each node of a validation report: {host, healthy, reason, checks, slurm_name}.

    `nodes` are the report's nodes ({name, healthy, checks}); `slurm_names` maps a host to its name in Slurm where
    the two differ (a missing or null entry: the same name).
    """
    plan = []
    for node in nodes:
        name = node['name']
        slurm_name = slurm_names.get(name)
        plan.append({'host': name, 'healthy': node['healthy'], 'reason': drain_reason(node['checks']),
                     'checks': node['checks'], 'slurm_name': name if slurm_name is None else slurm_name})
    return plan


def drain_decisions(states: t.Iterable[t.Mapping[str, t.Any]]) -> list[dict[str, t.Any]]:
    """One decision per node whose Slurm state was read: {host, slurm_name, action, reason, old_reason, why}.

    `states` are registered `scontrol show node <name> -o` loop results whose item is a drain_plan entry; a result
    without rc 0 (skipped: no scontrol, draining off; or the node unknown to Slurm) gives no decision.
    """
    decisions = []
    for result in states:
        if result.get('rc') != 0:
            continue
        planned = result['item']
        node = parse_node(str(result.get('stdout') or ''))
        action = drain_action(planned['checks'], node)
        decisions.append({'host': planned['host'], 'slurm_name': planned['slurm_name'], 'action': action['action'],
                          'reason': planned['reason'], 'old_reason': node['reason'], 'why': action['why']})
    return decisions


def read_states(plan: t.Iterable[t.Mapping[str, t.Any]], text: str) -> list[dict[str, t.Any]]:
    """What drain_decisions reads, from one `scontrol show node --oneliner` of every node instead of one command per
    node: for each drain_plan entry, {rc: 0, stdout: its node's line, item: the entry}, or rc 1 for a node Slurm does
    not know."""
    lines = {}
    for line in str(text or '').splitlines():
        name = _NODE_NAME.search(line)
        if name:
            lines[name.group(1)] = line
    return [{'rc': 0, 'stdout': lines[entry['slurm_name']], 'item': entry} if entry['slurm_name'] in lines
            else {'rc': 1, 'stdout': '', 'item': entry} for entry in plan]
