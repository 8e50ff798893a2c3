#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs every test (unit,
# multi-process, launcher) and ends with one line "N passed, M failed, K skipped".
#   scripts/test.sh [ctest arguments...]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh" || { echo "0 passed, 1 failed (setup/build failed)"; exit 1; }
cd "$root/build" || exit 1
log=$(mktemp)
ctest --output-on-failure --timeout 300 -j "$(nproc)" "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
total=$(grep -Eo 'tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -1)
failed=$(grep -Eo '[0-9]+ tests failed out of' "$log" | grep -Eo '^[0-9]+' | tail -1)
skipped=$(grep -c '\*\*\*Skipped' "$log" || true)
rm -f "$log"
total=${total:-0}; failed=${failed:-0}
echo "$((total - failed - skipped)) passed, ${failed} failed, ${skipped} skipped"
exit "$rc"
