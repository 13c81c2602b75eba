# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test stand-in for perftest's ib_write_bw on hosts without RDMA hardware.

Speaks real TCP between server and client exactly where ib_write_bw exchanges its connection data,
so pairing, ports, timeouts and addresses are exercised for real. The printed report is perftest's
own format (a recorded report is the template); the bandwidth is the lower of the two ends' rates
for the rail's device, read from /etc/llmforge-test/perftest-rates.json ({"mlx5_1": 180.0}).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import socket
import sys
import time

RATES = pathlib.Path('/etc/llmforge-test/perftest-rates.json')
TEMPLATE = pathlib.Path('/usr/local/share/llmforge-test/ib_write_bw_client_gbits.txt')
HEALTHY_GBPS = 392.1


def own_rate(device: str) -> float:
    try:
        return float(json.loads(RATES.read_text()).get(device, HEALTHY_GBPS))
    except (OSError, ValueError):
        return HEALTHY_GBPS


def report(device: str, gbps: float) -> str:
    """The recorded report with this run's device and rates in its result row."""
    text = TEMPLATE.read_text()
    text = re.sub(r'(Device\s+: )\S+', lambda m: m.group(1) + device, text)

    def row(match: re.Match) -> str:
        size, iterations = match.group(1), match.group(2)
        msg_rate = gbps * 1e9 / 8 / int(size) / 1e6
        return f' {size:<10} {iterations:<10}       {gbps * 1.0004:.2f}             {gbps:.2f}\t\t   {msg_rate:.6f}'
    return re.sub(r'^ (\d+)\s+(\d+)\s+[\d.]+\s+[\d.]+\s+[\d.]+\s*$', row, text, flags=re.M)


def serve(args: argparse.Namespace) -> int:
    # Like ib_write_bw's server, it waits for its client until it is killed (the playbook runs it under timeout):
    # on a loaded machine a round's last client may connect well after the server started.
    with socket.create_server(('0.0.0.0', args.port), reuse_port=True) as server:
        conn, _address = server.accept()
        with conn:
            peer = json.loads(conn.recv(4096).decode())
            rate = min(own_rate(args.device), float(peer['rate']))
            conn.sendall(json.dumps({'rate': own_rate(args.device)}).encode())
    time.sleep(min(args.duration, 1))
    print(report(args.device, rate), end='')
    return 0


def connect(args: argparse.Namespace) -> int:
    deadline = time.monotonic() + args.timeout
    while True:
        try:
            conn = socket.create_connection((args.server, args.port), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                print(f"Couldn't connect to {args.server}:{args.port}", file=sys.stderr)
                print(' Unable to open file descriptor for socket connection Unable to init the socket connection',
                      file=sys.stderr)
                return 1
            time.sleep(0.2)
    with conn:
        conn.sendall(json.dumps({'rate': own_rate(args.device)}).encode())
        peer = json.loads(conn.recv(4096).decode())
    time.sleep(min(args.duration, 1))
    print(report(args.device, min(own_rate(args.device), float(peer['rate']))), end='')
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog='ib_write_bw')
    parser.add_argument('-d', '--ib-dev', dest='device', default='mlx5_0')
    parser.add_argument('-p', '--port', type=int, default=18515)
    parser.add_argument('-D', '--duration', type=float, default=5)
    parser.add_argument('--report_gbits', action='store_true')
    parser.add_argument('-F', '--CPU-freq', action='store_true')
    parser.add_argument('-x', '--gid-index')
    parser.add_argument('-q', '--qp', type=int, default=1)
    parser.add_argument('-s', '--size', type=int, default=65536)
    parser.add_argument('server', nargs='?')
    args = parser.parse_args()
    args.timeout = 30
    return connect(args) if args.server else serve(args)


if __name__ == '__main__':
    sys.exit(main())
