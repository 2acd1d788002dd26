/**
 * Watching real agent processes from tests: the hanging fixture agent (test/fixtures/rollout/hang.sh) records its pid
 * and its background child's in a directory; these helpers wait for them and tell whether they still run.
 */
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ProcessGroup from "../../layers/session/ProcessGroup.ts"

/** The pids every agent wrote: its own and its background child's. */
export const recordedPids = (dir: string): Array<number> =>
  Fs.readdirSync(dir)
    .filter((name) => !name.endsWith(".tmp"))
    .flatMap((name) => Fs.readFileSync(Path.join(dir, name), "utf8").trim().split("\n").map(Number))

/** Wait until `count` agents have recorded their pids in `dir` (watching the directory, not polling a clock). */
export const awaitAgents = (dir: string, count: number) =>
  Effect.callback<void>((resume) => {
    const recorded = () => Fs.readdirSync(dir).filter((name) => !name.endsWith(".tmp")).length >= count
    const watcher = Fs.watch(dir, () => {
      if (recorded()) {
        watcher.close()
        resume(Effect.void)
      }
    })
    if (recorded()) {
      watcher.close()
      resume(Effect.void)
    }
    return Effect.sync(() => watcher.close())
  })

/** Whether `pid` is a live process (a zombie, already dead and only waiting to be reaped, does not count). */
export const running = (pid: number): boolean => !ProcessGroup.hasExited(pid)
