#!/usr/bin/env bash
# `make demo`: the containers of molecule/cluster (ctl1, gpu1, gpu2, login1, the directory server ldap1 and two
# test clients), site.yml against inventories/demo, then the cluster's state and a 2-node GPU job.
set -euo pipefail
# Users log in on login1 and submit there; alice is a directory user (from ldap1), her home on the shared storage.
as_alice() { docker exec login1 runuser -l alice -c "$1"; }
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
echo "== alice@login1\$ srun -N2 --gres=gpu:2: a 2-node job, 2 GPUs per node"
as_alice "timeout 120 srun -N2 --gres=gpu:2 bash -c 'echo \"\$(hostname) \$(id -un): CUDA_VISIBLE_DEVICES=\$CUDA_VISIBLE_DEVICES\"'" |
    sort
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
job=$(as_alice "sbatch --parsable $sbatch" | cut -d';' -f1)
echo "alice@login1\$ sbatch $sbatch: job $job"
for _ in $(seq 1 120); do
    state=$(docker exec ctl1 squeue -h -j "$job" -o %T 2>/dev/null || true)
    [ -z "$state" ] && break
    sleep 5
done
# Each user's runs are in <run root>/<user> (0700, the user's own).
run=/shared/llmforge/runs/alice/llmforge-train-$job
as_alice "grep -E '^(resumed|starting|step=|checkpoint)' $run.out | tail -n 8"
as_alice "sacct -j $job -o JobID%-14,JobName%16,User,NodeList,Elapsed,State"
echo "checkpoints: $(as_alice "ls -d $run/step_* | tr '\n' ' '")"
echo "log: $run.out, summary: $run/summary-$job-0.json (alice's, on every host's /shared)"
echo
echo "The cluster is up: 'docker exec -it login1 runuser -l alice' to use it as alice, 'docker exec -it ctl1 bash' as"
echo "its administrator, 'make demo-down' to remove it."
