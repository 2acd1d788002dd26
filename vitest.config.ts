import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    env: {
      // Agents start under `bash -lc`, and a pyenv login profile runs `pyenv rehash`, which takes a lock file. Tests
      // that SIGKILL an agent group during shell start-up can leave that lock behind; every later login shell would
      // then wait pyenv's default 60 s for it. One second keeps a stale lock from stalling the suite.
      PYENV_REHASH_TIMEOUT: "1"
    }
  }
})
