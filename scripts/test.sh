#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs every test (unit,
# multi-process, launcher), then builds again with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer (build-san/) and runs the suite there too, less the soft-RoCE
# VM test (which the first stage ran). Two compilers: g++ builds the first stage, clang the
# second, so code that only one of them accepts fails here. Ends with one line
# "N passed, M failed, K skipped" over both stages, after the names of the tests that failed
# (so the last lines of a CI log say which ones).
#   scripts/test.sh [ctest arguments...]      (passed to both stages)
#   PODNET_TEST_SANITIZERS=0 scripts/test.sh  (the first stage only)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
passed=0; failed=0; skipped=0; rc=0
failures=()
excerpts=""

# run_stage NAME BUILD_DIR [ctest arguments...]: runs ctest in BUILD_DIR, adds its counts.
run_stage() {
  local name=$1 dir=$2 log total f s st ex t0=$SECONDS
  shift 2
  log=$(mktemp)
  (cd "$dir" && ctest --output-on-failure --timeout 300 -j "$(nproc)" "$@") 2>&1 | tee "$log"
  st=${PIPESTATUS[0]}
  total=$(grep -Eo 'tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -1)
  f=$(grep -Eo '[0-9]+ tests failed out of' "$log" | grep -Eo '^[0-9]+' | tail -1)
  s=$(grep -c '\*\*\*Skipped' "$log" || true)
  # ctest's closing list: "The following tests FAILED:" then "<tab>N - Name (Failed)" lines.
  while IFS= read -r line; do
    failures+=("$name: ${line#"${line%%[![:space:]]*}"}")
  done < <(sed -n '/^The following tests FAILED:/,/^[^[:space:]]/p' "$log" | grep -E '^[[:space:]]+[0-9]+ - ')
  # The last lines each failed test printed (ctest --output-on-failure puts them right after
  # its result line), kept for the end of the log.
  ex=$(awk -v stage="$name" '
    /^ *[0-9]+\/[0-9]+ Test +#[0-9]+: .*\*\*\*(Failed|Timeout|Exception)/ {
      flush(); cur = $0; n = 0; next }
    cur != "" && (/^ *Start +[0-9]+: / || /^ *[0-9]+\/[0-9]+ Test +#/ || /^[0-9]+% tests passed/) {
      flush() }
    cur != "" { buf[n++ % 40] = $0 }
    END { flush() }
    function flush(  i) {
      if (cur == "") return
      while (n > 0 && buf[(n - 1) % 40] ~ /^[[:space:]]*$/) n--
      printf "--- %s: %s\n", stage, cur
      for (i = (n > 40 ? n - 40 : 0); i < n; i++) print "    " buf[i % 40]
      cur = ""
    }' "$log")
  [[ -z $ex ]] || excerpts+="$ex"$'\n'
  rm -f "$log"
  total=${total:-0}; f=${f:-0}
  # ctest failing without a count (it could not start) counts as one failure.
  if [[ $st -ne 0 && $f -eq 0 ]]; then f=1; fi
  echo "$name: $((total - f - s)) passed, $f failed, $s skipped ($((SECONDS - t0)) s)"
  passed=$((passed + total - f - s)); failed=$((failed + f)); skipped=$((skipped + s))
  [[ $st -eq 0 ]] || rc=1
}

"$root/scripts/setup.sh" || { echo "0 passed, 1 failed (setup/build failed)"; exit 1; }
run_stage "tests" "$root/build" "$@"

if [[ ${PODNET_TEST_SANITIZERS:-1} != 0 ]]; then
  if "$root/scripts/setup.sh" --no-install --build-dir "$root/build-san" --sanitize address,undefined \
      --compiler clang; then
    # LeakSanitizer stays on (the default); UBSan aborts on the first report (built with
    # -fno-sanitize-recover) and prints where it came from.
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
      run_stage "tests under ASan+UBSan" "$root/build-san" -E RdmaLab "$@"
  else
    echo "tests under ASan+UBSan: the sanitizer build failed"
    failed=$((failed + 1)); rc=1
  fi
fi

if [[ ${#failures[@]} -gt 0 ]]; then
  printf '%s' "$excerpts"
  echo "failed:"
  printf '  %s\n' "${failures[@]}"
fi
echo "$passed passed, $failed failed, $skipped skipped"
exit "$rc"
