# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prune training checkpoint directories beyond a retention policy: keep the newest N and every Mth step.

Standard library only, no Ansible import: the program ``llmforge-checkpoint-prune`` itself, which the
lustre_client role installs with the collection's node programs (see the node_programs role) and runs from a
systemd timer. The policy (``plan``) is a pure function; ``main`` adds the file system.

Policy, per root directory (each root holds the checkpoints of one run, e.g. ``/lustre/ckpt/run42``):

* A root containing glob characters (``/lustre/ckpt/*``) stands for every directory it matches.
* A checkpoint is a directory directly under the root whose name matches ``pattern`` as a whole; the
  pattern's group ``step`` (or else its first group) is the step number, e.g. ``step_000123`` -> 123.
  Checkpoints are ordered by step number, never by modification time (a copy or a ``touch`` changes mtime).
  Symbolic links and other entries are never touched.
* In progress (kept, and not counted as one of the newest): a checkpoint whose directory or any direct entry
  was modified less than ``min_age`` seconds ago, or that lacks ``complete_marker`` when one is configured.
* The ``keep_last`` newest complete checkpoints are kept: a run always has that many to resume from.
* With ``keep_every`` M > 0, every checkpoint whose *step number* is a multiple of M is kept. Step numbers,
  not positions in the list, so a checkpoint's fate never changes from one run to the next: positions shift
  whenever an older checkpoint is removed, and a position rule would delete a little more on every run.
* A checkpoint a symbolic link in the root points to (``latest -> step_000500``) is kept.
* Everything else is removed: renamed to ``.llmforge-pruning-<name>`` first (a half-removed checkpoint
  must never look like a checkpoint to a resuming job), then deleted. Leftovers of an interrupted removal
  are deleted on the next run.

Safety, since it usually runs as root over directories users own:

* A root is opened with ``O_NOFOLLOW | O_DIRECTORY`` and everything after works relative to that directory
  descriptor (``dir_fd``): the program never leaves the directory it opened. A root that is a symbolic link
  is refused; a root matched by a glob must still be the directory (device, inode and owner) the listing saw.
* Each checkpoint is opened the same way and checked against what the listing saw before it is read, and
  again after it is renamed and before it is deleted; the deletion opens every directory with ``O_NOFOLLOW``,
  never follows a symbolic link (it removes the link itself) and never crosses into another file system.
  A directory swapped for a symbolic link or another directory on the way is left in place and logged.
* Step numbers are ASCII digits only.

Every decision is logged, one line each, to standard output (the journal under systemd) and to the
optional log file. Exit status: 0 done, 1 some root or checkpoint could not be read or removed (the others
were still processed), 2 bad arguments or configuration.
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import glob
import json
import os
import re
import stat
import sys
import time
import typing as t

PROGRAM = 'llmforge-checkpoint-prune'
DEFAULT_PATTERN = r'(?:step_|checkpoint-|global_step)(?P<step>[0-9]+)'
PRUNING_PREFIX = '.llmforge-pruning-'
# In its own directory: the systemd unit makes /run/llmforge-checkpoint-prune writable for the service user
# (RuntimeDirectory=), and a run by hand uses the same lock.
DEFAULT_LOCK_FILE = '/run/llmforge-checkpoint-prune/lock'
# Directories are opened this way only: never through a symbolic link.
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# Deeper trees are left in place rather than holding a descriptor per level without end.
MAX_DEPTH = 64
_ASCII_DIGITS = frozenset('0123456789')


class PruneConfigError(ValueError):
    """A policy or configuration value that cannot be used; the message names the setting."""


class ChangedError(OSError):
    """A directory is no longer the one the listing saw (swapped for a symbolic link or another directory)."""


# (st_dev, st_ino, st_uid) of a directory: what was listed must be what is opened.
Identity = t.Tuple[int, int, int]


def identity_of(status: os.stat_result) -> Identity:
    return (status.st_dev, status.st_ino, status.st_uid)


class Checkpoint(t.NamedTuple):
    name: str
    step: int
    # Newest modification time (epoch seconds) of the directory and its direct entries.
    mtime: float
    # False when a completion marker is configured and missing.
    complete: bool
    # Target of a symbolic link in the root.
    linked: bool = False
    # What the listing saw; checked again before the checkpoint is removed.
    identity: t.Optional[Identity] = None


class Decision(t.NamedTuple):
    checkpoint: Checkpoint
    keep: bool
    reason: str


def compile_pattern(pattern: t.Any) -> re.Pattern:
    """The checkpoint name pattern; it must compile and have a ``step`` group or at least one group."""
    if not isinstance(pattern, str) or not pattern:
        raise PruneConfigError(f'pattern: {pattern!r} is not a regular expression')
    try:
        # ASCII: \d and [[:digit:]]-like classes must not match other scripts' digits.
        compiled = re.compile(pattern, re.ASCII)
    except re.error as error:
        raise PruneConfigError(f'pattern: {pattern!r} is not a valid regular expression ({error})') from None
    if compiled.groups < 1:
        raise PruneConfigError(f'pattern: {pattern!r} has no group; put the step number in (?P<step>[0-9]+)')
    return compiled


def step_of(compiled: re.Pattern, name: str) -> t.Optional[int]:
    """The step number of a checkpoint name, or None when the name is not a checkpoint's."""
    match = compiled.fullmatch(name)
    if not match:
        return None
    text = match.group('step') if 'step' in compiled.groupindex else match.group(1)
    # int() would take other scripts' digits, or raise on some ('²'): only ASCII digits make a step.
    if not text or len(text) > 4000 or not _ASCII_DIGITS.issuperset(text):
        return None
    return int(text)


def check_policy(keep_last: t.Any, keep_every: t.Any, min_age: t.Any) -> None:
    for name, value, least in (('keep_last', keep_last, 1), ('keep_every', keep_every, 0), ('min_age', min_age, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise PruneConfigError(f'{name}: {value!r} must be an integer of at least {least}')


def plan(checkpoints: t.Iterable[Checkpoint], keep_last: int, keep_every: int = 0, min_age: int = 0,
         now: t.Optional[float] = None) -> list[Decision]:
    """Decide for every checkpoint, in step order, whether it is kept (and why) or removed."""
    check_policy(keep_last, keep_every, min_age)
    now = time.time() if now is None else now
    ordered = sorted(checkpoints, key=lambda checkpoint: (checkpoint.step, checkpoint.name))
    in_progress = {}
    for checkpoint in ordered:
        if not checkpoint.complete:
            in_progress[checkpoint.name] = 'in progress: no completion marker'
        elif now - checkpoint.mtime < min_age:
            in_progress[checkpoint.name] = f'in progress: modified {max(0, int(now - checkpoint.mtime))} s ago (< min_age {min_age} s)'
    finished = [checkpoint for checkpoint in ordered if checkpoint.name not in in_progress]
    newest = {checkpoint.name for checkpoint in finished[-keep_last:]}
    decisions = []
    for checkpoint in ordered:
        if checkpoint.name in in_progress:
            decisions.append(Decision(checkpoint, True, in_progress[checkpoint.name]))
        elif checkpoint.name in newest:
            decisions.append(Decision(checkpoint, True, f'one of the newest {keep_last}'))
        elif keep_every and checkpoint.step % keep_every == 0:
            decisions.append(Decision(checkpoint, True, f'step {checkpoint.step} is a multiple of keep_every {keep_every}'))
        elif checkpoint.linked:
            decisions.append(Decision(checkpoint, True, 'a symbolic link in the root points to it'))
        else:
            decisions.append(Decision(checkpoint, False, 'beyond the retention policy'))
    return decisions


# The file system side -------------------------------------------------------------------------------


def say(line: str, stream: t.TextIO) -> None:
    """One line to a standard stream, flushed at once so the journal keeps the order."""
    stream.write(line + '\n')
    stream.flush()


class Logger:
    """One line per event to standard output and, when given, appended to a log file."""

    def __init__(self, log_file: t.Optional[str], dry_run: bool):
        self.prefix = '[dry-run] ' if dry_run else ''
        self.handle = open(log_file, 'a', encoding='utf-8') if log_file else None  # pylint: disable=consider-using-with

    def __call__(self, message: str, error: bool = False) -> None:
        line = f"{'ERROR: ' if error else ''}{self.prefix}{message}"
        say(line, sys.stderr if error else sys.stdout)
        if self.handle:
            self.handle.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} {PROGRAM}: {line}\n")
            self.handle.flush()

    def close(self) -> None:
        if self.handle:
            self.handle.close()


def _is_link(name: str, dir_fd: t.Optional[int]) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
    except OSError:
        return False


def open_dir(name: str, dir_fd: t.Optional[int] = None, expected: t.Optional[Identity] = None) -> tuple[int, os.stat_result]:
    """Open a directory without following a symbolic link, checked against the identity a listing saw."""
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as error:
        # O_NOFOLLOW with O_DIRECTORY answers ENOTDIR (or ELOOP) for a link: say which it was.
        if error.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(name, dir_fd):
            raise ChangedError(errno.ELOOP, 'it is a symbolic link, which is never followed') from None
        raise
    try:
        status = os.fstat(fd)
        if expected is not None and identity_of(status) != expected:
            raise ChangedError(errno.ESTALE, 'it changed since it was listed (another directory is there now)')
    except BaseException:
        os.close(fd)
        raise
    return fd, status


def _empty_dir(fd: int, device: int, depth: int) -> None:
    """Delete everything inside an open directory, depth first, never following a link nor leaving the device."""
    with os.scandir(fd) as listing:
        entries = list(listing)
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            # Files and symbolic links alike: unlink removes the link, never what it points to.
            os.unlink(entry.name, dir_fd=fd)
            continue
        if depth >= MAX_DEPTH:
            raise OSError(errno.ELOOP, f'more than {MAX_DEPTH} directory levels; left in place')
        child, status = open_dir(entry.name, fd, identity_of(entry.stat(follow_symlinks=False)))
        try:
            if status.st_dev != device:
                raise OSError(errno.EXDEV, f'{entry.name} is another file system mounted inside; left in place')
            _empty_dir(child, device, depth + 1)
        finally:
            os.close(child)
        os.rmdir(entry.name, dir_fd=fd)


def _remove_opened(parent_fd: int, name: str, fd: int, status: os.stat_result) -> None:
    """Delete the directory ``name`` of an open directory, already opened as ``fd``, then close it."""
    try:
        _empty_dir(fd, status.st_dev, 1)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent_fd)


def remove_tree(parent_fd: int, name: str, expected: t.Optional[Identity]) -> None:
    """Delete the directory ``name`` of an open directory, with the descriptor-based walk of _empty_dir."""
    fd, status = open_dir(name, parent_fd, expected)
    _remove_opened(parent_fd, name, fd, status)


def newest_mtime(fd: int) -> float:
    """The newest mtime of an open directory and its direct entries (one directory read, no deep walk on Lustre)."""
    newest = os.fstat(fd).st_mtime
    with os.scandir(fd) as entries:
        for entry in entries:
            try:
                newest = max(newest, entry.stat(follow_symlinks=False).st_mtime)
            except FileNotFoundError:
                continue
    return newest


def has_entry(fd: int, name: str) -> bool:
    """Whether an open directory holds ``name`` (as os.path.exists would say)."""
    try:
        os.stat(name, dir_fd=fd)
    except (OSError, ValueError):
        return False
    return True


def real_path(fd: int, fallback: str) -> str:
    """The path an open directory has now, for comparing link targets; the given path where /proc says nothing."""
    try:
        return os.readlink(f'/proc/self/fd/{fd}')
    except OSError:
        return os.path.realpath(fallback)


def scan(root_fd: int, root: str, compiled: re.Pattern, complete_marker: str,
         log: t.Callable[..., None]) -> tuple[list[Checkpoint], list[tuple[str, Identity]], bool]:
    """The checkpoints of an open root, the leftovers of interrupted removals, and False when one was skipped."""
    linked = set()
    candidates, leftovers = [], []
    root_real = real_path(root_fd, root)
    with os.scandir(root_fd) as entries:
        for entry in entries:
            if entry.name.startswith(PRUNING_PREFIX) and entry.is_dir(follow_symlinks=False):
                leftovers.append((entry.name, identity_of(entry.stat(follow_symlinks=False))))
            elif entry.is_symlink():
                # Only read, to keep what a link names: realpath never changes anything.
                target = os.path.realpath(os.path.join(root_real, entry.name))
                if os.path.dirname(target) == root_real:
                    linked.add(os.path.basename(target))
            elif entry.is_dir(follow_symlinks=False) and step_of(compiled, entry.name) is not None:
                candidates.append((entry.name, identity_of(entry.stat(follow_symlinks=False))))
    checkpoints = []
    ok = True
    for name, identity in candidates:
        try:
            fd, _status = open_dir(name, root_fd, identity)
        except OSError as error:
            log(f'{os.path.join(root, name)}: skipped: {error.strerror or error}', error=True)
            ok = False
            continue
        try:
            complete = not complete_marker or has_entry(fd, complete_marker)
            checkpoints.append(Checkpoint(name, step_of(compiled, name), newest_mtime(fd), complete, name in linked, identity))
        finally:
            os.close(fd)
    return checkpoints, sorted(leftovers), ok


def remove(root_fd: int, name: str, expected: t.Optional[Identity]) -> None:
    """Hide the checkpoint under a name no pattern matches, then delete it, if it is still what was listed."""
    hidden = PRUNING_PREFIX + name
    os.rename(name, hidden, src_dir_fd=root_fd, dst_dir_fd=root_fd)
    try:
        fd, status = open_dir(hidden, root_fd, expected)
    except ChangedError:
        # Not what was listed (a link, another directory): give it its name back, untouched.
        os.rename(hidden, name, src_dir_fd=root_fd, dst_dir_fd=root_fd)
        raise
    # From here on a failure leaves the hidden name, which the next run finishes removing.
    _remove_opened(root_fd, hidden, fd, status)


def open_root(root: str, listed: t.Optional[Identity]) -> int:
    """Open a root as a directory, never through a symbolic link, checked against what the glob listing saw."""
    fd, _status = open_dir(root, None, listed)
    return fd


def prune_root(root: str, settings: dict[str, t.Any], log: Logger, listed: t.Optional[Identity] = None) -> bool:
    """Apply the policy to one root; False when something could not be read or removed."""
    try:
        root_fd = open_root(root, listed)
    except ChangedError as error:
        log(f'{root}: cannot read the checkpoint directory: {error.strerror}; skipped', error=True)
        return False
    except OSError as error:
        log(f'{root}: cannot read the checkpoint directory: {error}', error=True)
        return False
    try:
        return _prune_open_root(root_fd, root, settings, log)
    finally:
        os.close(root_fd)


def _prune_open_root(root_fd: int, root: str, settings: dict[str, t.Any], log: Logger) -> bool:
    try:
        checkpoints, leftovers, ok = scan(root_fd, root, settings['compiled'], settings['complete_marker'], log)
    except OSError as error:
        log(f'{root}: cannot read the checkpoint directory: {error}', error=True)
        return False
    for name, identity in leftovers:
        path = os.path.join(root, name)
        if settings['dry_run']:
            log(f'would finish removing {path} (left by an interrupted removal)')
            continue
        try:
            remove_tree(root_fd, name, identity)
            log(f'finished removing {path} (left by an interrupted removal)')
        except OSError as error:
            log(f'cannot remove {path}: {error.strerror or error}', error=True)
            ok = False
    decisions = plan(checkpoints, settings['keep_last'], settings['keep_every'], settings['min_age'])
    removed = 0
    for decision in decisions:
        path = os.path.join(root, decision.checkpoint.name)
        if decision.keep:
            log(f'keep {path} (step {decision.checkpoint.step}): {decision.reason}')
        elif settings['dry_run']:
            log(f'would remove {path} (step {decision.checkpoint.step}): {decision.reason}')
            removed += 1
        else:
            try:
                remove(root_fd, decision.checkpoint.name, decision.checkpoint.identity)
                log(f'removed {path} (step {decision.checkpoint.step}): {decision.reason}')
                removed += 1
            except ChangedError as error:
                log(f'cannot remove {path}: {error.strerror}; left in place', error=True)
                ok = False
            except OSError as error:
                log(f'cannot remove {path}: {error}', error=True)
                ok = False
    verb = 'would remove' if settings['dry_run'] else 'removed'
    log(f'{root}: {len(decisions)} checkpoints, kept {len(decisions) - removed}, {verb} {removed}')
    return ok


SETTINGS = {
    # name: (type, default)
    'roots': (list, []),
    'pattern': (str, DEFAULT_PATTERN),
    'keep_last': (int, 3),
    'keep_every': (int, 0),
    'min_age': (int, 3600),
    'complete_marker': (str, ''),
    'dry_run': (bool, True),
    'log_file': (str, ''),
}


def _listed_directory(path: str) -> t.Optional[Identity]:
    """The identity of a directory a glob matched, or None for anything else (a symbolic link is never a root)."""
    try:
        status = os.lstat(path)
    except OSError:
        return None
    return identity_of(status) if stat.S_ISDIR(status.st_mode) else None


def expand_roots(roots: t.Sequence[str], log: Logger) -> list[tuple[str, t.Optional[Identity]]]:
    """Roots as given; a root with glob characters (/lustre/ckpt/*) stands for every directory it matches.

    A matched directory comes with its identity, which must still hold when it is opened; a root given
    plainly comes with None (it is still never followed through a symbolic link).
    """
    expanded: dict[str, t.Optional[Identity]] = {}
    for root in roots:
        if re.search(r'[*?[]', root):
            matches = []
            for path in sorted(glob.glob(root)):
                identity = _listed_directory(path)
                if identity is not None:
                    matches.append(path)
                    expanded.setdefault(path, identity)
            if not matches:
                log(f'{root}: no directory matches')
        else:
            expanded.setdefault(root, None)
    return list(expanded.items())


def merged_settings(schema: dict[str, tuple[type, t.Any]], config_path: t.Optional[str], overrides: dict[str, t.Any],
                    error: type[PruneConfigError] = PruneConfigError, option: str = '') -> dict[str, t.Any]:
    """Defaults of `schema` ({name: (type, default)}), then the JSON configuration file, then the command line's
    overrides that are set; unknown settings and values of the wrong type are refused naming them (`error`).

    Shared by the programs that read such a file (the pruner, the checkpoint archive); `option` names the command line
    option that gave the file, for the message when it cannot be read.
    """
    settings = {name: default for name, (_kind, default) in schema.items()}
    if config_path:
        try:
            with open(config_path, encoding='utf-8') as handle:
                loaded = json.load(handle)
        except (OSError, ValueError) as problem:
            raise error(f'cannot read the configuration {config_path}{option}: {problem}') from None
        if not isinstance(loaded, dict):
            raise error(f'{config_path}: the configuration must be a JSON object')
        unknown = sorted(set(loaded) - set(schema))
        if unknown:
            raise error(f'{config_path}: unknown settings {unknown}; known: {sorted(schema)}')
        settings.update(loaded)
    settings.update({name: value for name, value in overrides.items() if value is not None})
    for name, (kind, _default) in schema.items():
        value = settings[name]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise error(f'{name}: {value!r} is not a {kind.__name__}')
    return settings


def load_settings(config_path: t.Optional[str], overrides: dict[str, t.Any]) -> dict[str, t.Any]:
    """Defaults, then the JSON configuration file, then the command line; checked."""
    settings = merged_settings(SETTINGS, config_path, overrides)
    roots = settings['roots']
    if not roots or not all(isinstance(root, str) and os.path.isabs(root) for root in roots):
        raise PruneConfigError(f'roots: {roots!r} must be a non-empty list of absolute directory paths')
    if '/' in settings['complete_marker']:
        raise PruneConfigError(f"complete_marker: {settings['complete_marker']!r} must be a file name, not a path")
    check_policy(settings['keep_last'], settings['keep_every'], settings['min_age'])
    settings['compiled'] = compile_pattern(settings['pattern'])
    return settings


def parse_args(argv: t.Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split('\n\n', 1)[0],
                                     epilog='Command-line values override the configuration file.')
    parser.add_argument('--config', metavar='FILE', help='JSON file with the settings below (roots, pattern, keep_last, ...)')
    parser.add_argument('--root', dest='roots', action='append', metavar='DIR', help='checkpoint directory of one run (repeatable)')
    parser.add_argument('--pattern', help=f'checkpoint directory names, with the step number in group "step" (default: {DEFAULT_PATTERN})')
    parser.add_argument('--keep-last', dest='keep_last', type=int, metavar='N', help='newest complete checkpoints to keep (default: 3)')
    parser.add_argument('--keep-every', dest='keep_every', type=int, metavar='M',
                        help='also keep every checkpoint whose step number is a multiple of M; 0: none (default: 0)')
    parser.add_argument('--min-age', dest='min_age', type=int, metavar='SECONDS',
                        help='checkpoints modified more recently are in progress and kept (default: 3600)')
    parser.add_argument('--complete-marker', dest='complete_marker', metavar='NAME',
                        help='file a finished checkpoint contains; checkpoints without it are kept (default: none)')
    parser.add_argument('--dry-run', dest='dry_run', action=argparse.BooleanOptionalAction, default=None,
                        help='only print what would be removed (default: on)')
    parser.add_argument('--log-file', dest='log_file', metavar='PATH', help='also append every line to this file')
    parser.add_argument('--lock-file', dest='lock_file', default=DEFAULT_LOCK_FILE, metavar='PATH',
                        help=f'held while running, so two runs never overlap (default: {DEFAULT_LOCK_FILE})')
    return parser.parse_args(argv)


def main(argv: t.Optional[t.Sequence[str]] = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    overrides = {name: getattr(args, name) for name in SETTINGS}
    try:
        settings = load_settings(args.config, overrides)
    except PruneConfigError as error:
        say(f'{PROGRAM}: {error}', sys.stderr)
        return 2
    try:
        if args.lock_file == DEFAULT_LOCK_FILE:
            os.makedirs(os.path.dirname(DEFAULT_LOCK_FILE), mode=0o755, exist_ok=True)
        # Read-only is enough for flock, so a service user can lock a file root created, and the reverse.
        lock = os.open(args.lock_file, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as error:
        say(f'{PROGRAM}: cannot open the lock file {args.lock_file}: {error}; nothing done', sys.stderr)
        return 1
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        os.close(lock)
        say(f'{PROGRAM}: another run holds {args.lock_file} ({error}); nothing done', sys.stderr)
        return 1
    try:
        log = Logger(settings['log_file'] or None, settings['dry_run'])
    except OSError as error:
        os.close(lock)
        say(f"{PROGRAM}: cannot open the log file {settings['log_file']}: {error}", sys.stderr)
        return 1
    try:
        ok = True
        for root, listed in expand_roots(settings['roots'], log):
            ok = prune_root(root, settings, log, listed) and ok
        return 0 if ok else 1
    finally:
        log.close()
        os.close(lock)
