#!/usr/bin/python3
# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test-only: inject a GPU fault into a node's stand-in driver, as the real hardware would show it.

    llmforge-sim-fault xid CODE --gpu N [--abort-job JOBID] [--text TEXT]
    llmforge-sim-fault sxid CODE --switch N (--fatal|--non-fatal)
    llmforge-sim-fault slow --gpu N [--job JOBID] [--duty F]
    llmforge-sim-fault clear

`xid` writes the driver's Xid line for GPU N (its PCI bus id from the simulated nvidia-smi) to the node's simulated
kernel log (/run/llmforge-sim/kernel.log, `dmesg --ctime` format), as NVRM prints it. With --abort-job, the
processes of that Slurm job on this node that run the trainer get SIGABRT, as a CUDA call on a GPU that fell off
the bus aborts the process that made it. A reboot (a new /run) forgets the fault, as the kernel's log does.

`slow` makes GPU N a straggler, as a GPU stuck at low clocks (a failing power stage, a thermal fault) is: DCGM's
level-3 diagnostic (the dcgmi stand-in's /etc/llmforge-sim/dcgmi-diag-3) fails on its performance tests, and, with
--job, the processes of that Slurm job on this node that run the trainer are stopped for F (default 0.75) of every
20 ms until they have all ended (a background process does it), so that the rank's steps take longer as they
would on the slow GPU. It lasts across reboots, as a hardware fault does; `clear` ends it (the stopping ends
with the job).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import time

KERNEL_LOG = '/run/llmforge-sim/kernel.log'
SMI_XML = '/usr/local/share/llmforge-sim/gpu/smi_q.xml'
TEXTS = {
    79: 'GPU has fallen off the bus.',
    48: 'An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0, subpartition 0.',
    94: 'Contained: SM (0x1). RST: No, D-RST: No',
    95: 'Uncontained: FBHUB. RST: Yes, D-RST: No',
    13: 'Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address',
    31: 'Ch 00000008, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f_1e000000.',
}


def gpu_bus(index: int) -> str:
    """The Xid form of GPU `index`'s PCI bus id: 0000:18:00 for nvidia-smi's 00000000:18:00.0."""
    with open(SMI_XML, encoding='utf-8') as handle:
        ids = re.findall(r'<gpu id="([0-9A-Fa-f]+):([0-9A-Fa-f]+):([0-9A-Fa-f]+)\.\d"', handle.read())
    if not 0 <= index < len(ids):
        raise SystemExit(f'llmforge-sim-fault: no GPU {index} (the node has {len(ids)})')
    domain, bus, device = ids[index]
    return f'{int(domain, 16):04x}:{bus.lower()}:{device.lower()}'


def log(line: str) -> None:
    stamp = time.strftime('%a %b %e %H:%M:%S %Y', time.localtime())
    os.makedirs(os.path.dirname(KERNEL_LOG), exist_ok=True)
    with open(KERNEL_LOG, 'a', encoding='utf-8') as handle:
        handle.write(f'[{stamp}] {line}\n')


DCGM_LEVEL3 = '/etc/llmforge-sim/dcgmi-diag-3'
PERIOD = 0.02


def job_trainers(job: str) -> list[int]:
    """This node's processes of Slurm job `job` that run the trainer."""
    found = []
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open(f'/proc/{entry}/environ', 'rb') as handle:
                environ = handle.read().split(b'\0')
            with open(f'/proc/{entry}/cmdline', 'rb') as handle:
                cmdline = handle.read()
        except OSError:
            continue
        # The trainer's ranks: llmforge_train.py --run-dir DIR --summary FILE ... (its helper modes have no --summary).
        words = cmdline.split(b'\0')
        if f'SLURM_JOB_ID={job}'.encode() in environ and any(word.endswith(b'llmforge_train.py') for word in words) \
                and b'--summary' in words:
            found.append(int(entry))
    return found


def signal_all(pids: list[int], number: int) -> list[int]:
    alive = []
    for pid in pids:
        try:
            os.kill(pid, number)
            alive.append(pid)
        except OSError:
            pass
    return alive


def abort_job(job: str) -> list[int]:
    """SIGABRT to this node's processes of Slurm job `job` that run the trainer."""
    return signal_all(job_trainers(job), signal.SIGABRT)


def throttle(job: str, duty: float) -> None:
    """Stop the job's trainers for `duty` of every PERIOD until none is left; always leave them running."""
    pids = job_trainers(job)
    looked = time.monotonic()
    try:
        while pids:
            pids = signal_all(pids, signal.SIGSTOP)
            time.sleep(PERIOD * duty)
            pids = signal_all(pids, signal.SIGCONT)
            time.sleep(PERIOD * (1 - duty))
            if time.monotonic() - looked > 5:
                pids, looked = job_trainers(job), time.monotonic()
    finally:
        signal_all(pids, signal.SIGCONT)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog='llmforge-sim-fault', description=__doc__.split('\n\n', maxsplit=1)[0])
    sub = parser.add_subparsers(dest='kind', required=True)
    xid = sub.add_parser('xid')
    xid.add_argument('code', type=int)
    xid.add_argument('--gpu', type=int, required=True)
    xid.add_argument('--abort-job', default='')
    xid.add_argument('--text', default='')
    sxid = sub.add_parser('sxid')
    sxid.add_argument('code', type=int)
    sxid.add_argument('--switch', type=int, required=True)
    severity = sxid.add_mutually_exclusive_group(required=True)
    severity.add_argument('--fatal', action='store_true')
    severity.add_argument('--non-fatal', action='store_true')
    slow = sub.add_parser('slow')
    slow.add_argument('--gpu', type=int, required=True)
    slow.add_argument('--job', default='')
    slow.add_argument('--duty', type=float, default=0.75)
    sub.add_parser('clear')
    args = parser.parse_args(argv)
    if args.kind == 'slow':
        gpu_bus(args.gpu)  # the GPU exists
        if not 0 < args.duty < 1:
            raise SystemExit('llmforge-sim-fault: --duty must be between 0 and 1')
        os.makedirs(os.path.dirname(DCGM_LEVEL3), exist_ok=True)
        with open(DCGM_LEVEL3, 'w', encoding='utf-8') as handle:
            handle.write('l3-fail\n')
        if args.job:
            if not job_trainers(args.job):
                raise SystemExit(f'llmforge-sim-fault: no trainer of job {args.job} on this node')
            if os.fork() == 0:
                os.setsid()
                throttle(args.job, args.duty)
                os._exit(0)  # pylint: disable=protected-access
        return 0
    if args.kind == 'clear':
        if os.path.exists(DCGM_LEVEL3):
            os.unlink(DCGM_LEVEL3)
        return 0
    if args.kind == 'xid':
        text = args.text or TEXTS.get(args.code, 'Graphics Exception')
        log(f"NVRM: Xid (PCI:{gpu_bus(args.gpu)}): {args.code}, pid='<unknown>', name=<unknown>, {text}")
        if args.abort_job:
            print(f'aborted {abort_job(args.abort_job)}')
    else:
        words = 'Fatal' if args.fatal else 'Non-fatal'
        log(f'nvidia-nvswitch{args.switch}: SXid (PCI:0000:0{5 + args.switch}:00.0): {args.code}, {words}, Link 32 '
            'egress non-posted PRIV error')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
