# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: pull_recap
type: aggregate
short_description: Write a run's recap and its changed and failed tasks to a JSON file (pull mode)
description:
  - Used by C(llmforge-pull-node), which runs the GPU-node plays on a node itself in pull mode. At the end of the run
    it writes, per host, the recap counts (ok, changed, failed, unreachable, skipped, rescued, ignored), the tasks
    that changed (role and name) and the failures (task, message, whether ignored), so that the control host can say
    what each node changed and drain a node that failed, naming the task.
  - The file is written once, at the end of the run, through a temporary file and a rename (mode 0600).
  - Needs to be enabled (C(ANSIBLE_CALLBACKS_ENABLED=llmforge.cluster.pull_recap)).
options:
  path:
    description: The JSON file to write.
    type: path
    required: true
    env:
      - name: LLMFORGE_PULL_RECAP
"""

import json
import os
import tempfile

from ansible.plugins.callback import CallbackBase

# Characters of a failure's message kept: enough for a module's msg, not its whole output.
MESSAGE_CHARS = 400


def _task_name(result):
    """(role, task): the role's full name and the task's own name (its action where it has none), templated."""
    task = result._task
    role = task._role.get_name() if task._role else ''
    return role, str(task.name or task.action or '').strip()


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'llmforge.cluster.pull_recap'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._hosts = {}

    def _host(self, result):
        return self._hosts.setdefault(result._host.get_name(), {'changed_tasks': [], 'failures': []})

    def v2_runner_on_ok(self, result):
        if result._result.get('changed', False):
            role, name = _task_name(result)
            self._host(result)['changed_tasks'].append({'role': role, 'task': name})

    def v2_runner_item_on_ok(self, result):
        # The task's own result (on_ok) says changed when any item changed; nothing more to record per item.
        pass

    def _failure(self, result, ignore_errors, unreachable=False):
        role, name = _task_name(result)
        message = result._result.get('msg') or result._result.get('stderr') or result._result.get('reason') or ''
        self._host(result)['failures'].append({
            'role': role, 'task': name, 'message': str(message).strip()[:MESSAGE_CHARS],
            'ignored': bool(ignore_errors), 'unreachable': unreachable})

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._failure(result, ignore_errors)

    def v2_runner_on_unreachable(self, result):
        self._failure(result, False, unreachable=True)

    def v2_playbook_on_stats(self, stats):
        for host in sorted(stats.processed):
            entry = self._hosts.setdefault(host, {'changed_tasks': [], 'failures': []})
            entry['stats'] = stats.summarize(host)
        path = self.get_option('path')
        directory = os.path.dirname(path) or '.'
        handle, temporary = tempfile.mkstemp(prefix='.pull-recap.', dir=directory)
        try:
            with os.fdopen(handle, 'w', encoding='utf-8') as stream:
                json.dump({'hosts': self._hosts}, stream, sort_keys=True)
            os.chmod(temporary, 0o600)
            os.replace(temporary, path)
        except BaseException:
            if os.path.exists(temporary):
                os.unlink(temporary)
            raise
