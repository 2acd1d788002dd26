/**
 * `npm run bench -- heapsteps`: the retained heap of relax-agentic step after step in a long run. Each mode is a real
 * `relax-agentic rollout` process on the embedded engine (2 Groups × 2 Sessions per step, real agent processes, 3
 * requests each) with heapProbe.mjs preloaded: at every step end it forces full collections and prints the V8 heap in
 * use. Modes: plain, `--partial-rollout`, `--fully-async`, `--agentic-prelaunch`, and a cluster (a controller and two
 * runners over a throwaway PostgreSQL; the runners are measured when the controller's step ends). The table gives the
 * heap per step per mode and the growth slope (bytes per step, least squares over the last half of the steps).
 *
 * **Details**
 * 30 steps quick, 100 `full`; `HEAPSTEPS=<n>` for any other count, `HEAPSTEPS_MODES=plain,cluster` for a subset.
 * `HEAPSTEPS_SNAPSHOTS=10,60` writes heap snapshots of every measured process at those steps into
 * `HEAPSTEPS_DIR` (default: a temporary directory, kept and printed) for a retainer diff in Chrome DevTools.
 * Some growth is bounded by design: closed Sessions are remembered (the last 100,000, `Sessions.closedMemory`) and a
 * runner remembers stopped Sessions for 10 minutes (`Host` tombstones), so a slope is a leak only when it stays above
 * what those bounds explain as the run gets longer.
 */
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Processes from "../cluster/processes.ts"
import * as EmbeddedPg from "../support/EmbeddedPg.ts"
import * as Harness from "./harness.ts"

const probe = Path.join(import.meta.dirname, "heapProbe.mjs")

interface Mode {
  readonly name: string
  readonly extra: ReadonlyArray<string>
  readonly cluster?: boolean
}

const modes: ReadonlyArray<Mode> = [
  { name: "plain", extra: [] },
  { name: "partial", extra: ["--partial-rollout"] },
  { name: "fully-async", extra: ["--fully-async"] },
  { name: "prelaunch", extra: ["--agentic-prelaunch"] },
  { name: "cluster", extra: [], cluster: true }
]

/** Heap in use per measurement, in order, from a process's HEAPPROBE lines. */
const heapOf = (output: string): Array<number> =>
  [...output.matchAll(/HEAPPROBE n=\d+ used=(\d+)/g)].map((m) => Number(m[1]))

/** Least-squares slope of `values` against their index. */
export const slope = (values: ReadonlyArray<number>): number => {
  const n = values.length
  if (n < 2) return Number.NaN
  const meanX = (n - 1) / 2
  const meanY = values.reduce((a, b) => a + b, 0) / n
  let num = 0
  let den = 0
  values.forEach((y, x) => {
    num += (x - meanX) * (y - meanY)
    den += (x - meanX) ** 2
  })
  return num / den
}

const memberFlags = (work: string, steps: number, extra: ReadonlyArray<string>) =>
  Processes.memberFlags({
    agent: "clusterAgent.mjs",
    agentCwd: import.meta.dirname,
    agentEnv: ["REQUESTS=3"],
    policy: "cluster",
    batchSize: 2,
    numRollout: steps,
    outputDir: Path.join(work, "out"),
    extra: ["--agentic-concurrency", "4", ...extra]
  })

// Agents get an empty HOME, as in the cluster benches: a machine login profile under their `bash -lc` costs CPU.
const probeEnv = (snapshots: string, dir: string) => ({
  HOME: Processes.emptyHome(),
  NODE_OPTIONS: `${process.env["NODE_OPTIONS"] ?? ""} --import=${probe}`.trim(),
  HEAPPROBE_SNAPSHOTS: snapshots,
  HEAPPROBE_DIR: dir
})

/** Run one mode; returns the heap series per measured process (`rollout`, or `controller`, `runner 1`, `runner 2`). */
const measure = (mode: Mode, steps: number, snapshots: string, snapshotDir: string) =>
  Effect.scoped(Effect.gen(function*() {
    const work = yield* Processes.workDir("relax-bench-heapsteps-")
    const env = probeEnv(snapshots, Path.join(snapshotDir, mode.name))
    Fs.mkdirSync(env.HEAPPROBE_DIR, { recursive: true })
    if (mode.cluster !== true) {
      const output = yield* Processes.run(["rollout", ...memberFlags(work, steps, mode.extra)], env)
      return new Map([["rollout", heapOf(output)]])
    }
    const db = yield* EmbeddedPg.start
    const ports = yield* EmbeddedPg.freePorts(2)
    const runners = [
      yield* Processes.runner([
        ...memberFlags(work, steps, []),
        ...Processes.clusterFlags(db.url),
        ...Processes.runnerAt(ports[0]!)
      ], env),
      yield* Processes.runner([
        ...memberFlags(work, steps, []),
        ...Processes.clusterFlags(db.url),
        ...Processes.runnerAt(ports[1]!)
      ], env)
    ]
    const controller = yield* Processes.start([
      "rollout",
      ...memberFlags(work, steps, []),
      ...Processes.clusterFlags(db.url)
    ], env)
    // Every step end of the controller is a measurement of each runner.
    let ended = 0
    controller.child.stdout?.on("data", () => {
      const now = controller.output().match(/event=accounting_end/g)?.length ?? 0
      for (; ended < now; ended++) for (const runner of runners) runner.child.kill("SIGUSR2")
    })
    const code = yield* controller.exited
    if (code !== 0) {
      return yield* Effect.die(new Error(`controller exited ${code}:\n${controller.output().slice(-4000)}`))
    }
    for (const runner of runners) yield* Processes.waitFor(runner, new RegExp(`HEAPPROBE n=${ended} `))
    return new Map([
      ["controller", heapOf(controller.output())],
      ["runner 1", heapOf(runners[0]!.output())],
      ["runner 2", heapOf(runners[1]!.output())]
    ])
  }))

const mib = (bytes: number | undefined) => (bytes === undefined ? "" : (bytes / 1024 / 1024).toFixed(2))

export const bench: Harness.Bench = {
  name: "heapsteps",
  run: async ({ full }): Promise<Harness.BenchResult> => {
    const steps = Number(process.env["HEAPSTEPS"] ?? (full ? 100 : 30))
    const wanted = process.env["HEAPSTEPS_MODES"]?.split(",")
    const snapshots = process.env["HEAPSTEPS_SNAPSHOTS"] ?? ""
    const snapshotDir = process.env["HEAPSTEPS_DIR"] ?? Fs.mkdtempSync(Path.join(Os.tmpdir(), "relax-heapsteps-"))
    const series = new Map<string, ReadonlyArray<number>>()
    for (const mode of modes.filter((m) => wanted === undefined || wanted.includes(m.name))) {
      const measured = await Effect.runPromise(measure(mode, steps, snapshots, snapshotDir))
      for (const [process, heap] of measured) series.set(mode.cluster === true ? `cluster ${process}` : mode.name, heap)
    }
    const columns = [...series.keys()]
    const marks = [
      ...new Set([1, 2, 5, ...Array.from({ length: steps }, (_, i) => i + 1).filter((s) => s % 10 === 0), steps])
    ]
      .filter((s) => s <= steps)
      .sort((a, b) => a - b)
    const half = Math.max(2, Math.floor(steps / 2))
    const rows: Array<Record<string, string>> = [
      ...marks.map((step) => ({
        "heap (MiB) after step": String(step),
        ...Object.fromEntries(columns.map((c) => [c, mib(series.get(c)?.[step - 1])]))
      })),
      {
        "heap (MiB) after step": `slope, last ${half} steps`,
        ...Object.fromEntries(
          columns.map((c) => [c, `${Harness.formatBytes(slope((series.get(c) ?? []).slice(-half)))}/step`])
        )
      }
    ]
    return {
      title: `Retained heap across ${steps} steps (after forced full GC), per mode`,
      rows,
      notes: [
        "2 Groups × 2 Sessions per step (--agentic-concurrency 4), real agent processes (3 requests each), embedded engine.",
        "V8 heap in use after two forced full collections at each step end; the cluster's runners when the controller's step ends.",
        "Bounded by design: the last 100,000 closed Session ids (per process) and a runner's stopped Sessions for 10 minutes.",
        ...(snapshots === "" ? [] : [`heap snapshots at measurements ${snapshots}: ${snapshotDir}`])
      ]
    }
  }
}
