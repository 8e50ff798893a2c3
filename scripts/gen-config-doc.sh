#!/usr/bin/env bash
# Regenerates the knob table in docs/configuration.md from `podnet doctor --config --json`.
#   scripts/gen-config-doc.sh [--check] [PODNET_BINARY]
# --check: exit 1 (printing the difference) when the document is out of date.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
check=0
[[ "${1:-}" == "--check" ]] && { check=1; shift; }
podnet=${1:-$root/build/tools/podnet/podnet}
doc=$root/docs/configuration.md
# Knobs reflect the code's defaults, not this shell's environment.
table=$(env -u PODNET_IFNAME -i PATH="$PATH" "$podnet" doctor --config --json | python3 -c '
import json, sys
for k in json.load(sys.stdin)["knobs"]:
    default = k["default"] if k["default"] != "" else "(empty)"
    print("| `%s` | %s | `%s` | %s |" % (k["env"], k["type"], default, k["help"].replace("|", "\\|")))
')
new=$(python3 - "$doc" "$table" <<'EOF'
import sys
doc, table = open(sys.argv[1]).read().split("\n"), sys.argv[2]
start = next(i for i, l in enumerate(doc) if l.startswith("|---"))
end = start + 1
while end < len(doc) and doc[end].startswith("| `"):
    end += 1
print("\n".join(doc[:start + 1] + table.split("\n") + doc[end:]), end="")
EOF
)
if [[ $check -eq 1 ]]; then
  diff <(cat "$doc") <(printf '%s' "$new") || { echo "docs/configuration.md is out of date: run scripts/gen-config-doc.sh" >&2; exit 1; }
  exit 0
fi
printf '%s' "$new" > "$doc"
