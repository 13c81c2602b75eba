# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test-only: publish a stand-in NVIDIA driver release in a local apt repository.

    standin_driver.py [--broken] VERSION REPO

VERSION is a Debian package version such as 580.159.04-1; its branch (580) is what `gpu_driver_branch` pins. The
packages carry the names the gpu_driver role installs on Debian (nvidia-smi, libnvidia-ml1, nvidia-persistenced,
libnvidia-cfg1, firmware-nvidia-gsp) and do what installing a real driver does to a node, as far as a container
allows: /usr/bin/nvidia-modprobe creates the /dev/nvidia0..N-1 and /dev/nvidiactl device nodes (major 195) and starts
the node's simulated kernel log, /run/llmforge-sim/kernel.log, with the driver's load message; nvidia-smi's
postinst runs it once, and nvidia-persistenced runs it at every boot before it starts, as the real daemon has
nvidia-modprobe make the device files (a container's /dev and /run are new at each start, as a server's are after
a reboot: without this, slurmd waits for /dev/nvidia0 forever). /usr/bin/nvidia-smi answers from the simulated GPUs under
/usr/local/share/llmforge-sim/gpu, which the postinst (re)writes from the fixture in this directory with the
package's own driver version, as a driver update changes what nvidia-smi reports. The fixture is the 8-GPU HGX
H200 one (fixture/smi_q.xml, topo_m.txt, smi_version.txt) and nvidia-smi-shim replays it. A --broken release
installs cleanly, but its nvidia-smi cannot talk to the driver (exit 9, nvidia-smi's own message), as after an
update whose kernel module failed to load.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import make_apt_repo  # noqa: E402  pylint: disable=wrong-import-position

SIM = '/usr/local/share/llmforge-sim'
SHARE = '/usr/share/llmforge-sim-driver'
LIB = '/usr/lib/llmforge-sim-driver'

# Stand-in for nvidia-modprobe: the device files of the simulated GPUs, and the kernel log a loaded driver starts.
NVIDIA_MODPROBE = f"""#!/bin/sh
# Stand-in for NVIDIA's nvidia-modprobe: makes /dev/nvidia0..N-1 and /dev/nvidiactl (major 195) for the simulated
# GPUs and writes the driver's load message to the simulated kernel log (/run: empty after every start).
set -e
count=$(grep -c '<gpu id=' {SHARE}/smi_q.xml)
i=0
while [ "$i" -lt "$count" ]; do
    [ -e /dev/nvidia$i ] || mknod -m 0666 /dev/nvidia$i c 195 $i
    i=$((i + 1))
done
[ -e /dev/nvidiactl ] || mknod -m 0666 /dev/nvidiactl c 195 255
mkdir -p -m 0755 /run/llmforge-sim
if [ ! -s /run/llmforge-sim/kernel.log ]; then
    version=$(sed -n 's/^DRIVER version *: *//p' {SHARE}/smi_version.txt)
    # As `dmesg --ctime` prints it.
    printf '[%s] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  %s  Release Build\\n' \\
        "$(LC_ALL=C date '+%a %b %e %H:%M:%S %Y')" "$version" >>/run/llmforge-sim/kernel.log
    chmod 0640 /run/llmforge-sim/kernel.log
fi
"""

POSTINST = f"""#!/bin/sh
set -e
if [ "$1" = configure ]; then
    /usr/bin/nvidia-modprobe
    mkdir -p {SIM}/gpu {SIM}/gpu-healthy
    cp {SHARE}/* {SIM}/gpu-healthy/
    cp {SHARE}/* {SIM}/gpu/
fi
"""

NVIDIA_SMI = f"""#!/bin/sh
# Stand-in for NVIDIA's nvidia-smi: answers from the node's simulated GPUs.
NVIDIA_SMI_SHIM_DIR="${{NVIDIA_SMI_SHIM_DIR:-{SIM}/gpu}}" exec {LIB}/nvidia-smi-shim "$@"
"""
NVIDIA_SMI_BROKEN = f"""#!/bin/sh
# Stand-in for NVIDIA's nvidia-smi of a release whose kernel module does not load.
NVIDIA_SMI_SHIM_FAIL=9 NVIDIA_SMI_SHIM_DIR={SIM}/gpu exec {LIB}/nvidia-smi-shim "$@"
"""

PERSISTENCED_UNIT = """[Unit]
Description=NVIDIA Persistence Daemon (test stand-in)

[Service]
# As the real daemon has nvidia-modprobe make the device files when it starts, at every boot.
ExecStartPre=/usr/bin/nvidia-modprobe
ExecStart=/bin/sleep infinity

[Install]
WantedBy=multi-user.target
"""


def write(root: str, path: str, content: str, mode: int = 0o644) -> None:
    target = os.path.join(root, path.lstrip('/'))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, 'w', encoding='utf-8') as handle:
        handle.write(content)
    os.chmod(target, mode)


def package_tree(build: str, name: str, version: str, description: str, depends: str = '') -> str:
    root = os.path.join(build, name)
    control = (f'Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: llmforge test <test@example.com>\n'
               + (f'Depends: {depends}\n' if depends else '')
               + f'Description: {description} (test stand-in)\n Part of a simulated NVIDIA driver release.\n')
    write(root, 'DEBIAN/control', control)
    write(root, f'/usr/share/doc/{name}/README', f'{name} {version}: test stand-in, no driver inside.\n')
    return root


def fixture_with_version(build: str, driver: str) -> str:
    """The HGX fixture reporting `driver` as its driver version, plus the `nvidia-smi -L` listing."""
    out = os.path.join(build, 'fixture')
    os.makedirs(out)
    src = os.path.join(HERE, 'fixture')
    xml = open(os.path.join(src, 'smi_q.xml'), encoding='utf-8').read()
    xml = re.sub(r'<driver_version>[^<]*</driver_version>', f'<driver_version>{driver}</driver_version>', xml)
    version = open(os.path.join(src, 'smi_version.txt'), encoding='utf-8').read()
    version = re.sub(r'^((?:NVIDIA-SMI|DRIVER) version\s*:\s*)\S+', rf'\g<1>{driver}', version, flags=re.M)
    version = re.sub(r'^(NVML version\s*:\s*)\S+', r'\g<1>' + driver.rsplit('.', 1)[0], version, flags=re.M)
    for name, text in (('smi_q.xml', xml), ('smi_version.txt', version)):
        write(out, name, text)
    for name in ('topo_m.txt', 'list_gpus.txt'):
        shutil.copy(os.path.join(src, name), os.path.join(out, name))
    return out


def main(argv: list[str]) -> int:
    broken = argv[:1] == ['--broken']
    argv = argv[1:] if broken else argv
    if len(argv) != 2 or not re.match(r'^\d+\.\d+(\.\d+)?-\S+$', argv[0]):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    version, repo = argv
    driver = version.split('-', 1)[0]
    with tempfile.TemporaryDirectory() as build:
        fixture = fixture_with_version(build, driver)
        smi = package_tree(build, 'nvidia-smi', version, 'NVIDIA System Management Interface',
                           f'libnvidia-ml1 (= {version})')
        for name in sorted(os.listdir(fixture)):
            write(smi, f'{SHARE}/{name}', open(os.path.join(fixture, name), encoding='utf-8').read())
        write(smi, f'{LIB}/nvidia-smi-shim', open(os.path.join(HERE, 'nvidia-smi-shim'), encoding='utf-8').read(),
              0o755)
        write(smi, '/usr/bin/nvidia-smi', NVIDIA_SMI_BROKEN if broken else NVIDIA_SMI, 0o755)
        write(smi, '/usr/bin/nvidia-modprobe', NVIDIA_MODPROBE, 0o755)
        write(smi, 'DEBIAN/postinst', POSTINST, 0o755)
        persistenced = package_tree(build, 'nvidia-persistenced', version, 'NVIDIA persistence daemon',
                                    f'libnvidia-cfg1 (= {version})')
        write(persistenced, '/lib/systemd/system/nvidia-persistenced.service', PERSISTENCED_UNIT)
        trees = [smi, persistenced] + [
            package_tree(build, name, version, description) for name, description in (
                ('libnvidia-ml1', 'NVIDIA Management Library'),
                ('libnvidia-cfg1', 'NVIDIA configuration library'),
                ('firmware-nvidia-gsp', 'NVIDIA GSP firmware'))]
        return make_apt_repo.main([repo] + trees)


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
