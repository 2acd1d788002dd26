#!/usr/bin/env bash
# Launcher relax-agentic runs for every Session (--agent-command "bash run_agent_app.sh"): the thin client, which
# submits the Session's task to the agent server at CODING_AGENT_SERVER (started by run.sh) and waits for its result.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The project's Node 22 (a login shell may reset PATH) runs the TypeScript itself (type stripping); another Node, which
# may not, runs it through tsx.
node_bin="$here/../../node_modules/.bin/node"
[ -x "$node_bin" ] && exec "$node_bin" "$here/client.ts"
exec node --import tsx "$here/client.ts"
