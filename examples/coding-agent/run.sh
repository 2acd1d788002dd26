#!/usr/bin/env bash
# Runs the coding example: starts the agent server (a cross-session service, outside the per-Session agent command),
# checks the harness and the server's capacity against the guide's table, runs the rollout, and stops the server.
#
#   bash examples/coding-agent/run.sh                 # 4 slots: the check passes, two steps run
#   SLOTS=2 bash examples/coding-agent/run.sh         # an undersized server: the check fails, nothing is launched
#
# CONFIG names another config file (default examples/coding-agent/rollout.json). Extra arguments go to both `check`
# and `rollout`, e.g. `--engine sglang --sglang-url http://gpu-0:30000 --tokenizer /models/Qwen3-8B` with a config
# without "embedded-policy" (docs/examples.md).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
slots="${SLOTS:-4}"
config="${CONFIG:-examples/coding-agent/rollout.json}"
node_bin="$root/node_modules/.bin/node"
mkdir -p runs/coding-agent
url_file="runs/coding-agent/server.url"
rm -f "$url_file"
"$node_bin" examples/coding-agent/server.ts --slots "$slots" --url-file "$url_file" &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -s "$url_file" ] && break; sleep 0.1; done
[ -s "$url_file" ] || { echo "the agent server did not start" >&2; exit 1; }
export CODING_AGENT_SERVER="$(cat "$url_file")"

relax=("$node_bin" src/cli.ts)
if ! "${relax[@]}" check --config "$config" --agent-max-slots "$slots" "$@"; then
  echo "relax-agentic check failed (see above); not launching the rollout" >&2
  exit 1
fi
"${relax[@]}" rollout --config "$config" --agent-max-slots "$slots" "$@"
