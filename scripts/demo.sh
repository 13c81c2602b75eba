#!/usr/bin/env bash
# `make demo`: the same three containers as molecule/cluster (ctl1, gpu1, gpu2), site.yml against
# inventories/demo, then the cluster's state and a 2-node GPU job.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

molecule create --scenario-name cluster
ansible-playbook playbooks/site.yml -i inventories/demo

echo
echo "== sinfo on ctl1"
docker exec ctl1 sinfo -N -o '%N %P %T %G'
echo
echo "== srun -N2 --gres=gpu:2: a 2-node job, 2 GPUs per node"
docker exec ctl1 timeout 120 srun -N2 --gres=gpu:2 \
    bash -c 'echo "$(hostname): CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"' | sort
echo
echo "== sacct"
docker exec ctl1 sacct -X -o JobID,JobName,NodeList,AllocTRES%40,State
echo
echo "== validate.yml: GPU topology and RDMA checks on every node, report, Slurm drain/resume"
ansible-playbook playbooks/validate.yml -i inventories/demo -e validate_report_dir="$root/validate-report" |
    sed -n '/Print the summary/,/PLAY RECAP/p' | grep -E 'healthy nodes|failing nodes' || true
echo "report: $root/validate-report/report.html (report.json, junit.xml beside it)"
echo
echo "The cluster is up: 'docker exec -it ctl1 bash' to use it, 'make demo-down' to remove it."
