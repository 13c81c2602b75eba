# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Loads the health check's expectation the way llmforge-nodecheck does, from stdin, with the code installed in the
# directory given as the argument, and names the inventory variables on error (tasks/health_check.yml runs it with
# python3 -I -c before the expectation is written).
import sys

sys.path.insert(0, sys.argv[1])
from ansible_collections.llmforge.cluster.plugins.module_utils.programs import _nodecheck  # noqa: E402

try:
    _nodecheck.load_config('/dev/stdin')
except _nodecheck.ConfigError as err:
    sys.exit('health check expectation (gpu_profile, gpu_expected, rdma_expected, slurm_node_health_check_*): '
             + str(err).replace('/dev/stdin: ', ''))
