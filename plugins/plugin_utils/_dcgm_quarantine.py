# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validate role's DCGM acceptance flow: which nodes go into quarantine, what comes out, and the reservation.

Standard library only, no Ansible import (the llmforge.cluster.dcgm_* filters are thin wrappers). The flow:

1. the fast tier (`dcgmi diag -r 1`, seconds) runs on every GPU node: its results are the llmforge.cluster.dcgm_diag
   module's return values (verdict, healthy, reason, level, duration_seconds, ...);
2. `quarantine_plan` chooses the candidates from those results and each node's Slurm state (`scontrol show node
   <name> -o`, read by _slurm_drain.parse_node): a node whose fast tier failed (fail, error or hang) and a node
   already drained with one of our DCGM reasons (`llmforge: dcgm L1 ...` of the node health check, or an earlier
   run's `llmforge: dcgm L3 ...`). A node drained for any other reason (an administrator's, or another of our
   checks: `llmforge: pcie_width ...`) is never a candidate: its drain stays as it is.
   Each candidate is drained with `llmforge: dcgm L<long> pending: L<fast> <fast detail>` and added to the
   quarantine reservation. The reason names the long level, so _slurm_drain lifts it only when a diagnostic of
   that level passes: the health check's level-1 pass cannot return the node early;
3. the long tier (`dcgmi diag -r 3`, minutes to hours) runs on the candidates;
4. `release_plan` judges the long results: pass or warn, the node leaves the reservation and is resumed (only while
   its reason is still ours); fail, error or hang (or no result), it stays drained with the long reason
   (`llmforge: dcgm L3 fail: memory GPU3`) and stays in the reservation.

Reservation node lists are sets of Slurm node names; `reservation_command` turns (what Slurm holds, what it should
hold) into the one scontrol call that gets there: create, update Nodes, delete (it would be empty) or nothing.
"""

from __future__ import annotations

import re
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils import _dcgm_diag as dcgm
from ansible_collections.llmforge.cluster.plugins.module_utils import _hostlist as hostlist
from ansible_collections.llmforge.cluster.plugins.module_utils import _prometheus as prometheus
from ansible_collections.llmforge.cluster.plugins.module_utils import _slurm_drain as drain
from ansible_collections.llmforge.cluster.plugins.module_utils._checks import (
    FAIL, PASS, WARN, check, finite, natural_key)

UNHEALTHY = (dcgm.FAIL, dcgm.ERROR, dcgm.HANG)
# Our DCGM drain reasons, any level: `llmforge: dcgm L1 fail: ...`, `llmforge: dcgm L3 pending: ...`.
# What drain.reason_check names for a DCGM reason: `dcgm L3`.
_DCGM_LEVEL = re.compile(r'dcgm L([1-4])')
_RESERVATION_NODES = re.compile(r'(?:^|\s)Nodes=(\S*)')

DCGM_HEALTHY = 'llmforge_dcgm_diag_healthy'
DCGM_DURATION = 'llmforge_dcgm_diag_duration_seconds'
DCGM_QUARANTINED = 'llmforge_dcgm_quarantined'
DCGM_HELP = {
    DCGM_HEALTHY: '1 when the last dcgmi diag run of this level passed (or only warned) on this node.',
    DCGM_DURATION: 'How long the last dcgmi diag run of this level took on this node (its timeout for a hang).',
    DCGM_QUARANTINED: '1 while the validate role keeps this node drained in the DCGM quarantine reservation.',
}


class QuarantineError(ValueError):
    """Malformed input; the message names the node and the field."""


# --- results --------------------------------------------------------------------------------------

def summary(result: t.Any, level: int) -> t.Optional[dict[str, t.Any]]:
    """The part of a dcgm_diag module result the flow and the report keep; None when the task did not run.

    A result without a verdict (the task failed before dcgmi ran, e.g. dcgmi is missing) is an `error` whose
    detail is the task's message.
    """
    if result is None or not isinstance(result, t.Mapping):
        return None
    if result.get('skipped') or result.get('unreachable'):
        return None
    verdict = result.get('verdict')
    if verdict not in dcgm.VERDICTS:
        verdict = dcgm.ERROR
    reason = str(result.get('reason') or '')
    detail = reason.partition(f'dcgm L{level} ')[2]
    if not detail:
        message = str(result.get('msg') or 'the diagnostic gave no result')
        detail = f'{verdict}: {message}' if verdict not in message else message
        reason = dcgm.make_reason(drain.REASON_PREFIX, level, verdict, [message])
    duration = result.get('duration_seconds')
    return {
        'level': level,
        'verdict': verdict,
        'healthy': verdict in (dcgm.PASS, dcgm.WARN),
        'reason': reason,
        'detail': dcgm.clean_reason(detail),
        'failing_gpus': list(result.get('failing_gpus') or []),
        'messages': [str(item) for item in (result.get('messages') or [])][:10],
        'duration_seconds': finite(duration),
    }


def diag_check(result: t.Mapping[str, t.Any],
               superseded_by: t.Optional[t.Mapping[str, t.Any]] = None) -> dict[str, t.Any]:
    """A summary as a validator check (as _dcgm_diag.as_check): name `dcgm`, subject `L<level>`.

    A failed fast tier that a passing long diagnostic overruled is a warning, not a failure: the node is healthy
    and the Slurm stage must not drain it again for the fast result.
    """
    status = PASS if summary_status(result) == PASS else WARN if result['healthy'] else FAIL
    message = f"dcgmi diag -r {result['level']}: " + ('; '.join(result['messages'][:3]) or result['detail'])
    if status == FAIL and superseded_by is not None and superseded_by['healthy']:
        status = WARN
        message = f"superseded by the level-{superseded_by['level']} diagnostic that passed; {message}"
    return check('dcgm', status, f"L{result['level']}", PASS, result['detail'], message)


def summary_status(result: t.Mapping[str, t.Any]) -> str:
    return {dcgm.PASS: PASS, dcgm.WARN: WARN}.get(result['verdict'], FAIL)


# --- Slurm state ----------------------------------------------------------------------------------

def dcgm_reason_level(reason: str) -> t.Optional[int]:
    """The level a reason of ours names (`llmforge: dcgm L1 fail: ...` -> 1); None for any other reason."""
    match = _DCGM_LEVEL.fullmatch(drain.reason_check(reason) or '')
    return int(match.group(1)) if match else None


def is_ours(reason: str) -> bool:
    return drain.reason_check(reason) is not None


def pending_reason(long_level: int, detail: str, prefix: str = drain.REASON_PREFIX) -> str:
    """`llmforge: dcgm L3 pending: L1 fail: software GPU3`: drained until the level-3 diagnostic passes."""
    return dcgm.make_reason(prefix, long_level, 'pending', [detail])


def _node_state(result: t.Mapping[str, t.Any]) -> t.Optional[dict[str, t.Any]]:
    """parse_node of a registered `scontrol show node <name> -o` result; None when Slurm was not read (skipped,
    no scontrol, the node unknown to Slurm)."""
    if result.get('rc') != 0 or result.get('skipped'):
        return None
    return drain.parse_node(str(result.get('stdout') or ''))


def quarantine_plan(nodes: t.Sequence[t.Mapping[str, t.Any]], fast_level: int, long_level: int,
                    prefix: str = drain.REASON_PREFIX) -> list[dict[str, t.Any]]:
    """One entry per node: {host, slurm_name, slurm, state, reason, fast, candidate, drain, old_reason, why}.

    `nodes` are {host, slurm_name, fast (dcgm_diag result or None), state (registered scontrol result or None)}.
    `drain` says the node's reason must be set to `reason` (the pending reason) now.
    """
    long_level = dcgm.check_level(long_level)
    plan = []
    for node in nodes:
        host = node.get('host')
        if not isinstance(host, str) or not host:
            raise QuarantineError(f'a node without a host name: {node!r}')
        slurm_name = str(node.get('slurm_name') or host)
        fast = summary(node.get('fast'), fast_level)
        state_result = node.get('state')
        state = _node_state(state_result) if isinstance(state_result, t.Mapping) else None
        old = state['reason'] if state else ''
        drained = bool(state and state['drained'])
        entry = {'host': host, 'slurm_name': slurm_name, 'slurm': state is not None, 'fast': fast,
                 'candidate': False, 'drain': False, 'reason': '', 'old_reason': old, 'drained': drained}
        failed = fast is not None and not fast['healthy']
        old_level = dcgm_reason_level(old) if drained else None
        if drained and not is_ours(old):
            entry['why'] = (f'drained by someone else ({old or "no reason"}): left alone, not quarantined'
                            + (f" (its L{fast_level} diagnostic failed: {fast['detail']})" if failed else ''))
        elif drained and old_level is None:
            # Drained by another of our checks (llmforge: pcie_width ...): that drain stands until its own check
            # passes; quarantining it would replace its reason and could resume a node still failing that check.
            entry['why'] = (f'drained for another check ({old}): left as it is, not quarantined'
                            + (f" (its L{fast_level} diagnostic failed: {fast['detail']})" if failed else ''))
        elif failed or old_level is not None:
            if failed:
                detail = f"L{fast_level} {fast['detail']}"
            else:
                detail = old.partition('pending: ')[2] if ' pending: ' in old else old.partition(' dcgm ')[2]
            entry.update(candidate=True, reason=pending_reason(long_level, detail, prefix))
            entry['drain'] = entry['slurm'] and old != entry['reason']
            because = f"L{fast_level} {fast['detail']}" if failed else f'drained for: {old}'
            entry['why'] = (f'quarantined for the level-{long_level} diagnostic ({because})' if entry['slurm']
                            else f'level-{long_level} diagnostic only, Slurm does not know the node ({because})')
        elif fast is None:
            entry['why'] = f'no level-{fast_level} result (node not reached)'
        else:
            entry['why'] = f"level-{fast_level} diagnostic {fast['verdict']}"
        plan.append(entry)
    return plan


def release_plan(plan: t.Sequence[t.Mapping[str, t.Any]], long_results: t.Mapping[str, t.Any],
                 states: t.Mapping[str, t.Any], long_level: int) -> list[dict[str, t.Any]]:
    """One decision per candidate of the plan: {host, slurm_name, long, release, action, reason, old_reason, why}.

    `long_results` maps a host to its dcgm_diag result (None or skipped: not run); `states` a host to its
    registered `scontrol show node` result read after the long diagnostic. `action` is `resume`, `drain` (set the
    long reason) or None; `release` True (leave the reservation), False (stay) or None (not run, --check).
    """
    long_level = dcgm.check_level(long_level)
    decisions = []
    for entry in plan:
        if not entry.get('candidate'):
            continue
        host = entry['host']
        raw = long_results.get(host)
        long = summary(raw, long_level)
        state_result = states.get(entry['slurm_name'])
        state = _node_state(state_result) if isinstance(state_result, t.Mapping) else None
        old = state['reason'] if state else ''
        drained = bool(state and state['drained'])
        decision = {'host': host, 'slurm_name': entry['slurm_name'], 'slurm': state is not None, 'long': long,
                    'release': None, 'action': None, 'reason': '', 'old_reason': old}
        if long is None and isinstance(raw, t.Mapping) and raw.get('skipped'):
            decision['why'] = f'level-{long_level} diagnostic not run ({raw.get("skip_reason") or "skipped"})'
            decisions.append(decision)
            continue
        if long is None:
            long = summary({'verdict': dcgm.ERROR, 'msg': 'no result: the node was not reached'}, long_level)
            decision['long'] = long
        if long['healthy']:
            decision['release'] = True
            if drained and is_ours(old):
                decision.update(action='resume',
                                why=f"level-{long_level} diagnostic {long['verdict']}: back in service")
            elif drained:
                decision['why'] = (f"level-{long_level} diagnostic {long['verdict']}, but drained by someone "
                                   f'else since ({old}): left drained')
            else:
                decision['why'] = f"level-{long_level} diagnostic {long['verdict']}: in service"
        else:
            decision['release'] = False
            decision['reason'] = long['reason']
            if state is not None and (not drained or is_ours(old)):
                if old != long['reason'] or not drained:
                    decision['action'] = 'drain'
                decision['why'] = (f"level-{long_level} diagnostic {long['verdict']}: stays quarantined "
                                   f"({long['reason']})")
            elif state is not None:
                decision['why'] = (f"level-{long_level} diagnostic {long['verdict']}; drained by someone else since "
                                   f'({old}): reason left as it is')
            else:
                decision['why'] = f"level-{long_level} diagnostic {long['verdict']} (Slurm does not know the node)"
        decisions.append(decision)
    return decisions


# --- the reservation ------------------------------------------------------------------------------

def reservation_nodes(result: t.Mapping[str, t.Any]) -> t.Optional[list[str]]:
    """The nodes of a registered `scontrol show reservation <name> -o`; None when the reservation does not exist."""
    if result.get('skipped') or result.get('rc') != 0:
        return None
    text = str(result.get('stdout') or '')
    if 'ReservationName=' not in text:
        return None
    match = _RESERVATION_NODES.search(text)
    value = match.group(1) if match else ''
    if value in ('', '(null)'):
        return []
    try:
        return hostlist.expand(value)
    except hostlist.HostlistError as err:
        raise QuarantineError(f'the reservation lists nodes that cannot be read: {err}') from None


def _ordered(names: t.Iterable[str]) -> list[str]:
    return sorted(set(names), key=natural_key)


def wanted_nodes(current: t.Optional[t.Iterable[str]], add: t.Iterable[str] = (),
                 remove: t.Iterable[str] = ()) -> list[str]:
    """(current - remove) + add, in natural order; a node in both `add` and `remove` stays."""
    removed = set(remove) - set(add)
    return _ordered([name for name in (current or []) if name not in removed] + list(add))


def reservation_command(name: str, current: t.Optional[t.Sequence[str]], wanted: t.Sequence[str]) -> list[str]:
    """The scontrol argv that makes reservation `name` hold `wanted`; [] when nothing is to be done.

    Absent and wanted: created from now, with no end, for root, as a maintenance reservation that ignores the jobs
    running on its nodes. Present and nothing wanted: deleted (Slurm refuses a reservation without nodes).
    """
    if not name or re.search(r'[\s=,]', name):
        raise QuarantineError(f'the reservation name must be one word without = or commas, got {name!r}')
    wanted = _ordered(wanted)
    if current is None:
        if not wanted:
            return []
        return ['scontrol', 'create', 'reservation', f'ReservationName={name}', 'StartTime=now', 'Duration=UNLIMITED',
                'Users=root', 'Flags=MAINT,IGNORE_JOBS', f"Nodes={','.join(wanted)}"]
    if not wanted:
        return ['scontrol', 'delete', f'ReservationName={name}']
    if _ordered(current) == wanted:
        return []
    return ['scontrol', 'update', f'ReservationName={name}', f"Nodes={','.join(wanted)}"]


# --- what the report and the metrics get ------------------------------------------------------------

def node_results(plan: t.Sequence[t.Mapping[str, t.Any]], decisions: t.Sequence[t.Mapping[str, t.Any]],
                 reservation: str) -> dict[str, dict[str, t.Any]]:
    """{host: validator result} of every node with a fast result: its checks (long first), healthy, and the
    quarantine state (`quarantined`: drained in the reservation after this run; `quarantine`: what was done)."""
    by_host = {decision['host']: decision for decision in decisions}
    results = {}
    for entry in plan:
        fast = entry.get('fast')
        if fast is None:
            continue
        decision = by_host.get(entry['host'], {})
        long = decision.get('long')
        checks = ([diag_check(long)] if long else []) + [diag_check(fast, long)]
        results[entry['host']] = {
            'checks': checks,
            'healthy': not any(item['status'] == FAIL for item in checks),
            'fast': fast,
            'long': long,
            'quarantined': bool(entry.get('candidate')) and decision.get('release') is False,
            'quarantine': decision.get('why') or entry.get('why', ''),
            'reservation': reservation,
        }
    return results


def cluster_stage(plan: t.Sequence[t.Mapping[str, t.Any]], decisions: t.Sequence[t.Mapping[str, t.Any]],
                  reservation: str, fast_level: int, long_level: int) -> dict[str, t.Any]:
    """The report's cluster-level `dcgm` stage: one row per node (fast and long verdicts, what was done)."""
    by_host = {decision['host']: decision for decision in decisions}
    rows = {}
    for entry in plan:
        fast = entry.get('fast')
        long = by_host.get(entry['host'], {}).get('long')
        decision = by_host.get(entry['host'], {})
        rows[entry['host']] = {
            f'L{fast_level}': fast['detail'] if fast else 'not run',
            f'L{long_level}': long['detail'] if long else 'not run',
            'quarantined': bool(entry.get('candidate')) and decision.get('release') is False,
            'slurm': decision.get('why') or entry.get('why', ''),
        }
    held = [host for host, row in rows.items() if row['quarantined']]
    left = [entry['host'] for entry in plan if entry.get('drained') and not is_ours(entry.get('old_reason', ''))
            and entry.get('fast') and not entry['fast']['healthy']]
    message = (f"in reservation {reservation}: {', '.join(held)}" if held else 'no node quarantined')
    if left:
        message += f"; failing but drained by someone else, left alone: {', '.join(left)}"
    return {
        'title': f'DCGM diagnostics (L{fast_level} on every node, L{long_level} in quarantine)',
        'checks': [check('quarantine', WARN if held or left else PASS, 'cluster', [], held, message)],
        'healthy': True,
        'facts': {'reservation': reservation, 'fast_level': fast_level, 'long_level': long_level,
                  'quarantined': held},
        'columns': [f'L{fast_level}', f'L{long_level}', 'quarantined', 'slurm'],
        'nodes': rows,
    }


def metrics_text(result: t.Optional[t.Mapping[str, t.Any]]) -> str:
    """The DCGM families of one node's llmforge_validate.prom (appended to the validators'); '' without a result."""
    if not result:
        return ''
    healthy, duration = [], []
    for item in (result.get('fast'), result.get('long')):
        if not item:
            continue
        labels = {'level': str(item['level'])}
        healthy.append((labels, 1 if item['healthy'] else 0))
        if item.get('duration_seconds') is not None:
            duration.append((labels, round(float(item['duration_seconds']), 3)))
    families = [
        prometheus.Family(DCGM_HEALTHY, 'gauge', DCGM_HELP[DCGM_HEALTHY], healthy),
        prometheus.Family(DCGM_DURATION, 'gauge', DCGM_HELP[DCGM_DURATION], duration),
        prometheus.Family(DCGM_QUARANTINED, 'gauge', DCGM_HELP[DCGM_QUARANTINED],
                          [({}, 1 if result.get('quarantined') else 0)]),
    ]
    return prometheus.render(families)
