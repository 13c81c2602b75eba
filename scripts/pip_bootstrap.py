# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stand-in for the pip bootstrap script ansible-test downloads into its sanity virtualenvs.

Machines that reach only a package index cannot fetch that script, so this one installs the pip
bundled with Python (ensurepip) and then the pip version ansible-test asked for, from the index.
ansible-test runs it with pip-install arguments, exactly as it runs the original.
"""

from __future__ import annotations

import ensurepip
import os
import subprocess
import sys

# get-pip options that `pip install` itself does not know.
GET_PIP_ONLY_OPTIONS = {'--no-setuptools', '--no-wheel'}


def main() -> None:
    ensurepip.bootstrap(upgrade=True)
    args = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY_OPTIONS]
    # ensurepip hides the pip configuration (index, certificates) from this process; the install needs it.
    env = {key: value for key, value in os.environ.items() if key not in ('PIP_CONFIG_FILE', 'ENSUREPIP_OPTIONS')}
    subprocess.check_call([sys.executable, '-m', 'pip', 'install', *args], env=env)


if __name__ == '__main__':
    main()
