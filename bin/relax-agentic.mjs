#!/usr/bin/env node
// Runs the TypeScript CLI without a build step: on Node's own type stripping (through tsx when installed under
// node_modules, where Node does not strip types).
// The stack needs Node.js >= 22.19; on an older Node.js the command re-runs itself on the Node.js 22 the project
// brings (the `node` package), or says clearly what is missing instead of failing deep inside a dependency.
import { spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { createRequire } from "node:module"

const [major = 0, minor = 0] = process.versions.node.split(".").map(Number)
if (major < 22 || (major === 22 && minor < 19)) {
  let projectNode
  try {
    const nodePackage = createRequire(import.meta.url).resolve("node/package.json")
    projectNode = nodePackage.replace(/package\.json$/, "bin/node")
  } catch {
    projectNode = undefined
  }
  if (projectNode === undefined || !existsSync(projectNode) || process.env.RELAX_AGENTIC_REEXEC === "1") {
    process.stderr.write(
      `relax-agentic needs Node.js 22.19 or newer; this is ${process.version}. ` +
        "Install Node.js 22, or run it through the project's scripts (npm start, npx relax-agentic), " +
        "which use the Node.js 22 the project brings.\n"
    )
    process.exit(1)
  }
  const child = spawn(projectNode, [process.argv[1], ...process.argv.slice(2)], {
    stdio: "inherit",
    env: { ...process.env, RELAX_AGENTIC_REEXEC: "1" }
  })
  // Signals sent to this process alone (a supervisor's SIGTERM) reach the real command, which reaps its agents.
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, () => child.kill(signal))
  child.on("exit", (code, signal) => process.exit(code ?? (signal === null ? 1 : 128)))
} else {
  delete process.env.RELAX_AGENTIC_REEXEC
  // Node strips the types of the project's own files itself (its sources are erasable TypeScript: tsconfig's
  // `erasableSyntaxOnly`). It does not under node_modules, nor on a Node without type stripping (23.0–23.5): there
  // the CLI runs through tsx.
  if (import.meta.url.includes("/node_modules/") || !process.features.typescript) {
    const { register } = await import("tsx/esm/api")
    register()
  }
  await import("../src/cli.ts")
}
