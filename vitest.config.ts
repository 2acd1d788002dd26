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

/** The e2e lane: tests that start processes (agents, the command), PostgreSQL or a browser. */
const e2e = ["test/e2e/**/*.test.ts", "test/**/*.e2e.test.ts"]

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions } },
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    env: { HOME: home },
    // Two lanes (docs/architecture.md "Test lanes"): `unit` runs in this process's workers only (no agent process,
    // PostgreSQL or browser; test/support/unitLane.ts refuses child processes there), `e2e` is everything that starts
    // one. `vitest run` (npm test) runs both.
    projects: [
      {
        extends: true,
        test: {
          name: "unit",
          include: ["test/**/*.test.ts"],
          exclude: [...e2e],
          setupFiles: ["test/support/unitLane.ts"],
          // Under 2 minutes on 2 cores (docs/architecture.md "Test lanes"). Each worker loads Effect and the project
          // once for all its files (`isolate: false`): a fresh module graph per file cost about a second a file, a
          // third of the lane. Safe here: no unit test patches a global, and those that read the process's metrics
          // count the change since they started. Two workers even on 2 cores: the lane's live tests spend their time
          // waiting on loopback servers, not on the CPU. The probe's tests wait side by side (`maxConcurrency`).
          isolate: false,
          maxWorkers: 2,
          maxConcurrency: 10
        }
      },
      // After the unit lane (its own group: vitest refuses two projects of one group with different maxWorkers).
      { extends: true, test: { name: "e2e", include: [...e2e], sequence: { groupOrder: 1 } } }
    ]
  }
})
