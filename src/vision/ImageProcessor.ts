/**
 * The image processor a model's `preprocessor_config.json` describes, as far as its `pixel_values` depend on it:
 * transformers' `Qwen2VLImageProcessor` (Qwen2-VL, Qwen2.5-VL and Qwen3-VL checkpoints name it, or its `Fast`
 * variant). A field the file leaves out takes the class's default.
 *
 * **Details**
 * The values are computed as the class's PIL backend computes them (src/vision/PixelValues.ts). Another processor
 * class is refused with the two fallbacks: `--multimodal-train-inputs grid` (the expanded tokens and
 * `image_grid_thw` from Qwen2-VL's `smart_resize`, which processors derived from it share) or `none`.
 */
import { Result, Schema } from "effect"
import * as ImageGrid from "../template/ImageGrid.ts"
import * as PillowResample from "./PillowResample.ts"

/** OpenAI CLIP's normalisation, the class's default `image_mean` / `image_std` (Qwen2-VL, Qwen2.5-VL). */
type Triple = readonly [number, number, number]
const CLIP_MEAN: Triple = [0.48145466, 0.4578275, 0.40821073]
const CLIP_STD: Triple = [0.26862954, 0.26130258, 0.27577711]

/** The processor classes whose `pixel_values` relax-agentic computes. */
export const supportedClasses = ["Qwen2VLImageProcessor", "Qwen2VLImageProcessorFast"] as const

const TripleSchema = Schema.Tuple([Schema.Number, Schema.Number, Schema.Number])

/** The fields of `preprocessor_config.json` the pixel values depend on, beside the grid's (ImageGrid.ts). */
export const PixelFields = Schema.Struct({
  image_processor_type: Schema.optional(Schema.String),
  do_resize: Schema.optional(Schema.Boolean),
  resample: Schema.optional(Schema.Int),
  do_rescale: Schema.optional(Schema.Boolean),
  rescale_factor: Schema.optional(Schema.Number),
  do_normalize: Schema.optional(Schema.Boolean),
  image_mean: Schema.optional(Schema.Union([TripleSchema, Schema.Number])),
  image_std: Schema.optional(Schema.Union([TripleSchema, Schema.Number]))
})

/** Everything the processor does to one image. */
export interface ProcessorConfig extends ImageGrid.VisionConfig {
  readonly processorClass: string
  readonly doResize: boolean
  readonly resample: PillowResample.Resample
  readonly doRescale: boolean
  readonly rescaleFactor: number
  readonly doNormalize: boolean
  readonly imageMean: Triple
  readonly imageStd: Triple
}

const decodeFields = Schema.decodeUnknownResult(PixelFields)

const triple = (value: number | Triple | undefined, fallback: Triple): Triple =>
  value === undefined ? fallback : typeof value === "number" ? [value, value, value] : value

/**
 * The message for a processor class whose pixel values are not computed here: the class, the classes that are, and
 * the two fallbacks.
 */
export const unsupportedClass = (processorClass: string, directory: string): string =>
  `${directory}/preprocessor_config.json names the image processor ${JSON.stringify(processorClass)}, whose ` +
  `pixel_values relax-agentic does not compute (it computes them for ${supportedClasses.join(" / ")}: Qwen2-VL, ` +
  "Qwen2.5-VL, Qwen3-VL). Run with --multimodal-train-inputs grid (samples carry the expanded image tokens and " +
  "image_grid_thw, sized by Qwen2-VL's smart_resize, and the trainer computes pixel_values) or none (samples keep " +
  "one image placeholder per image and no multimodal_train_inputs)"

/**
 * The processor of a `preprocessor_config.json` object whose grid constants are `grid` (ImageGrid.configFrom). The
 * failure says which field is wrong, or names the unsupported class and the fallbacks.
 */
export const fromJson = (
  json: unknown,
  grid: ImageGrid.VisionConfig,
  directory: string
): Result.Result<ProcessorConfig, string> => {
  const decoded = decodeFields(json)
  if (Result.isFailure(decoded)) {
    return Result.fail(`${directory}/preprocessor_config.json: ${decoded.failure.message}`)
  }
  const c = decoded.success
  const processorClass = c.image_processor_type ?? "Qwen2VLImageProcessor"
  if (!(supportedClasses as ReadonlyArray<string>).includes(processorClass)) {
    return Result.fail(unsupportedClass(processorClass, directory))
  }
  const resample = c.resample ?? PillowResample.Resample.bicubic
  if (!PillowResample.isResample(resample)) {
    return Result.fail(
      `${directory}/preprocessor_config.json: resample ${resample} is not one of Pillow's filters (0 nearest, ` +
        "1 lanczos, 2 bilinear, 3 bicubic, 4 box, 5 hamming)"
    )
  }
  return Result.succeed({
    ...grid,
    processorClass,
    doResize: c.do_resize ?? true,
    resample,
    doRescale: c.do_rescale ?? true,
    rescaleFactor: c.rescale_factor ?? 1 / 255,
    doNormalize: c.do_normalize ?? true,
    imageMean: triple(c.image_mean, CLIP_MEAN),
    imageStd: triple(c.image_std, CLIP_STD)
  })
}
