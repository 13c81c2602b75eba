# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test-only: build .deb packages from package trees and publish them as a signed flat apt repository.

    make_apt_repo.py REPO TREE [TREE ...]

Each TREE is a package root with DEBIAN/control. The .deb files land in REPO (older builds stay, as in a real
repository that keeps previous versions), then REPO/Packages, Release and InRelease are written. InRelease is
signed with a key generated on first use under REPO/../<basename>-gnupg; its public half is REPO.gpg, for
`Signed-By:`. Only dpkg-deb, gpg and the Python standard library: no apt-utils, so preparing a test host never
depends on the package index of the image.
"""

from __future__ import annotations

import email.utils
import hashlib
import os
import subprocess
import sys


def control_fields(tree: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    key = ''
    with open(os.path.join(tree, 'DEBIAN', 'control'), encoding='utf-8') as handle:
        for line in handle:
            if line[:1] in (' ', '\t') and key:
                fields[key] += '\n' + line.rstrip('\n')
            elif ':' in line:
                key, value = line.split(':', 1)
                fields[key] = value.strip()
    return fields


def build(repo: str, tree: str) -> str:
    fields = control_fields(tree)
    name = f"{fields['Package']}_{fields['Version']}_{fields['Architecture']}.deb"
    subprocess.run(['dpkg-deb', '--root-owner-group', '-Zgzip', '--build', tree, os.path.join(repo, name)],
                   check=True, stdout=subprocess.DEVNULL)
    return name


def stanza(repo: str, deb: str) -> str:
    path = os.path.join(repo, deb)
    control = subprocess.run(['dpkg-deb', '--field', path], check=True, capture_output=True, text=True).stdout
    with open(path, 'rb') as handle:
        data = handle.read()
    extra = (f'Filename: ./{deb}\nSize: {len(data)}\nMD5sum: {hashlib.md5(data).hexdigest()}\n'
             f'SHA256: {hashlib.sha256(data).hexdigest()}\n')
    return control.rstrip('\n') + '\n' + extra


def write_index(repo: str) -> None:
    debs = sorted(name for name in os.listdir(repo) if name.endswith('.deb'))
    packages = '\n'.join(stanza(repo, deb) for deb in debs)
    with open(os.path.join(repo, 'Packages'), 'w', encoding='utf-8') as handle:
        handle.write(packages)
    data = packages.encode()
    release = (f'Origin: llmforge-test\nLabel: llmforge-test\nDate: {email.utils.formatdate(usegmt=True)}\n'
               f'MD5Sum:\n {hashlib.md5(data).hexdigest()} {len(data)} Packages\n'
               f'SHA256:\n {hashlib.sha256(data).hexdigest()} {len(data)} Packages\n')
    with open(os.path.join(repo, 'Release'), 'w', encoding='utf-8') as handle:
        handle.write(release)


def sign(repo: str) -> None:
    home = os.path.join(os.path.dirname(os.path.abspath(repo)), os.path.basename(os.path.abspath(repo)) + '-gnupg')
    gpg = ['gpg', '--batch', '--quiet', '--homedir', home]
    if not os.path.isdir(home):
        os.makedirs(home, mode=0o700)
        subprocess.run(gpg + ['--passphrase', '', '--quick-gen-key', 'llmforge test repository', 'ed25519', 'sign',
                              'never'], check=True)
    with open(repo.rstrip('/') + '.gpg', 'wb') as handle:
        handle.write(subprocess.run(gpg + ['--export'], check=True, capture_output=True).stdout)
    inrelease = os.path.join(repo, 'InRelease')
    if os.path.exists(inrelease):
        os.unlink(inrelease)
    subprocess.run(gpg + ['--clearsign', '--output', inrelease, os.path.join(repo, 'Release')], check=True)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    repo, trees = argv[0], argv[1:]
    os.makedirs(repo, exist_ok=True)
    for tree in trees:
        print(build(repo, tree))
    write_index(repo)
    sign(repo)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
