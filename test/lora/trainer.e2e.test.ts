/**
 * A Python trainer publishing LoRA adapters over the RPC (`PublishAdapter`, examples/python-trainer/trainer.py
 * `--adapters`), on a versioned, fully async rollout with the embedded engine and real agent processes: the samples
 * carry the versions it published, one per Session; a path that is no adapter is refused over RPC, naming it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { execFile } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import type { Results } from "../../src/index.ts"
import { makeRpcClient, memorySink, resolveConfig, RolloutRpcServer, serveFromSettings } from "../../src/index.ts"
import * as TempDir from "../support/TempDir.ts"

const root = Path.join(import.meta.dirname, "..", "..")
const fixtures = Path.join(root, "test", "fixtures")

const run = (file: string, args: ReadonlyArray<string>) =>
  Effect.callback<{ readonly code: number; readonly stdout: string; readonly stderr: string }>((resume) => {
    const child = execFile(file, args, { cwd: root, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      resume(
        Effect.succeed({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout, stderr })
      )
    })
    return Effect.sync(() => {
      child.kill("SIGTERM")
    })
  })

describe("a LoRA trainer over RPC", () => {
  it.live(
    "the Python example publishes versions; every sample names the one its Session bound",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const dir = yield* TempDir.scoped("relax-lora-trainer-")
        const adapters = [1, 2, 3].map((n) => {
          const adapter = Path.join(dir, `step-${n}`)
          Fs.mkdirSync(adapter)
          Fs.writeFileSync(Path.join(adapter, "adapter_config.json"), JSON.stringify({ r: 8, peft_type: "LORA" }))
          Fs.writeFileSync(Path.join(adapter, "adapter_model.safetensors"), `weights after step ${n}`)
          return adapter
        })
        const settings = yield* resolveConfig({
          promptData: Path.join(fixtures, "rollout", "train.jsonl"),
          labelKey: "label",
          agentCommand: `${JSON.stringify(process.execPath)} agent.mjs`,
          agentCwd: Path.join(fixtures, "rollout"),
          agentTimeout: 60,
          nSamplesPerPrompt: 2,
          rolloutBatchSize: 2,
          rolloutMaxResponseLen: 16,
          rolloutSeed: 7,
          fullyAsync: true,
          loraAdapterMode: true,
          enableVersionedLoraPublication: true
        })
        const services = yield* Layer.build(
          serveFromSettings(settings, { port: 0 }, {
            telemetry: memorySink(),
            embedded: EmbeddedEngine.EmbeddedEngine.instant
          })
        )
        const url = Context.get(services, RolloutRpcServer).url
        const client = yield* makeRpcClient({ url })
        const refused = yield* Effect.flip(client.PublishAdapter({ path: Path.join(dir, "nope") }))
        assert.strictEqual(refused._tag, "RolloutCallError")
        assert.include(refused.message, Path.join(dir, "nope"))
        const dump = Path.join(dir, "steps.json")
        const python = yield* run("python3", [
          Path.join(root, "examples", "python-trainer", "trainer.py"),
          "--url",
          url,
          "--steps",
          "2",
          "--dump",
          dump,
          "--adapters",
          ...adapters
        ])
        assert.strictEqual(python.code, 0, python.stderr)
        const published = [...python.stdout.matchAll(/^LoRA version -> (\S+)$/gm)].map((m) => m[1]!)
        assert.strictEqual(published.length, 3, python.stdout)
        assert.match(published[0]!, /^relax_policy_lora@[0-9a-f]{12}-1-[0-9a-f]{16}$/)
        const steps = JSON.parse(Fs.readFileSync(dump, "utf8")) as Array<Results.StepResult>
        const samples = steps.flatMap((s) => s.samples)
        assert.isAbove(samples.length, 0)
        for (const sample of samples) {
          const bound = sample.metadata["lora_version"] as string
          assert.include(published, bound)
          assert.deepStrictEqual([...new Set(sample.lora_versions)], [bound])
        }
        // The same directory again is a no-op returning its version.
        const again = yield* client.PublishAdapter({ path: adapters[2]! })
        assert.deepStrictEqual([again.version, again.noOp], [published[2], true])
      })).pipe(Effect.scoped),
    { timeout: 240_000 }
  )
})
