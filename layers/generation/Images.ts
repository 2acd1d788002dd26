/**
 * The training view of an observation with images: each image's size is read, its grid computed as the vision
 * processor does, and its `<|image_pad|>` placeholder expanded (src/template/ImageGrid.ts). Inference keeps the
 * template's one placeholder per image; SGLang expands it from `image_data` itself.
 *
 * **Details**
 * Images are `image_url` URLs: `data:` URIs (what dataset images become), `http(s)://` URLs (fetched), or file paths
 * (layers/vision/ImageBytes.ts). With `--multimodal-train-inputs grid` only the header is needed for the size, which
 * sharp reads without decoding the pixels (layers/platform/ImageCodec.ts); with `pixels` (the default) the image is
 * decoded and its `pixel_values` computed (layers/vision/VisionInputs.ts), the grid coming with them.
 * Without a vision processor (`--tokenizer` without `preprocessor_config.json`), an observation whose rendered tokens
 * hold no image placeholder trains on its inference tokens (a text-only template drops the images); one whose tokens
 * do hold placeholders is refused, since its training tokens would be wrong.
 */
import { Effect, Result } from "effect"
import type * as Commit from "../../src/forest/Commit.ts"
import * as ImageGrid from "../../src/template/ImageGrid.ts"
import * as ImageCodec from "../platform/ImageCodec.ts"
import * as StepSpan from "../platform/StepSpan.ts"
import type * as Tokenizer from "../tokenizer/Tokenizer.ts"
import * as ImageBytes from "../vision/ImageBytes.ts"
import type * as VisionInputs from "../vision/VisionInputs.ts"

/** Width and height of an image URL, in pixels. */
export const size = (url: string): Effect.Effect<{ readonly width: number; readonly height: number }, string> =>
  ImageBytes.of(url).pipe(
    Effect.flatMap((input) =>
      ImageCodec.dimensions(input).pipe(
        Effect.mapError((reason) => `cannot read image ${ImageBytes.shortName(url)}: ${reason}`)
      )
    ),
    Effect.flatMap((meta) =>
      meta.width === undefined || meta.height === undefined
        ? Effect.fail(`cannot read the size of image ${ImageBytes.shortName(url)}`)
        : Effect.succeed({ width: meta.width, height: meta.height })
    ),
    Effect.withSpan("Images.size")
  )

/**
 * The training view of an observation's `tokens` with `media` (its images in message order, the first being image
 * `firstIndex` of the request), or undefined when it trains on `tokens` as they are (`--multimodal-train-inputs none`,
 * or no images). With `pixels`, each image is decoded and its `pixel_values` computed now (`inputs.pixelsOf`, cached),
 * so a corrupt image fails here. The failure says which image (by its index in the request) or placeholder is wrong.
 */
export const expandObservation = (
  tokenizer: Tokenizer.TokenizerShape,
  tokens: ReadonlyArray<number>,
  media: ReadonlyArray<string>,
  inputs: Pick<VisionInputs.VisionInputsShape, "mode" | "pixelsOf">,
  firstIndex = 0
): Effect.Effect<Commit.ExpandedObservation | undefined, string> =>
  StepSpan.stepOf("Images.expandObservation", () => {
    if (inputs.mode === "none") return Effect.succeed(undefined)
    const vision = tokenizer.vision
    if (vision !== undefined) return expandWithVision(vision, tokens, media, inputs, firstIndex)
    // A tokenizer without a processor: nothing to expand, unless the template rendered image placeholders.
    const pad = tokenizer.tokenToId("<|image_pad|>")
    if (pad === undefined || !tokens.includes(pad)) return Effect.succeed(undefined)
    return Effect.fail(
      `the chat template renders image placeholders, but the tokenizer directory ${tokenizer.source} has no ` +
        "preprocessor_config.json, so the images' training tokens cannot be expanded as the processor does; give " +
        "--tokenizer the model checkpoint directory (or run with --multimodal-train-inputs none)"
    )
  })

/** One image's grid: from its header (`grid`), or from its computed `pixel_values` (`pixels`). */
const gridOf = (
  vision: NonNullable<Tokenizer.TokenizerShape["vision"]>,
  url: string,
  inputs: Pick<VisionInputs.VisionInputsShape, "mode" | "pixelsOf">
): Effect.Effect<ImageGrid.Grid, string> =>
  inputs.mode === "pixels"
    ? Effect.map(inputs.pixelsOf(url), (values) => values.grid)
    : size(url).pipe(
      Effect.flatMap(({ width, height }) =>
        Effect.fromResult(ImageGrid.gridOf(height, width, vision.config)).pipe(
          Effect.mapError((reason) => `(${width}x${height}): ${reason}`)
        )
      )
    )

const expandWithVision = (
  vision: NonNullable<Tokenizer.TokenizerShape["vision"]>,
  tokens: ReadonlyArray<number>,
  media: ReadonlyArray<string>,
  inputs: Pick<VisionInputs.VisionInputsShape, "mode" | "pixelsOf">,
  firstIndex: number
): Effect.Effect<Commit.ExpandedObservation | undefined, string> =>
  Effect.gen(function*() {
    if (media.length === 0 && !tokens.includes(vision.imagePadId)) return undefined
    const grids = yield* Effect.forEach(media, (url, i) =>
      gridOf(vision, url, inputs).pipe(
        Effect.mapError((reason) =>
          `image ${firstIndex + i} of the request (0-based, in message order; ${ImageBytes.shortName(url)}): ${reason}`
        )
      ), { concurrency: 4 })
    const expanded = ImageGrid.expand(
      tokens,
      vision.imagePadId,
      grids.map((grid) => ImageGrid.padCount(grid, vision.config))
    )
    if (Result.isFailure(expanded)) return yield* Effect.fail(expanded.failure)
    return { tokens: expanded.success, imageGrids: grids }
  })
