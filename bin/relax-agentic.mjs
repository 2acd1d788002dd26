#!/usr/bin/env node
// The `relax-agentic` command. Installed from the package it runs the build (dist/, plain JavaScript); in a checkout it
// runs the TypeScript sources on Node's own type stripping, so the development loop has no build step.
// The stack needs Node.js >= 22.19; on an older Node.js a checkout re-runs the command on the Node.js 22 the project
// brings (the `node` devDependency), and anything else says what to install instead of failing deep inside a dependency.
import { spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { createRequire } from "node:module"
import { fileURLToPath } from "node:url"

const source = fileURLToPath(new URL("../src/cli.ts", import.meta.url))
const build = fileURLToPath(new URL("../dist/src/cli.js", import.meta.url))
// A checkout has the sources outside any node_modules; an installed package has only the build.
const checkout = existsSync(source) && !import.meta.url.includes("/node_modules/")

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
        (checkout
          ? "In this checkout, run `npm ci` (it installs the Node.js 22 the project brings), then use the npm " +
            "scripts: `npm start`, `npm run relax-agentic -- <command> ...`.\n"
          : "Install Node.js 22.19 or newer (https://nodejs.org, or `nvm install 22`) and run the command with it.\n")
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
  if (checkout && process.features.typescript) {
    // The sources are erasable TypeScript (tsconfig's `erasableSyntaxOnly`): Node strips their types itself.
    await import(source)
  } else if (existsSync(build)) {
    await import(build)
  } else {
    // Sources without a build where Node does not strip types (under node_modules, or Node 23.0–23.5): through tsx.
    const { register } = await import("tsx/esm/api")
    register()
    await import(source)
  }
}
