# shellcheck shell=bash
# Shared by the bench/ scripts (sourced, not run).

# stop_pids TENTHS PID...: SIGTERM to every PID at once, then waits up to TENTHS/10 s for
# each before SIGKILL, and reaps them.
stop_pids() {
  local tenths=$1 pid i
  shift
  for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "$@"; do
    for ((i = 0; i < tenths; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}
