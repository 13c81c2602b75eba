# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Archive complete training checkpoints to S3, verified, with retention in the bucket and on shared storage.

The program ``llmforge-checkpoint-archive`` (``llmforge-restore`` is its ``restore`` command), installed with the
collection's node programs (see the node_programs role). Standard library only, no Ansible import, except the S3
client library boto3, which the hosts get from their distribution (Debian: python3-boto3) and which is loaded only
by the functions that talk to S3 (through importlib: a node program imports nothing but the standard library and
this collection's module_utils at its top, and ``--help``, configuration errors and the unit tests need no boto3).

Why boto3 rather than rclone or ``aws s3 sync``: an archive is only worth something when it is verified, and what
"verified" and "safe to delete" mean here is the program's own logic, in one tested Python program: the S3 ETag of
every file computed locally (MD5 for a single PUT, MD5 of the parts' MD5s and ``-N`` for a multipart upload whose
part size the program chooses) and compared with what the endpoint reports; a per-step manifest uploaded last, so
that a step counts only once all of it is there; retention in the bucket with the pruner's policy; shared copies
removed only with a verified archive copy, through the pruner's removal code (never following links, renamed
before deletion); restore with sha256 checks and the trainer's commit protocol (hidden directory, marker last,
rename). A sync tool would have to be wrapped in all of that anyway, without control over part sizes or
per-object checks, and it would read the checkpoints as root instead of as their owner.

Commands (a JSON configuration file, ``--config``, default /etc/llmforge/archive/archive.json):

``archive`` (a systemd timer, as root; or at a job's end with ``--root RUN_DIR``): every run directory that
``roots`` matches (glob patterns, e.g. ``/shared/llmforge/runs/*/llmforge-train-*``), opened like the pruner opens
its roots (``O_NOFOLLOW | O_DIRECTORY``, checked against what the listing saw), is processed as its owner: the
effective uid and gid become the run directory's owner's (and the supplementary groups that user's), and go back
to root after the run, so the program reads only what the owner could read. A checkpoint is a directory directly in
the run directory whose name matches ``pattern``; it is archived once it holds ``complete_marker`` and nothing in
it was modified for ``min_age`` seconds. Its regular files are read with ``O_NOFOLLOW``; symbolic links and other
entries in it are skipped with a log line, never followed; a file or directory in it that is not the owner's, or is
writable by group or others, keeps the checkpoint out of the archive (the trainer would not resume from it).

    <prefix>/<owner>/<run directory>/step_%08d/<path in the checkpoint>     each file but the marker
    <prefix>/<owner>/<run directory>/step_%08d/llmforge-archive-manifest.json   uploaded last

Each file is uploaded (multipart above ``multipart_threshold`` in parts of ``multipart_chunk``, ``threads`` parts
at a time, each part and each single PUT sent with its Content-MD5), then checked with a HEAD: size and ETag must
be what the program computed. The manifest lists each file's size, sha256, ETag, mode and mtime, the marker's
content, the owner (uid, name), the host and the time. A step is *archived* only when its manifest exists and every
file it lists HEADs with the listed size and ETag (*verified*); a failed upload leaves no manifest. A step that is
archived, verified and still the checkpoint in the run directory (same marker, same files and sizes) is skipped; one
whose archived copy does not verify or differs (a checkpoint written again after a resume) is archived again, its old
manifest deleted first; objects under a step that its new manifest does not list are deleted after it.

Then, per run: with ``prune_shared``, the pruner's ``plan`` (``shared_keep_last``, ``shared_keep_every``,
``min_age``) over the checkpoints in the run directory; one it would remove is removed (as the owner, renamed to
``.llmforge-pruning-<name>``, then deleted: the pruner's code) only when its archive copy verified in this run and
is that checkpoint; otherwise it is kept and the log says why. Then, with ``bucket_keep_last`` > 0, the pruner's
``plan`` over the verified archived steps (``bucket_keep_last``, ``bucket_keep_every``); a step beyond it is deleted
from the bucket, its manifest first, then its files. A checkpoint that this bucket policy would delete at once is not
uploaded in the first place (so it is never removed from shared storage by this program either). A step whose
archived copy does not verify is not counted: it is deleted only when the policy would not keep it even if it
verified, else kept and reported (an error when it has a manifest).

``restore <user>/<run> [--step N] [--to DIR] [--force]`` (as root, or as that user): the newest verified archived
step (or step N, which must verify) is downloaded as the user (euid switch) into DIR, by default
``<restore_root>/<user>/<run>``. DIR, when it exists, must be the user's, a directory (not a link), not writable by
group or others, below directories only root or the user own (the trainer's trust rules); when missing it is made
0700 if its parent is the user's. The files go into ``.tmp-step_%08d-restore-<pid>`` (sha256 and size checked
against the manifest, modes and mtimes as archived, fsynced), the marker is written last from the manifest, and the
directory is renamed to ``step_%08d``. When DIR holds a complete checkpoint of step N or later (or a step N
directory), the restore is refused unless ``--force``, which moves those into ``DIR/.superseded-<time>/`` (deleting
nothing). A restore that fails leaves no step directory and removes its temporary directory.

``list [<user>/<run>]``: the archived steps of one run (or of every run under ``prefix``) and whether each verifies
(exit 1 when one does not).

Settings (JSON object; unknown keys are refused; ``--root``, ``--dry-run``, ``--log-file`` override):
``endpoint_url`` (http(s)://host[:port], required), ``region`` (us-east-1), ``bucket`` (required), ``prefix``
(llmforge; may be empty), ``credentials_file`` (required), ``create_bucket`` (false), ``addressing_style`` (path;
virtual or auto), ``ca_bundle`` (a CA file for https; empty: the system's), ``roots`` (required by ``archive``),
``restore_root`` (empty: ``restore`` needs ``--to``), ``pattern`` (``step_(?P<step>[0-9]+)``), ``complete_marker``
(llmforge-complete.json), ``min_age`` (300 s), ``multipart_threshold`` (64 MiB, at most 5 GiB),
``multipart_chunk`` (16 MiB, 5 MiB to 5 GiB), ``threads`` (4: parts uploaded or downloaded at once, and HEADs),
``bucket_keep_last`` (0: no retention in the bucket), ``bucket_keep_every`` (0), ``prune_shared`` (false),
``shared_keep_last`` (3, at least 1), ``shared_keep_every`` (0), ``dry_run`` (false: ``archive`` logs what it would
upload, delete and remove, as if the uploads verified, and changes nothing), ``log_file`` (empty). ``archive`` holds
``--lock-file`` (default /run/llmforge-checkpoint-archive/lock) so that two runs never overlap; a second one exits 1
at once. ``restore`` and ``list`` take no lock.

Errors that stop everything before data is touched name the setting: the credentials file (``credentials_file``:
JSON ``{"access_key", "secret_key"}``, a regular file owned by root or the running user, mode 0600 or stricter; its
content is never printed), the endpoint (``endpoint_url``, checked with a HEAD on the bucket), the bucket (never
created unless ``create_bucket``), the region and access rights. Every decision is logged, one line each, to
standard output (errors to standard error) and to the optional ``log_file``. Exit status: 0 done, 1 something could
not be archived, verified, pruned or restored (or a restore was refused), 2 bad arguments, configuration or
credentials file.

ETag verification needs an endpoint whose ETags are MD5-based (Ceph RGW, MinIO, AWS S3 without SSE-KMS/SSE-C).
"""

from __future__ import annotations

import argparse
import base64
import collections
import concurrent.futures
import contextlib
import fcntl
import functools
import hashlib
import importlib
import json
import os
import pwd
import re
import socket
import stat
import sys
import time
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils.programs._checkpoint_prune import (
    MAX_DEPTH, ChangedError, Checkpoint, Identity, Logger, PruneConfigError, check_policy,
    compile_pattern, expand_roots, identity_of, merged_settings, open_dir, plan, remove, remove_tree, say, scan)

PROGRAM = 'llmforge-checkpoint-archive'
RESTORE_PROGRAM = 'llmforge-restore'
DEFAULT_CONFIG = '/etc/llmforge/archive/archive.json'
DEFAULT_LOCK_FILE = '/run/llmforge-checkpoint-archive/lock'
# The reference trainer's checkpoints (roles/training_env/files/llmforge_train.py) and its marker.
DEFAULT_PATTERN = r'step_(?P<step>[0-9]+)'
DEFAULT_MARKER = 'llmforge-complete.json'
MANIFEST = 'llmforge-archive-manifest.json'
MANIFEST_FORMAT = 1
RESTORE_TMP = '.tmp-step_{step:08d}-restore-{pid}'
SUPERSEDED_PREFIX = '.superseded-'
MIB = 1 << 20
# S3's limits: parts of 5 MiB to 5 GiB (the last may be smaller), at most 10000 of them; a single PUT up to 5 GiB.
MIN_PART, MAX_PART, MAX_PARTS, MAX_PUT = 5 * MIB, 5 << 30, 10000, 5 << 30
MAX_MARKER_BYTES = 1 * MIB
MAX_MANIFEST_BYTES = 64 * MIB
READ_BLOCK = 8 * MIB
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# A user or run directory name as a key component: no slash, no leading dot, nothing a shell or a URL mangles.
_NAME = re.compile(r'[A-Za-z0-9_][A-Za-z0-9._@+=,-]{0,254}')
_STEP_DIR = re.compile(r'step_([0-9]{8,18})/')
_SHA256 = re.compile(r'[0-9a-f]{64}')
_BUCKET = re.compile(r'[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]')
_PREFIX = re.compile(r'[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*')
_REGION = re.compile(r'[a-z0-9-]{1,32}')
_ENDPOINT = re.compile(r'https?://[^/\s?#@]+/?')
# Error codes of S3 (and of HEAD requests, which carry only the HTTP status).
_MISSING = frozenset({'404', 'NoSuchKey', 'NotFound', 'NoSuchBucket'})
_DENIED = frozenset({'403', 'AccessDenied', 'Forbidden', 'InvalidAccessKeyId', 'SignatureDoesNotMatch',
                     'AllAccessDisabled', 'AccountProblem', 'InvalidToken', 'ExpiredToken'})
_WRONG_REGION = frozenset({'301', 'PermanentRedirect', 'AuthorizationHeaderMalformed', 'IllegalLocationConstraintException',
                           'InvalidLocationConstraint', 'InvalidRegion'})
_CONNECTION_ERRORS = frozenset({'ConnectionError', 'EndpointConnectionError', 'ConnectTimeoutError',
                                'ConnectionClosedError', 'ReadTimeoutError', 'ProxyConnectionError'})


class ArchiveConfigError(PruneConfigError):
    """A setting, argument or credentials file that cannot be used; the message names it (exit 2)."""


class ArchiveError(Exception):
    """Something could not be archived, verified, removed or restored; the message says what (exit 1)."""


# Settings ----------------------------------------------------------------------------------------------

SETTINGS: dict[str, tuple[type, t.Any]] = {
    # name: (type, default)
    'endpoint_url': (str, ''),
    'region': (str, 'us-east-1'),
    'bucket': (str, ''),
    'prefix': (str, 'llmforge'),
    'credentials_file': (str, ''),
    'create_bucket': (bool, False),
    'addressing_style': (str, 'path'),
    'ca_bundle': (str, ''),
    'roots': (list, []),
    'restore_root': (str, ''),
    'pattern': (str, DEFAULT_PATTERN),
    'complete_marker': (str, DEFAULT_MARKER),
    'min_age': (int, 300),
    'multipart_threshold': (int, 64 * MIB),
    'multipart_chunk': (int, 16 * MIB),
    'threads': (int, 4),
    'bucket_keep_last': (int, 0),
    'bucket_keep_every': (int, 0),
    'prune_shared': (bool, False),
    'shared_keep_last': (int, 3),
    'shared_keep_every': (int, 0),
    'dry_run': (bool, False),
    'log_file': (str, ''),
}


def _check_int(settings: dict[str, t.Any], name: str, least: int, most: t.Optional[int] = None) -> None:
    value = settings[name]
    if value < least or (most is not None and value > most):
        bounds = f'of at least {least}' if most is None else f'from {least} to {most}'
        raise ArchiveConfigError(f'{name}: {value!r} must be an integer {bounds}')


def check_settings(settings: dict[str, t.Any], command: str) -> dict[str, t.Any]:
    """Check the values (types were checked); add the compiled pattern. The message names the setting."""
    for name in ('endpoint_url', 'bucket', 'credentials_file'):
        if not settings[name]:
            raise ArchiveConfigError(f'{name}: not set')
    if not _ENDPOINT.fullmatch(settings['endpoint_url']):
        raise ArchiveConfigError(f"endpoint_url: {settings['endpoint_url']!r} is not an http(s)://host[:port] URL")
    if not _REGION.fullmatch(settings['region']):
        raise ArchiveConfigError(f"region: {settings['region']!r} is not a region name such as us-east-1")
    if not _BUCKET.fullmatch(settings['bucket']) or '..' in settings['bucket']:
        raise ArchiveConfigError(f"bucket: {settings['bucket']!r} is not an S3 bucket name (3 to 63 lower-case letters, "
                                 'digits, dots and hyphens, starting and ending with a letter or digit)')
    if settings['prefix'] and not _PREFIX.fullmatch(settings['prefix']):
        raise ArchiveConfigError(f"prefix: {settings['prefix']!r} must be empty or words of letters, digits, . _ - "
                                 'joined by single slashes (no slash at either end)')
    if settings['addressing_style'] not in ('path', 'virtual', 'auto'):
        raise ArchiveConfigError(f"addressing_style: {settings['addressing_style']!r} must be path, virtual or auto")
    for name in ('credentials_file', 'ca_bundle', 'restore_root', 'log_file'):
        if settings[name] and not os.path.isabs(settings[name]):
            raise ArchiveConfigError(f'{name}: {settings[name]!r} must be an absolute path')
    roots = settings['roots']
    if not all(isinstance(root, str) and os.path.isabs(root) for root in roots) or (command == 'archive' and not roots):
        raise ArchiveConfigError(f'roots: {roots!r} must be a non-empty list of absolute glob patterns of run '
                                 'directories (e.g. /shared/llmforge/runs/*/llmforge-train-*)')
    marker = settings['complete_marker']
    if not marker or '/' in marker or marker in ('.', '..', MANIFEST):
        raise ArchiveConfigError(f'complete_marker: {marker!r} must be a file name (not {MANIFEST})')
    _check_int(settings, 'min_age', 0)
    _check_int(settings, 'multipart_threshold', 0, MAX_PUT)
    _check_int(settings, 'multipart_chunk', MIN_PART, MAX_PART)
    _check_int(settings, 'threads', 1, 64)
    _check_int(settings, 'bucket_keep_last', 0)
    _check_int(settings, 'bucket_keep_every', 0)
    _check_int(settings, 'shared_keep_last', 1)
    _check_int(settings, 'shared_keep_every', 0)
    check_policy(settings['shared_keep_last'], settings['shared_keep_every'], settings['min_age'])
    settings['compiled'] = compile_pattern(settings['pattern'])
    return settings


def load_settings(config_path: str, overrides: dict[str, t.Any], command: str) -> dict[str, t.Any]:
    """Defaults, then the JSON configuration file, then the command line; checked."""
    return check_settings(merged_settings(SETTINGS, config_path, overrides, ArchiveConfigError, ' (--config)'), command)


def read_credentials(path: str) -> dict[str, str]:
    """The access and secret key from a JSON file only root or the running user can read; never printed."""
    where = f'credentials_file {path}'
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        raise ArchiveConfigError(f'{where}: no such file') from None
    except OSError as error:
        raise ArchiveConfigError(f'{where}: {error.strerror or error}') from None
    if stat.S_ISLNK(status.st_mode):
        raise ArchiveConfigError(f'{where}: a symbolic link; it must be a regular file')
    if not stat.S_ISREG(status.st_mode):
        raise ArchiveConfigError(f'{where}: not a regular file')
    if status.st_uid not in (0, os.geteuid()):
        raise ArchiveConfigError(f'{where}: owned by uid {status.st_uid}; it must be owned by root or by the user '
                                 f'running this program (uid {os.geteuid()})')
    if status.st_mode & 0o077:
        raise ArchiveConfigError(f'{where}: mode {stat.S_IMODE(status.st_mode):04o} is too open; it must be 0600 or '
                                 f'stricter (chmod 600 {path})')
    try:
        fd = os.open(path, _FILE_FLAGS)
        try:
            if identity_of(os.fstat(fd)) != identity_of(status):
                raise ArchiveConfigError(f'{where}: changed while it was opened')
            data = os.read(fd, 65536)
        finally:
            os.close(fd)
        document = json.loads(data.decode('utf-8'))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        # The error names a position, never the content.
        detail = error.strerror if isinstance(error, OSError) else f'not JSON ({type(error).__name__})'
        raise ArchiveConfigError(f'{where}: cannot be read: {detail}') from None
    keys = ('access_key', 'secret_key')
    if not isinstance(document, dict) or not all(isinstance(document.get(key), str) and document[key] for key in keys):
        raise ArchiveConfigError(f'{where}: must be a JSON object with non-empty strings access_key and secret_key')
    unknown = sorted(set(document) - {*keys, 'session_token'})
    if unknown:
        raise ArchiveConfigError(f'{where}: unknown keys {unknown}; known: access_key, secret_key, session_token')
    return {key: str(value) for key, value in document.items()}


# Users ------------------------------------------------------------------------------------------------


class User(t.NamedTuple):
    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]


def _user(entry: pwd.struct_passwd) -> User:
    return User(entry.pw_name, entry.pw_uid, entry.pw_gid, tuple(os.getgrouplist(entry.pw_name, entry.pw_gid)))


def user_by_uid(uid: int) -> User:
    try:
        return _user(pwd.getpwuid(uid))
    except KeyError:
        raise ArchiveError(f'uid {uid} has no user on this host (passwd, LDAP): cannot act as the owner') from None


def user_by_name(name: str) -> User:
    try:
        return _user(pwd.getpwnam(name))
    except KeyError:
        raise ArchiveConfigError(f'user {name}: no such user on this host') from None


@contextlib.contextmanager
def as_user(user: User) -> t.Iterator[None]:
    """Effective uid, gid and groups of `user` while inside (as root); a process not root acts only as itself."""
    euid = os.geteuid()
    if euid != 0:
        if euid != user.uid:
            raise ArchiveError(f'this program runs as uid {euid}, neither root nor {user.name} (uid {user.uid}): '
                               f'it cannot act as {user.name}')
        yield
        return
    saved_gid, saved_groups = os.getegid(), os.getgroups()

    def back() -> None:
        os.seteuid(0)
        os.setegid(saved_gid)
        os.setgroups(saved_groups)

    try:
        os.setgroups(list(user.groups))
        os.setegid(user.gid)
        os.seteuid(user.uid)
    except BaseException:
        back()
        raise
    try:
        yield
    finally:
        back()


def ancestor_problem(directory: str, uid: int, what: str) -> t.Optional[str]:
    """Why a directory above `what` could let another user swap it, or None (the trainer's rule)."""
    path = os.path.realpath(directory)
    while True:
        info = os.stat(path)
        if info.st_uid not in (0, uid):
            return f'{path} (above {what}) is owned by uid {info.st_uid}, neither root nor {uid}'
        if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
            return (f'{path} (above {what}) is writable by group or others without the sticky bit '
                    f'(mode {stat.S_IMODE(info.st_mode):04o})')
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def entry_problem(path: str, status: os.stat_result, uid: int) -> t.Optional[str]:
    """Why a file or directory of a checkpoint or run (its lstat) is not trusted, or None (the trainer's rule)."""
    if status.st_uid != uid:
        return f"{path} is owned by uid {status.st_uid}, not by the run's owner (uid {uid})"
    if status.st_mode & 0o022:
        return f'{path} is writable by group or others (mode {stat.S_IMODE(status.st_mode):04o})'
    return None


# S3 ---------------------------------------------------------------------------------------------------


def error_code(error: BaseException) -> str:
    """The S3 error code of a client error (botocore's ``.response['Error']['Code']``), or ''."""
    response = getattr(error, 'response', None)
    if not isinstance(response, dict):
        return ''
    code = (response.get('Error') or {}).get('Code')
    if code:
        return str(code)
    status = (response.get('ResponseMetadata') or {}).get('HTTPStatusCode')
    return str(status) if status else ''


def is_connection_error(error: BaseException) -> bool:
    return any(kind.__name__ in _CONNECTION_ERRORS for kind in type(error).__mro__)


def is_missing(error: BaseException) -> bool:
    return error_code(error) in _MISSING


def is_remote_error(error: BaseException) -> bool:
    return bool(error_code(error)) or is_connection_error(error) or type(error).__module__.startswith(('botocore', 'boto3'))


def bucket_region(error: BaseException) -> str:
    response = getattr(error, 'response', None) or {}
    headers = (response.get('ResponseMetadata') or {}).get('HTTPHeaders') or {}
    return str(headers.get('x-amz-bucket-region') or (response.get('Error') or {}).get('Region') or '')


def describe(error: BaseException, settings: dict[str, t.Any], of_bucket: bool = False) -> str:
    """A remote error in words that name the setting to look at (`of_bucket`: the answer to a HEAD on the bucket)."""
    code = error_code(error)
    url, bucket = settings['endpoint_url'], settings['bucket']
    if is_connection_error(error):
        return f'endpoint_url {url}: cannot connect: {error}'
    if code == 'NoSuchBucket' or (of_bucket and code in ('404', 'NotFound')):
        return f"bucket {bucket}: no such bucket at {url} (create it, or set create_bucket: true)"
    region = bucket_region(error)
    if code in _WRONG_REGION or (region and region != settings['region']):
        said = f' (the endpoint says {region})' if region else ''
        return f"region {settings['region']}: wrong for bucket {bucket} at {url}{said}: {code}"
    if code in _DENIED:
        return (f"credentials_file {settings['credentials_file']}: access to bucket {bucket} at {url} denied ({code}): "
                'check the keys in it and what that account may do')
    message = (getattr(error, 'response', None) or {}).get('Error', {}).get('Message', '') if code else ''
    return f'{code}: {message}' if code and message else str(error) or type(error).__name__


def make_client(settings: dict[str, t.Any], credentials: dict[str, str]) -> t.Any:
    """A boto3 S3 client for the configured endpoint (boto3 loaded here, not at import)."""
    try:
        boto3 = importlib.import_module('boto3')
        botocore_config = importlib.import_module('botocore.config')
    except ImportError as error:
        raise ArchiveError(f'cannot load boto3 ({error}): install it (Debian and Ubuntu: python3-boto3)') from None
    options: dict[str, t.Any] = {
        'connect_timeout': 10, 'read_timeout': 120, 'retries': {'max_attempts': 5, 'mode': 'standard'},
        'max_pool_connections': settings['threads'] + 4, 's3': {'addressing_style': settings['addressing_style']},
        # The program sends Content-MD5 itself; newer botocore would add CRC trailers some S3 servers refuse.
        'request_checksum_calculation': 'when_required', 'response_checksum_validation': 'when_required'}
    try:
        config = botocore_config.Config(**options)
    except TypeError:  # botocore before 1.36 has neither checksum setting
        for name in ('request_checksum_calculation', 'response_checksum_validation'):
            options.pop(name)
        config = botocore_config.Config(**options)
    return boto3.session.Session().client(
        's3', endpoint_url=settings['endpoint_url'], region_name=settings['region'],
        aws_access_key_id=credentials['access_key'], aws_secret_access_key=credentials['secret_key'],
        aws_session_token=credentials.get('session_token') or None, verify=settings['ca_bundle'] or None, config=config)


def md5_of(data: bytes) -> t.Any:
    return hashlib.md5(data, usedforsecurity=False)


def read_exact(fd: int, offset: int, count: int) -> bytes:
    """`count` bytes of an open file from `offset`; an error if the file is shorter (it shrank while read)."""
    pieces, done = [], 0
    while done < count:
        data = os.pread(fd, count - done, offset + done)
        if not data:
            raise ArchiveError(f'the file ended after {offset + done} bytes, before the {offset + count} expected '
                               '(it changed while it was read)')
        pieces.append(data)
        done += len(data)
    return b''.join(pieces)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def in_order(pool: concurrent.futures.Executor, tasks: t.Iterable[t.Callable[[], t.Any]], window: int) -> t.Iterator[t.Any]:
    """Run the tasks on the pool, at most `window` at a time (the producer runs here); yield results in order."""
    pending: collections.deque = collections.deque()
    try:
        for task in tasks:
            pending.append(pool.submit(task))
            while len(pending) >= window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()
        concurrent.futures.wait(pending)


def unquote(etag: t.Any) -> str:
    return str(etag or '').strip('"')


class Archived(t.NamedTuple):
    """A step in the bucket: its manifest (when there is one that could be read) and why it does not verify."""
    step: int
    prefix: str
    manifest: t.Optional[dict]
    # None: verified (the manifest exists and every file it lists HEADs with its size and ETag).
    problem: t.Optional[str]
    has_manifest: bool


def safe_relative(path: t.Any) -> bool:
    return (isinstance(path, str) and bool(path) and '\x00' not in path and not path.startswith('/')
            and all(part not in ('', '.', '..') for part in path.split('/')))


def manifest_problem(document: t.Any, step: int) -> t.Optional[str]:
    """Why a manifest cannot be used, or None."""
    if not isinstance(document, dict) or document.get('format') != MANIFEST_FORMAT:
        return f'the manifest is not of format {MANIFEST_FORMAT}'
    if document.get('step') != step:
        return f"the manifest names step {document.get('step')!r}, not {step}"
    marker, files = document.get('marker'), document.get('files')
    if not isinstance(marker, dict) or not isinstance(marker.get('name'), str) or '/' in marker['name'] \
            or not isinstance(marker.get('sha256'), str) or not isinstance(marker.get('content', marker.get('content_base64')), str):
        return 'the manifest has no usable marker'
    if not isinstance(files, list):
        return 'the manifest has no file list'
    seen = set()
    for item in files:
        if not (isinstance(item, dict) and safe_relative(item.get('path')) and isinstance(item.get('size'), int)
                and not isinstance(item.get('size'), bool) and item['size'] >= 0 and isinstance(item.get('etag'), str)
                and isinstance(item.get('sha256'), str) and _SHA256.fullmatch(item['sha256'])
                and isinstance(item.get('mode', 0o600), int)):
            return f'the manifest lists an unusable file entry: {str(item)[:200]}'
        if item['path'] in seen or item['path'] in (MANIFEST, marker['name']):
            return f"the manifest lists {item['path']} twice or as the marker or manifest"
        seen.add(item['path'])
    return None


class Store:
    """The bucket: uploads with computed ETags, HEAD checks, manifests, deletions, downloads."""

    def __init__(self, client: t.Any, settings: dict[str, t.Any], log: t.Callable[..., None]):
        self.client = client
        self.settings = settings
        self.bucket = settings['bucket']
        self.log = log
        self.threads = settings['threads']
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix='s3')

    def close(self) -> None:
        self.pool.shutdown(wait=True)

    def url(self, key: str = '') -> str:
        return f's3://{self.bucket}/{key}'

    # The bucket itself

    def check_bucket(self, create: bool, dry_run: bool) -> bool:
        """HEAD the bucket (create it with `create`); raises ArchiveError naming the setting. False: dry run, missing."""
        try:
            self.client.head_bucket(Bucket=self.bucket)
            return True
        except Exception as error:  # pylint: disable=broad-except
            if not is_remote_error(error):
                raise
            if not (create and error_code(error) in ('404', 'NoSuchBucket')):
                raise ArchiveError(describe(error, self.settings, of_bucket=True)) from None
        if dry_run:
            self.log(f'would create bucket {self.bucket} at {self.settings["endpoint_url"]} (create_bucket)')
            return False
        arguments: dict[str, t.Any] = {'Bucket': self.bucket}
        if self.settings['region'] != 'us-east-1':
            arguments['CreateBucketConfiguration'] = {'LocationConstraint': self.settings['region']}
        try:
            self.client.create_bucket(**arguments)
        except Exception as error:  # pylint: disable=broad-except
            if not is_remote_error(error):
                raise
            raise ArchiveError(f'bucket {self.bucket}: cannot create it (create_bucket): {describe(error, self.settings)}') from None
        self.log(f'created bucket {self.bucket} at {self.settings["endpoint_url"]} (create_bucket)')
        return True

    # Listing

    def pages(self, **arguments: t.Any) -> t.Iterator[dict]:
        token = None
        while True:
            extra = {'ContinuationToken': token} if token else {}
            page = self.client.list_objects_v2(Bucket=self.bucket, **arguments, **extra)
            yield page
            token = page.get('NextContinuationToken')
            if not page.get('IsTruncated') or not token:
                return

    def folders(self, prefix: str) -> list[str]:
        """The names of the "directories" right under a prefix (CommonPrefixes, without the prefix or the slash)."""
        names = []
        for page in self.pages(Prefix=prefix, Delimiter='/'):
            names.extend(item['Prefix'][len(prefix):].rstrip('/') for item in page.get('CommonPrefixes') or [])
        return sorted(name for name in names if name)

    def keys(self, prefix: str) -> list[str]:
        return [item['Key'] for page in self.pages(Prefix=prefix) for item in page.get('Contents') or []]

    def steps(self, run_prefix: str) -> dict[int, str]:
        """{step: its prefix} of the step folders of a run in the bucket (complete or not)."""
        found = {}
        for name in self.folders(run_prefix):
            match = _STEP_DIR.fullmatch(name + '/')
            if match and name == f'step_{int(match.group(1)):08d}':
                found[int(match.group(1))] = f'{run_prefix}{name}/'
        return found

    # Objects

    def head_problem(self, key: str, size: int, etag: str) -> t.Optional[str]:
        """Why the object is not there with this size and ETag, or None."""
        try:
            response = self.client.head_object(Bucket=self.bucket, Key=key)
        except Exception as error:  # pylint: disable=broad-except
            if not is_remote_error(error):
                raise
            if is_missing(error):
                return f'{key}: missing'
            return f'{key}: cannot be checked: {describe(error, self.settings)}'
        if response.get('ContentLength') != size:
            return f"{key}: {response.get('ContentLength')} bytes, expected {size}"
        if unquote(response.get('ETag')) != etag:
            return f"{key}: ETag {unquote(response.get('ETag'))}, expected {etag}"
        return None

    def check_object(self, key: str, size: int, etag: str) -> None:
        problem = self.head_problem(key, size, etag)
        if problem:
            raise ArchiveError(f'uploaded, but the endpoint does not have it as sent: {problem}')

    def put_bytes(self, key: str, data: bytes, content_type: str = 'application/octet-stream') -> str:
        digest = md5_of(data)
        self.client.put_object(Bucket=self.bucket, Key=key, Body=data, ContentLength=len(data), ContentType=content_type,
                               ContentMD5=base64.b64encode(digest.digest()).decode('ascii'))
        return digest.hexdigest()

    def _put_part(self, key: str, upload_id: str, number: int, data: bytes, digest: bytes) -> dict:
        response = self.client.upload_part(Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=data,
                                           ContentLength=len(data), ContentMD5=base64.b64encode(digest).decode('ascii'))
        if unquote(response.get('ETag')) != digest.hex():
            raise ArchiveError(f"{key}: part {number}: the endpoint answered ETag {unquote(response.get('ETag'))}, not "
                               f'the MD5 of the part sent ({digest.hex()})')
        return {'PartNumber': number, 'ETag': response['ETag']}

    def upload(self, fd: int, size: int, key: str) -> tuple[str, str]:
        """Upload `size` bytes of an open file; (sha256, the S3 ETag computed from the bytes sent)."""
        threshold, chunk = self.settings['multipart_threshold'], self.settings['multipart_chunk']
        if size <= threshold:
            data = read_exact(fd, 0, size)
            etag = self.put_bytes(key, data)
            return hashlib.sha256(data).hexdigest(), etag
        parts = -(-size // chunk)
        if parts > MAX_PARTS:
            raise ArchiveError(f'{size} bytes in parts of multipart_chunk {chunk} make {parts} parts, more than S3 '
                               f'allows ({MAX_PARTS}): raise multipart_chunk')
        upload_id = self.client.create_multipart_upload(Bucket=self.bucket, Key=key)['UploadId']
        sha256, digests = hashlib.sha256(), []

        def tasks() -> t.Iterator[t.Callable[[], dict]]:
            for number in range(1, parts + 1):
                offset = (number - 1) * chunk
                data = read_exact(fd, offset, min(chunk, size - offset))
                sha256.update(data)
                digests.append(md5_of(data).digest())
                yield functools.partial(self._put_part, key, upload_id, number, data, digests[-1])

        try:
            sent = list(in_order(self.pool, tasks(), self.threads + 1))
            self.client.complete_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id,
                                                  MultipartUpload={'Parts': sent})
        except BaseException:
            with contextlib.suppress(Exception):
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
            raise
        return sha256.hexdigest(), f'{md5_of(b"".join(digests)).hexdigest()}-{parts}'

    def _get(self, key: str, etag: str, byte_range: t.Optional[tuple[int, int]] = None) -> t.Any:
        extra = {'Range': f'bytes={byte_range[0]}-{byte_range[1] - 1}'} if byte_range else {}
        response = self.client.get_object(Bucket=self.bucket, Key=key, **extra)
        if unquote(response.get('ETag')) != etag:
            response['Body'].close()
            raise ArchiveError(f"{key}: ETag {unquote(response.get('ETag'))}, the manifest says {etag}")
        return response['Body']

    def _get_range(self, key: str, etag: str, start: int, end: int) -> bytes:
        body = self._get(key, etag, (start, end))
        try:
            data = body.read()
        finally:
            body.close()
        if len(data) != end - start:
            raise ArchiveError(f'{key}: {len(data)} bytes at {start}, expected {end - start}')
        return data

    def download(self, key: str, size: int, etag: str, out: int) -> str:
        """Write the object to an open file; its sha256 (the size is checked)."""
        sha256, written = hashlib.sha256(), 0
        if size <= self.settings['multipart_threshold']:
            body = self._get(key, etag)
            try:
                while True:
                    data = body.read(READ_BLOCK)
                    if not data:
                        break
                    sha256.update(data)
                    write_all(out, data)
                    written += len(data)
            finally:
                body.close()
        else:
            chunk = self.settings['multipart_chunk']
            tasks = (functools.partial(self._get_range, key, etag, start, min(start + chunk, size))
                     for start in range(0, size, chunk))
            for data in in_order(self.pool, tasks, self.threads + 1):
                sha256.update(data)
                write_all(out, data)
                written += len(data)
        if written != size:
            raise ArchiveError(f'{key}: {written} bytes, the manifest says {size}')
        return sha256.hexdigest()

    def delete_keys(self, keys: t.Sequence[str]) -> None:
        for start in range(0, len(keys), 1000):
            batch = keys[start:start + 1000]
            response = self.client.delete_objects(Bucket=self.bucket, Delete={'Objects': [{'Key': key} for key in batch],
                                                                              'Quiet': True})
            errors = response.get('Errors') or []
            if errors:
                first = errors[0]
                raise ArchiveError(f"cannot delete {len(errors)} objects, e.g. {first.get('Key')}: {first.get('Code')} "
                                   f"{first.get('Message', '')}".rstrip())

    def delete_step(self, step_prefix: str) -> None:
        """Delete an archived step: its manifest first (it no longer counts), then its files."""
        self.client.delete_object(Bucket=self.bucket, Key=step_prefix + MANIFEST)
        self.delete_keys([key for key in self.keys(step_prefix) if key != step_prefix + MANIFEST])

    # Manifests

    def manifest(self, step_prefix: str) -> tuple[t.Optional[dict], t.Optional[str], bool]:
        """(manifest, problem, whether one exists) of a step."""
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=step_prefix + MANIFEST)['Body']
        except Exception as error:  # pylint: disable=broad-except
            if not is_remote_error(error):
                raise
            if is_missing(error):
                return None, 'no manifest (an upload that did not finish)', False
            return None, f'the manifest cannot be read: {describe(error, self.settings)}', True
        try:
            data = body.read(MAX_MANIFEST_BYTES + 1)
        finally:
            body.close()
        try:
            document = json.loads(data.decode('utf-8'))
        except (UnicodeDecodeError, ValueError):
            return None, 'the manifest is not JSON', True
        return document, None, True

    def verify(self, step_prefix: str, step: int) -> Archived:
        """Whether the archived step verifies: its manifest, and every file it lists with that size and ETag."""
        document, problem, exists = self.manifest(step_prefix)
        if document is not None:
            problem = manifest_problem(document, step)
        if problem:
            return Archived(step, step_prefix, None, problem, exists)
        files = document['files']
        problems = self.pool.map(lambda item: self.head_problem(step_prefix + item['path'], item['size'], item['etag']), files)
        found = [problem for problem in problems if problem]
        if found:
            more = f' (and {len(found) - 1} more)' if len(found) > 1 else ''
            return Archived(step, step_prefix, document, found[0] + more, True)
        return Archived(step, step_prefix, document, None, True)


def key_prefix(prefix: str, user: str, run: str) -> str:
    return '/'.join(part for part in (prefix, user, run) if part) + '/'


def step_prefix_of(run_prefix: str, step: int) -> str:
    return f'{run_prefix}step_{step:08d}/'


def mib(count: float) -> str:
    return f'{count / MIB:.1f} MiB'


def rate(count: float, seconds: float) -> str:
    return f'{count / MIB / max(seconds, 1e-6):.1f} MiB/s'


class ArchiveLogger(Logger):
    """The pruner's logger, under this program's name, counting errors."""

    def __init__(self, log_file: t.Optional[str], dry_run: bool, program: str = PROGRAM):
        super().__init__(log_file, dry_run)
        self.program = program
        self.errors = 0

    def __call__(self, message: str, error: bool = False) -> None:
        line = f"{'ERROR: ' if error else ''}{self.prefix}{message}"
        self.errors += bool(error)
        say(line, sys.stderr if error else sys.stdout)
        if self.handle:
            self.handle.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} {self.program}: {line}\n")
            self.handle.flush()


# Archive ----------------------------------------------------------------------------------------------


class LocalFile(t.NamedTuple):
    path: str  # relative to the checkpoint, '/'-separated
    size: int
    mode: int
    mtime: float
    dev: int
    ino: int


def walk_checkpoint(fd: int, where: str, uid: int, log: t.Callable[..., None], rel: str = '',
                    depth: int = 1) -> list[LocalFile]:
    """The regular files of an open checkpoint directory, never following a link; ArchiveError for an untrusted one."""
    found = []
    with os.scandir(fd) as listing:
        entries = sorted(listing, key=lambda entry: entry.name)
    for entry in entries:
        path = rel + entry.name
        try:
            path.encode('utf-8')
        except UnicodeEncodeError:
            raise ArchiveError(f'{where}/{path!r}: the name is not UTF-8') from None
        status = entry.stat(follow_symlinks=False)
        if stat.S_ISLNK(status.st_mode):
            log(f'{where}/{path}: a symbolic link: skipped, never followed')
            continue
        if not (stat.S_ISDIR(status.st_mode) or stat.S_ISREG(status.st_mode)):
            log(f'{where}/{path}: neither a regular file nor a directory: skipped')
            continue
        problem = entry_problem(f'{where}/{path}', status, uid)
        if problem:
            raise ArchiveError(f'not trusted: {problem}')
        if stat.S_ISREG(status.st_mode):
            found.append(LocalFile(path, status.st_size, stat.S_IMODE(status.st_mode), status.st_mtime,
                                   status.st_dev, status.st_ino))
            continue
        if depth >= MAX_DEPTH:
            raise ArchiveError(f'{where}/{path}: more than {MAX_DEPTH} directory levels')
        child, _status = open_dir(entry.name, fd, identity_of(status))
        try:
            found.extend(walk_checkpoint(child, where, uid, log, path + '/', depth + 1))
        finally:
            os.close(child)
    return found


def open_file(step_fd: int, item: LocalFile) -> int:
    """Open a file of a checkpoint for reading, every level without following a link, as the walk saw it."""
    parts = item.path.split('/')
    opened: list[int] = []
    current = step_fd
    try:
        for part in parts[:-1]:
            current, _status = open_dir(part, current)
            opened.append(current)
        fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=current)
    finally:
        for descriptor in opened:
            os.close(descriptor)
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode) or (status.st_dev, status.st_ino) != (item.dev, item.ino):
        os.close(fd)
        raise ChangedError(0, f'{item.path} changed since it was listed')
    return fd


def read_marker(step_fd: int, name: str, step: int) -> dict:
    """The marker's manifest entry (with its content); ArchiveError when it is no regular file or does not fit."""
    try:
        status = os.lstat(name, dir_fd=step_fd)
    except FileNotFoundError:
        raise ArchiveError(f'no {name}') from None
    if not stat.S_ISREG(status.st_mode):
        raise ArchiveError(f'{name} is not a regular file')
    if status.st_size > MAX_MARKER_BYTES:
        raise ArchiveError(f'{name} is larger than {MAX_MARKER_BYTES} bytes')
    fd = open_file(step_fd, LocalFile(name, status.st_size, 0, 0, status.st_dev, status.st_ino))
    try:
        content = read_exact(fd, 0, status.st_size)
    finally:
        os.close(fd)
    if name.endswith('.json'):
        with contextlib.suppress(UnicodeDecodeError, ValueError):
            document = json.loads(content.decode('utf-8'))
            if isinstance(document, dict) and 'step' in document and document['step'] != step:
                raise ArchiveError(f"{name} names step {document['step']!r}, not {step}")
    entry: dict[str, t.Any] = {'name': name, 'size': len(content), 'sha256': hashlib.sha256(content).hexdigest(),
                               'mode': stat.S_IMODE(status.st_mode), 'mtime': status.st_mtime}
    try:
        entry['content'] = content.decode('utf-8')
    except UnicodeDecodeError:
        entry['content_base64'] = base64.b64encode(content).decode('ascii')
    return entry


def same_checkpoint(manifest: t.Optional[dict], files: t.Sequence[LocalFile], marker: dict) -> bool:
    """Whether an archived step's manifest describes this checkpoint (same marker, same files and sizes)."""
    if not manifest:
        return False
    archived = {(item['path'], item['size']) for item in manifest.get('files', [])}
    return (manifest.get('marker', {}).get('sha256') == marker['sha256']
            and archived == {(item.path, item.size) for item in files})


class Totals:
    def __init__(self) -> None:
        self.runs = self.archived = self.skipped = self.deleted = self.removed = self.bytes = 0
        self.seconds = 0.0


class Archiver:
    """The archive command over the run directories."""

    def __init__(self, store: Store, settings: dict[str, t.Any], log: ArchiveLogger):
        self.store = store
        self.settings = settings
        self.log = log
        self.dry_run = settings['dry_run']
        self.totals = Totals()
        self.host = socket.gethostname()

    def run_all(self) -> bool:
        ok = True
        for path, listed in expand_roots(self.settings['roots'], self.log):
            ok = self.archive_run(path, listed) and ok
        totals = self.totals
        if self.dry_run:
            done = f'would archive {totals.archived} checkpoints ({mib(totals.bytes)})'
        else:
            done = (f'archived {totals.archived} checkpoints ({mib(totals.bytes)} in {totals.seconds:.1f} s, '
                    f'{rate(totals.bytes, totals.seconds)})')
        self.log(f'run directories: {totals.runs}; {done}, {totals.skipped} already archived, {totals.deleted} deleted '
                 f'from the bucket, {totals.removed} removed from shared storage; errors: {self.log.errors}')
        return ok

    def archive_run(self, path: str, listed: t.Optional[Identity]) -> bool:
        path = path.rstrip('/') or '/'
        name = os.path.basename(path)
        try:
            status = os.lstat(path)
        except OSError as error:
            self.log(f'{path}: cannot read the run directory: {error.strerror or error}', error=True)
            return False
        uid = listed[2] if listed else status.st_uid
        if not _NAME.fullmatch(name):
            self.log(f'{path}: the run directory name cannot be part of an S3 key (letters, digits, . _ @ + = , -); '
                     'skipped', error=True)
            return False
        try:
            user = user_by_uid(uid)
            if not _NAME.fullmatch(user.name):
                raise ArchiveError(f'user name {user.name!r} cannot be part of an S3 key')
            with as_user(user):
                fd, opened = open_dir(path, None, listed)
                try:
                    if opened.st_uid != uid or not stat.S_ISDIR(opened.st_mode):
                        raise ChangedError(0, 'it changed since it was listed')
                    self.totals.runs += 1
                    return self._archive_open_run(fd, path, user, name)
                finally:
                    os.close(fd)
        except ChangedError as error:
            self.log(f'{path}: cannot read the run directory: {error.strerror}; skipped', error=True)
        except (ArchiveError, OSError) as error:
            self.log(f'{path}: {error}', error=True)
        return False

    def _archive_open_run(self, fd: int, path: str, user: User, name: str) -> bool:
        settings, log = self.settings, self.log
        label = f'{user.name}/{name}'
        run_prefix = key_prefix(settings['prefix'], user.name, name)
        checkpoints, leftovers, ok = scan(fd, path, settings['compiled'], settings['complete_marker'], log)
        try:
            archived = {step: self.store.verify(prefix, step) for step, prefix in self.store.steps(run_prefix).items()}
        except Exception as error:  # pylint: disable=broad-except
            if not is_remote_error(error):
                raise
            log(f'{label}: cannot list {self.store.url(run_prefix)}: {describe(error, settings)}; run skipped', error=True)
            return False
        now = time.time()
        ready = []  # (checkpoint, files, marker entry, step directory mode)
        steps_seen: set[int] = set()
        for checkpoint in sorted(checkpoints, key=lambda item: (item.step, item.name)):
            where = os.path.join(path, checkpoint.name)
            if not checkpoint.complete:
                log(f"{label} step {checkpoint.step}: in progress (no {settings['complete_marker']}); not archived")
                continue
            if now - checkpoint.mtime < settings['min_age']:
                log(f"{label} step {checkpoint.step}: modified {max(0, int(now - checkpoint.mtime))} s ago "
                    f"(< min_age {settings['min_age']} s); not archived yet")
                continue
            if checkpoint.step in steps_seen:
                log(f'{where}: another directory of step {checkpoint.step} came first; not archived', error=True)
                ok = False
                continue
            steps_seen.add(checkpoint.step)
            try:
                step_fd, status = open_dir(checkpoint.name, fd, checkpoint.identity)
                try:
                    problem = entry_problem(where, status, user.uid)
                    if problem:
                        raise ArchiveError(f'not trusted: {problem}')
                    files = walk_checkpoint(step_fd, where, user.uid, log)
                    marker = read_marker(step_fd, settings['complete_marker'], checkpoint.step)
                finally:
                    os.close(step_fd)
            except ChangedError as error:
                log(f'{label} step {checkpoint.step}: {where}: {error.strerror}; not archived', error=True)
                ok = False
                continue
            except (ArchiveError, OSError) as error:
                log(f'{label} step {checkpoint.step}: {where}: {error}; not archived', error=True)
                ok = False
                continue
            if any(item.path == MANIFEST for item in files):
                log(f'{where}/{MANIFEST}: the name of the archive\'s manifest: this file is not archived', error=True)
            files = [item for item in files if item.path not in (settings['complete_marker'], MANIFEST)]
            ready.append((checkpoint, files, marker, stat.S_IMODE(status.st_mode)))

        # What the bucket's policy keeps, counting what is about to be archived: the rest is not uploaded.
        verified = {step: item for step, item in archived.items() if item.problem is None}
        wanted = self.bucket_plan({*verified, *(item[0].step for item in ready)})
        # name in the run directory -> the step whose verified archived copy is that checkpoint
        archived_names: dict[str, int] = {}
        for checkpoint, files, marker, mode in ready:
            step, existing = checkpoint.step, archived.get(checkpoint.step)
            if existing and existing.problem is None and same_checkpoint(existing.manifest, files, marker):
                log(f'{label} step {step}: already archived and verified; skipped')
                self.totals.skipped += 1
                archived_names[checkpoint.name] = step
                continue
            if step not in wanted:
                log(f"{label} step {step}: beyond the bucket's retention policy ({wanted[None]}); not archived")
                continue
            if existing and existing.has_manifest:
                why = f'does not verify ({existing.problem})' if existing.problem else 'is not the checkpoint now in the run directory'
                log(f'{label} step {step}: the archived copy {why}; archiving it again')
            try:
                archived[step] = self.upload_step(fd, path, label, run_prefix, checkpoint, files, marker, mode, user,
                                                  existing)
            except ChangedError as error:
                log(f'{label} step {step}: not archived: {error.strerror}', error=True)
                ok = False
                archived.pop(step, None)
                continue
            except Exception as error:  # pylint: disable=broad-except
                if not (isinstance(error, (ArchiveError, OSError)) or is_remote_error(error)):
                    raise
                detail = describe(error, settings) if is_remote_error(error) else str(error)
                log(f'{label} step {step}: not archived: {detail}', error=True)
                ok = False
                archived.pop(step, None)
                continue
            if archived[step].problem is None:
                archived_names[checkpoint.name] = step
        if settings['prune_shared']:
            ok = self.prune_shared(fd, path, checkpoints, leftovers, archived_names) and ok
        return self.apply_bucket_retention(label, archived) and ok

    def bucket_plan(self, steps: t.Iterable[int]) -> dict:
        """{step: reason} of the steps the bucket's policy keeps, and None: the policy in words."""
        keep_last, keep_every = self.settings['bucket_keep_last'], self.settings['bucket_keep_every']
        steps = sorted(set(steps))
        if not keep_last:
            return {**{step: 'no retention in the bucket (bucket_keep_last 0)' for step in steps}, None: 'none'}
        decisions = plan([Checkpoint(f'step_{step:08d}', step, 0.0, True) for step in steps], keep_last, keep_every, 0)
        kept = {decision.checkpoint.step: decision.reason for decision in decisions if decision.keep}
        return {**kept, None: f'bucket_keep_last {keep_last}, bucket_keep_every {keep_every}'}

    def upload_step(self, run_fd: int, path: str, label: str, run_prefix: str, checkpoint: Checkpoint,
                    files: list[LocalFile], marker: dict, mode: int, user: User,
                    existing: t.Optional[Archived]) -> Archived:
        """Upload the files of a checkpoint, check each, then its manifest; the step as archived now."""
        step = checkpoint.step
        prefix = step_prefix_of(run_prefix, step)
        total = sum(item.size for item in files)
        if self.dry_run:
            self.log(f'{label} step {step}: would archive {len(files) + 1} files, {mib(total)} to {self.store.url(prefix)}')
            self.totals.archived += 1
            self.totals.bytes += total
            # Counted as archived, so that the dry run shows what the retention policies would then do.
            return Archived(step, prefix, None, None, False)
        if existing and existing.has_manifest:
            # No longer counted as archived while its files are replaced.
            self.store.client.delete_object(Bucket=self.store.bucket, Key=prefix + MANIFEST)
        started = time.monotonic()
        step_fd, _status = open_dir(checkpoint.name, run_fd, checkpoint.identity)
        uploaded: list[str] = []
        entries = []
        try:
            for item in files:
                key = prefix + item.path
                fd = open_file(step_fd, item)
                try:
                    before = os.fstat(fd)
                    if before.st_size != item.size:
                        raise ChangedError(0, f'{path}/{checkpoint.name}/{item.path} changed since it was listed')
                    uploaded.append(key)
                    sha256, etag = self.store.upload(fd, item.size, key)
                    after = os.fstat(fd)
                    if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
                        raise ChangedError(0, f'{path}/{checkpoint.name}/{item.path} changed while it was read')
                finally:
                    os.close(fd)
                self.store.check_object(key, item.size, etag)
                entries.append({'path': item.path, 'size': item.size, 'sha256': sha256, 'etag': etag, 'mode': item.mode,
                                'mtime': item.mtime})
            again = read_marker(step_fd, marker['name'], step)
            if again['sha256'] != marker['sha256']:
                raise ChangedError(0, f"{path}/{checkpoint.name}/{marker['name']} changed while the checkpoint was read")
            manifest = {
                'format': MANIFEST_FORMAT, 'program': PROGRAM, 'step': step, 'name': checkpoint.name,
                'run': os.path.basename(path), 'source': f'{path}/{checkpoint.name}', 'host': self.host,
                'owner': {'uid': user.uid, 'name': user.name},
                'archived': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()), 'archived_epoch': time.time(),
                'mode': mode, 'bytes': total, 'multipart_threshold': self.settings['multipart_threshold'],
                'multipart_chunk': self.settings['multipart_chunk'], 'marker': marker, 'files': entries}
            body = (json.dumps(manifest, indent=1, sort_keys=True) + '\n').encode('utf-8')
            uploaded.append(prefix + MANIFEST)
            etag = self.store.put_bytes(prefix + MANIFEST, body, 'application/json')
            self.store.check_object(prefix + MANIFEST, len(body), etag)
        except BaseException:
            # A failed upload leaves no manifest, and as few of its files as it can.
            with contextlib.suppress(Exception):
                self.store.delete_keys(uploaded)
            raise
        finally:
            os.close(step_fd)
        # Files of an earlier copy of this step, or of an upload that did not finish, that this one does not have.
        listed = {prefix + item['path'] for item in entries} | {prefix + MANIFEST}
        stale = [key for key in self.store.keys(prefix) if key not in listed]
        if stale:
            self.store.delete_keys(stale)
            self.log(f'{label} step {step}: deleted {len(stale)} objects no manifest lists, e.g. {stale[0]}')
        seconds = time.monotonic() - started
        self.totals.archived += 1
        self.totals.bytes += total
        self.totals.seconds += seconds
        self.log(f'{label} step {step}: archived {len(files) + 1} files, {mib(total)} in {seconds:.1f} s '
                 f'({rate(total, seconds)}) to {self.store.url(prefix)}')
        return Archived(step, prefix, manifest, None, True)

    def prune_shared(self, fd: int, path: str, checkpoints: list[Checkpoint],
                     leftovers: list[tuple[str, Identity]], archived_names: dict[str, int]) -> bool:
        """The pruner's policy over the run directory, removing only checkpoints with a verified archive copy."""
        settings, log, ok = self.settings, self.log, True
        for name, identity in leftovers:
            if self.dry_run:
                log(f'would finish removing {path}/{name} (left by an interrupted removal)')
                continue
            try:
                remove_tree(fd, name, identity)
                log(f'finished removing {path}/{name} (left by an interrupted removal)')
            except OSError as error:
                log(f'cannot remove {path}/{name}: {error.strerror or error}', error=True)
                ok = False
        decisions = plan(checkpoints, settings['shared_keep_last'], settings['shared_keep_every'], settings['min_age'])
        for decision in decisions:
            checkpoint = decision.checkpoint
            where = os.path.join(path, checkpoint.name)
            if decision.keep:
                log(f'{where} (step {checkpoint.step}): kept in shared storage: {decision.reason}')
            elif archived_names.get(checkpoint.name) != checkpoint.step:
                log(f'{where} (step {checkpoint.step}): kept in shared storage: no verified archive copy of it')
            elif self.dry_run:
                log(f'would remove {where} (step {checkpoint.step}) from shared storage: archived and verified, '
                    f'{decision.reason}')
            else:
                try:
                    remove(fd, checkpoint.name, checkpoint.identity)
                except ChangedError as error:
                    log(f'cannot remove {where}: {error.strerror}; left in place', error=True)
                    ok = False
                    continue
                except OSError as error:
                    log(f'cannot remove {where}: {error}', error=True)
                    ok = False
                    continue
                self.totals.removed += 1
                log(f'removed {where} (step {checkpoint.step}) from shared storage: archived and verified, '
                    f'{decision.reason}')
        return ok

    def apply_bucket_retention(self, label: str, archived: dict[int, Archived]) -> bool:
        """The pruner's policy over the verified steps in the bucket; a step that does not verify is not counted, and
        is deleted only when the policy would not keep it even if it verified."""
        log, ok, retention = self.log, True, bool(self.settings['bucket_keep_last'])
        verified = {step: item for step, item in archived.items() if item.problem is None}
        kept = self.bucket_plan(verified)
        for step, item in sorted(archived.items()):
            if item.problem is not None:
                if retention and step not in self.bucket_plan({*verified, step}):
                    why = f'does not verify ({item.problem}), and beyond the retention policy ({kept[None]})'
                elif item.has_manifest:
                    log(f'{label} step {step}: kept in the bucket, not counted: does not verify ({item.problem})', error=True)
                    ok = False
                    continue
                else:
                    log(f'{label} step {step}: kept in the bucket, not counted: {item.problem}')
                    continue
            elif step in kept:
                if retention:
                    log(f'{label} step {step}: kept in the bucket: {kept[step]}')
                continue
            else:
                why = f'beyond the retention policy ({kept[None]})'
            if self.dry_run:
                log(f'{label} step {step}: would delete from the bucket: {why}')
                continue
            try:
                self.store.delete_step(item.prefix)
            except Exception as error:  # pylint: disable=broad-except
                if not (isinstance(error, ArchiveError) or is_remote_error(error)):
                    raise
                log(f'{label} step {step}: cannot delete {self.store.url(item.prefix)}: '
                    f'{describe(error, self.settings) if is_remote_error(error) else error}', error=True)
                ok = False
                continue
            self.totals.deleted += 1
            log(f'{label} step {step}: deleted from the bucket: {why}')
        return ok


# Restore ----------------------------------------------------------------------------------------------


def parse_run(spec: str) -> tuple[str, str]:
    user, _slash, run = spec.partition('/')
    if not _NAME.fullmatch(user) or not _NAME.fullmatch(run):
        raise ArchiveConfigError(f'{spec!r} is not <user>/<run directory> (e.g. alice/llmforge-train-42)')
    return user, run


def fsync_dir(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.fsync(fd)


class Restorer:
    """The restore command: one archived step into a run directory, as its user."""

    def __init__(self, store: Store, settings: dict[str, t.Any], log: ArchiveLogger):
        self.store = store
        self.settings = settings
        self.log = log

    def choose(self, run_prefix: str, label: str, step: t.Optional[int]) -> Archived:
        steps = self.store.steps(run_prefix)
        if not steps:
            raise ArchiveError(f'{label}: nothing archived under {self.store.url(run_prefix)}')
        if step is not None:
            if step not in steps:
                raise ArchiveError(f'{label}: step {step} is not archived (archived: {", ".join(map(str, sorted(steps)))})')
            chosen = self.store.verify(steps[step], step)
            if chosen.problem:
                raise ArchiveError(f'{label}: the archived step {step} does not verify: {chosen.problem}')
            return chosen
        for candidate in sorted(steps, reverse=True):
            chosen = self.store.verify(steps[candidate], candidate)
            if chosen.problem is None:
                return chosen
            self.log(f'{label} step {candidate}: does not verify ({chosen.problem}); passed over')
        raise ArchiveError(f'{label}: no archived step verifies')

    def target(self, user: User, run: str, to: t.Optional[str]) -> str:
        if to:
            return os.path.abspath(to)
        if not self.settings['restore_root']:
            raise ArchiveConfigError('restore_root is not set: give the target directory with --to DIR')
        return os.path.join(self.settings['restore_root'], user.name, run)

    def open_target(self, target: str, user: User) -> int:
        """Open (make, when missing and its parent is the user's) the target run directory, with the trust rules."""
        try:
            status = os.lstat(target)
        except FileNotFoundError:
            parent = os.path.dirname(target)
            try:
                above = os.lstat(parent)
            except OSError as error:
                raise ArchiveError(f'{target} does not exist, nor can its parent be read: {error.strerror or error}') from None
            if not stat.S_ISDIR(above.st_mode) or above.st_uid != user.uid:
                raise ArchiveError(f"{target} does not exist and its parent {parent} is not {user.name}'s directory: "
                                   f'make {target} first (0700, owned by {user.name}) or give --to') from None
            os.mkdir(target, 0o700)
            self.log(f'made {target} (0700, {user.name})')
            status = os.lstat(target)
        if stat.S_ISLNK(status.st_mode):
            raise ArchiveError(f'{target} is a symbolic link, which is never followed')
        if not stat.S_ISDIR(status.st_mode):
            raise ArchiveError(f'{target} is not a directory')
        problem = entry_problem(target, status, user.uid) or ancestor_problem(os.path.dirname(target), user.uid, target)
        if problem:
            raise ArchiveError(f'{target} is not trusted: {problem}')
        fd, _status = open_dir(target, None, identity_of(status))
        return fd

    def conflicts(self, fd: int, target: str, step: int) -> list[tuple[str, Identity, str]]:
        """(name, identity, why) of what would be resumed from instead of the restored step, or is in its way."""
        checkpoints, _leftovers, _ok = scan(fd, target, self.settings['compiled'], self.settings['complete_marker'], self.log)
        found = []
        for checkpoint in sorted(checkpoints, key=lambda item: (item.step, item.name)):
            if checkpoint.step == step:
                found.append((checkpoint.name, checkpoint.identity,
                              f"{checkpoint.name} ({'complete' if checkpoint.complete else 'incomplete'}, step {step})"))
            elif checkpoint.complete and checkpoint.step > step:
                found.append((checkpoint.name, checkpoint.identity, f'{checkpoint.name} (complete, step {checkpoint.step})'))
        return found

    def restore(self, spec: str, step: t.Optional[int], to: t.Optional[str], force: bool) -> int:
        user_name, run = parse_run(spec)
        user = user_by_name(user_name)
        if os.geteuid() not in (0, user.uid):
            raise ArchiveConfigError(f'run it as root or as {user.name}: uid {os.geteuid()} cannot restore into '
                                     f"{user.name}'s run")
        target = self.target(user, run, to)
        run_prefix = key_prefix(self.settings['prefix'], user.name, run)
        chosen = self.choose(run_prefix, spec, step)
        owner = (chosen.manifest or {}).get('owner') or {}
        if owner.get('name') != user.name:
            raise ArchiveError(f"{spec}: the manifest of step {chosen.step} names owner {owner.get('name')!r}, not {user.name}")
        with as_user(user):
            fd = self.open_target(target, user)
            try:
                return self._restore_into(fd, target, spec, chosen, force)
            finally:
                os.close(fd)

    def _restore_into(self, fd: int, target: str, label: str, chosen: Archived, force: bool) -> int:
        manifest, step = t.cast(dict, chosen.manifest), chosen.step
        final = f'step_{step:08d}'
        found = self.conflicts(fd, target, step)
        if found and not force:
            self.log(f"{target} already holds {', '.join(why for _name, _identity, why in found)}: the trainer would "
                     f'resume from that rather than from the restored step {step}, or it is in the way; nothing done '
                     f"(--force moves {', '.join(name for name, _identity, _why in found)} into "
                     f'{target}/{SUPERSEDED_PREFIX}<time>/, deleting nothing)', error=True)
            return 1
        tmp = RESTORE_TMP.format(step=step, pid=os.getpid())
        started = time.monotonic()
        os.mkdir(tmp, 0o700, dir_fd=fd)
        tmp_fd, tmp_status = open_dir(tmp, fd)
        try:
            try:
                total = self.download(tmp_fd, chosen.prefix, manifest)
                os.fchmod(tmp_fd, (int(manifest.get('mode', 0o700)) & 0o755) | 0o700)
                fsync_dir(tmp_fd)
            finally:
                os.close(tmp_fd)
            found = self.conflicts(fd, target, step)
            if found and not force:
                raise ArchiveError(f"{target} now holds {', '.join(why for _name, _identity, why in found)} "
                                   '(written during the restore); nothing restored (--force moves it aside)')
            if found:
                self.supersede(fd, target, found)
            os.rename(tmp, final, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException as error:
            try:
                remove_tree(fd, tmp, identity_of(tmp_status))
            except OSError as cleanup:
                self.log(f'cannot remove {target}/{tmp}: {cleanup}', error=True)
            if isinstance(error, (ArchiveError, OSError)) or is_remote_error(error):
                detail = describe(error, self.settings) if is_remote_error(error) else str(error)
                self.log(f'{label} step {step}: not restored: {detail}; {target}/{final} not written, the temporary '
                         'directory removed', error=True)
                return 1
            raise
        fsync_dir(fd)
        seconds = time.monotonic() - started
        self.log(f'restored {label} step {step} into {target}/{final}: {len(manifest["files"]) + 1} files, {mib(total)} '
                 f'in {seconds:.1f} s ({rate(total, seconds)})')
        return 0

    def supersede(self, fd: int, target: str, found: list[tuple[str, Identity, str]]) -> None:
        name = SUPERSEDED_PREFIX + time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())
        try:
            os.mkdir(name, 0o700, dir_fd=fd)
        except FileExistsError:
            name = f'{name}-{os.getpid()}'
            os.mkdir(name, 0o700, dir_fd=fd)
        aside, _status = open_dir(name, fd)
        try:
            for entry, identity, why in found:
                checked, _status = open_dir(entry, fd, identity)
                os.close(checked)
                os.rename(entry, entry, src_dir_fd=fd, dst_dir_fd=aside)
                self.log(f'moved {target}/{entry} into {target}/{name}/ ({why}; --force)')
            fsync_dir(aside)
        finally:
            os.close(aside)

    def download(self, tmp_fd: int, prefix: str, manifest: dict) -> int:
        """Every file of the manifest into the open directory, checked, then the marker; the bytes written."""
        total = 0
        for item in manifest['files']:
            parts = item['path'].split('/')
            opened: list[int] = []
            directory = tmp_fd
            try:
                for part in parts[:-1]:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o700, dir_fd=directory)
                    directory, _status = open_dir(part, directory)
                    opened.append(directory)
                out = os.open(parts[-1], _NEW_FILE_FLAGS, 0o600, dir_fd=directory)
                try:
                    digest = self.store.download(prefix + item['path'], item['size'], item['etag'], out)
                    if digest != item['sha256']:
                        raise ArchiveError(f"{prefix}{item['path']}: sha256 {digest}, the manifest says {item['sha256']}: "
                                           'the archived copy is damaged')
                    os.fchmod(out, int(item.get('mode', 0o600)) & 0o755)
                    os.fsync(out)
                    if isinstance(item.get('mtime'), (int, float)):
                        os.utime(out, (item['mtime'], item['mtime']))
                finally:
                    os.close(out)
                for descriptor in opened:
                    fsync_dir(descriptor)
            finally:
                for descriptor in opened:
                    os.close(descriptor)
            total += item['size']
        marker = manifest['marker']
        content = (marker['content'].encode('utf-8') if 'content' in marker
                   else base64.b64decode(marker['content_base64'], validate=True))
        if hashlib.sha256(content).hexdigest() != marker['sha256']:
            raise ArchiveError(f"{prefix}{MANIFEST}: the marker's content does not match its sha256")
        out = os.open(marker['name'], _NEW_FILE_FLAGS, 0o600, dir_fd=tmp_fd)
        try:
            write_all(out, content)
            os.fchmod(out, int(marker.get('mode', 0o644)) & 0o755)
            os.fsync(out)
            if isinstance(marker.get('mtime'), (int, float)):
                os.utime(out, (marker['mtime'], marker['mtime']))
        finally:
            os.close(out)
        return total + len(content)


# List -------------------------------------------------------------------------------------------------


def list_archive(store: Store, settings: dict[str, t.Any], spec: t.Optional[str]) -> int:
    """Print the archived steps of a run (or of all) and whether each verifies; 1 when one does not."""
    if spec:
        runs = [parse_run(spec)]
    else:
        top = f"{settings['prefix']}/" if settings['prefix'] else ''
        runs = [(user, run) for user in store.folders(top) for run in store.folders(f'{top}{user}/')]
    failed = shown = 0
    for user, run in runs:
        steps = store.steps(key_prefix(settings['prefix'], user, run))
        for step, prefix in sorted(steps.items()):
            item = store.verify(prefix, step)
            shown += 1
            if item.problem is None:
                manifest = t.cast(dict, item.manifest)
                say(f"{user}/{run} step {step}: verified, {len(manifest['files']) + 1} files, {mib(manifest.get('bytes', 0))}, "
                    f"archived {manifest.get('archived', '?')} from {manifest.get('host', '?')}:{manifest.get('source', '?')}",
                    sys.stdout)
            else:
                failed += 1
                say(f'{user}/{run} step {step}: NOT verified: {item.problem}', sys.stdout)
    if not shown:
        say(f"nothing archived under {store.url(key_prefix(settings['prefix'], *parse_run(spec)) if spec else settings['prefix'])}",
            sys.stdout)
    return 1 if failed else 0


def check_access(store: Store, settings: dict[str, t.Any], log: t.Callable[..., None]) -> int:
    """After the bucket answered a HEAD: the keys may also list it under the prefix (what every archive run does)."""
    top = f"{settings['prefix']}/" if settings['prefix'] else ''
    store.client.list_objects_v2(Bucket=store.bucket, Prefix=top, MaxKeys=1)
    log(f"bucket {store.bucket} at {settings['endpoint_url']} (region {settings['region']}): reachable, the keys in "
        f"{settings['credentials_file']} accepted, listing {store.url(top)} allowed")
    return 0


# Command line -----------------------------------------------------------------------------------------


def parse_args(argv: t.Sequence[str], prog: t.Optional[str] = None) -> argparse.Namespace:
    summary = __doc__.split('\n\n', 1)[0]
    parser = argparse.ArgumentParser(prog=PROGRAM, description=summary)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument('--config', default=DEFAULT_CONFIG, metavar='FILE',
                        help=f'JSON file with the settings (endpoint_url, bucket, credentials_file, roots, ...; default: {DEFAULT_CONFIG})')
    commands = parser.add_subparsers(dest='command', required=True, metavar='COMMAND')
    archive = commands.add_parser('archive', parents=[common], help='archive complete checkpoints, apply retention',
                                  description='Archive the complete checkpoints of the run directories to S3 and apply '
                                              'the retention policies. Command-line values override the configuration file.')
    archive.add_argument('--root', dest='roots', action='append', metavar='DIR',
                         help='run directory or glob pattern of run directories (repeatable; replaces roots)')
    archive.add_argument('--dry-run', dest='dry_run', action=argparse.BooleanOptionalAction, default=None,
                         help='only print what would be uploaded, deleted or removed')
    archive.add_argument('--log-file', dest='log_file', metavar='PATH', help='also append every line to this file')
    archive.add_argument('--lock-file', dest='lock_file', default=DEFAULT_LOCK_FILE, metavar='PATH',
                         help=f'held while running, so two runs never overlap (default: {DEFAULT_LOCK_FILE})')
    restore = commands.add_parser('restore', parents=[common], prog=prog if prog else None,
                                  help='restore an archived checkpoint into its run directory',
                                  description='Restore the newest verified archived checkpoint of a run (or step N) '
                                              'into its run directory, as the run\'s user.')
    restore.add_argument('run', metavar='USER/RUN', help='the run, e.g. alice/llmforge-train-42')
    restore.add_argument('--step', type=int, metavar='N', help='this step (default: the newest that verifies)')
    restore.add_argument('--to', metavar='DIR', help='the run directory to restore into (default: <restore_root>/<user>/<run>)')
    restore.add_argument('--force', action='store_true',
                         help=f'move checkpoints of step N or later out of the way into {SUPERSEDED_PREFIX}<time>/ (never deleted)')
    check = commands.add_parser('check', parents=[common], help='check the endpoint, the keys and the bucket',
                                description='Check that the endpoint answers, the keys are accepted, the bucket exists in '
                                            'the region (made when create_bucket is set) and the keys may list it; '
                                            'reads and changes no checkpoint.')
    check.add_argument('--dry-run', dest='dry_run', action=argparse.BooleanOptionalAction, default=None,
                       help='do not create a missing bucket, only say so')
    listing = commands.add_parser('list', parents=[common], help='archived checkpoints and whether they verify',
                                  description='List the archived steps of a run (or of every run) and whether each verifies.')
    listing.add_argument('run', nargs='?', metavar='USER/RUN', help='one run (default: every run under the prefix)')
    return parser.parse_args(argv)


def main(argv: t.Optional[t.Sequence[str]] = None, prog: t.Optional[str] = None,
         client_factory: t.Callable[[dict, dict], t.Any] = make_client) -> int:
    """The program; `prog` names it in messages (llmforge-restore), `client_factory` makes the S3 client."""
    args = parse_args(sys.argv[1:] if argv is None else argv, prog)
    program = prog or PROGRAM
    overrides = {name: getattr(args, name, None) for name in SETTINGS}
    try:
        settings = load_settings(args.config, overrides, args.command)
        credentials = read_credentials(settings['credentials_file'])
        if args.command == 'restore':
            user = user_by_name(parse_run(args.run)[0])
            if os.geteuid() not in (0, user.uid):
                raise ArchiveConfigError(f'run it as root or as {user.name}')
        elif args.command == 'list' and args.run:
            parse_run(args.run)
    except PruneConfigError as error:
        say(f'{program}: {error}', sys.stderr)
        return 2
    lock = None
    if args.command == 'archive':
        try:
            if args.lock_file == DEFAULT_LOCK_FILE:
                os.makedirs(os.path.dirname(DEFAULT_LOCK_FILE), mode=0o755, exist_ok=True)
            lock = os.open(args.lock_file, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if lock is not None:
                os.close(lock)
            say(f'{program}: cannot lock {args.lock_file} ({error}): another run holds it, or it cannot be made; '
                'nothing done', sys.stderr)
            return 1
    try:
        log = ArchiveLogger(settings['log_file'] or None, settings['dry_run'] and args.command == 'archive', program)
    except OSError as error:
        say(f"{program}: cannot open the log file {settings['log_file']} (log_file): {error}", sys.stderr)
        if lock is not None:
            os.close(lock)
        return 1
    try:
        try:
            store = Store(client_factory(settings, credentials), settings, log)
        except ArchiveError as error:
            log(str(error), error=True)
            return 1
        try:
            create = args.command in ('archive', 'check') and settings['create_bucket']
            if not store.check_bucket(create, settings['dry_run']):
                return 0
            if args.command == 'check':
                return check_access(store, settings, log)
            if args.command == 'archive':
                return 0 if Archiver(store, settings, log).run_all() else 1
            if args.command == 'restore':
                return Restorer(store, settings, log).restore(args.run, args.step, args.to, args.force)
            return list_archive(store, settings, args.run)
        except PruneConfigError as error:
            log(str(error), error=True)
            return 2
        except ArchiveError as error:
            log(str(error), error=True)
            return 1
        except ChangedError as error:
            log(f'{error.strerror}', error=True)
            return 1
        except OSError as error:
            log(str(error), error=True)
            return 1
        except Exception as error:  # pylint: disable=broad-except
            if not is_remote_error(error):
                raise
            log(describe(error, settings), error=True)
            return 1
        finally:
            store.close()
    finally:
        log.close()
        if lock is not None:
            os.close(lock)
