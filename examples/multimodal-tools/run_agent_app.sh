#!/usr/bin/env bash
# Launcher relax-agentic runs for every Session (--agent-command "bash run_agent_app.sh").
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Use the project's Node 22 (a login shell may reset PATH).
node_bin="$here/../../node_modules/.bin/node"
[ -x "$node_bin" ] || node_bin="node"
exec "$node_bin" --import tsx "$here/agent.ts"
