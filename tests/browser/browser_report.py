# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster the browser tests render: validator results made by the real parsers from the real fixtures.

* gpu1: healthy 8-GPU HGX H200 node (``topo_m.txt``, all NV18, NICi PIX to GPUi) and 8 healthy NDR ports.
* gpu2: the same hardware degraded: GPU3 trained at PCIe x8, and mlx5_3 port 1 is DOWN/Polling.
* gpu3: unreachable, recorded the way playbooks/validate.yml does (``__validate_unreachable``).
"""

from __future__ import annotations

import importlib.util
import pathlib
import typing as t
import xml.etree.ElementTree as ET

from ansible_collections.llmforge.cluster.plugins.module_utils import _gpu_topology as gpu
from ansible_collections.llmforge.cluster.plugins.module_utils import _rdma_links as rdma
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _report as rep

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / 'fixtures'
HGX = FIXTURES / 'gpu' / 'hgx-h200-8'
NDR = {'devices': r'^mlx5_(?!bond)', 'hca_count': 8, 'link_layer': 'InfiniBand', 'rate_gbps': 400,
       'require_sm': True, 'require_netdev': True}
CLUSTER = 'demo'
WHEN = '2026-11-30T01:00:00Z'
DEGRADED_GPU = 3  # the GPU of gpu2 whose PCIe link trained at x8
DOWN_PORT = 'mlx5_3/1'  # the IB port of gpu2 that is down
# What playbooks/validate.yml records for a validator of a node it could not reach.
UNREACHABLE = {'unreachable': True, 'msg': 'host unreachable', 'healthy': False}


def _load_sysfs_builder() -> t.Any:
    spec = importlib.util.spec_from_file_location('make_sysfs_trees', FIXTURES / 'rdma' / 'make_sysfs_trees.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def smi_xml(pcie_x8_gpu: t.Optional[int] = None) -> str:
    """The HGX ``nvidia-smi -q -x`` fixture, optionally with one GPU's current PCIe link width at 8x."""
    text = (HGX / 'smi_q.xml').read_text(encoding='utf-8')
    if pcie_x8_gpu is None:
        return text
    root = ET.fromstring(text)
    node = root.findall('gpu')[pcie_x8_gpu].find('pci/pci_gpu_link_info/link_widths/current_link_width')
    assert node is not None and node.text == '16x', 'the HGX fixture changed: no 16x current_link_width'
    node.text = '8x'
    return ET.tostring(root, encoding='unicode')


def gpu_result(pcie_x8_gpu: t.Optional[int] = None) -> dict[str, t.Any]:
    facts = gpu.parse_smi_xml(smi_xml(pcie_x8_gpu))
    topo = gpu.parse_topo_matrix((HGX / 'topo_m.txt').read_text(encoding='utf-8'))
    return gpu.evaluate(facts, topo, gpu.resolve_expectation('h200-sxm-8', None))


def results(workdir: pathlib.Path) -> dict[str, dict[str, t.Any]]:
    """``{node: {validator: result}}`` as validate.yml collects it; sysfs trees are written under workdir."""
    builder = _load_sysfs_builder()
    healthy_tree = builder.build('ndr8_healthy', workdir / 'sysfs-healthy')
    down_tree = builder.build('ndr8_port_down', workdir / 'sysfs-down')
    return {
        'gpu1': {'gpu_topology': gpu_result(), 'rdma_links': rdma.evaluate(str(healthy_tree), NDR)},
        'gpu2': {'gpu_topology': gpu_result(DEGRADED_GPU), 'rdma_links': rdma.evaluate(str(down_tree), NDR)},
        'gpu3': {'gpu_topology': dict(UNREACHABLE), 'rdma_links': dict(UNREACHABLE)},
    }


def report(workdir: pathlib.Path) -> dict[str, t.Any]:
    return rep.build_report(results(workdir), CLUSTER, WHEN)
