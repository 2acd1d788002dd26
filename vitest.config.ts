import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { defaultServerConditions } from "vite"
import { defineConfig } from "vitest/config"

// Agents start under `bash -lc`, which reads the login profile in $HOME. A machine profile that runs `pyenv init` costs
// each agent's shell about a second, and its `pyenv rehash` takes a lock file: a test that SIGKILLs an agent group while
// its shell starts leaves the lock behind, and every later login shell then waits 60 s for it. Tests give agents (and
// everything else they start) an empty home: the login shell still runs, without the machine's profile.
const home = Path.join(Os.tmpdir(), "relax-agentic-test-home")
Fs.mkdirSync(home, { recursive: true })

// The examples import the package by its name; in the repository that resolves to the sources (package.json's
// `relax-agentic-source` export condition), not to the build in dist/.
const conditions = ["relax-agentic-source", ...defaultServerConditions]

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions } },
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    env: { HOME: home }
  }
})
