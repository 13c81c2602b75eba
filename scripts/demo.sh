#!/usr/bin/env bash
# `make demo`: the containers of molecule/cluster (ctl1, gpu1, gpu2, login1, the directory server ldap1 and two
# test clients), site.yml against inventories/demo, then the cluster's state and a 2-node GPU job.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

molecule --base-config .config/molecule/config.yml create --scenario-name cluster
ansible-playbook playbooks/site.yml -i inventories/demo

echo
echo "== sinfo on ctl1"
docker exec ctl1 sinfo -N -o '%N %P %T %G'
echo
echo "== scontrol show topology: the switches of topology.conf, read from the (simulated) InfiniBand fabric"
docker exec ctl1 scontrol show topology
echo
echo "== srun -N2 --gres=gpu:2: a 2-node job, 2 GPUs per node"
docker exec ctl1 timeout 120 srun -N2 --gres=gpu:2 \
    bash -c 'echo "$(hostname): CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"' | sort
echo
echo "== sacct"
docker exec ctl1 sacct -X -a -o JobID,User,Account,JobName,NodeList,AllocTRES%40,State
echo
echo "== validate.yml: GPU topology and RDMA checks on every node, report, Slurm drain/resume"
ansible-playbook playbooks/validate.yml -i inventories/demo -e validate_report_dir="$root/validate-report" |
    sed -n '/Print the summary/,/PLAY RECAP/p' | grep -E 'healthy nodes|failing nodes' || true
echo "report: $root/validate-report/report.html (report.json, junit.xml beside it)"
echo
echo
echo "== the reference training job: PyTorch on 2 nodes through Slurm, a checkpoint every 10 steps on /shared"
sbatch=/shared/llmforge/envs/llmforge-train/share/llmforge/llmforge-train.sbatch
job=$(docker exec ctl1 sbatch --parsable "$sbatch" | cut -d';' -f1)
echo "submitted job $job: sbatch $sbatch"
for _ in $(seq 1 120); do
    state=$(docker exec ctl1 squeue -h -j "$job" -o %T 2>/dev/null || true)
    [ -z "$state" ] && break
    sleep 5
done
# Each user's runs are in <run root>/<user> (0700); this job is root's.
run=/shared/llmforge/runs/root/llmforge-train-$job
docker exec ctl1 grep -E '^(resumed|starting|step=|checkpoint)' "$run.out" | tail -n 8
docker exec ctl1 sacct -X -j "$job" -o JobID,JobName,NodeList,Elapsed,State
echo "checkpoints: $(docker exec ctl1 bash -c "ls -d $run/step_* | tr '\n' ' '")"
echo "log: $run.out, summary: $run/summary-$job-0.json (on ctl1, gpu1, gpu2)"
echo
echo "The cluster is up: 'docker exec -it ctl1 bash' to use it, 'make demo-down' to remove it."
