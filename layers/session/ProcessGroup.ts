/**
 * Internal to the Supervisor (not part of the public API): start a command as the leader of its own process group
 * with its output appended to a file, and stop the whole group.
 *
 * **Details**
 * Why `node:child_process` and not `effect/process` (docs/architecture.md says the same): the agent's stdout and stderr
 * go straight to its log file descriptor, so no pipe exists that a backgrounded grandchild could hold open and nothing
 * has to be drained by this process; `effect/process` offers pipes, inherit, ignore or a Sink, not a file. And its
 * group cleanup polls `kill(-pgid, 0)`, which counts zombies as alive: where PID 1 does not reap re-parented children
 * (containers), a killed grandchild would keep the group "alive" until the final timeout. Here liveness is read from
 * `/proc` without zombies.
 *
 * Every started group is registered with the owner link (`OwnerLink.ts`) until it is gone, so it is killed when this
 * process dies by any signal, SIGKILL included (docs/runtime.md "Fate sharing").
 */
import { Duration, Effect } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Thrown from "../../src/Thrown.ts"
import * as OwnerLink from "./OwnerLink.ts"

export interface Exited {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

/** A started process-group leader. */
export interface Leader {
  readonly pid: number
  readonly exited: Promise<Exited>
  readonly hasExited: () => boolean
}

/** State letter and process group of `pid` from `/proc/<pid>/stat`, or `undefined` when it is gone. */
export const processState = (pid: number): { readonly state: string; readonly pgrp: number } | undefined => {
  let stat: string
  try {
    stat = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
  } catch {
    return undefined
  }
  // The command name may contain spaces and parentheses: the fields start after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  const state = fields[0]
  const pgrp = Number(fields[2])
  return state === undefined ? undefined : { state, pgrp }
}

/** Whether `pid` is gone or only a zombie (`Z`) / dead (`X`) entry: it has exited. */
export const hasExited = (pid: number): boolean => {
  const state = processState(pid)
  return state === undefined || state.state === "Z" || state.state === "X"
}

/** How long one `/proc` scan answers every group's question (one poll tick, see `pollInterval`). */
const scanMaxAgeMs = 20

let lastScan: { readonly at: number; readonly groups: ReadonlyMap<number, ReadonlyArray<number>> } | undefined

/** Every process group's live members, from one `/proc` scan shared by the callers of the last `scanMaxAgeMs`. */
const scanGroups = (): ReadonlyMap<number, ReadonlyArray<number>> | undefined => {
  const now = Date.now()
  if (lastScan !== undefined && now - lastScan.at < scanMaxAgeMs) return lastScan.groups
  let entries: Array<string>
  try {
    entries = Fs.readdirSync("/proc")
  } catch {
    return undefined
  }
  const groups = new Map<number, Array<number>>()
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue
    const state = processState(Number(entry))
    if (state === undefined || state.state === "Z" || state.state === "X") continue
    const members = groups.get(state.pgrp)
    if (members === undefined) groups.set(state.pgrp, [Number(entry)])
    else members.push(Number(entry))
  }
  lastScan = { at: Date.now(), groups }
  return groups
}

/**
 * Members of process group `pgid` that are still running, read from `/proc` (Linux).
 *
 * **Details**
 * `kill(-pgid, 0)` also succeeds for zombies: a killed grandchild re-parented to a PID 1 that does not reap would
 * keep the group "alive" forever. Zombies (`Z`) and dead (`X`) entries are therefore not counted. Returns
 * `undefined` where `/proc` is not available. One scan (every process's `/proc/<pid>/stat`, ~10 ms per few hundred
 * processes) answers every group for `scanMaxAgeMs`: with many groups stopping at once (a dropped step, a runner's
 * Groups), each polling every `pollInterval`, a scan per group and poll kept the event loop busy for whole seconds.
 */
export const liveGroupMembers = (pgid: number): ReadonlyArray<number> | undefined => {
  const groups = scanGroups()
  return groups === undefined ? undefined : groups.get(pgid) ?? []
}

const groupAlive = (pgid: number): boolean => {
  try {
    process.kill(-pgid, 0)
  } catch {
    return false
  }
  // The cheap check says "some member exists"; only then pay for the /proc scan that discounts zombies.
  const members = liveGroupMembers(pgid)
  return members === undefined || members.length > 0
}

const signalGroup = (pgid: number, signal: NodeJS.Signals): void => {
  try {
    process.kill(-pgid, signal)
  } catch {
    // ESRCH: the group is already gone.
  }
}

const pollInterval = Duration.millis(25)

/** Wait (polling) until the group is empty and the leader reaped, for at most `limit`; true when it happened. */
const awaitGroupGone = (leader: Leader, limit: Duration.Duration): Effect.Effect<boolean> =>
  Effect.gen(function*() {
    const isGone = () => leader.hasExited() && !groupAlive(leader.pid)
    const polls = Math.max(1, Math.ceil(Duration.toMillis(limit) / Duration.toMillis(pollInterval)))
    for (let i = 0; i < polls; i++) {
      if (isGone()) return true
      yield* Effect.sleep(pollInterval)
    }
    return isGone()
  })

/**
 * SIGTERM to the whole group, SIGKILL after `grace`, then wait for the leader and every member. A group seen gone is
 * released from the owner link; one that still has members stays registered, so it is killed at this process's end.
 */
export const terminate = (leader: Leader, grace: Duration.Duration): Effect.Effect<void> =>
  Effect.gen(function*() {
    if (leader.hasExited() && !groupAlive(leader.pid)) return OwnerLink.release(leader.pid)
    signalGroup(leader.pid, "SIGTERM")
    if (yield* awaitGroupGone(leader, grace)) return OwnerLink.release(leader.pid)
    signalGroup(leader.pid, "SIGKILL")
    if (yield* awaitGroupGone(leader, Duration.seconds(5))) return OwnerLink.release(leader.pid)
    yield* Effect.logWarning(`agent process group ${leader.pid} still has members 5 s after SIGKILL`)
  })

/**
 * SIGKILL every agent process group still registered, at once (no grace, no waiting): what a forced exit does before
 * it abandons the rest of the shutdown (docs/runtime.md "Shutdown").
 */
export const killAllNow = (): number => OwnerLink.killAll()

/** What to start: `/bin/bash -lc <command>` in `cwd` with exactly `env`, output appended to `logPath`. */
export interface Command {
  readonly command: string
  readonly cwd: string
  readonly env: Record<string, string>
  readonly logPath: string
}

/** Start `command` as the leader of a new process group; fails with a one-line reason when it cannot start. */
export const start = (command: Command): Effect.Effect<Leader, string> =>
  Effect.callback<Leader, string>((resume) => {
    let fd: number
    try {
      fd = Fs.openSync(command.logPath, "a")
    } catch (error) {
      resume(Effect.fail(`cannot open the log ${command.logPath}: ${Thrown.messageOf(error)}`))
      return
    }
    let child: ChildProcess
    try {
      // stdout and stderr go straight to the log file: no pipe that a backgrounded grandchild could hold open.
      child = spawn("/bin/bash", ["-lc", command.command], {
        cwd: command.cwd,
        env: command.env,
        detached: true,
        stdio: ["ignore", fd, fd]
      })
    } catch (error) {
      Fs.closeSync(fd)
      resume(Effect.fail(Thrown.messageOf(error)))
      return
    }
    Fs.closeSync(fd)
    let exit: Exited | undefined
    const exited = new Promise<Exited>((resolve) => {
      child.once("exit", (code, signal) => {
        exit = { code, signal }
        resolve(exit)
      })
    })
    child.once("error", (error) => {
      if (child.pid === undefined) resume(Effect.fail(Thrown.messageOf(error)))
    })
    // Registered at once (before any await), so the window in which this process's death could orphan the group is
    // only the spawn itself.
    if (child.pid !== undefined) OwnerLink.adopt(child.pid)
    child.once("spawn", () => {
      const pid = child.pid
      if (pid === undefined) resume(Effect.fail("the process has no pid"))
      else resume(Effect.succeed({ pid, exited, hasExited: () => exit !== undefined }))
    })
  })
