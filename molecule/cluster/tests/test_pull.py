# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pull mode when a node's plays fail: the node is drained with the task named, the run fails naming it.

The drift test (test_cluster.py) proves pull mode's re-run: 0 changed on one node, the drift restored on the other.
Here the first node's copy of llmforge-repair's code is made a directory, so the node_programs step that writes it
fails on that node alone; the second node is drained by hand first, so pull.yml (run alone: the pulled nodes only)
converges the first node by itself. Root's run: converging is the administrator's.
"""

from __future__ import annotations

import json
import os

from conftest import NODES, drain_reasons
from scenario_helpers import run_playbook, said

LAST_RUN = os.path.expanduser('~/.cache/llmforge/pull/last-run.json')
REPAIR_CODE = ('/usr/local/lib/llmforge/python/ansible_collections/llmforge/cluster/plugins/module_utils/'
               'programs/_repair.py')
TASK = 'node_programs : Install the Python code of programs._repair'


def test_a_node_whose_plays_fail_is_drained_naming_the_task(hosts, ctl):
    failing, other = NODES
    node = hosts[failing]
    node.check_output(f'cp -p {REPAIR_CODE} /root/_repair.py && rm {REPAIR_CODE} && mkdir {REPAIR_CODE}')
    ctl.check_output(f"scontrol update NodeName={other} State=DRAIN Reason='test: pushed, not pulled'")
    try:
        result = run_playbook('-e', 'pull_mode=pull', playbook='llmforge.cluster.pull', timeout=900)
        text = said(result)
        assert result.returncode != 0, result.stdout[-4000:]
        assert 'GPU nodes: pull on 1 through one Slurm step; push for 1 (not idle in Slurm)' in text, text[-4000:]
        with open(LAST_RUN, encoding='utf-8') as handle:
            outcomes = json.load(handle)['outcomes']
        assert list(outcomes) == [failing], outcomes
        outcome = outcomes[failing]
        assert outcome['status'] == 'failed' and outcome['failed_task'] == {
            'role': 'llmforge.cluster.node_programs', 'task': 'Install the Python code of programs._repair',
            'message': outcome['failed_task']['message']}, outcome
        assert REPAIR_CODE in outcome['failed_task']['message'], outcome
        reasons = drain_reasons(ctl)
        assert reasons[failing] == f'llmforge: converge failed at {TASK}', reasons
        assert reasons[other] == 'test: pushed, not pulled', reasons
        assert f'1 GPU node(s) did not converge (drained): {failing}: failed at' in text, text[-3000:]
        # The node's own log of its run, root's alone.
        assert node.file('/var/log/llmforge/pull.log').mode == 0o600
        assert 'PLAY RECAP' in node.check_output('cat /var/log/llmforge/pull.log')
        print(f'{failing}: {outcome["status"]} after {outcome["seconds"]} s; drained: {reasons[failing]}')
    finally:
        node.run(f'rmdir {REPAIR_CODE}; cp -p /root/_repair.py {REPAIR_CODE} && rm -f /root/_repair.py')
        ctl.run(f"scontrol update NodeName={','.join(NODES)} State=RESUME")
    assert not {name for name in drain_reasons(ctl) if name in NODES}
