#!/usr/bin/env bash
# Runs the molecule scenarios named as arguments and ends with one table of their results (and, for a failed
# scenario, what failed in it: scripts/molecule_failures.py).
#
# `cluster` runs alone, its output on the terminal. Then `cluster_debian12` (followed by gpu_driver) runs beside the
# other single-role scenarios (one after another, their output on the terminal), with its output in its log only. A third stream costs more than
# it saves: the scenarios are bound by this machine's CPU (Ansible's worker processes, docker exec and the modules'
# Python in the containers), and with cluster, cluster_debian12 and the role scenarios at once each one took 2 to
# 2.5 times as long as alone (a site.yml re-run then ran past its 600 s limit). MOLECULE_STREAMS=1 runs every
# scenario one after another.
#
# The cluster scenarios run the installed tarball, not the checkout: molecule would put an exported checkout path
# first, so they run without ANSIBLE_COLLECTIONS_PATH. The role scenarios keep it: it points at collections/, where
# the checkout is the collection (molecule's prerun, which would install it into a cache the scenarios share, is
# off in .config/molecule/config.yml). Each scenario's molecule.yml is merged over .config/molecule/config.yml,
# named here so that a copy of the repository without .git (where molecule would not look for it) runs the same.
# Every scenario runs; the script exits 1 if any failed, after printing the end of each failed scenario's log and
# the table.
set -u
cd "$(dirname "$0")/.." || exit 2
logs=build/molecule
mkdir -p "$logs"
: >"$logs/results"
streams=${MOLECULE_STREAMS:-2}

# run_scenario NAME [quiet]: molecule test NAME, its output in $logs/NAME.log (and on the terminal unless quiet).
run_scenario() {
    local name=$1 quiet=${2:-} log="$logs/$1.log" start rc
    local -a env_cmd=(env)
    [[ $name == cluster* ]] && env_cmd=(env -u ANSIBLE_COLLECTIONS_PATH)
    start=$(date +%s)
    if [[ -n $quiet ]]; then
        echo "== $(date +%T) molecule test --scenario-name $name started; its log: $log"
        "${env_cmd[@]}" molecule --base-config .config/molecule/config.yml test --scenario-name "$name" >"$log" 2>&1
        rc=$?
        echo "== $(date +%T) molecule test --scenario-name $name ended: rc $rc in $(($(date +%s) - start)) s"
    else
        "${env_cmd[@]}" molecule --base-config .config/molecule/config.yml test --scenario-name "$name" 2>&1 | tee "$log"
        rc=${PIPESTATUS[0]}
    fi
    printf '%s %s %s\n' "$name" "$rc" "$(($(date +%s) - start))" >>"$logs/results"
    return "$rc"
}

# run_each [quiet] NAME...: the scenarios one after another, all of them whatever their results.
run_each() {
    local quiet=$1 name
    shift
    for name in "$@"; do
        run_scenario "$name" "$quiet"
    done
    return 0
}

cluster=() debian12=() roles=()
for name in "$@"; do
    case $name in
        cluster) cluster=(cluster) ;;
        cluster_debian12) debian12=(cluster_debian12) ;;
        *) roles+=("$name") ;;
    esac
done

if [[ $streams == 1 ]]; then
    run_each '' "${cluster[@]}" "${debian12[@]}" "${roles[@]}"
else
    run_each '' "${cluster[@]}"
    # The two lanes of the second half take about as long: cluster_debian12 and then the scenarios named in
    # MOLECULE_AFTER_DEBIAN12 (gpu_driver by default) in one, the other role scenarios in the other.
    after=() rest=()
    for name in "${roles[@]}"; do
        if ((${#debian12[@]})) && [[ " ${MOLECULE_AFTER_DEBIAN12-gpu_driver} " == *" $name "* ]]; then
            after+=("$name")
        else
            rest+=("$name")
        fi
    done
    pid=
    if ((${#debian12[@]})); then
        run_each quiet "${debian12[@]}" "${after[@]}" &
        pid=$!
    fi
    run_each '' "${rest[@]}"
    [[ -n $pid ]] && wait "$pid"
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
