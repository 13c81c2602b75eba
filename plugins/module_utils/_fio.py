# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Storage acceptance with fio: the jobs to run, what fio's JSON output says, and what the fleet's figures say.

Pure Python, no Ansible import. Three parts:

- **Jobs** (build_job, job_argv, job_file): one fio job per profile, from the directory, the size of each job's
  file, the runtime, and optional numjobs/iodepth/direct overrides. Profiles (PROFILES): node-local scratch
  sequential write and read (1 MiB blocks) and random 4 KiB read IOPS; on the shared file system, a sequential read
  that every node runs at once (dataset streaming: the sum of the nodes' figures is the aggregate) and a
  checkpoint-sized sequential write (16 MiB blocks, one file per node, written through the page cache as a
  checkpoint writer does, with an fsync at the end that fio counts in the job's runtime). Each job writes one file
  per fio job process, named after the job, inside the directory it is given.
- **Output** (parse_output, figures): `fio --output-format=json` (fio 3.x) is one JSON object
  ``{"fio version", "timestamp_ms", "jobs": [{"jobname", "error", "read": {...}, "write": {...}}], "disk_util"}``,
  where each direction has ``bw`` (KiB/s), ``bw_bytes`` (bytes/s), ``iops``, ``runtime`` (ms), ``io_bytes``,
  ``total_ios`` and ``clat_ns`` (completion latency in ns, with ``percentile`` {"99.000000": ns} when any I/O was
  done). fio prints notes and errors before the JSON on the same stdout (``note: both iodepth >= 1 and synchronous
  I/O engine are selected...``, ``fio: pid=..., err=22/...``): they are skipped and kept as ``notes``. Several jobs
  (numjobs > 1) are added up: bandwidth, IOPS and bytes summed, runtime the longest, the p99 latency the worst job's
  (percentiles cannot be merged without the histograms) and the mean weighted by the I/O count. A job whose
  ``error`` is not 0 is listed in ``errors`` with its errno's name.
- **Judging** (judge): each node's figures against its inventory expectations ({"scratch_seq_read_mib_s": 2000,
  "scratch_rand_read_iops": 400000, "scratch_rand_read_p99_ms": 2}: `<profile>_mib_s` and `<profile>_iops` are
  floors, `<profile>_p99_ms` a ceiling) and against the fleet median of the same profile (a node below `fraction`,
  0.7 by default, of the median fails; the fleet needs two measured nodes, as in the NCCL and training stages,
  whose helpers this uses). The shared profiles' per-node figures add up to a cluster-level aggregate, judged against
  `<profile>_aggregate_mib_s` of the cluster's expectations, and only when the nodes' runs overlapped in time.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import statistics
import tempfile
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils import _proc as proc
from ansible_collections.llmforge.cluster.plugins.module_utils._checks import (
    FAIL, PASS, SKIP, WARN, check, finite, healthy, non_finite)
from ansible_collections.llmforge.cluster.plugins.module_utils._checks import below_fleet, natural_key

MIB = 1024 * 1024
JOB_PREFIX = 'llmforge-'
WORK_DIR_PREFIX = '.llmforge-fio-'
DEFAULT_FRACTION = 0.7
# Two runs overlapped enough for their sum to be an aggregate when they shared at least this part of the shorter one.
MIN_OVERLAP = 0.5


class FioError(ValueError):
    """Bad input, unreadable output or a failed run; the message names the field, the file or the command.

    `partial` holds the profiles a run measured before it failed.
    """

    def __init__(self, message: str, partial: t.Optional[dict[str, t.Any]] = None) -> None:
        super().__init__(message)
        self.partial = partial or {}


class Profile(t.NamedTuple):
    scope: str          # scratch (node-local) or shared (the file system every node mounts)
    rw: str             # fio's rw
    bs: str
    numjobs: int
    iodepth: int
    ioengine: str
    figure: str         # the figure judged: mib_s or iops
    time_based: bool    # run for `runtime` (looping over the file), else write the file once
    end_fsync: bool
    buffered: bool      # through the page cache whatever `direct` says
    purpose: str


PROFILES: dict[str, Profile] = {
    'scratch_seq_write': Profile('scratch', 'write', '1M', 1, 32, 'libaio', 'mib_s', True, False, False,
                                 'sequential write, 1 MiB blocks'),
    'scratch_seq_read': Profile('scratch', 'read', '1M', 1, 32, 'libaio', 'mib_s', True, False, False,
                                'sequential read, 1 MiB blocks'),
    'scratch_rand_read': Profile('scratch', 'randread', '4k', 4, 64, 'libaio', 'iops', True, False, False,
                                 'random read IOPS, 4 KiB blocks'),
    'shared_seq_read': Profile('shared', 'read', '1M', 4, 16, 'libaio', 'mib_s', True, False, False,
                               'sequential read from every node at once (dataset streaming)'),
    'shared_ckpt_write': Profile('shared', 'write', '16M', 1, 1, 'psync', 'mib_s', False, True, True,
                                 'checkpoint write: one file per node, 16 MiB blocks, fsync at the end'),
}
SCRATCH_PROFILES = [name for name, profile in PROFILES.items() if profile.scope == 'scratch']
FIGURES = ('mib_s', 'iops')
UNITS = {'mib_s': 'MiB/s', 'iops': 'IOPS'}
_SIZE = re.compile(r'^\s*([0-9]{1,30})\s*([kmgt]?)\s*$', re.IGNORECASE)
# fio splits these options' values at ':' into several paths; `\:` is a colon of the path itself (fio(1), filename).
_PATH_OPTIONS = ('directory', 'filename')
_JSON_START = re.compile(r'^\{', re.MULTILINE)


# --- jobs ------------------------------------------------------------------------------------------

def parse_size(value: t.Any, name: str = 'size') -> int:
    """Bytes of `64M`, `1G`, `512k` or a plain number; the letters are powers of 1024, as fio reads them.

    Other spellings (`1GB`, `1GiB`) are refused: fio's meaning of them depends on its kb_base option.
    """
    if isinstance(value, bool):
        raise FioError(f'{name} must be a size such as 64M or 10G, got {value!r}')
    if isinstance(value, int):
        number, unit = value, ''
    else:
        match = _SIZE.match(str(value))
        if not match:
            raise FioError(f'{name} must be a whole number of bytes or one with K, M, G or T (powers of 1024), '
                           f'such as 64M or 10G; got {value!r}')
        number, unit = int(match.group(1)), match.group(2).lower()
    size = number * 1024 ** ('kmgt'.index(unit) + 1 if unit else 0)
    if size <= 0:
        raise FioError(f'{name} must be more than 0 bytes, got {value!r}')
    return size


def _positive(value: t.Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FioError(f'{name} must be a whole number of at least 1, got {value!r}')
    return value


def profile_of(name: t.Any) -> Profile:
    if name not in PROFILES:
        raise FioError(f"unknown profile {name!r}; profiles: {', '.join(PROFILES)}")
    return PROFILES[name]


def build_job(profile: str, directory: str, size: t.Any, runtime: int, numjobs: t.Optional[int] = None,
              iodepth: t.Optional[int] = None, direct: bool = True) -> dict[str, t.Any]:
    """{'profile', 'name', 'options': [(option, value or None)], 'numjobs', 'size_bytes', 'direct'} of one profile.

    `size` is the size of each fio job's file; `iodepth` only applies to the asynchronous (libaio) profiles, and
    `direct` not to shared_ckpt_write, which writes through the page cache and fsyncs at the end.
    """
    spec = profile_of(profile)
    size_bytes = parse_size(size)
    runtime = _positive(runtime, 'runtime')
    jobs = _positive(numjobs, 'numjobs') if numjobs is not None else spec.numjobs
    depth = _positive(iodepth, 'iodepth') if iodepth is not None else spec.iodepth
    if spec.ioengine == 'psync':
        depth = 1  # a synchronous engine has one I/O in flight whatever the depth
    if size_bytes < parse_size(spec.bs):
        raise FioError(f'size ({human_bytes(size_bytes)}) must be at least the block size of {profile}, {spec.bs}')
    use_direct = bool(direct) and not spec.buffered
    name = JOB_PREFIX + profile
    options: list[tuple[str, t.Optional[str]]] = [
        ('name', name), ('directory', directory), ('rw', spec.rw), ('bs', spec.bs), ('size', str(size_bytes)),
        ('numjobs', str(jobs)), ('ioengine', spec.ioengine), ('iodepth', str(depth)),
        ('direct', '1' if use_direct else '0'),
    ]
    if spec.rw.startswith('rand'):
        # Fresh offsets each run, without the map that makes every block be read exactly once per pass.
        options += [('randrepeat', '0'), ('norandommap', None)]
    if spec.time_based:
        options += [('runtime', str(runtime)), ('time_based', None)]
    if spec.end_fsync:
        options.append(('end_fsync', '1'))
    return {'profile': profile, 'name': name, 'options': options, 'numjobs': jobs, 'iodepth': depth,
            'size_bytes': size_bytes, 'direct': use_direct}


def _option_value(key: str, value: str) -> str:
    """The value as fio reads it back: a path's colons escaped, so that `/scratch/a:b` stays one directory."""
    return value.replace(':', '\\:') if key in _PATH_OPTIONS else value


def job_argv(job: t.Mapping[str, t.Any], fio_path: str = 'fio') -> list[str]:
    """fio's argv for one job, JSON on stdout and no progress lines."""
    argv = [fio_path, '--output-format=json', '--eta=never']
    return argv + [f'--{key}' if value is None else f'--{key}={_option_value(key, value)}'
                   for key, value in job['options']]


def job_file(job: t.Mapping[str, t.Any]) -> str:
    """The same job as a fio job file (`fio --output-format=json <file>`)."""
    lines = [f"[{job['name']}]"]
    lines += [key if value is None else f'{key}={_option_value(key, value)}' for key, value in job['options']
              if key != 'name']
    return '\n'.join(lines) + '\n'


def space_needed(jobs: t.Sequence[t.Mapping[str, t.Any]], keep_files: bool) -> int:
    """Bytes the jobs' files take: the largest profile's when each profile's files are removed before the next."""
    sizes = [job['size_bytes'] * job['numjobs'] for job in jobs]
    if not sizes:
        return 0
    return sum(sizes) if keep_files else max(sizes)


def human_bytes(size: float) -> str:
    for unit in ('B', 'KiB', 'MiB', 'GiB'):
        if size < 1024:
            return f'{size:.1f} {unit}' if unit != 'B' else f'{int(size)} B'
        size /= 1024
    return f'{size:.1f} TiB'


# --- output ----------------------------------------------------------------------------------------

def _number(value: t.Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FioError(f'{where} must be a number, got {value!r}')
    number = finite(value)
    if number is None:
        raise FioError(f'{where} must be a finite number, got {str(value)[:40]}')
    return number


def _direction(job: t.Mapping[str, t.Any], ddir: str, where: str) -> dict[str, t.Any]:
    """One job's figures in one direction."""
    stats = job.get(ddir)
    if not isinstance(stats, t.Mapping):
        raise FioError(f'{where}.{ddir} must be an object, got {stats!r}')
    if 'bw_bytes' in stats:
        bw_bytes = _number(stats['bw_bytes'], f'{where}.{ddir}.bw_bytes')
    else:
        bw_bytes = _number(stats.get('bw'), f'{where}.{ddir}.bw') * 1024
    clat = stats.get('clat_ns') or {}
    if not isinstance(clat, t.Mapping):
        raise FioError(f'{where}.{ddir}.clat_ns must be an object, got {clat!r}')
    percentiles = clat.get('percentile') or {}
    p99 = percentiles.get('99.000000') if isinstance(percentiles, t.Mapping) else None
    return {
        'bw_bytes': bw_bytes,
        'iops': _number(stats.get('iops'), f'{where}.{ddir}.iops'),
        'io_bytes': _number(stats.get('io_bytes', 0), f'{where}.{ddir}.io_bytes'),
        'runtime_ms': _number(stats.get('runtime', 0), f'{where}.{ddir}.runtime'),
        'total_ios': _number(stats.get('total_ios', 0), f'{where}.{ddir}.total_ios'),
        'clat_p99_ns': None if p99 is None else _number(p99, f'{where}.{ddir}.clat_ns.percentile.99.000000'),
        'clat_mean_ns': _number(clat['mean'], f'{where}.{ddir}.clat_ns.mean') if 'mean' in clat else None,
    }


def _aggregate(per_job: t.Sequence[t.Mapping[str, t.Any]]) -> dict[str, t.Any]:
    """Several jobs in one direction as one: sums, the longest runtime, the worst p99, the I/O-weighted mean."""
    ios = sum(job['total_ios'] for job in per_job)
    p99s = [job['clat_p99_ns'] for job in per_job if job['clat_p99_ns'] is not None and job['total_ios']]
    means = [(job['clat_mean_ns'], job['total_ios']) for job in per_job
             if job['clat_mean_ns'] is not None and job['total_ios']]
    return {
        'bw_bytes': sum(job['bw_bytes'] for job in per_job),
        'iops': sum(job['iops'] for job in per_job),
        'io_bytes': sum(job['io_bytes'] for job in per_job),
        'runtime_ms': max((job['runtime_ms'] for job in per_job), default=0.0),
        'total_ios': ios,
        'clat_p99_ns': max(p99s) if p99s else None,
        'clat_mean_ns': sum(mean * count for mean, count in means) / ios if means and ios else None,
    }


def _error_text(code: int) -> str:
    name = errno.errorcode.get(code)
    return f'{name} ({os.strerror(code)})' if name else f'error {code}'


def _locate_json(text: str) -> tuple[t.Any, list[str]]:
    """The JSON object and the lines printed around it."""
    match = _JSON_START.search(text)
    if match is None:
        first = next((line.strip() for line in text.splitlines() if line.strip()), '')
        said = f'; it printed: {first[:200]}' if first else ' (the output is empty)'
        raise FioError('no JSON object in the fio output' + said)
    before = [line.strip() for line in text[:match.start()].splitlines() if line.strip()]
    try:
        data, end = json.JSONDecoder().raw_decode(text, match.start())
    except json.JSONDecodeError as err:
        # A string runs to the end of the input only when the input ends inside it.
        cut = err.pos >= len(text.rstrip()) or err.msg.startswith('Unterminated string')
        raise FioError(f"the fio JSON output is {'cut off' if cut else 'malformed'} at line {err.lineno} column "
                       f'{err.colno}: {err.msg}') from None
    except ValueError as err:  # such as a number of more digits than Python converts
        raise FioError(f'the fio JSON output cannot be read: {err}') from None
    after = [line.strip() for line in text[end:].splitlines() if line.strip()]
    return data, before + after


def parse_output(text: str) -> dict[str, t.Any]:
    """{'fio_version', 'timestamp_ms', 'jobs': [names], 'read', 'write', 'errors', 'notes', 'disk_util'}."""
    data, notes = _locate_json(text)
    if not isinstance(data, dict):
        raise FioError(f'the fio JSON output must be an object, got {type(data).__name__}')
    jobs = data.get('jobs')
    if not isinstance(jobs, list) or not jobs:
        raise FioError(f'the fio JSON output has no jobs (jobs: {jobs!r})')
    per_job: dict[str, list[dict[str, t.Any]]] = {'read': [], 'write': []}
    names, errors = [], []
    for index, job in enumerate(jobs):
        where = f'jobs[{index}]'
        if not isinstance(job, t.Mapping):
            raise FioError(f'{where} must be an object, got {job!r}')
        name = job.get('jobname')
        if not isinstance(name, str):
            raise FioError(f'{where}.jobname must be a string, got {name!r}')
        names.append(name)
        code = job.get('error', 0)
        if isinstance(code, bool) or not isinstance(code, int):
            raise FioError(f'{where}.error must be a whole number, got {code!r}')
        if code:
            errors.append({'job': name, 'index': index, 'errno': code, 'error': _error_text(code)})
        for ddir in per_job:
            per_job[ddir].append(_direction(job, ddir, where))
    timestamp = data.get('timestamp_ms')
    disk_util = data.get('disk_util') or []
    return {
        'fio_version': str(data.get('fio version') or ''),
        'timestamp_ms': timestamp if isinstance(timestamp, int) and not isinstance(timestamp, bool)
        and 0 <= timestamp < 10 ** 15 else None,
        'jobs': names,
        'read': _aggregate(per_job['read']),
        'write': _aggregate(per_job['write']),
        'errors': errors,
        'notes': notes,
        'disk_util': disk_util if isinstance(disk_util, list) else [],
    }


def profile_in(parsed: t.Mapping[str, t.Any]) -> t.Optional[str]:
    """The profile whose job name the output carries (every job of it), or None for other jobs."""
    found = {name[len(JOB_PREFIX):] for name in parsed['jobs'] if name.startswith(JOB_PREFIX)}
    if len(found) == 1 and len(set(parsed['jobs'])) == 1:
        profile = found.pop()
        return profile if profile in PROFILES else None
    return None


def _round(value: t.Optional[float], digits: int = 1) -> t.Optional[float]:
    return None if value is None else round(value, digits)


def figures(parsed: t.Mapping[str, t.Any], profile: str) -> dict[str, t.Any]:
    """The profile's figures from its direction: MiB/s, IOPS, p99 and mean completion latency in ms, and more."""
    spec = profile_of(profile)
    stats = parsed['write' if spec.rw.endswith('write') else 'read']
    runtime_s = stats['runtime_ms'] / 1000
    ended = parsed['timestamp_ms'] / 1000 if parsed['timestamp_ms'] is not None else None
    return {
        'mib_s': _round(stats['bw_bytes'] / MIB),
        'iops': _round(stats['iops']),
        'lat_p99_ms': _round(stats['clat_p99_ns'] / 1e6 if stats['clat_p99_ns'] is not None else None, 3),
        'lat_mean_ms': _round(stats['clat_mean_ns'] / 1e6 if stats['clat_mean_ns'] is not None else None, 3),
        'io_mib': _round(stats['io_bytes'] / MIB),
        'runtime_s': round(runtime_s, 3),
        'ended_at': ended,
        'started_at': None if ended is None else round(ended - runtime_s, 3),
        'jobs': len(parsed['jobs']),
        'fio_version': parsed['fio_version'],
    }


# --- running ---------------------------------------------------------------------------------------

def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or '').splitlines() if line.strip()]
    return lines[-1][:300] if lines else ''


def run_job(job: t.Mapping[str, t.Any], fio_path: str, timeout: float) -> dict[str, t.Any]:
    """Run one job and parse its output; FioError names the profile and says what went wrong."""
    argv = job_argv(job, fio_path)
    profile = job['profile']
    try:
        # Its own process group: fio forks a process per job, and a timeout must end them all.
        done = proc.run(argv, timeout, own_session=True)
    except proc.CommandError as err:
        if err.reason == proc.MISSING:
            raise FioError(f'{fio_path} not found: install fio (Debian: apt-get install fio) or set fio_path') from None
        if err.reason == proc.TIMEOUT:
            raise FioError(f'{profile}: fio did not finish within {timeout:g} s and was killed (raise timeout, or '
                           f'lower size or runtime)') from None
        raise FioError(f'{profile}: {err}') from None
    if not done.stdout.strip():
        why = _last_line(done.stderr)
        raise FioError(f'{profile}: fio exited {done.rc} without output' + (f': {why}' if why else ''))
    try:
        parsed = parse_output(done.stdout)
    except FioError as err:
        why = _last_line(done.stderr)
        raise FioError(f'{profile}: fio exited {done.rc} without usable JSON ({err})'
                       + (f'; stderr: {why}' if why else '')) from None
    parsed['rc'] = done.rc
    parsed['stderr_tail'] = _last_line(done.stderr)
    return parsed


def _direct_refused(parsed: t.Mapping[str, t.Any], job: t.Mapping[str, t.Any]) -> bool:
    """O_DIRECT refused: EINVAL from every failing job of a direct run (our block sizes are aligned)."""
    return bool(job['direct'] and parsed['errors'] and all(e['errno'] == errno.EINVAL for e in parsed['errors']))


def _empty_dir(path: str) -> None:
    for entry in os.listdir(path):
        target = os.path.join(path, entry)
        if os.path.isdir(target) and not os.path.islink(target):
            shutil.rmtree(target)
        else:
            os.unlink(target)


def free_bytes(directory: str) -> int:
    stats = os.statvfs(directory)
    return stats.f_bavail * stats.f_frsize


def bench(directory: str, profiles: t.Sequence[str], size: t.Any, runtime: int, timeout: float, fio_path: str = 'fio',
          direct: bool = True, numjobs: t.Optional[int] = None, iodepth: t.Optional[int] = None,
          keep_files: bool = False, warn: t.Callable[[str], None] = lambda text: None) -> dict[str, t.Any]:
    """Run the profiles one after the other in a new temporary directory inside `directory`; its files are removed
    after each profile and the directory at the end (also on failure or timeout) unless keep_files.

    Returns {'work_dir', 'profiles': {profile: figures and job settings}}; FioError carries the profiles measured
    so far in its `partial` attribute.
    """
    if not profiles:
        raise FioError('profiles is empty: name at least one of ' + ', '.join(PROFILES))
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise FioError(f'timeout must be a positive number of seconds, got {timeout!r}')
    if not os.path.isdir(directory):
        raise FioError(f'directory {directory} does not exist or is not a directory' if not os.path.exists(directory)
                       else f'directory {directory} is not a directory')
    jobs = [build_job(name, directory, size, runtime, numjobs, iodepth, direct) for name in dict.fromkeys(profiles)]
    needed = space_needed(jobs, keep_files)
    free = free_bytes(directory)
    if free < needed:
        largest = max(jobs, key=lambda job: job['size_bytes'] * job['numjobs'])
        raise FioError(f"directory {directory} has {human_bytes(free)} free; the test files need {human_bytes(needed)} "
                       f"({largest['profile']}: {largest['numjobs']} file(s) of {human_bytes(largest['size_bytes'])}"
                       f"{', all profiles kept' if keep_files else ''}): lower size or free some space")
    try:
        work_dir = tempfile.mkdtemp(prefix=WORK_DIR_PREFIX, dir=directory)
    except OSError as err:
        raise FioError(f'cannot create a temporary directory in {directory}: {err.strerror or err}') from None
    results: dict[str, dict[str, t.Any]] = {}
    try:
        for job in jobs:
            profile_dir = os.path.join(work_dir, job['profile'])
            os.mkdir(profile_dir)
            job = dict(job, options=[(key, profile_dir if key == 'directory' else value)
                                     for key, value in job['options']])
            parsed = run_job(job, fio_path, timeout)
            if _direct_refused(parsed, job):
                warn(f"{directory} refused O_DIRECT (EINVAL; tmpfs or some overlay and network file systems): "
                     f"{job['profile']} ran again buffered (direct=0), so the page cache is part of its figures")
                _empty_dir(profile_dir)
                job = dict(job, direct=False, options=[(key, '0' if key == 'direct' else value)
                                                       for key, value in job['options']])
                parsed = run_job(job, fio_path, timeout)
            if parsed['errors']:
                first = parsed['errors'][0]
                detail = f": {parsed['stderr_tail']}" if parsed['stderr_tail'] else ''
                raise FioError(f"{job['profile']}: fio job {first['job']} failed with {first['error']}{detail}")
            for note in parsed['notes']:
                warn(f"{job['profile']}: fio said: {note}")
            if parsed['rc']:
                warn(f"{job['profile']}: fio exited {parsed['rc']} although no job failed"
                     + (f": {parsed['stderr_tail']}" if parsed['stderr_tail'] else ''))
            spec = PROFILES[job['profile']]
            results[job['profile']] = dict(
                figures(parsed, job['profile']), figure=spec.figure, rw=spec.rw, bs=spec.bs, numjobs=job['numjobs'],
                iodepth=job['iodepth'], size_bytes=job['size_bytes'], direct=job['direct'],
                command=job_argv(job, fio_path))
            if not keep_files:
                shutil.rmtree(profile_dir)
    except FioError as err:
        err.partial = results
        raise
    except OSError as err:
        raise FioError(f'cannot write or remove the test files in {work_dir}: {err.strerror or err}',
                       partial=results) from None
    finally:
        if not keep_files:
            shutil.rmtree(work_dir, ignore_errors=True)
            if os.path.exists(work_dir):
                warn(f'could not remove {work_dir}: remove it by hand')
    return {'work_dir': work_dir, 'profiles': results}


# --- judging ---------------------------------------------------------------------------------------

def check_fraction(fraction: t.Any) -> float:
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
        raise FioError(f'the fleet fraction must be a number in (0, 1], such as 0.7, got {fraction!r}')
    return float(fraction)


def _expectations(expected: t.Any, where: str, aggregate: bool = False) -> dict[str, float]:
    """Checked expectations: known keys, numbers >= 0; a typo fails here instead of passing silently."""
    if expected is None:
        return {}
    if not isinstance(expected, t.Mapping):
        raise FioError(f'{where} must map figures to numbers, such as {{scratch_seq_read_mib_s: 2000}}, '
                       f'got {expected!r}')
    if aggregate:
        known = {f'{name}_aggregate_mib_s' for name, spec in PROFILES.items() if spec.scope == 'shared'}
    else:
        known = {f'{name}_{suffix}' for name in PROFILES for suffix in FIGURES + ('p99_ms',)}
    clean = {}
    for key, value in expected.items():
        if key not in known:
            raise FioError(f"{where}: {key} is not a storage figure; use one of {', '.join(sorted(known))}")
        if value is None:
            continue
        number = _figure_of(expected, key)
        if number is None or number < 0:
            raise FioError(f'{where}: {key} must be a number >= 0, got {str(value)[:40]!r}')
        clean[str(key)] = number
    return clean


def _key_profile(key: str) -> str:
    """The profile an expectation key is about: scratch_seq_read of scratch_seq_read_mib_s."""
    for suffix in ('_aggregate_mib_s', '_p99_ms', '_mib_s', '_iops'):
        if key.endswith(suffix):
            return key[:-len(suffix)]
    return key


def _measured(results: t.Any, node: str) -> tuple[dict[str, dict[str, t.Any]], list[dict[str, t.Any]]]:
    """The profiles a node measured, from its registered storage_bench results, and its run checks."""
    if results is None or isinstance(results, t.Mapping):
        results = [results]
    if isinstance(results, (str, bytes)) or not isinstance(results, t.Sequence):
        raise FioError(f'the results of node {node} must be a list of registered storage_bench results, '
                       f'got {results!r}')
    flat: list[t.Any] = []
    for result in results:
        # A loop's registered result holds its items' results.
        looped = isinstance(result, t.Mapping) and isinstance(result.get('results'), list)
        flat += result['results'] if looped else [result]
    profiles: dict[str, dict[str, t.Any]] = {}
    runs = []
    for result in flat:
        # None: never registered (the task did not reach the node); a false `when`: the profile was not asked for.
        if result is None or (isinstance(result, t.Mapping) and result.get('skipped') and 'false_condition' in result):
            continue
        if not isinstance(result, t.Mapping):
            raise FioError(f'a result of node {node} must be a registered storage_bench result, got {result!r}')
        measured = result.get('profiles') or {}
        if not isinstance(measured, t.Mapping):
            raise FioError(f'the profiles of a result of node {node} must be a mapping, got {measured!r}')
        profiles.update((name, dict(values)) for name, values in measured.items() if isinstance(values, t.Mapping))
        invocation = result.get('invocation')
        args = invocation.get('module_args') if isinstance(invocation, t.Mapping) else None
        directory = args.get('directory') if isinstance(args, t.Mapping) else None
        subject = str(directory or ', '.join(map(str, measured)) or 'storage')
        if result.get('unreachable'):
            runs.append(check('storage_run', FAIL, subject, None, None,
                              f"{node}: {result.get('msg') or 'host unreachable'}"))
        elif result.get('failed'):
            runs.append(check('storage_run', FAIL, subject, None, None,
                              f"{node}: storage_bench failed: {result.get('msg') or 'no message'}"))
        elif result.get('skipped'):
            runs.append(check('storage_run', SKIP, subject, None, None,
                              f"{node}: not run: {result.get('msg') or result.get('skip_reason') or 'skipped'}"))
    return profiles, runs


def _figure_of(values: t.Mapping[str, t.Any], figure: str) -> t.Optional[float]:
    """A finite figure, or None: a missing one counts as not measured (_damaged tells a NaN or infinite one)."""
    return finite(values.get(figure))


def _damaged(values: t.Mapping[str, t.Any], figure: str) -> bool:
    """A figure that is there but NaN or infinite: a broken measurement fails, it is not skipped."""
    return non_finite(values.get(figure))


def _throughput_check(node: str, profile: str, values: t.Mapping[str, t.Any], expected: t.Mapping[str, float],
                      fleet_median: t.Optional[float], peers: int, fraction: float) -> dict[str, t.Any]:
    spec = PROFILES[profile]
    value = _figure_of(values, spec.figure)
    unit = UNITS[spec.figure]
    floor = expected.get(f'{profile}_{spec.figure}')
    fleet_floor = fleet_median * fraction if fleet_median and peers >= 2 else None
    bound = max(b for b in (floor, fleet_floor, 0.0) if b is not None)
    expected_text = f'>= {bound:.1f} {unit}' if bound else None
    if _damaged(values, spec.figure):
        return check('storage_throughput', FAIL, profile, expected_text, str(values[spec.figure]),
                     f'{node}: {profile}: {spec.figure} is not a finite number ({values[spec.figure]})')
    if value is None:
        return check('storage_throughput', SKIP, profile, expected_text, None, f'{node}: {profile}: no {unit} measured')
    problems = []
    if floor is not None and value < floor:
        problems.append(f'below the expected {floor:g} {unit}')
    tolerance_pct = (1 - fraction) * 100
    if peers >= 2 and below_fleet(value, fleet_median, tolerance_pct):
        problems.append(f'below {fraction:g} of the fleet median {fleet_median:.1f} {unit}')
    other = 'iops' if spec.figure == 'mib_s' else 'mib_s'
    other_floor, other_value = expected.get(f'{profile}_{other}'), _figure_of(values, other)
    if other_floor is not None and other_value is not None and other_value < other_floor:
        problems.append(f'{other_value:.1f} {UNITS[other]} below the expected {other_floor:g} {UNITS[other]}')
    fleet_text = f'fleet median {fleet_median:.1f} over {peers} node(s)' if fleet_median else 'no fleet median'
    if problems:
        return check('storage_throughput', FAIL, profile, expected_text, round(value, 1),
                     f"{node}: {profile} {value:.1f} {unit} is {' and '.join(problems)} ({fleet_text})")
    return check('storage_throughput', PASS, profile, expected_text, round(value, 1),
                 f'{node}: {profile} {value:.1f} {unit} ({fleet_text})')


def _latency_check(node: str, profile: str, values: t.Mapping[str, t.Any], ceiling: float) -> dict[str, t.Any]:
    p99 = _figure_of(values, 'lat_p99_ms')
    if _damaged(values, 'lat_p99_ms'):
        return check('storage_latency', FAIL, profile, f'<= {ceiling:g} ms', str(values['lat_p99_ms']),
                     f"{node}: {profile}: lat_p99_ms is not a finite number ({values['lat_p99_ms']})")
    if p99 is None:
        return check('storage_latency', SKIP, profile, f'<= {ceiling:g} ms', None, f'{node}: {profile}: no p99 latency')
    status = FAIL if p99 > ceiling else PASS
    verb = 'above' if status == FAIL else 'within'
    return check('storage_latency', status, profile, f'<= {ceiling:g} ms', p99,
                 f'{node}: {profile} p99 completion latency {p99:g} ms is {verb} {ceiling:g} ms')


def _overlap(windows: t.Sequence[tuple[float, float]]) -> t.Optional[float]:
    """The part of the shortest run that all the runs shared, or None without timestamps."""
    if not windows:
        return None
    shortest = min(end - start for start, end in windows)
    shared = min(end for _start, end in windows) - max(start for start, _end in windows)
    # A run of no length (or ending before it started) shared no time with anything.
    return 0.0 if shortest <= 0 else max(shared, 0.0) / shortest


def _aggregate_check(profile: str, measured: t.Mapping[str, t.Mapping[str, t.Any]],
                     expected: t.Mapping[str, float]) -> tuple[dict[str, t.Any], dict[str, t.Any]]:
    nodes = sorted(measured, key=natural_key)
    values = [_figure_of(measured[node], 'mib_s') for node in nodes]
    total = sum(value for value in values if value is not None)
    floor = expected.get(f'{profile}_aggregate_mib_s')
    expected_text = f'>= {floor:g} MiB/s' if floor is not None else None
    damaged = [node for node in nodes if _damaged(measured[node], 'mib_s')]
    if damaged:
        facts = {'nodes': len(nodes), 'aggregate_mib_s': None, 'overlap_pct': None}
        return check('storage_aggregate', FAIL, profile, expected_text, None,
                     f"{profile}: no aggregate: the mib_s of {', '.join(damaged)} is not a finite number"), facts
    stamps = [(_figure_of(measured[node], 'started_at'), _figure_of(measured[node], 'ended_at')) for node in nodes]
    windows = [(start, end) for start, end in stamps if start is not None and end is not None]
    overlap = _overlap(windows) if len(windows) == len(nodes) else None
    text = f'{profile}: {total:.1f} MiB/s from {len(nodes)} node(s) at once'
    facts = {'nodes': len(nodes), 'aggregate_mib_s': round(total, 1),
             'overlap_pct': None if overlap is None else round(overlap * 100)}
    if len(nodes) > 1 and (overlap is None or overlap < MIN_OVERLAP):
        why = ('the runs carry no timestamps' if overlap is None else
               f'the runs shared only {overlap * 100:.0f}% of their time')
        return check('storage_aggregate', WARN, profile, expected_text, round(total, 1),
                     f'{profile}: the sum of {len(nodes)} nodes, {total:.1f} MiB/s, is no aggregate: {why} (give the '
                     f'profile a task of its own, run on every node at once: forks >= nodes)'), facts
    if floor is not None and total < floor:
        return check('storage_aggregate', FAIL, profile, expected_text, round(total, 1),
                     f'{text} is below the expected {floor:g} MiB/s'), facts
    return check('storage_aggregate', PASS, profile, expected_text, round(total, 1),
                 text + ('' if floor is not None else ' (no expectation set: reported, not judged)')), facts


def judge(results: t.Mapping[str, t.Any], expected: t.Mapping[str, t.Any], fraction: t.Any = DEFAULT_FRACTION,
          cluster_expected: t.Any = None) -> dict[str, t.Any]:
    """{'nodes': {node: {checks, healthy, profiles}}, 'cluster': the storage stage for the report}.

    `results` maps each node to its registered storage_bench results (a list; a loop's result and None, not run,
    are fine); `expected` maps nodes to their expectations; `cluster_expected` holds the aggregate floors.
    """
    fraction = check_fraction(fraction)
    if not isinstance(results, t.Mapping):
        raise FioError(f'results must map node names to their storage_bench results, got {results!r}')
    if not isinstance(expected or {}, t.Mapping):
        raise FioError(f'expected must map node names to their expectations, got {expected!r}')
    cluster_floors = _expectations(cluster_expected, 'cluster_expected', aggregate=True)
    measured: dict[str, dict[str, dict[str, t.Any]]] = {}
    runs: dict[str, list[dict[str, t.Any]]] = {}
    for node in results:
        measured[node], runs[node] = _measured(results[node], node)
    floors = {node: _expectations((expected or {}).get(node), f'storage_expected of node {node}') for node in results}
    fleet: dict[str, list[float]] = {}
    for node, profiles in measured.items():
        for profile, values in profiles.items():
            value = _figure_of(values, PROFILES[profile].figure) if profile in PROFILES else None
            if value is not None:
                fleet.setdefault(profile, []).append(value)
    medians = {profile: statistics.median(values) for profile, values in fleet.items()}
    nodes = {}
    for node in sorted(results, key=natural_key):
        checks = list(runs[node])
        judged = [profile for profile in PROFILES if profile in measured[node]]
        # An expectation of a profile the node did not measure is reported as skipped, not silently dropped.
        unmeasured = sorted({_key_profile(key) for key in floors[node]} - set(judged))
        for profile in judged:
            values = measured[node][profile]
            checks.append(_throughput_check(node, profile, values, floors[node], medians.get(profile),
                                            len(fleet.get(profile, [])), fraction))
            ceiling = floors[node].get(f'{profile}_p99_ms')
            if ceiling is not None:
                checks.append(_latency_check(node, profile, values, ceiling))
        for profile in unmeasured:
            checks.append(check('storage_throughput', SKIP, profile, None, None, f'{node}: {profile} was not measured'))
        nodes[node] = {'checks': sorted(checks, key=lambda c: c['status'] != FAIL), 'healthy': healthy(checks),
                       'profiles': measured[node]}
    return {'nodes': nodes, 'cluster': _cluster(measured, nodes, medians, fraction, cluster_floors)}


def _cluster(measured: t.Mapping[str, t.Mapping[str, t.Mapping[str, t.Any]]],
             nodes: t.Mapping[str, t.Mapping[str, t.Any]], medians: t.Mapping[str, float], fraction: float,
             floors: t.Mapping[str, float]) -> dict[str, t.Any]:
    """The report's storage stage: the shared profiles' aggregates and a table of every node's figures."""
    checks = []
    facts: dict[str, t.Any] = {'fleet_fraction': fraction,
                               'fleet_median': {profile: round(value, 1) for profile, value in medians.items()}}
    for profile, spec in PROFILES.items():
        per_node = {node: profiles[profile] for node, profiles in measured.items() if profile in profiles}
        if spec.scope == 'shared' and per_node:
            item, facts[profile] = _aggregate_check(profile, per_node, floors)
            checks.append(item)
        elif spec.scope == 'shared' and f'{profile}_aggregate_mib_s' in floors:
            checks.append(check('storage_aggregate', SKIP, profile, None, None, f'{profile}: no node measured it'))
    columns = ['healthy'] + [f'{profile}_{spec.figure}' for profile, spec in PROFILES.items()
                             if any(profile in profiles for profiles in measured.values())]
    table = {}
    for node, result in nodes.items():
        row: dict[str, t.Any] = {'healthy': result['healthy']}
        for profile, spec in PROFILES.items():
            if f'{profile}_{spec.figure}' in columns:
                row[f'{profile}_{spec.figure}'] = _figure_of(measured[node].get(profile) or {}, spec.figure)
        table[node] = row
    return {'title': 'Storage', 'checks': checks, 'healthy': healthy(checks), 'facts': facts, 'nodes': table,
            'columns': columns}
