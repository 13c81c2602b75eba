# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests for llmforge-checkpoint-archive and llmforge-restore against an in-memory S3 (no boto3 needed).

Run as root (as the test machine does), the run directories belong to uid 20001 and the program reads and
restores them as that uid (its effective uid switched); otherwise they are the test user's own.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import io
import json
import os
import pathlib
import shutil
import stat
import tempfile
import threading
import time

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils.programs import _checkpoint_archive as archive
from node_install import install, run_launcher

ROOT = pathlib.Path(__file__).resolve().parents[2]
AS_ROOT = os.geteuid() == 0
OWNER_UID = 20001 if AS_ROOT else os.getuid()
OWNER_GID = 20001 if AS_ROOT else os.getgid()
OWNER = archive.User('alice', OWNER_UID, OWNER_GID, (OWNER_GID,))
RUN = 'llmforge-train-42'
SECRET = 'sEcReT-never-printed-0123456789'
MIB = 1 << 20
needs_root = pytest.mark.skipif(not AS_ROOT, reason='switching the effective uid needs root')


# An in-memory S3 with the boto3 client methods the program uses -----------------------------------------------


class ClientError(Exception):
    """Shaped like botocore.exceptions.ClientError: .response['Error']['Code']."""

    def __init__(self, code, message='', status=400, headers=None):
        super().__init__(f'An error occurred ({code}): {message}')
        self.response = {'Error': {'Code': code, 'Message': message},
                         'ResponseMetadata': {'HTTPStatusCode': status, 'HTTPHeaders': headers or {}}}


class EndpointConnectionError(ConnectionError):
    """Named like botocore's, whose base class is also called ConnectionError."""


class FakeBody:
    def __init__(self, data):
        self.stream = io.BytesIO(data)

    def read(self, count=-1):
        return self.stream.read(-1 if count is None else count)

    def close(self):
        pass


def md5(data):
    return hashlib.md5(data).hexdigest()


class FakeS3:
    def __init__(self, buckets=('archive',), page_size=3):
        self.buckets = {name: {} for name in buckets}
        self.page_size = page_size
        self.calls = []
        self.uploads = {}
        self.bad_etag = set()  # keys whose ETag the endpoint reports wrongly
        self.head_bucket_errors = []  # raised by head_bucket, the first one
        self.lock = threading.Lock()

    def _objects(self, bucket):
        if bucket not in self.buckets:
            raise ClientError('NoSuchBucket', 'The specified bucket does not exist', 404)
        return self.buckets[bucket]

    def _record(self, *call):
        with self.lock:
            self.calls.append(call)

    @staticmethod
    def _check_md5(data, content_md5):
        if content_md5 is not None and base64.b64decode(content_md5) != hashlib.md5(data).digest():
            raise ClientError('BadDigest', 'The Content-MD5 you specified did not match what we received.')

    def head_bucket(self, Bucket):
        self._record('head_bucket', Bucket)
        if self.head_bucket_errors:
            raise self.head_bucket_errors[0]
        if Bucket not in self.buckets:
            raise ClientError('404', 'Not Found', 404)
        return {}

    def create_bucket(self, Bucket, CreateBucketConfiguration=None):
        self._record('create_bucket', Bucket)
        self.buckets.setdefault(Bucket, {})

    def put_object(self, Bucket, Key, Body, ContentMD5=None, ContentLength=None, ContentType=None):
        data = bytes(Body)
        assert ContentLength in (None, len(data))
        self._check_md5(data, ContentMD5)
        self._record('put_object', Key)
        with self.lock:
            self._objects(Bucket)[Key] = {'data': data, 'etag': md5(data)}
        return {'ETag': f'"{md5(data)}"'}

    def create_multipart_upload(self, Bucket, Key):
        self._objects(Bucket)
        with self.lock:
            upload_id = f'upload-{len(self.uploads)}'
            self.uploads[upload_id] = {'key': Key, 'parts': {}}
        self._record('create_multipart_upload', Key)
        return {'UploadId': upload_id}

    def upload_part(self, Bucket, Key, UploadId, PartNumber, Body, ContentLength=None, ContentMD5=None):
        data = bytes(Body)
        self._check_md5(data, ContentMD5)
        self._record('upload_part', Key, PartNumber)
        with self.lock:
            self.uploads[UploadId]['parts'][PartNumber] = data
        return {'ETag': f'"{md5(data)}"'}

    def complete_multipart_upload(self, Bucket, Key, UploadId, MultipartUpload):
        upload = self.uploads.pop(UploadId)
        numbers = [part['PartNumber'] for part in MultipartUpload['Parts']]
        assert numbers == sorted(upload['parts']) == list(range(1, len(numbers) + 1))
        parts = [upload['parts'][number] for number in numbers]
        assert [part['ETag'] for part in MultipartUpload['Parts']] == [f'"{md5(part)}"' for part in parts]
        etag = hashlib.md5(b''.join(hashlib.md5(part).digest() for part in parts)).hexdigest() + f'-{len(parts)}'
        self._record('complete_multipart_upload', Key)
        with self.lock:
            self._objects(Bucket)[Key] = {'data': b''.join(parts), 'etag': etag}
        return {'ETag': f'"{etag}"'}

    def abort_multipart_upload(self, Bucket, Key, UploadId):
        self._record('abort_multipart_upload', Key)
        self.uploads.pop(UploadId, None)

    def _get(self, Bucket, Key):
        objects = self._objects(Bucket)
        if Key not in objects:
            raise ClientError('404', 'Not Found', 404)
        found = objects[Key]
        return found, '0' * 32 if Key in self.bad_etag else found['etag']

    def head_object(self, Bucket, Key):
        self._record('head_object', Key)
        found, etag = self._get(Bucket, Key)
        return {'ContentLength': len(found['data']), 'ETag': f'"{etag}"'}

    def get_object(self, Bucket, Key, Range=None):
        self._record('get_object', Key)
        try:
            found, etag = self._get(Bucket, Key)
        except ClientError:
            raise ClientError('NoSuchKey', 'The specified key does not exist.', 404) from None
        data = found['data']
        if Range:
            start, end = Range[len('bytes='):].split('-')
            data = data[int(start):int(end) + 1]
        return {'Body': FakeBody(data), 'ETag': f'"{etag}"', 'ContentLength': len(data)}

    def list_objects_v2(self, Bucket, Prefix='', Delimiter=None, ContinuationToken=None, MaxKeys=1000):
        self._record('list_objects_v2', Prefix)
        items = []
        for key in sorted(self._objects(Bucket)):
            if not key.startswith(Prefix):
                continue
            rest = key[len(Prefix):]
            if Delimiter and Delimiter in rest:
                folder = Prefix + rest.split(Delimiter, 1)[0] + Delimiter
                if ('prefix', folder) not in items:
                    items.append(('prefix', folder))
            else:
                items.append(('key', key))
        start = int(ContinuationToken or 0)
        page = items[start:start + min(self.page_size, MaxKeys)]
        response = {'Contents': [{'Key': key, 'Size': len(self.buckets[Bucket][key]['data'])} for kind, key in page if kind == 'key'],
                    'CommonPrefixes': [{'Prefix': folder} for kind, folder in page if kind == 'prefix'],
                    'IsTruncated': start + self.page_size < len(items)}
        if response['IsTruncated']:
            response['NextContinuationToken'] = str(start + self.page_size)
        return response

    def delete_object(self, Bucket, Key):
        self._record('delete_object', Key)
        with self.lock:
            self._objects(Bucket).pop(Key, None)
        return {}

    def delete_objects(self, Bucket, Delete):
        keys = [item['Key'] for item in Delete['Objects']]
        self._record('delete_objects', tuple(keys))
        with self.lock:
            for key in keys:
                self._objects(Bucket).pop(key, None)
        return {}

    # For the tests

    def keys(self, prefix=''):
        return sorted(key for key in self.buckets['archive'] if key.startswith(prefix))

    def ops(self, *names):
        return [call for call in self.calls if call[0] in names]


# A run directory as the reference trainer leaves it ---------------------------------------------------------


def own(path: pathlib.Path) -> None:
    """Give a tree to the run's owner (without following links)."""
    for item in [path, *path.rglob('*')]:
        os.chown(item, OWNER_UID, OWNER_GID, follow_symlinks=False)


def shard(step: int, rank: int, size: int = 3000) -> bytes:
    return (f'step {step} rank {rank} '.encode() * (size // 10 + 1))[:size]


def make_step(run: pathlib.Path, step: int, complete: bool = True, age: float = 7200, files=None) -> pathlib.Path:
    """step_%08d with two ranks' shard files and .metadata, the marker written last (when complete)."""
    path = run / f'step_{step:08d}'
    path.mkdir(mode=0o700)
    for name, data in (files or {'__0_0.distcp': shard(step, 0), '__1_0.distcp': shard(step, 1),
                                 '.metadata': f'metadata of {step}'.encode()}).items():
        (path / name).write_bytes(data)
        (path / name).chmod(0o644)
    if complete:
        (path / archive.DEFAULT_MARKER).write_text(json.dumps({'step': step, 'world_size': 2, 'time': 1.0, 'job_id': '42'}))
        (path / archive.DEFAULT_MARKER).chmod(0o644)
    own(path)
    old = time.time() - age
    for item in [*path.iterdir(), path]:
        os.utime(item, (old, old), follow_symlinks=False)
    return path


def tree_digest(path: pathlib.Path) -> dict:
    return {str(item.relative_to(path)): (hashlib.sha256(item.read_bytes()).hexdigest(), stat.S_IMODE(item.stat().st_mode),
                                          item.stat().st_uid)
            for item in sorted(path.rglob('*')) if item.is_file()}


class World:
    """A run root, a run directory of the owner's, a credentials file, a configuration and a fake S3."""

    def __init__(self, base: pathlib.Path):
        self.base = base
        self.runs = base / 'runs'
        self.user_dir = self.runs / 'alice'
        self.run = self.user_dir / RUN
        self.run.mkdir(parents=True)
        self.user_dir.chmod(0o700)
        self.run.chmod(0o700)
        own(self.user_dir)
        self.credentials = base / 'credentials.json'
        self.credentials.write_text(json.dumps({'access_key': 'AKIATEST', 'secret_key': SECRET}))
        self.credentials.chmod(0o600)
        self.config_path = base / 'archive.json'
        self.log = base / 'archive.log'
        self.s3 = FakeS3()
        self.configure()

    def configure(self, **changes):
        config = {'endpoint_url': 'http://s3.example:7480', 'region': 'us-east-1', 'bucket': 'archive',
                  'prefix': 'ckpt', 'credentials_file': str(self.credentials),
                  'roots': [str(self.runs / '*' / 'llmforge-train-*')], 'restore_root': str(self.runs),
                  'min_age': 600, 'multipart_threshold': 5 * MIB, 'multipart_chunk': 5 * MIB, 'threads': 3,
                  'log_file': str(self.log), **changes}
        self.config_path.write_text(json.dumps(config))

    def main(self, *args):
        return archive.main([*args, '--config', str(self.config_path)], client_factory=lambda settings, credentials: self.s3)

    def archive(self, *args):
        return self.main('archive', '--lock-file', str(self.base / 'lock'), *args)

    def restore(self, *args):
        return archive.main(['restore', *args, '--config', str(self.config_path)], prog='llmforge-restore',
                            client_factory=lambda settings, credentials: self.s3)

    def names(self, path=None):
        return sorted(item.name for item in (path or self.run).iterdir())


@pytest.fixture(name='world')
def fixture_world(monkeypatch):
    # Below /tmp, not pytest's private directory: the run's owner must be able to reach the run directory.
    base = pathlib.Path(tempfile.mkdtemp(prefix='llmforge-archive-test-', dir='/tmp'))
    base.chmod(0o755)
    monkeypatch.setattr(archive, 'user_by_uid', lambda uid: OWNER if uid == OWNER_UID else _unknown_uid(uid))
    monkeypatch.setattr(archive, 'user_by_name', lambda name: OWNER if name == 'alice' else _no_user(name))
    try:
        yield World(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _no_user(name):
    raise archive.ArchiveConfigError(f'user {name}: no such user on this host')


def _unknown_uid(uid):
    raise archive.ArchiveError(f'uid {uid} has no user on this host (passwd, LDAP): cannot act as the owner')


def step_keys(world, step):
    return world.s3.keys(f'ckpt/alice/{RUN}/step_{step:08d}/')


def manifest_of(world, step):
    return json.loads(world.s3.buckets['archive'][f'ckpt/alice/{RUN}/step_{step:08d}/{archive.MANIFEST}']['data'])


# Archive ---------------------------------------------------------------------------------------------------


def test_only_complete_old_enough_checkpoints_are_archived_and_the_manifest_goes_last(world, capsys):
    for step in (100, 200, 300):
        make_step(world.run, step)
    make_step(world.run, 400, complete=False)
    make_step(world.run, 500, age=10)
    tmp = world.run / '.tmp-step_00000600-abc'
    tmp.mkdir()
    (tmp / '__0_0.distcp').write_bytes(b'half')
    own(tmp)
    assert world.archive() == 0
    out = capsys.readouterr().out
    assert sorted({key.split('/')[3] for key in world.s3.keys()}) == ['step_00000100', 'step_00000200', 'step_00000300']
    assert step_keys(world, 200) == [f'ckpt/alice/{RUN}/step_00000200/{name}'
                                     for name in ('.metadata', '__0_0.distcp', '__1_0.distcp', archive.MANIFEST)]
    # Per step: every file, then the manifest.
    puts = [key for _op, key in world.s3.ops('put_object')]
    for step in (100, 200, 300):
        mine = [index for index, key in enumerate(puts) if f'/step_{step:08d}/' in key]
        assert puts[mine[-1]].endswith(archive.MANIFEST) and len(mine) == 4
    manifest = manifest_of(world, 200)
    local = world.run / 'step_00000200'
    assert {item['path']: (item['size'], item['sha256'], item['etag']) for item in manifest['files']} == {
        name: (len(data), hashlib.sha256(data).hexdigest(), md5(data))
        for name, data in ((name, (local / name).read_bytes()) for name in ('.metadata', '__0_0.distcp', '__1_0.distcp'))}
    assert manifest['marker']['content'] == (local / archive.DEFAULT_MARKER).read_text()
    assert manifest['owner'] == {'uid': OWNER_UID, 'name': 'alice'} and manifest['step'] == 200
    assert manifest['mode'] == 0o700 and {item['mode'] for item in manifest['files']} == {0o644}
    assert f'alice/{RUN} step 400: in progress (no llmforge-complete.json); not archived' in out
    assert f'alice/{RUN} step 500: modified ' in out and '(< min_age 600 s); not archived yet' in out
    assert f'alice/{RUN} step 100: archived 4 files' in out and 'MiB/s' in out
    assert 'run directories: 1; archived 3 checkpoints' in out and 'errors: 0' in out
    assert 'archived 3 checkpoints' in world.log.read_text()


def test_multipart_uploads_are_verified_by_their_computed_etag(world, capsys):
    big = os.urandom(11 * MIB + 123)
    make_step(world.run, 10, files={'__0_0.distcp': big, '.metadata': b'meta'})
    assert world.archive() == 0
    key = f'ckpt/alice/{RUN}/step_00000010/__0_0.distcp'
    assert world.s3.ops('complete_multipart_upload') == [('complete_multipart_upload', key)]
    assert len(world.s3.ops('upload_part')) == 3
    parts = [big[start:start + 5 * MIB] for start in range(0, len(big), 5 * MIB)]
    expected = hashlib.md5(b''.join(hashlib.md5(part).digest() for part in parts)).hexdigest() + '-3'
    entry = next(item for item in manifest_of(world, 10)['files'] if item['path'] == '__0_0.distcp')
    assert entry['etag'] == expected and entry['sha256'] == hashlib.sha256(big).hexdigest()
    assert world.s3.buckets['archive'][key]['data'] == big
    capsys.readouterr()
    assert world.main('list', f'alice/{RUN}') == 0
    assert f'alice/{RUN} step 10: verified, 3 files' in capsys.readouterr().out


def test_a_wrong_etag_means_no_manifest_and_the_shared_copy_is_never_pruned(world, capsys):
    for step in (1, 2, 3):
        make_step(world.run, step)
    world.configure(prune_shared=True, shared_keep_last=1)
    world.s3.bad_etag.add(f'ckpt/alice/{RUN}/step_00000001/__1_0.distcp')
    assert world.archive() == 1
    captured = capsys.readouterr()
    assert step_keys(world, 1) == []  # no manifest, and its files cleaned up
    assert f'alice/{RUN} step 1: not archived: uploaded, but the endpoint does not have it as sent:' in captured.err
    assert 'ETag 00000000000000000000000000000000, expected' in captured.err
    # Step 2 is archived, verified and beyond shared_keep_last: removed; step 1 has no verified copy: kept.
    assert world.names() == ['step_00000001', 'step_00000003']
    assert f"{world.run / 'step_00000001'} (step 1): kept in shared storage: no verified archive copy of it" in captured.out
    assert f"removed {world.run / 'step_00000002'} (step 2) from shared storage: archived and verified" in captured.out


def test_a_second_run_uploads_nothing_and_a_rewritten_checkpoint_is_archived_again(world, capsys):
    for step in (1, 2, 3):
        make_step(world.run, step)
    assert world.archive() == 0
    capsys.readouterr()
    world.s3.calls.clear()
    assert world.archive() == 0
    out = capsys.readouterr().out
    assert world.s3.ops('put_object', 'upload_part', 'delete_object', 'delete_objects') == []
    assert out.count('already archived and verified; skipped') == 3
    # The trainer wrote step 3 again after resuming from step 2: a new marker, other bytes.
    shutil.rmtree(world.run / 'step_00000003')
    make_step(world.run, 3, files={'__0_0.distcp': b'new weights', '.metadata': b'new'})
    world.s3.calls.clear()
    assert world.archive() == 0
    out = capsys.readouterr().out
    assert f'alice/{RUN} step 3: the archived copy is not the checkpoint now in the run directory; archiving it again' in out
    assert world.s3.ops('delete_object')[0] == ('delete_object', f'ckpt/alice/{RUN}/step_00000003/{archive.MANIFEST}')
    assert [item['path'] for item in manifest_of(world, 3)['files']] == ['.metadata', '__0_0.distcp']
    assert step_keys(world, 3)[-1].endswith(archive.MANIFEST) and len(step_keys(world, 3)) == 3


def test_bucket_retention_deletes_the_manifest_first_and_skips_what_it_would_delete(world, capsys):
    for step in (1, 2, 3, 4):
        make_step(world.run, step)
    assert world.archive() == 0
    world.configure(bucket_keep_last=1, bucket_keep_every=2)
    world.s3.calls.clear()
    capsys.readouterr()
    assert world.archive() == 0
    out = capsys.readouterr().out
    assert sorted({key.split('/')[3] for key in world.s3.keys()}) == ['step_00000002', 'step_00000004']
    deletions = world.s3.ops('delete_object', 'delete_objects')
    first = deletions.index(('delete_object', f'ckpt/alice/{RUN}/step_00000001/{archive.MANIFEST}'))
    files = next(index for index, call in enumerate(deletions)
                 if call[0] == 'delete_objects' and any('/step_00000001/' in key for key in call[1]))
    assert first < files
    assert f'alice/{RUN} step 1: deleted from the bucket: beyond the retention policy' in out
    assert f'alice/{RUN} step 2: kept in the bucket: step 2 is a multiple of keep_every 2' in out
    # The next run does not upload again what the policy would delete at once.
    world.s3.calls.clear()
    assert world.archive() == 0
    assert world.s3.ops('put_object') == []
    assert f"alice/{RUN} step 3: beyond the bucket's retention policy (bucket_keep_last 1, bucket_keep_every 2); " \
           'not archived' in capsys.readouterr().out


def test_a_damaged_archived_step_is_not_counted_and_deleted_only_beyond_the_policy(world, capsys):
    for step in (1, 2, 3):
        make_step(world.run, step)
    assert world.archive() == 0
    for step in (1, 2, 3):
        shutil.rmtree(world.run / f'step_{step:08d}')
    for step in (1, 3):
        world.s3.buckets['archive'].pop(f'ckpt/alice/{RUN}/step_{step:08d}/.metadata')
    world.configure(bucket_keep_last=1)
    capsys.readouterr()
    # Step 3 does not verify: it does not count, so step 2 is the newest kept; step 1 goes, damaged or not.
    assert world.archive() == 1
    captured = capsys.readouterr()
    assert sorted({key.split('/')[3] for key in world.s3.keys()}) == ['step_00000002', 'step_00000003']
    assert f'alice/{RUN} step 1: deleted from the bucket: does not verify (ckpt/alice/{RUN}/step_00000001/.metadata: ' \
           'missing), and beyond the retention policy (bucket_keep_last 1, bucket_keep_every 0)' in captured.out
    assert f'alice/{RUN} step 3: kept in the bucket, not counted: does not verify' in captured.err
    assert f'alice/{RUN} step 2: kept in the bucket: one of the newest 1' in captured.out


def test_shared_pruning_removes_only_verified_checkpoints_beyond_the_policy(world, capsys):
    for step in (1, 2, 3, 4):
        make_step(world.run, step)
    make_step(world.run, 5, complete=False)
    world.configure(prune_shared=True, shared_keep_last=2, dry_run=True)
    assert world.archive() == 0
    assert world.s3.keys() == [] and len(world.names()) == 5
    out = capsys.readouterr().out
    assert f'[dry-run] alice/{RUN} step 1: would archive 4 files' in out
    # What the retention would then do, as if the uploads had verified.
    assert f"[dry-run] would remove {world.run / 'step_00000001'} (step 1) from shared storage: archived and verified" in out
    assert '[dry-run] run directories: 1; would archive 4 checkpoints (0.0 MiB), 0 already archived' in out
    world.configure(prune_shared=True, shared_keep_last=2)
    assert world.archive() == 0
    assert world.names() == ['step_00000003', 'step_00000004', 'step_00000005']
    # A verified copy that goes bad later (an object lost) protects the shared copy again.
    for step in (5, 6):
        shutil.rmtree(world.run / f'step_{step:08d}', ignore_errors=True)
        make_step(world.run, step)
    world.s3.buckets['archive'].pop(f'ckpt/alice/{RUN}/step_00000003/__0_0.distcp')
    world.s3.bad_etag.add(f'ckpt/alice/{RUN}/step_00000003/__0_0.distcp')
    capsys.readouterr()
    assert world.archive() == 1
    assert world.names() == ['step_00000003', 'step_00000005', 'step_00000006']
    out = capsys.readouterr().out
    assert 'step 3: the archived copy does not verify' in out and 'kept in shared storage: no verified archive copy' in out


def test_symbolic_links_are_skipped_and_never_followed(world, capsys):
    outside = world.base / 'outside'
    outside.mkdir()
    (outside / 'secret').write_text('not alice\'s')
    make_step(world.run, 1)
    (world.run / 'step_00000001' / 'evil').symlink_to(outside / 'secret')
    (world.run / 'step_00000001' / 'sub').symlink_to(outside)
    linked = world.base / 'linked-step'
    linked.mkdir()
    (linked / archive.DEFAULT_MARKER).write_text('{}')
    (world.run / 'step_00000009').symlink_to(linked)
    (world.runs / 'alice' / 'llmforge-train-99').symlink_to(world.run)
    old = time.time() - 7200
    for item in ('evil', 'sub', ''):
        os.utime(world.run / 'step_00000001' / item, (old, old), follow_symlinks=False)
    assert world.archive() == 0
    out = capsys.readouterr().out
    assert all('/evil' not in key and '/sub' not in key and 'secret' not in key for key in world.s3.keys())
    assert sorted({key.split('/')[2] for key in world.s3.keys()}) == [RUN]
    assert sorted({key.split('/')[3] for key in world.s3.keys()}) == ['step_00000001']
    assert f"{world.run / 'step_00000001'}/evil: a symbolic link: skipped, never followed" in out
    assert [item['path'] for item in manifest_of(world, 1)['files']] == ['.metadata', '__0_0.distcp', '__1_0.distcp']


def test_a_checkpoint_with_another_users_or_a_writable_file_is_not_archived(world, capsys):
    make_step(world.run, 1)
    make_step(world.run, 2)
    (world.run / 'step_00000001' / '__1_0.distcp').chmod(0o666)
    assert world.archive() == 1
    assert step_keys(world, 1) == [] and len(step_keys(world, 2)) == 4
    assert 'is writable by group or others (mode 0666); not archived' in capsys.readouterr().err


@needs_root
def test_the_checkpoints_are_read_as_their_owner_and_root_comes_back(world, capsys):
    make_step(world.run, 1)
    make_step(world.run, 2)
    # Readable by root, not by its owner: the archive reads as the owner, so it cannot.
    (world.run / 'step_00000001' / '__0_0.distcp').chmod(0o000)
    groups = os.getgroups()
    assert world.archive() == 1
    assert 'Permission denied' in capsys.readouterr().err
    assert step_keys(world, 1) == [] and len(step_keys(world, 2)) == 4
    assert (os.geteuid(), os.getegid(), os.getgroups()) == (0, 0, groups)
    # Another user's file in alice's checkpoint keeps it out of the archive too.
    (world.run / 'step_00000001' / '__0_0.distcp').chmod(0o644)
    os.chown(world.run / 'step_00000001' / '__0_0.distcp', 0, 0)
    assert world.archive() == 1
    assert f"is owned by uid 0, not by the run's owner (uid {OWNER_UID})" in capsys.readouterr().err


@needs_root
def test_a_run_directory_of_an_unknown_uid_is_skipped(world, capsys):
    other = world.runs / 'ghost' / 'llmforge-train-7'
    other.mkdir(parents=True)
    os.chown(other, 20999, 20999)
    make_step(world.run, 1)
    assert world.archive() == 1
    assert 'uid 20999 has no user on this host' in capsys.readouterr().err
    assert len(step_keys(world, 1)) == 4


# Restore ---------------------------------------------------------------------------------------------------


def test_restore_the_newest_and_a_given_step_checked_against_the_manifest(world, capsys):
    originals = {}
    for step in (1, 2, 3):
        originals[step] = tree_digest(make_step(world.run, step))
    assert world.archive() == 0
    for step in (1, 2, 3):
        shutil.rmtree(world.run / f'step_{step:08d}')
    capsys.readouterr()
    assert world.restore(f'alice/{RUN}') == 0
    out = capsys.readouterr().out
    assert world.names() == ['step_00000003']
    assert tree_digest(world.run / 'step_00000003') == originals[3]
    status = (world.run / 'step_00000003').stat()
    assert (status.st_uid, stat.S_IMODE(status.st_mode)) == (OWNER_UID, 0o700)
    assert f"restored alice/{RUN} step 3 into {world.run}/step_00000003: 4 files" in out and 'MiB/s)' in out
    # Step 2 while step 3 is there: refused, then moved aside with --force.
    assert world.restore(f'alice/{RUN}', '--step', '2') == 1
    err = capsys.readouterr().err
    assert 'already holds step_00000003 (complete, step 3)' in err and '--force moves step_00000003' in err
    assert world.names() == ['step_00000003']
    assert world.restore(f'alice/{RUN}', '--step', '2', '--force') == 0
    names = world.names()
    assert names[0].startswith('.superseded-') and names[1:] == ['step_00000002']
    assert tree_digest(world.run / names[0] / 'step_00000003') == originals[3]
    assert tree_digest(world.run / 'step_00000002') == originals[2]
    assert stat.S_IMODE((world.run / names[0]).stat().st_mode) == 0o700
    # The marker is the archived one, and the trainer's rules find the checkpoint complete.
    assert json.loads((world.run / 'step_00000002' / archive.DEFAULT_MARKER).read_text())['step'] == 2


def test_a_damaged_object_fails_the_restore_and_leaves_nothing_behind(world, capsys):
    make_step(world.run, 1)
    make_step(world.run, 2)
    assert world.archive() == 0
    shutil.rmtree(world.run / 'step_00000002')
    key = f'ckpt/alice/{RUN}/step_00000002/__1_0.distcp'
    stored = world.s3.buckets['archive'][key]
    stored['data'] = stored['data'][:-1] + b'X'  # same size, same ETag as recorded: bit rot
    capsys.readouterr()
    assert world.restore(f'alice/{RUN}', '--step', '2') == 1
    err = capsys.readouterr().err
    assert f'{key}: sha256 ' in err and 'the archived copy is damaged' in err
    assert 'step_00000002 not written, the temporary directory removed' in err
    assert world.names() == ['step_00000001']


def test_restore_makes_a_missing_run_directory_and_refuses_untrusted_ones(world, capsys):
    make_step(world.run, 5)
    assert world.archive() == 0
    target = world.user_dir / 'llmforge-train-43'
    assert world.restore(f'alice/{RUN}', '--to', str(target)) == 0
    status = target.stat()
    assert (status.st_uid, stat.S_IMODE(status.st_mode)) == (OWNER_UID, 0o700)
    assert world.names(target) == ['step_00000005']
    writable = world.user_dir / 'shared-run'
    writable.mkdir()
    own(writable)
    writable.chmod(0o770)
    assert world.restore(f'alice/{RUN}', '--to', str(writable)) == 1
    assert 'is writable by group or others (mode 0770)' in capsys.readouterr().err
    link = world.user_dir / 'link-run'
    link.symlink_to(target)
    assert world.restore(f'alice/{RUN}', '--to', str(link)) == 1
    assert 'is a symbolic link, which is never followed' in capsys.readouterr().err
    elsewhere = world.base / 'not-alices' / 'run'
    (world.base / 'not-alices').mkdir()
    assert world.restore(f'alice/{RUN}', '--to', str(elsewhere)) == 1
    assert "its parent" in capsys.readouterr().err and not elsewhere.exists()
    assert world.restore('bob/run') == 2
    assert 'user bob: no such user on this host' in capsys.readouterr().err
    assert world.restore(f'alice/{RUN}', '--step', '7') == 1
    assert 'step 7 is not archived (archived: 5)' in capsys.readouterr().err


def test_list_shows_what_verifies(world, capsys):
    make_step(world.run, 1)
    make_step(world.run, 2)
    assert world.archive() == 0
    world.s3.buckets['archive'].pop(f'ckpt/alice/{RUN}/step_00000001/.metadata')
    capsys.readouterr()
    assert world.main('list') == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f'alice/{RUN} step 1: NOT verified: ckpt/alice/{RUN}/step_00000001/.metadata: missing'
    assert out[1].startswith(f'alice/{RUN} step 2: verified, 4 files')


# Errors before anything is touched -----------------------------------------------------------------------


def test_a_credentials_file_readable_by_others_is_refused(world, capsys):
    make_step(world.run, 1)
    world.credentials.chmod(0o644)
    assert world.archive() == 2
    err = capsys.readouterr().err
    assert f'credentials_file {world.credentials}: mode 0644 is too open; it must be 0600 or stricter' in err
    assert SECRET not in err and world.s3.calls == []
    world.credentials.unlink()
    assert world.archive() == 2
    assert f'credentials_file {world.credentials}: no such file' in capsys.readouterr().err
    world.credentials.write_text('{"access_key": "a", "secret_key": ')
    world.credentials.chmod(0o600)
    assert world.archive() == 2
    err = capsys.readouterr().err
    assert 'cannot be read: not JSON' in err and '"a"' not in err


@pytest.mark.parametrize('error, message', [
    (None, 'bucket archive: no such bucket at http://s3.example:7480 (create it, or set create_bucket: true)'),
    (EndpointConnectionError('Could not connect to the endpoint URL: "http://s3.example:7480/archive"'),
     'endpoint_url http://s3.example:7480: cannot connect: Could not connect to the endpoint URL'),
    (ClientError('403', 'Forbidden', 403), 'credentials_file {credentials}: access to bucket archive at '
                                           'http://s3.example:7480 denied (403)'),
    (ClientError('301', 'Moved Permanently', 301, {'x-amz-bucket-region': 'eu-west-1'}),
     'region us-east-1: wrong for bucket archive at http://s3.example:7480 (the endpoint says eu-west-1)'),
])
def test_endpoint_bucket_region_and_access_errors_name_the_setting(world, capsys, error, message):
    make_step(world.run, 1)
    if error is None:
        world.s3.buckets.clear()
    world.s3.head_bucket_errors = [error] if error is not None else []
    assert world.archive() == 1
    assert message.format(credentials=world.credentials) in capsys.readouterr().err
    assert [call[0] for call in world.s3.calls] == ['head_bucket']
    assert world.names() == ['step_00000001']
    assert world.restore(f'alice/{RUN}') == 1
    assert message.format(credentials=world.credentials) in capsys.readouterr().err
    # `check`, which the role runs before it installs the configuration: the same words, nothing else asked.
    world.s3.calls.clear()
    world.s3.head_bucket_errors = [error] if error is not None else []
    assert world.main('check') == 1
    assert message.format(credentials=world.credentials) in capsys.readouterr().err
    assert [call[0] for call in world.s3.calls] == ['head_bucket']


def test_check_says_the_bucket_answers_and_may_be_listed_and_creates_it_only_when_asked(world, capsys):
    assert world.main('check') == 0
    out = capsys.readouterr().out
    assert ('bucket archive at http://s3.example:7480 (region us-east-1): reachable, the keys in '
            f'{world.credentials} accepted, listing s3://archive/ckpt/ allowed') in out
    assert [call[0] for call in world.s3.calls] == ['head_bucket', 'list_objects_v2']
    world.s3.buckets.clear()
    world.s3.calls.clear()
    world.configure(create_bucket=True)
    assert world.main('check', '--dry-run') == 0
    assert 'would create bucket archive' in capsys.readouterr().out
    assert [call[0] for call in world.s3.calls] == ['head_bucket']
    assert world.main('check') == 0
    assert [call[0] for call in world.s3.calls] == ['head_bucket', 'head_bucket', 'create_bucket', 'list_objects_v2']


def test_a_missing_bucket_is_created_only_when_asked(world):
    make_step(world.run, 1)
    world.s3.buckets.clear()
    world.configure(create_bucket=True)
    assert world.archive() == 0
    assert [call[0] for call in world.s3.calls[:2]] == ['head_bucket', 'create_bucket']
    assert len(step_keys(world, 1)) == 4


@pytest.mark.parametrize('changes, message', [
    ({'bucket': 'Bad_Bucket'}, 'bucket: '),
    ({'multipart_chunk': MIB}, 'multipart_chunk: 1048576 must be an integer from 5242880'),
    ({'endpoint_url': 's3.example'}, 'endpoint_url: '),
    ({'roots': []}, 'roots: [] must be a non-empty list'),
    ({'shared_keep_last': 0}, 'shared_keep_last: 0 must be an integer of at least 1'),
    ({'complete_marker': archive.MANIFEST}, 'complete_marker: '),
    ({'pattern': 'step_[0-9]+'}, 'pattern: '),
    ({'keep_last': 3}, "unknown settings ['keep_last']"),
    ({'prune_shared': 'yes'}, "prune_shared: 'yes' is not a bool"),
])
def test_bad_settings_exit_2_naming_the_setting(world, capsys, changes, message):
    world.configure(**changes)
    assert world.archive() == 2
    assert message in capsys.readouterr().err and world.s3.calls == []


# The installed programs ------------------------------------------------------------------------------------


def installed(tmp_path):
    library = tmp_path / 'lib'
    if not library.exists():
        install('programs._checkpoint_archive', library)
    return library


def test_the_launchers_run_the_installed_code(tmp_path, world):
    library = installed(tmp_path)
    result = run_launcher('programs._checkpoint_archive', library, 'archive', '--help')
    assert result.returncode == 0 and result.stdout.startswith('usage: llmforge-checkpoint-archive archive ')
    launcher = ROOT / 'roles' / 'checkpoint_archive' / 'files' / 'llmforge-restore'
    text = launcher.read_text(encoding='utf-8')
    assert text.startswith('#!/usr/bin/python3 -I\n') and launcher.stat().st_mode & 0o111
    copy = tmp_path / 'llmforge-restore'
    copy.write_text(text.replace("LIBRARY = '/usr/local/lib/llmforge/python'\n", f'LIBRARY = {str(library)!r}\n'))
    import subprocess  # pylint: disable=import-outside-toplevel
    environment = {key: value for key, value in os.environ.items() if key != 'PYTHONPATH'}
    import sys  # pylint: disable=import-outside-toplevel
    result = subprocess.run([sys.executable, '-I', str(copy), '--help'], capture_output=True, text=True, env=environment,
                            check=False, timeout=60)
    assert result.returncode == 0 and result.stdout.startswith('usage: llmforge-restore [-h] ')
    result = subprocess.run([sys.executable, '-I', str(copy), 'alice/x', '--config', str(tmp_path / 'none.json')],
                            capture_output=True, text=True, env=environment, check=False, timeout=60)
    assert result.returncode == 2 and result.stderr.startswith('llmforge-restore: cannot read the configuration')
    if importlib.util.find_spec('boto3') is None:
        # Without boto3 the program says what to install, after checking everything else.
        result = run_launcher('programs._checkpoint_archive', library, 'archive', '--config', str(world.config_path),
                              '--lock-file', str(tmp_path / 'lock'))
        assert result.returncode == 1 and 'cannot load boto3' in result.stderr and 'python3-boto3' in result.stderr


def test_the_program_is_the_standard_library_and_the_pruner():
    source = (ROOT / 'plugins' / 'module_utils' / 'programs' / '_checkpoint_archive.py').read_text(encoding='utf-8')
    assert 'import boto3' not in source and "importlib.import_module('boto3')" in source
    assert 'def plan(' not in source and 'def open_dir(' not in source
