#!/usr/bin/env bash
# Static analysis: clang-tidy with the project's checks (.clang-tidy: bug-prone patterns, the
# clang static analyzer, concurrency and performance) over every source file of the library
# (src/) and the tool (tools/), through the compile commands of a build directory.
#   scripts/lint.sh [--build-dir DIR] [FILE-REGEX]
# Needs clang-tidy (Debian package clang-tidy) and a configured build directory (default
# build/, as scripts/setup.sh makes it). Prints each finding; ends with "lint: N findings in
# M files" and exits 1 when there is any, 0 when there is none, 2 on bad usage. About 9
# minutes on 2 cores; not part of scripts/test.sh for that reason.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build"
filter="$root/(src|tools)/.*\\.cc\$"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build=$(cd "$2" 2>/dev/null && pwd) || { echo "lint: no directory $2" >&2; exit 2; }; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "lint: unknown option $1 (--build-dir DIR, --help)" >&2; exit 2 ;;
    *) filter="$1"; shift ;;
  esac
done
runner=$(command -v run-clang-tidy-14 || command -v run-clang-tidy) ||
  { echo "lint: run-clang-tidy not found: apt-get install clang-tidy" >&2; exit 2; }
tidy=$(command -v clang-tidy-14 || command -v clang-tidy) ||
  { echo "lint: clang-tidy not found: apt-get install clang-tidy" >&2; exit 2; }
[[ -f "$build/compile_commands.json" ]] ||
  { echo "lint: $build/compile_commands.json missing: configure a build first (scripts/setup.sh)" >&2; exit 2; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$runner" -clang-tidy-binary "$tidy" -p "$build" -j "$(nproc)" -quiet "$filter" >"$log" 2>&1
st=$?
sed -i 's/\x1b\[[0-9;]*m//g' "$log"  # clang-tidy's colours
# Findings are "path:line:col: warning|error: text [check]"; the same header finding reached
# from several files counts once.
findings=$(grep -E '^/[^ ]+:[0-9]+:[0-9]+: (warning|error): ' "$log" | sort -u)
if [[ -n "$findings" ]]; then
  grep -vE '^(clang-tidy|[0-9]+ warnings? (and [0-9]+ errors? )?generated|Suppressed|Use -header-filter|Running clang-tidy)' "$log"
  n=$(wc -l <<<"$findings")
  files=$(cut -d: -f1 <<<"$findings" | sort -u | wc -l)
  echo "lint: $n findings in $files files"
  exit 1
fi
if [[ $st -ne 0 ]]; then
  tail -30 "$log"
  echo "lint: clang-tidy failed (exit $st) without a finding to show"
  exit 1
fi
echo "lint: 0 findings"
