#!/usr/bin/env bash
# Runs the molecule scenarios named as arguments and ends with one table of their results (and, for a failed
# scenario, what failed in it: scripts/molecule_failures.py).
#
# `cluster` runs first, its output on the terminal; a second lane starts when it reaches its verify step and takes
# scenarios from a queue (longest first), with their output in their logs only; a third lane (quiet) takes the
# shortest from the queue's end once the cluster's tests are past its site re-run, and when `cluster` ends, the first
# lane takes from the same queue, on the terminal. The scenarios are bound by this machine's CPU (Ansible's worker
# processes, docker exec and the modules' Python in the containers): with cluster, cluster_debian12 and the role
# scenarios converging at once each one took 2 to 2.5 times as long as alone (a site.yml re-run then ran past its
# 600 s limit), while the cluster's later tests mostly wait (the machine was 20 % idle then with two lanes).
# MOLECULE_STREAMS=1 runs every scenario one after another.
#
# The cluster scenarios run the installed tarball, not the checkout: molecule would put an exported checkout path
# first, so they run without ANSIBLE_COLLECTIONS_PATH. The role scenarios keep it: it points at collections/, where
# the checkout is the collection (molecule's prerun, which would install it into a cache the scenarios share, is
# off in .config/molecule/config.yml). Each scenario's molecule.yml is merged over .config/molecule/config.yml,
# named here so that a copy of the repository without .git (where molecule would not look for it) runs the same.
# What only cluster_debian12 needs, its image and the wheelhouse (`make image-debian12 wheelhouse`), is made in the
# background while the scenarios before it run: downloads and package unpacking, little CPU.
# Every scenario runs; the script exits 1 if any failed, after printing the end of each failed scenario's log and
# the table.
set -u
cd "$(dirname "$0")/.." || exit 2
logs=build/molecule
mkdir -p "$logs"
: >"$logs/results"
streams=${MOLECULE_STREAMS:-2}

# A deadline for every scenario (LLMFORGE_TEST_DEADLINE, seconds since the epoch; scripts/test-all.sh sets it): a
# scenario still running then is stopped (rc 124) after the processes it had are printed, and one not yet started
# is not started, so that the run ends by itself with its table and failures instead of being cut off from outside.
deadline=${LLMFORGE_TEST_DEADLINE:-0}

# watchdog NAME SECONDS: after SECONDS, prints what was running (the process tree under this script's scenarios and
# the containers) into NAME's log, shortly before `timeout` stops the scenario.
watchdog() {
    sleep "$2"
    {
        echo "== $(date +%T) molecule test --scenario-name $1 is at make test's deadline; what was running:"
        ps -eo pid,ppid,etimes,pcpu,args --forest | cut -c1-220 | grep -v -e ' \[' -e 'ps -eo' | tail -n 100
        docker ps --format '{{.Names}} {{.Status}}'
    } >>"$logs/$1.log" 2>&1
}

# run_scenario NAME [quiet]: molecule test NAME, its output in $logs/NAME.log (and on the terminal unless quiet).
run_scenario() {
    local name=$1 quiet=${2:-} log="$logs/$1.log" start rc bound=0 watcher=
    local -a env_cmd=(env)
    [[ $name == cluster* ]] && env_cmd=(env -u ANSIBLE_COLLECTIONS_PATH)
    start=$(date +%s)
    : >"$log"
    if ((deadline > 0)); then
        bound=$((deadline - start))
        if ((bound < 120)); then
            echo "== molecule test --scenario-name $name not started: make test's deadline is $bound s away" \
                | tee "$log"
            printf '%s %s %s\n' "$name" 124 0 >>"$logs/results"
            return 124
        fi
        # `timeout` stops the scenario's whole process group (molecule, Ansible, pytest); stdin from /dev/null, as
        # that group is not the terminal's.
        env_cmd=(timeout --kill-after=30 "$bound" "${env_cmd[@]}")
        watchdog "$name" "$((bound - 5))" &
        watcher=$!
    fi
    if [[ -n $quiet ]]; then
        echo "== $(date +%T) molecule test --scenario-name $name started; its log: $log"
        "${env_cmd[@]}" molecule --base-config .config/molecule/config.yml test --scenario-name "$name" </dev/null \
            >>"$log" 2>&1
        rc=$?
        echo "== $(date +%T) molecule test --scenario-name $name ended: rc $rc in $(($(date +%s) - start)) s"
    else
        "${env_cmd[@]}" molecule --base-config .config/molecule/config.yml test --scenario-name "$name" \
            </dev/null 2>&1 | tee -a "$log"
        rc=${PIPESTATUS[0]}
    fi
    [[ -z $watcher ]] || kill "$watcher" 2>/dev/null
    if [[ $rc == 124 || $rc == 137 ]] && ((bound > 0)); then
        echo "== molecule test --scenario-name $name stopped at make test's deadline, $bound s after it started" \
            | tee -a "$log"
    fi
    printf '%s %s %s\n' "$name" "$rc" "$(($(date +%s) - start))" >>"$logs/results"
    return "$rc"
}

# The scenarios after cluster wait in a queue, the longest first (cluster_debian12, monitoring, gpu_driver, then
# the others in the order given), so that the two lanes end close together whichever scenario takes longer today.
queue=$logs/queue
: >"$queue"
for name in cluster_debian12 monitoring gpu_driver "$@"; do
    if [[ $name != cluster && " $* " == *" $name "* ]] && ! grep -qx -- "$name" "$queue"; then
        echo "$name" >>"$queue"
    fi
done

# next_scenario [last]: takes the first name off the queue (the last with `last`; under a lock: several lanes take
# from it) and prints it; fails when the queue is empty.
next_scenario() {
    local name
    {
        flock 9
        if [[ ${1:-} == last ]]; then
            name=$(tail -n 1 "$queue")
            [[ -z $name ]] || sed -i '$d' "$queue"
        else
            name=$(head -n 1 "$queue")
            [[ -z $name ]] || sed -i 1d "$queue"
        fi
    } 9>"$queue.lock"
    [[ -n $name ]] && echo "$name"
}

# lane [quiet] [last]: the queue's scenarios one after another until it is empty, all of them whatever their
# results; from the queue's end (the shortest first) with `last`.
lane() {
    local name
    while name=$(next_scenario "${2:-}"); do
        if [[ $name == cluster_debian12 ]] && ! debian12_prepared; then
            continue
        fi
        run_scenario "$name" "${1:-}"
    done
    return 0
}

# debian12_prepared: waits for the background `make image-debian12 wheelhouse` (its exit status in a file: the lane
# that asks may run in a subshell, which cannot wait for its sibling); when it failed, records cluster_debian12 as
# failed with that make's output as its log.
debian12_prepared() {
    local rc
    until [[ -s $logs/prepare-debian12.rc ]]; do
        sleep 2
    done
    rc=$(<"$logs/prepare-debian12.rc")
    if [[ $rc != 0 ]]; then
        cp "$logs/prepare-debian12.log" "$logs/cluster_debian12.log"
        echo "== make image-debian12 wheelhouse failed (rc $rc): cluster_debian12 not run; see $logs/prepare-debian12.log"
        printf '%s %s %s\n' cluster_debian12 "$rc" 0 >>"$logs/results"
        return 1
    fi
}

rm -f "$logs/prepare-debian12.rc"
if grep -qx cluster_debian12 "$queue"; then
    {
        make --no-print-directory image-debian12 wheelhouse >"$logs/prepare-debian12.log" 2>&1
        echo $? >"$logs/prepare-debian12.rc"
    } &
fi

cluster=
[[ " $* " == *" cluster "* ]] && cluster=1
if [[ $streams == 1 ]]; then
    [[ -z $cluster ]] || run_scenario cluster
    lane
elif [[ -z $cluster ]]; then
    lane quiet &
    lane
    wait
else
    # The second lane starts when the cluster scenario reaches its verify step (MOLECULE_SECOND_LANE=verify, the
    # default) or when it has ended (=end). Its verify waits for jobs, timers and drains most of the time: about
    # half of this machine's CPU is idle then, and the first scenario of the queue takes it.
    #
    # A third lane takes the short role scenarios from the queue's end once the cluster scenario's tests are past its
    # site re-run (the drift test, the one test that converges every host again; the tests after it run jobs and
    # wait for Slurm's timers and drains, the machine a third idle). Until then, a role scenario's converge beside
    # that re-run and cluster_debian12's converge stretched all three. When `cluster` ends, the first lane takes from
    # the queue's front, on the terminal.
    rm -f "$logs/cluster.log" "$logs/cluster.ended"
    {
        until [[ -e $logs/cluster.ended ]] || { [[ ${MOLECULE_SECOND_LANE:-verify} == verify ]] \
            && grep -aq 'verify.*Executing' "$logs/cluster.log" 2>/dev/null; }; do
            sleep 5
        done
        lane quiet
    } &
    second=$!
    # The cluster scenario's containers at twice the CPU weight of the others (Docker's default 1024): its drills wait
    # on work inside them (training steps, slurmd, the health check), and beside the other lanes each drill took up
    # to 1.5 times as long. Once they exist (its create step); they keep the weight through their reboots.
    {
        until [[ -e $logs/cluster.ended ]] || grep -aq 'prepare.*Executing' "$logs/cluster.log" 2>/dev/null; do
            sleep 5
        done
        docker update --cpu-shares 2048 ctl1 gpu1 gpu2 login1 ldap1 >/dev/null \
            || echo "== the cluster scenario's containers keep Docker's default CPU weight (docker update failed)"
    } &
    {
        # The first test after the drift test (test_cluster.py) has started: the re-run is over.
        until [[ -e $logs/cluster.ended ]] || grep -aq 'test_gpu_stack_is_in' "$logs/cluster.log" 2>/dev/null; do
            sleep 5
        done
        lane quiet last
    } &
    third=$!
    run_scenario cluster
    touch "$logs/cluster.ended"
    lane
    wait "$second" "$third"
fi

failed=0
while read -r name rc seconds; do
    if [[ $rc != 0 ]]; then
        failed=1
        echo "== molecule test --scenario-name $name FAILED (rc $rc); the last 150 lines of $logs/$name.log"
        tail -n 150 "$logs/$name.log"
    fi
done <"$logs/results"
echo "== molecule scenarios"
while read -r name rc seconds; do
    [[ $rc == 0 ]] && result=passed || result="FAILED (rc $rc)"
    printf '   %-20s %-14s %5d s\n' "$name" "$result" "$seconds"
done <"$logs/results"
if [[ $failed != 0 ]]; then
    # Last, so that the end of the output names the failures: the failed action, tests and assertions.
    while read -r name rc seconds; do
        if [[ $rc != 0 ]]; then
            echo "== $name: what failed (from $logs/$name.log)"
            python3 scripts/molecule_failures.py "$logs/$name.log"
        fi
    done <"$logs/results"
    echo "make molecule: a scenario failed (its log is printed above)"
fi
exit "$failed"
