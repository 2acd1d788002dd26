/**
 * The controller side of the cluster with a trainer, end to end and real processes only: one throwaway PostgreSQL
 * and two `relax-agentic runner` processes shared by the file's tests (started once: the suite's time is tight), real
 * agents (test/fixtures/cluster/steps.mjs) and the embedded engine on each runner.
 * - `serve --cluster-database-url` and the trainer RPC: an `UpdateWeights` between two turns of running Sessions, and
 *   a `PauseGeneration` / `ResumeGeneration` around their third turns, reach both runners (every sample's turns
 *   carry `0`, then the updated, then the resumed version; the third turns are held on the runners, counted in their
 *   `relax_agentic_generations_held`, and answer only after the resume).
 * - A controller killed with SIGKILL: the runners reap its Sessions' agents (no controller touches them any more).
 * - `--partial-rollout` across the runners: a Group still running at step 0's close is kept, finishes in step 1 on
 *   the version the weight update between the steps relayed, and both steps give the same samples as one process.
 * - `--fully-async` across the same runners (started with `--partial-rollout`: on a runner both retain alike): the
 *   final backfill drains the debt, each step pays its own partition or the previous one, and the samples of every
 *   prompt both runs took are token-exact those of one process (run side by side with it). Where a step closes early
 *   and which Groups it takes depend on when agents sit between requests and which Group finishes first, so only what
 *   fully async guarantees is compared, not the steps' accounting nor the set of prompts.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Scope } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type * as TrainingSample from "../../src/forest/TrainingSample.ts"
import { makeRpcClient } from "../../src/index.ts"
import * as AgentProcesses from "../support/agentProcesses.ts"
import * as EmbeddedPg from "../support/EmbeddedPg.ts"
import * as Processes from "./processes.ts"

/** The flags every member reads (runners and controllers must agree on the sample-changing ones). */
const flags = (ctrl: string) =>
  Processes.memberFlags({
    agent: "steps.mjs",
    agentEnv: [`CTRL_DIR=${ctrl}`],
    policy: "cluster",
    maxResponseLen: 24,
    labelKey: "label",
    seed: 7,
    extra: ["--agent-timeout", "300", "--partial-rollout"]
  })

interface Cluster {
  readonly url: string
  readonly work: string
  readonly ctrl: string
  readonly runners: ReadonlyArray<Processes.Runner>
  readonly clusterFlags: ReadonlyArray<string>
}

const scope = Scope.makeUnsafe()
let cluster: Cluster

beforeAll(async () => {
  cluster = await Effect.runPromise(
    Effect.gen(function*() {
      const db = yield* EmbeddedPg.start
      const ports = yield* EmbeddedPg.freePorts(2)
      const work = yield* Processes.workDir("relax-cluster-trainer-")
      const ctrl = Path.join(work, "ctrl")
      Fs.mkdirSync(ctrl)
      const clusterFlags = Processes.clusterFlags(db.url)
      const runners = yield* Effect.forEach([1, 2], (i) =>
        Processes.runner([
          ...flags(ctrl),
          ...clusterFlags,
          "--rollout-batch-size",
          "1",
          ...Processes.runnerAt(ports[i - 1]!),
          "--cluster-orphan-timeout",
          "12"
        ]), { concurrency: "unbounded" })
      return { url: db.url, work, ctrl, runners, clusterFlags } satisfies Cluster
    }).pipe(Scope.provide(scope))
  )
}, 240_000)

afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)), 60_000)

/** Remove every mark and control file of the last test. */
const clear = (ctrl: string) => {
  for (const f of Fs.readdirSync(ctrl)) Fs.rmSync(Path.join(ctrl, f))
}

const marked = (ctrl: string, suffix: string) => Fs.readdirSync(ctrl).filter((f) => f.endsWith(`.${suffix}`))

/** Wait until `count` agents wrote their `suffix` mark (the marks come from other processes). */
const awaitMarks = (members: ReadonlyMap<string, Processes.Started>, ctrl: string, suffix: string, count: number) =>
  Processes.until(members, `${count} agents' ${suffix} marks`, 180, () => marked(ctrl, suffix).length >= count)

/**
 * The engine attempts a trainer's pause holds on the runners now: the sum of their `relax_agentic_generations_held`
 * (each runner's gateway `/metrics`).
 */
const heldOnRunners = (runners: ReadonlyArray<Processes.Runner>) =>
  Effect.promise(() =>
    Promise.all(runners.map(async (runner) => {
      const text = await (await fetch(`${new URL(runner.gatewayUrl).origin}/metrics`)).text()
      const value = /^relax_agentic_generations_held(?:\{\})? (\S+)$/m.exec(text)?.[1]
      assert.isDefined(value, `runner ${runner.incarnation} exports no relax_agentic_generations_held`)
      return Number(value)
    }))
  ).pipe(Effect.map((held) => held.reduce((sum, n) => sum + n, 0)))

/** A `rollout` of two steps of one Group each, two Groups started at once (over-sampling), into `out`. */
const twoSteps = (memberFlags: ReadonlyArray<string>, out: string, extra: ReadonlyArray<string>) =>
  Processes.run([
    "rollout",
    ...memberFlags,
    "--rollout-batch-size",
    "1",
    "--over-sampling-batch-size",
    "2",
    "--num-rollout",
    "2",
    "--output-dir",
    out,
    ...extra
  ])

describe("cluster with a trainer (end to end)", () => {
  it.live(
    "serve --cluster-database-url: UpdateWeights, PauseGeneration and ResumeGeneration reach every runner's Sessions",
    () =>
      Effect.gen(function*() {
        const { ctrl, runners } = cluster
        clear(ctrl)
        const served = yield* Processes.start([
          "serve",
          ...flags(ctrl),
          ...cluster.clusterFlags,
          "--rollout-batch-size",
          "4",
          "--rpc-port",
          "0"
        ])
        const url = (yield* Processes.waitFor(served, /listening on (http:\/\/\S+\/rpc)/))[1]!
        const client = yield* makeRpcClient({ url })
        const members = Processes.byName(served, runners)

        /** One step whose 8 Sessions get an update between their first two turns and a pause around their third. */
        const gatedStep = (rolloutId: number, before: string) =>
          Effect.gen(function*() {
            clear(ctrl)
            Fs.writeFileSync(Path.join(ctrl, "gated"), "")
            const [updated, resumed] = [`w${2 * rolloutId + 1}`, `w${2 * rolloutId + 2}`]
            const step = yield* Effect.forkChild(client.Step({ rolloutId }))
            // Every Session has had its first turn; the update reaches them between turns, on whichever runner.
            yield* awaitMarks(members, ctrl, "first", 8)
            assert.strictEqual((yield* client.UpdateWeights({ version: updated })).weightVersion, updated)
            Fs.writeFileSync(Path.join(ctrl, "go1"), "")
            yield* awaitMarks(members, ctrl, "second", 8)
            // A trainer's push: the third turns are held on every runner until the resume.
            yield* client.PauseGeneration({ mode: "abort" })
            Fs.writeFileSync(Path.join(ctrl, "go2"), "")
            // Every third turn reached its runner's engine, which holds it until the resume (or one was generated:
            // then its agent marks it, and the wait ends too).
            yield* Processes.within(
              members,
              "the pause to hold the 8 third turns",
              180,
              Effect.gen(function*() {
                while ((yield* heldOnRunners(runners)) < 8 && marked(ctrl, "third").length === 0) {
                  yield* Effect.sleep("200 millis")
                }
              })
            )
            assert.deepStrictEqual(marked(ctrl, "third"), [], "a turn was generated while the trainer's pause held")
            assert.strictEqual(yield* heldOnRunners(runners), 8)
            assert.strictEqual((yield* client.ResumeGeneration({ version: resumed })).weightVersion, resumed)
            const result = yield* Fiber.join(step)
            assert.strictEqual(yield* heldOnRunners(runners), 0)
            assert.strictEqual(result.samples.length, 8)
            for (const sample of result.samples) {
              assert.deepStrictEqual(sample.weight_versions, [before, updated, resumed])
            }
            return { sessions: new Set(result.samples.map((s) => s.session_id)), resumed }
          })

        // Groups land on runners by the hash of their key: run steps until both runners held some of them.
        const seen = new Set<Processes.Runner>()
        let before = "0"
        for (let rolloutId = 0; rolloutId < 4 && seen.size < runners.length; rolloutId++) {
          const { sessions, resumed } = yield* gatedStep(rolloutId, before)
          before = resumed
          for (const r of runners) if (Processes.hostedBy(r).some((s) => sessions.has(s))) seen.add(r)
        }
        assert.strictEqual(seen.size, runners.length, "every step's Groups landed on one runner")
        yield* client.Shutdown({})
        assert.strictEqual(yield* served.exited, 0, served.output().slice(-3000))
      }),
    400_000
  )

  it.live(
    "a controller killed with SIGKILL: the runners reap its agents (no controller touches their Sessions)",
    () =>
      Effect.gen(function*() {
        const { ctrl, runners } = cluster
        clear(ctrl)
        Fs.writeFileSync(Path.join(ctrl, "hang"), "")
        const controller = yield* Processes.start([
          "rollout",
          ...flags(ctrl),
          ...cluster.clusterFlags,
          "--rollout-batch-size",
          "2"
        ])
        const members = Processes.byName(controller, runners)
        yield* awaitMarks(members, ctrl, "first", 4)
        const pids = marked(ctrl, "pid").map((f) => Number(Fs.readFileSync(Path.join(ctrl, f), "utf8")))
        assert.strictEqual(pids.filter(AgentProcesses.running).length, 4)
        controller.child.kill("SIGKILL")
        yield* controller.exited
        // The runners reap Sessions untouched for --cluster-orphan-timeout (12 s here), checking every third of it.
        yield* Processes.until(members, "the runners to reap the agents", 60, () => !pids.some(AgentProcesses.running))
        const reaped = runners.flatMap((r) => [...r.output().matchAll(/reaps Session (\S+): no controller/g)])
        const killed = new Set(marked(ctrl, "pid").map((f) => f.replace(/\.pid$/, "")))
        assert.strictEqual(reaped.filter((m) => killed.has(m[1]!)).length, 4)
      }),
    180_000
  )

  it.live(
    "--partial-rollout across runners: a Group kept across the step boundary, the same samples as one process",
    () =>
      Effect.gen(function*() {
        const { ctrl, work } = cluster
        // The agents order the step's close after the kept Group's first turns (test/fixtures/cluster/steps.mjs).
        const run = (out: string, extra: ReadonlyArray<string>) =>
          Effect.suspend(() => {
            clear(ctrl)
            Fs.writeFileSync(Path.join(ctrl, "partial"), out)
            return twoSteps(flags(ctrl), out, extra)
          })
        const clustered = Path.join(work, "partial-cluster")
        const log = yield* run(clustered, cluster.clusterFlags)
        const single = Path.join(work, "partial-single")
        const singleLog = yield* run(single, [])
        for (const [output, dir] of [[log, clustered], [singleLog, single]] as const) {
          // Step 0 accepts the fast Group and keeps the slow one (in its tool: interrupted); step 1 accepts it.
          assert.match(
            output,
            /event=accounting_end rollout=0 groups=1 rows=2 debt=0 resident_groups=1 interrupted_groups=1/
          )
          const [first, second] = [Processes.samplesOf(dir, 0), Processes.samplesOf(dir, 1)]
          assert.strictEqual(first.length, 2)
          assert.strictEqual(second.length, 2)
          for (const s of first) assert.deepStrictEqual([s.rollout_id, s.weight_versions], [0, ["0", "0"]])
          // The kept Group's second turn ran after the weight update between the steps, under step 1.
          for (const s of second) {
            assert.deepStrictEqual([s.rollout_id, s.weight_versions], [1, ["0", "1"]])
            assert.include(s.prompt, "3 + 5")
          }
        }
        const exact = (
          s: TrainingSample.TrainingSample
        ) => [s.group_index, s.index, s.tokens, s.loss_mask, s.rollout_log_probs]
        for (const step of [0, 1]) {
          assert.deepStrictEqual(
            Processes.samplesOf(clustered, step).map(exact),
            Processes.samplesOf(single, step).map(exact)
          )
        }
      }),
    300_000
  )

  it.live(
    "--fully-async across runners: the final backfill drains the debt, the same samples as one process",
    () =>
      Effect.gen(function*() {
        const { ctrl, work, runners } = cluster
        clear(ctrl)
        const run = (out: string, extra: ReadonlyArray<string>) =>
          twoSteps([...flags(ctrl).filter((flag) => flag !== "--partial-rollout"), "--fully-async"], out, extra)
        const [clustered, single] = [Path.join(work, "async-cluster"), Path.join(work, "async-single")]
        // Side by side: the assertions below hold whatever the timing, and the file's time is tight.
        const [log, singleLog] = yield* Effect.all([run(clustered, cluster.clusterFlags), run(single, [])], {
          concurrency: "unbounded"
        })
        const all = (dir: string) =>
          [0, 1, 2].flatMap((step) => Processes.samplesOf(dir, step).map((sample) => ({ step, sample })))
        for (const [output, dir] of [[log, clustered], [singleLog, single]] as const) {
          assert.match(output, /event=accounting_start rollout=1 .*final_backfill=False/)
          assert.match(output, /event=accounting_start rollout=2 .*final_backfill=True/)
          // The final backfill (rollout_id == --num-rollout) drains what is still owed and keeps nothing.
          assert.match(output, /event=accounting_end rollout=2 groups=\d+ rows=\d+ debt=0 resident_groups=0 /)
          const rows = [...output.matchAll(/event=accounting_end rollout=\d+ groups=\d+ rows=(\d+)/g)]
          assert.strictEqual(rows.reduce((sum, m) => sum + Number(m[1]), 0), 4)
          // Two partitions of one Group each; a step's result holds its own partition's or the previous one's.
          const samples = all(dir)
          assert.deepStrictEqual(samples.map((s) => s.sample.rollout_id).sort(), [0, 0, 1, 1])
          for (const { step, sample } of samples) assert.include([step - 1, step], sample.rollout_id)
        }
        const sessions = new Set(all(clustered).map((s) => s.sample.session_id))
        assert.isTrue(
          runners.flatMap(Processes.hostedBy).some((s) => sessions.has(s)),
          "no runner hosted the fully-async run's Sessions"
        )
        // Which Groups a fully-async step takes depends on which finish first (a third prompt's Group may beat the
        // second's on a loaded machine, in either run): every sample of a prompt both runs took is token-exact.
        const exact = (s: TrainingSample.TrainingSample) => [s.tokens, s.loss_mask, s.rollout_log_probs]
        const byKey = (dir: string) =>
          new Map(all(dir).map(({ sample }) => [`${sample.prompt}#${sample.index}`, exact(sample)] as const))
        const [ours, reference] = [byKey(clustered), byKey(single)]
        const shared = [...ours.keys()].filter((key) => reference.has(key))
        assert.isAtLeast(shared.length, 2, `no Group of the same prompt in both runs: ${[...ours.keys()]}`)
        for (const key of shared) assert.deepStrictEqual(ours.get(key), reference.get(key), key)
      }),
    300_000
  )
})
