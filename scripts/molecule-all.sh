#!/usr/bin/env bash
# Runs the molecule scenarios named as arguments and ends with one table of their results (and, for a failed
# scenario, what failed in it: scripts/molecule_failures.py).
#
# The cluster scenarios run the installed tarball, not the checkout: molecule would put an exported checkout path
# first, so they run without ANSIBLE_COLLECTIONS_PATH. The role scenarios keep it (molecule's prerun installs the
# checkout through it). Each scenario's molecule.yml is merged over .config/molecule/config.yml, named here so
# that a copy of the repository without .git (where molecule would not look for it) runs the same. `cluster` runs
# alone; `cluster_debian12` runs beside the single-role scenarios (those wait on package downloads and services more
# than on the CPU) with its output in its log only. Every scenario runs; the script exits 1 if any failed, after
# printing the end of each failed scenario's log and the table.
set -u
cd "$(dirname "$0")/.." || exit 2
logs=build/molecule
mkdir -p "$logs"
: >"$logs/results"

# run_scenario NAME [quiet]: molecule test NAME, its output in $logs/NAME.log (and on the terminal unless quiet).
run_scenario() {
    local name=$1 quiet=${2:-} log="$logs/$1.log" start rc
    local -a env_cmd=(env)
    [[ $name == cluster* ]] && env_cmd=(env -u ANSIBLE_COLLECTIONS_PATH)
    start=$(date +%s)
    if [[ -n $quiet ]]; then
        "${env_cmd[@]}" molecule --base-config .config/molecule/config.yml test --scenario-name "$name" >"$log" 2>&1
        rc=$?
    else
        "${env_cmd[@]}" molecule --base-config .config/molecule/config.yml test --scenario-name "$name" 2>&1 | tee "$log"
        rc=${PIPESTATUS[0]}
    fi
    printf '%s %s %s\n' "$name" "$rc" "$(($(date +%s) - start))" >>"$logs/results"
    return "$rc"
}

background=
for name in "$@"; do
    [[ $name == cluster ]] && run_scenario cluster
done
for name in "$@"; do
    if [[ $name == cluster_debian12 ]]; then
        echo "== molecule test --scenario-name cluster_debian12 runs in the background; its log: $logs/cluster_debian12.log"
        run_scenario cluster_debian12 quiet &
        background=$!
    fi
done
for name in "$@"; do
    [[ $name == cluster* ]] || run_scenario "$name"
done
[[ -n $background ]] && wait "$background"

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
