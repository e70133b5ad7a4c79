#!/usr/bin/env bash
# Usage: molecule/test-scenario.sh SCENARIO [LOG] — `molecule test -s SCENARIO` with the whole Ansible log (nested
# ansible-playbook runs included, they inherit ANSIBLE_LOG_PATH) kept in build/logs/LOG.log (LOG defaults to
# SCENARIO; the site scenario runs once per topology, as site-tp3 and site-tp4).
# CI keeps only the end of the output, where molecule's summary says a step failed but not which task: on
# failure the failed tasks are therefore printed last.
set -uo pipefail
scenario=$1
root=$(cd "$(dirname "$0")/.." && pwd)
log=$root/build/logs/${2:-$scenario}.log
mkdir -p "$(dirname "$log")"
: >"$log"
ANSIBLE_LOG_PATH=$log "$root/.venv/bin/molecule" test -s "$scenario"
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "== molecule scenario $scenario (${2:-$scenario}) failed (rc $rc); its failed tasks (whole log: $log):"
  grep -a -E -B2 -A12 '(fatal|failed): \[|\[ERROR\]|ERROR!' "$log" | grep -a -v -E 'FAILED - RETRYING|\.\.\.ignoring' \
    | cut -c1-1500 | tail -n 120
fi
exit "$rc"
