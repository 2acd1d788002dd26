/**
 * CPU time and heap of other processes for the cluster benchmark: user+system CPU of a pid from /proc/<pid>/stat
 * (Linux), and `process.memoryUsage().heapUsed` after a full collection read over the inspector protocol of a Node
 * started with `--inspect=127.0.0.1:0`.
 *
 * **Details**
 * /proc/<pid>/stat counts clock ticks (100 per second on Linux), so a reading is 10 ms coarse: measure windows of
 * seconds. It counts every thread of the process (the V8 workers included), not its children (the agents).
 */
import * as Fs from "node:fs"

const ticksPerSecond = 100

/** User+system CPU milliseconds the process `pid` used so far. */
export const cpuMillis = (pid: number): number => {
  const stat = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
  // The command name (field 2) is in parentheses and may hold spaces: count fields after the last ")".
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  // Fields 14 and 15 (utime, stime) are the 12th and 13th after the command name.
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / ticksPerSecond
}

/** The inspector's WebSocket URL a Node started with `--inspect` printed. */
export const inspectorUrl = (output: string): string | undefined =>
  output.match(/Debugger listening on (ws:\/\/\S+)/)?.[1]

/** A connection to a Node inspector: `call` sends one protocol method and resolves with its result. */
export interface Inspector {
  readonly call: (method: string, params?: Record<string, unknown>) => Promise<unknown>
  readonly close: () => void
}

export const connect = (url: string): Promise<Inspector> =>
  new Promise((resolve, reject) => {
    const socket = new WebSocket(url)
    const pending = new Map<number, (result: unknown) => void>()
    let next = 1
    socket.addEventListener("message", (event) => {
      const message = JSON.parse(String(event.data)) as { readonly id?: number; readonly result?: unknown }
      if (message.id !== undefined) pending.get(message.id)?.(message.result)
    })
    socket.addEventListener("error", () => reject(new Error(`inspector ${url}: connection failed`)))
    socket.addEventListener("open", () =>
      resolve({
        call: (method, params = {}) =>
          new Promise((done) => {
            const id = next++
            pending.set(id, done)
            socket.send(JSON.stringify({ id, method, params }))
          }),
        close: () => socket.close()
      }))
  })

/** The process's used heap in bytes after a full garbage collection. */
export const heapUsed = async (inspector: Inspector): Promise<number> => {
  await inspector.call("HeapProfiler.collectGarbage")
  const evaluated = (await inspector.call("Runtime.evaluate", {
    expression: "process.memoryUsage().heapUsed",
    returnByValue: true
  })) as { readonly result: { readonly value: number } }
  return evaluated.result.value
}

/**
 * The whole machine's CPU so far, all cores together (/proc/stat's first line): `busyMs` all but idle, iowait and
 * steal; `stealMs` the time the hypervisor ran something else while this machine's cores wanted to run.
 */
export const machineCpu = (): { readonly busyMs: number; readonly stealMs: number } => {
  const line = Fs.readFileSync("/proc/stat", "utf8").split("\n", 1)[0] ?? ""
  // user nice system idle iowait irq softirq steal (guest time is already inside user and nice).
  const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = line.trim().split(/\s+/).slice(1, 9)
    .map(Number)
  const ms = (ticks: number) => (ticks * 1000) / ticksPerSecond
  return { busyMs: ms(user + nice + system + irq + softirq), stealMs: ms(steal) }
}
