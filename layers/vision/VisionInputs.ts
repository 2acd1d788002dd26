/**
 * What a vision model's samples carry for training (`--multimodal-train-inputs`, docs/outputs.md): `pixels` (the
 * default) adds each image's `pixel_values` to its grid, `grid` keeps the grid only, `none` trains on the inference
 * tokens.
 *
 * **Details**
 * With `pixels`, an observation's images are decoded and computed when it is observed (layers/generation/Images.ts),
 * so a corrupt image fails that request (400, naming the image's index); the values are kept per image digest (the
 * SHA-256 of its bytes) in a cache bounded by bytes, and a sample's `pixel_values` are taken from it when the sample is
 * built ({@link VisionInputsShape.attach}), computed again if the cache let them go. The computation runs on a worker
 * thread (layers/vision/PixelWorker.ts). The layer checks at startup that the model's image processor is one whose
 * values are computed here ({@link ImageProcessor.fromJson}), naming the `grid` / `none` fallbacks otherwise.
 *
 * Without the layer (a Generation or SessionRunner built alone, as tests do), the service is `grid`: today's samples.
 */
import { Context, Effect, Layer, Result } from "effect"
import { createHash } from "node:crypto"
import { readFile } from "node:fs/promises"
import * as FlagTable from "../../src/config/FlagTable.ts"
import type * as RolloutOptions from "../../src/config/RolloutOptions.ts"
import * as Settings from "../../src/config/Settings.ts"
import type * as TrainingSample from "../../src/forest/TrainingSample.ts"
import * as GenerationError from "../../src/generation/GenerationError.ts"
import * as Thrown from "../../src/Thrown.ts"
import * as ImageProcessor from "../../src/vision/ImageProcessor.ts"
import type * as PixelValues from "../../src/vision/PixelValues.ts"
import * as ImageCodec from "../platform/ImageCodec.ts"
import * as Tokenizer from "../tokenizer/Tokenizer.ts"
import * as ImageBytes from "./ImageBytes.ts"
import * as PixelWorker from "./PixelWorker.ts"

export interface VisionInputsShape {
  readonly mode: RolloutOptions.MultimodalTrainInputs
  /**
   * The `pixel_values` of an image URL (a `data:` URI, an `http(s)://` URL or a file path), from the cache or
   * computed; only in `pixels` mode. The failure says what is wrong with the image.
   */
  readonly pixelsOf: (url: string) => Effect.Effect<PixelValues.PixelValues, string>
  /** `samples` with each image's `pixel_values` beside its grid (`pixels` mode); the others unchanged. */
  readonly attach: (
    samples: ReadonlyArray<TrainingSample.TrainingSample>
  ) => Effect.Effect<Array<TrainingSample.TrainingSample>, GenerationError.ImageRejectedError>
}

/** Bytes of `pixel_values` the cache keeps (a 1-megapixel image under Qwen2.5-VL is ~8 MB of float32). */
export const CACHE_BYTES = 512 * 1024 * 1024

const gridOnly = (mode: RolloutOptions.MultimodalTrainInputs): VisionInputsShape => ({
  mode,
  pixelsOf: () => Effect.fail(`pixel_values are not computed with --multimodal-train-inputs ${mode}`),
  attach: (samples) => Effect.succeed([...samples])
})

/** A cache of values by digest, evicting the least recently used beyond `limit` bytes. */
const byteBoundedCache = (limit: number) => {
  const entries = new Map<string, PixelValues.PixelValues>()
  let bytes = 0
  return {
    get: (key: string): PixelValues.PixelValues | undefined => {
      const found = entries.get(key)
      if (found !== undefined) {
        entries.delete(key)
        entries.set(key, found)
      }
      return found
    },
    set: (key: string, value: PixelValues.PixelValues): void => {
      if (entries.has(key)) return
      entries.set(key, value)
      bytes += value.data.byteLength
      for (const [oldest, kept] of entries) {
        if (bytes <= limit || oldest === key) break
        entries.delete(oldest)
        bytes -= kept.data.byteLength
      }
    }
  }
}

const make = (
  config: ImageProcessor.ProcessorConfig
): Omit<VisionInputsShape, "mode"> => {
  const compute = PixelWorker.make()
  const cache = byteBoundedCache(CACHE_BYTES)
  const inFlight = new Map<string, Promise<Result.Result<PixelValues.PixelValues, string>>>()

  const computeBytes = (input: Buffer | string) =>
    Effect.gen(function*() {
      const bytes = typeof input === "string"
        ? yield* Effect.tryPromise({ try: () => readFile(input), catch: Thrown.messageOf })
        : input
      const digest = createHash("sha256").update(bytes).digest("hex")
      const cached = cache.get(digest)
      if (cached !== undefined) return cached
      const running = inFlight.get(digest) ?? Effect.runPromise(
        ImageCodec.decodeRgb(bytes).pipe(
          Effect.mapError((reason) => `cannot decode it: ${reason}`),
          Effect.flatMap((rgb) => Effect.flatMap(Effect.promise(() => compute(rgb, config)), Effect.fromResult)),
          Effect.result
        )
      ).finally(() => inFlight.delete(digest))
      inFlight.set(digest, running)
      const values = yield* Effect.flatMap(Effect.promise(() => running), Effect.fromResult)
      cache.set(digest, values)
      return values
    })

  const pixelsOf = (url: string) =>
    ImageBytes.of(url).pipe(Effect.flatMap(computeBytes), Effect.withSpan("VisionInputs.pixelsOf"))

  const attach = (samples: ReadonlyArray<TrainingSample.TrainingSample>) =>
    Effect.forEach(samples, (sample) => {
      const images = sample.multimodal_inputs?.images
      const train = sample.multimodal_train_inputs
      if (images === undefined || train === undefined) return Effect.succeed(sample)
      return Effect.forEach(images, (url, index) =>
        pixelsOf(url).pipe(
          Effect.map((values): TrainingSample.PixelArray => ({
            dtype: "float32",
            shape: values.shape,
            data: values.data
          })),
          Effect.mapError((reason) =>
            new GenerationError.ImageRejectedError({
              detail: `image ${index} of sample ${sample.index} (${ImageBytes.shortName(url)}): ${reason}`
            })
          )
        )).pipe(
          Effect.map((pixels): TrainingSample.TrainingSample => ({
            ...sample,
            multimodal_train_inputs: { ...train, pixel_values: pixels }
          }))
        )
    }).pipe(Effect.withSpan("VisionInputs.attach"))

  return { pixelsOf, attach }
}

/**
 * The service for `mode` and a tokenizer: `pixels` with a `preprocessor_config.json` whose processor class is not one
 * whose values are computed here fails, naming the class and the fallbacks.
 */
export const forTokenizer = (
  mode: RolloutOptions.MultimodalTrainInputs,
  tokenizer: Tokenizer.TokenizerShape
): Effect.Effect<VisionInputsShape, Settings.RolloutConfigError> => {
  const vision = tokenizer.vision
  if (mode !== "pixels" || vision === undefined) return Effect.succeed(gridOnly(mode))
  const config = ImageProcessor.fromJson(vision.preprocessorConfig, vision.config, tokenizer.source)
  return Result.isFailure(config)
    ? Effect.fail(
      new Settings.RolloutConfigError({
        option: FlagTable.flagOf("multimodalTrainInputs"),
        reason: "invalid",
        detail: config.failure
      })
    )
    : Effect.succeed({ mode, ...make(config.success) })
}

/** The training inputs of vision samples (`grid` where no layer provides the service). */
export class VisionInputs extends Context.Reference<VisionInputsShape>("relax-agentic/VisionInputs", {
  defaultValue: () => gridOnly("grid")
}) {
  /** For `--multimodal-train-inputs` `mode` and the tokenizer ({@link forTokenizer}); fails at startup as it does. */
  static readonly layer = (
    mode: RolloutOptions.MultimodalTrainInputs
  ): Layer.Layer<never, Settings.RolloutConfigError, Tokenizer.Tokenizer> =>
    Layer.effect(
      VisionInputs,
      Effect.gen(function*() {
        return yield* forTokenizer(mode, yield* Tokenizer.Tokenizer)
      })
    )
}
