/**
 * Internal to the Supervisor (not part of the public API): the owner link of agent process groups, which the kernel
 * breaks when this process dies by any signal (SIGKILL and the OOM killer included), so its agents die with it.
 *
 * **Details**
 * One watcher process per owner process (started with the first agent): a small `bash` loop, in a session of its own
 * (terminal signals such as Ctrl-C do not reach it) and ignoring SIGINT, SIGTERM and SIGHUP, whose standard input is
 * a pipe from this process. The owner writes `+ <pgid>` when it starts an agent's process group and `- <pgid>` once
 * the group is gone. Nothing else holds the pipe's write end (Node opens its descriptors close-on-exec, so agents do
 * not inherit it): when this process ends, however it ends, the kernel closes the pipe, the watcher reads end-of-file,
 * SIGKILLs every group still registered and exits. A clean exit registers nothing, so the watcher just exits.
 * Relax gets the same from its per-node launcher, which kills an agent's process group when its owner's connection
 * closes.
 *
 * Limits (docs/runtime.md "Fate sharing"): a process that left its agent's process group (`setsid`, a daemon) is not
 * reached, as with the normal group stop; and an agent whose spawn is under way at the very moment of the owner's death
 * (the time of one `fork` + `exec`, before it is registered) can escape. If the watcher itself is killed, the next
 * agent start brings a new one, which is told every group still registered.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { Socket } from "node:net"

/** The watcher: record the groups, SIGKILL those still registered at end-of-file. */
const watcherScript = [
  "trap '' INT TERM HUP PIPE",
  "declare -A groups=()",
  "while read -r op id; do",
  "  case \"$op\" in",
  "    +) groups[\"$id\"]=1 ;;",
  "    -) unset \"groups[$id]\" ;;",
  "  esac",
  "done",
  "for id in \"${!groups[@]}\"; do kill -KILL -- \"-$id\" 2>/dev/null; done"
].join("\n")

/** Process groups started and not yet seen gone. */
const registered = new Set<number>()
let watcher: ChildProcess | undefined

const send = (line: string): void => {
  const stdin = watcher?.stdin
  // A watcher that died meanwhile: the next `adopt` starts a new one and tells it every registered group.
  if (stdin !== undefined && stdin !== null && stdin.writable) stdin.write(line)
}

const startWatcher = (): ChildProcess | undefined => {
  let child: ChildProcess
  try {
    child = spawn("/bin/bash", ["-c", watcherScript, "relax-agentic-owner-link"], {
      detached: true,
      stdio: ["pipe", "ignore", "ignore"]
    })
  } catch {
    return undefined
  }
  // The link never keeps this process alive: neither the watcher nor its pipe hold the event loop.
  child.unref()
  if (child.stdin instanceof Socket) child.stdin.unref()
  child.stdin?.on("error", () => {
    // EPIPE: the watcher is gone; the 'exit' handler below forgets it.
  })
  child.once("error", () => {
    if (watcher === child) watcher = undefined
  })
  child.once("exit", () => {
    if (watcher === child) watcher = undefined
  })
  return child
}

/** Register a started agent process group with the watcher (starting it first if there is none). */
export const adopt = (pgid: number): void => {
  registered.add(pgid)
  if (watcher === undefined) {
    watcher = startWatcher()
    for (const id of registered) send(`+ ${id}\n`)
    return
  }
  send(`+ ${pgid}\n`)
}

/** Unregister a process group that is gone (so a reused id is never killed at the owner's death). */
export const release = (pgid: number): void => {
  if (!registered.delete(pgid)) return
  send(`- ${pgid}\n`)
}

/** The watcher's pid, while one runs (tests). */
export const watcherPid = (): number | undefined => watcher?.pid

/** SIGKILL every registered group now and forget it (a forced exit); returns how many there were. */
export const killAll = (): number => {
  const groups = [...registered]
  for (const pgid of groups) {
    try {
      process.kill(-pgid, "SIGKILL")
    } catch {
      // ESRCH: already gone.
    }
    release(pgid)
  }
  return groups.length
}
