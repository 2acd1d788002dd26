/**
 * The multimodal tool-use example's pixel_values where a trainer reads them: `rollout_<id>.jsonl` and its `.npy`
 * sidecar (checked against the debug dump's digests), and the RPC decoded by the Python trainer example (standard
 * library only). Both must equal a direct computation of each image.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Result } from "effect"
import { execFile } from "node:child_process"
import { createHash } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as EmbeddedEngine from "../../layers/engine/EmbeddedEngine.ts"
import * as Cli from "../../src/cli.ts"
import type * as TrainingSample from "../../src/forest/TrainingSample.ts"
import {
  makeRollout,
  memorySink,
  resolveConfig,
  Rollout,
  type RolloutOptionsInput,
  RolloutRpcServer,
  serveFromSettings
} from "../../src/index.ts"
import * as Npy from "../../src/vision/Npy.ts"
import * as TempDir from "../support/TempDir.ts"
import * as VisionTokenizer from "../support/VisionTokenizer.ts"

const root = Path.join(import.meta.dirname, "..", "..")
const config = Cli.readConfigFile(Path.join(root, "examples", "multimodal-tools", "rollout.json"))
const extras = () => ({ telemetry: memorySink(), embedded: EmbeddedEngine.EmbeddedEngine.instant })

const tempDir = TempDir.scoped("relax-pixels-")

const options = (tokenizer: string, out: string): RolloutOptionsInput => ({
  ...(Result.isSuccess(config) ? config.success : {}),
  tokenizer,
  numRollout: 1,
  outputDir: out,
  saveDebugRolloutData: Path.join(out, "debug_{rollout_id}.jsonl")
} as RolloutOptionsInput)

const littleEndian = (values: Float32Array) => Buffer.from(values.buffer, values.byteOffset, values.byteLength)

const python = (args: ReadonlyArray<string>) =>
  Effect.callback<{ readonly code: number; readonly stdout: string; readonly stderr: string }>((resume) => {
    const child = execFile("python3", args, { cwd: root, maxBuffer: 512 * 1024 * 1024 }, (error, stdout, stderr) => {
      resume(
        Effect.succeed({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout, stderr })
      )
    })
    return Effect.sync(() => {
      child.kill("SIGTERM")
    })
  })

describe("the multimodal tool-use example's pixel_values, as a trainer reads them", () => {
  it.live(
    "rollout_0.jsonl names rows of its .npy sidecar that equal a direct computation and the debug dump's digests",
    () =>
      Effect.gen(function*() {
        assert.isTrue(Result.isSuccess(config))
        const tokenizer = yield* VisionTokenizer.directory()
        const out = yield* tempDir
        yield* Effect.gen(function*() {
          const rollout = yield* Rollout
          yield* rollout.run
        }).pipe(Effect.provide(makeRollout(options(tokenizer, out), extras())))
        const lines = Fs.readFileSync(Path.join(out, "rollout_0.jsonl"), "utf8").trim().split("\n")
        const samples = lines.map((line) => JSON.parse(line) as TrainingSample.TrainingSample)
        const debug = Fs.readFileSync(Path.join(out, "debug_0.jsonl"), "utf8").trim().split("\n").map((line) =>
          JSON.parse(line) as { readonly pixel_values: ReadonlyArray<{ readonly sha256: string }> }
        )
        assert.lengthOf(samples, 4)
        const sidecar = Fs.readFileSync(Path.join(out, "rollout_0.pixel_values.npy"))
        const whole = Npy.read(sidecar)
        assert.notStrictEqual(typeof whole, "string")
        // The Group's four samples share the prompt image: it is written once.
        const distinct = new Set(
          samples.flatMap((s) => s.multimodal_train_inputs?.pixel_values ?? []).map((p) =>
            "offset" in p ? p.offset : -1
          )
        )
        assert.isBelow(distinct.size, 8)
        for (const [i, sample] of samples.entries()) {
          const images = sample.multimodal_inputs?.images ?? []
          const refs = sample.multimodal_train_inputs?.pixel_values ?? []
          assert.lengthOf(refs, 2)
          for (const [k, ref] of refs.entries()) {
            assert.isTrue("file" in ref)
            if (!("file" in ref)) continue
            assert.strictEqual(ref.file, "rollout_0.pixel_values.npy")
            assert.strictEqual(ref.dtype, "float32")
            const [t, h, w] = sample.multimodal_train_inputs!.image_grid_thw[k]!
            assert.strictEqual(ref.shape[0], t * h * w)
            const bytes = sidecar.subarray(ref.offset, ref.offset + ref.shape[0] * ref.shape[1] * 4)
            const direct = yield* VisionTokenizer.directPixels(tokenizer, images[k]!)
            assert.isTrue(bytes.equals(littleEndian(direct.data)), `sample ${i} image ${k}`)
            // --save-debug-rollout-data checks the sidecar: the same bytes' digest.
            assert.strictEqual(createHash("sha256").update(bytes).digest("hex"), debug[i]!.pixel_values[k]!.sha256)
          }
        }
      }).pipe(Effect.scoped),
    { timeout: 240_000 }
  )

  it.live(
    "the Python trainer example decodes the RPC's arrays (base64, little-endian float32) to the same values",
    () =>
      Effect.gen(function*() {
        const tokenizer = yield* VisionTokenizer.directory()
        const out = yield* tempDir
        const settings = yield* resolveConfig(options(tokenizer, out))
        const dump = Path.join(out, "steps.json")
        const ran = yield* Effect.scoped(Effect.gen(function*() {
          const services = yield* Layer.build(serveFromSettings(settings, { port: 0 }, extras()))
          const url = Context.get(services, RolloutRpcServer).url
          return yield* python([
            Path.join(root, "examples", "python-trainer", "trainer.py"),
            "--url",
            url,
            "--steps",
            "1",
            "--pixel-values",
            "--dump",
            dump
          ])
        }))
        assert.strictEqual(ran.code, 0, ran.stderr)
        const steps = JSON.parse(Fs.readFileSync(dump, "utf8")) as ReadonlyArray<
          { readonly samples: ReadonlyArray<TrainingSample.TrainingSample> }
        >
        const digest = createHash("sha256")
        let images = 0
        let rows = 0
        for (const sample of steps[0]!.samples) {
          for (const url of sample.multimodal_inputs?.images ?? []) {
            const direct = yield* VisionTokenizer.directPixels(tokenizer, url)
            digest.update(littleEndian(direct.data))
            images++
            rows += direct.shape[0]
          }
        }
        assert.strictEqual(images, 8)
        assert.include(ran.stdout, `pixel_values: ${images} images, ${rows} rows, sha256 ${digest.digest("hex")}`)
      }).pipe(Effect.scoped),
    { timeout: 240_000 }
  )
})
