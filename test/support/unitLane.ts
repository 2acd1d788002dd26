/**
 * The unit lane's guard (`npm run test:unit`, vitest.config.ts): a test there starts no process. Every way
 * `node:child_process` starts one throws, naming the lane rule, so a test that needs an agent process, PostgreSQL or a
 * browser is found at once and moved to the e2e lane (a `*.e2e.test.ts` file, or test/e2e/).
 */
import { vi } from "vitest"

vi.mock("node:child_process", async (importOriginal) => {
  const actual = await importOriginal<typeof import("node:child_process")>()
  const refuse = (name: string) => (): never => {
    throw new Error(
      `child_process.${name} in the unit lane: a test that starts a process belongs to the e2e lane ` +
        "(name it *.e2e.test.ts or put it under test/e2e/; docs/architecture.md \"Test lanes\")"
    )
  }
  return {
    ...actual,
    spawn: refuse("spawn"),
    spawnSync: refuse("spawnSync"),
    fork: refuse("fork"),
    exec: refuse("exec"),
    execSync: refuse("execSync"),
    execFile: refuse("execFile"),
    execFileSync: refuse("execFileSync")
  }
})
