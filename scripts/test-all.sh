#!/usr/bin/env bash
# `make test`: every check, in an order that keeps this 2-core machine busy.
#
#   1. What the machine needs from the distribution, one install after another (apt's lock): the Docker engine and
#      the test tools (fio, promtool, ShellCheck, Chromium): `make docker tools`. A failure here stops the run.
#   2. At once: the checks that need no container (`make unit lint sanity browser`: unit tests, yamllint and
#      ansible-lint, ansible-test sanity, the browser check; output in build/test/checks.log), and what the first
#      scenario needs: the Debian 13 test image and the collection built and installed as README says (`make -j2
#      image build`, mostly downloads and package unpacking). A failure of the latter stops the run.
#   3. The Molecule scenarios named as arguments (scripts/molecule-all.sh), while the checks finish beside them.
#
# Exits 0 only when the checks and every scenario passed; the end of the output says what failed.
set -u
cd "$(dirname "$0")/.." || exit 2
logs=build/test
mkdir -p "$logs"
started=$(date +%s)
# The scenarios stop at this deadline (scripts/molecule-all.sh), 80 minutes after the start unless set: a run that
# hangs ends by itself with its table, the stacks pytest-timeout printed and the process tree at the deadline, within
# the 90 minutes a CI run is given.
export LLMFORGE_TEST_DEADLINE=${LLMFORGE_TEST_DEADLINE:-$((started + 4800))}

# cpu_sampler: every 10 s, the share of the machine's CPU time that was busy since the last sample, from /proc/stat,
# as "HH:MM:SS busy%" lines in $logs/cpu.log (where a run's minutes went: an idle machine means waits, not work).
cpu_sampler() {
    local user nice system idle iowait irq softirq steal busy total last_busy=0 last_total=0
    while :; do
        read -r _ user nice system idle iowait irq softirq steal _ </proc/stat
        busy=$((user + nice + system + irq + softirq + steal))
        total=$((busy + idle + iowait))
        if ((last_total > 0 && total > last_total)); then
            echo "$(date +%T) $((100 * (busy - last_busy) / (total - last_total)))"
        fi
        last_busy=$busy last_total=$total
        sleep 10
    done
}
cpu_sampler >"$logs/cpu.log" &
sampler=$!
trap 'kill "$sampler" 2>/dev/null' EXIT

make --no-print-directory docker tools || {
    echo "make test: installing what the tests need failed (above); no check or scenario ran"
    exit 2
}

echo "== $(date +%T) make unit lint sanity browser started; its log: $logs/checks.log"
rm -f "$logs/checks.rc"
{
    checks_start=$(date +%s)
    make --no-print-directory unit lint sanity browser >"$logs/checks.log" 2>&1
    rc=$?
    echo "$rc" >"$logs/checks.rc"
    echo "== $(date +%T) make unit lint sanity browser ended: rc $rc in $(($(date +%s) - checks_start)) s"
} &
checks=$!

# The image and the collection at once (-j2): the image build waits on package downloads, the collection's install
# as README says on a fresh venv's; the cluster scenario needs both.
if make --no-print-directory -j2 --output-sync=target image build ansible-wheelhouse; then
    bash scripts/molecule-all.sh "$@"
    molecule_rc=$?
else
    molecule_rc=2
    echo "make test: the test image or the collection build failed (above); no scenario ran"
fi
wait "$checks"
checks_rc=$(cat "$logs/checks.rc" 2>/dev/null || echo 2)

if [[ $checks_rc != 0 ]]; then
    echo "== make unit lint sanity browser FAILED (rc $checks_rc); the last 150 lines of $logs/checks.log"
    tail -n 150 "$logs/checks.log"
else
    # pytest's summary lines (unit tests, then the browser check): a record of what ran.
    grep -E '^[0-9]+ passed' "$logs/checks.log"
fi
# The machine's busy share over the whole run (the mean of the samples; 100 % is both cores all the time).
awk '{ sum += $2; n++ } END { if (n) printf "make test: the CPU was %d %% busy on average (%s)\n", sum / n, FILENAME }' \
    "$logs/cpu.log"
echo "make test: $(($(date +%s) - started)) s; unit, lint, sanity and browser $( [[ $checks_rc == 0 ]] \
    && echo passed || echo "FAILED (rc $checks_rc)"); molecule scenarios $( [[ $molecule_rc == 0 ]] \
    && echo passed || echo "FAILED (rc $molecule_rc)")"
[[ $checks_rc == 0 && $molecule_rc == 0 ]]
