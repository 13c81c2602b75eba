# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The last-resort handler of the collection's modules: an unexpected exception becomes a failure with a message.

Standard library only, no Ansible import. A module runs its work inside ``last_resort``; whatever escapes its own
error handling (a parser that met input nobody foresaw) is turned into ``fail(msg=..., exception=<traceback>,
**result)`` (AnsibleModule.fail_json) with a message naming the exception, its text and the input being handled,
instead of a MODULE FAILURE traceback. The traceback goes to ``exception`` (shown with -vvv), not to the message.
"""

from __future__ import annotations

import contextlib
import traceback
import typing as t

# An exception's text can be huge (it may quote the input); the message keeps its start.
MAX_DETAIL = 300


def detail(err: BaseException) -> str:
    """The exception's text cut to MAX_DETAIL characters; 'no message' when it has none."""
    text = str(err).strip() or 'no message'
    return text[:MAX_DETAIL] + '...' if len(text) > MAX_DETAIL else text


def describe(err: BaseException, what: str) -> str:
    """`unexpected OverflowError while reading <what>: <text>`, the text cut to MAX_DETAIL characters."""
    where = f' while reading {what}' if what else ''
    return f'unexpected {type(err).__name__}{where}: {detail(err)}'


class Input:
    """What the module is handling now; set `what` before each step so a failure names its input."""

    def __init__(self, what: str = '') -> None:
        self.what = what


@contextlib.contextmanager
def last_resort(fail: t.Callable[..., t.Any], what: str = '', **result: t.Any) -> t.Iterator[Input]:
    """Run the block; an Exception escaping it calls ``fail(msg=..., exception=<traceback>, **result)``.

    SystemExit (exit_json/fail_json) and KeyboardInterrupt pass through untouched.
    """
    current = Input(what)
    try:
        yield current
    except Exception as err:  # pylint: disable=broad-except  # the point of a last resort
        fail(msg=describe(err, current.what), exception=traceback.format_exc(), **result)
        raise  # fail_json does not return; a `fail` that does must not hide the error


def positive(module: t.Any, name: str, **empty: t.Any) -> None:
    """Fail, naming the option, when the module's `name` option is not a positive number of seconds."""
    if module.params[name] <= 0:
        module.fail_json(msg=f'{name} must be a positive number of seconds, got {module.params[name]}', **empty)


def validator_options(**options: t.Any) -> t.Dict[str, t.Any]:
    """The argument_spec of a validator module: its own `options` and fail_on_mismatch, which every validator takes
    (documented once, by the llmforge.cluster.validator doc fragment)."""
    return dict(options, fail_on_mismatch=dict(type='bool', default=True))


def run_validator(module: t.Any, work: t.Callable[[Input], t.Mapping[str, t.Any]], errors: t.Tuple[type, ...],
                  summary: t.Callable[[t.Any], str], what: str = '', **empty: t.Any) -> None:
    """The main() of a validator module (gpu_topology, rdma_links, nccl_tests, scratch_devices) after its options.

    `work(current)` gives the result (its checks and `healthy`; `current.what` names the input it reads). An error of
    `errors` (bad input) fails with its message and the `empty` result; with fail_on_mismatch a failing check fails
    with `summary(checks)` and the whole result; anything else unexpected fails through `last_resort`. Never returns.
    """
    with last_resort(module.fail_json, what, **empty) as current:
        try:
            result = work(current)
        except errors as err:
            module.fail_json(msg=str(err), **empty)
        if module.params['fail_on_mismatch'] and not result['healthy']:
            module.fail_json(msg=summary(result['checks']), changed=False, **result)
    module.exit_json(changed=False, **result)


def read_output(path: str, parse: t.Callable[[str], t.Any], error: t.Type[Exception], option: str) -> t.Any:
    """`parse` of a saved output file; `error` naming the option and the file when it cannot be read or parsed."""
    try:
        with open(path, encoding='utf-8', errors='replace') as handle:
            text = handle.read()
    except OSError as err:
        raise error(f'cannot read {option} {path}: {err.strerror}') from None
    try:
        return parse(text)
    except error as err:
        raise error(f'{path}: {err}') from None
