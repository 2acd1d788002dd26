/**
 * The training view of an observation with images: each image's size is read, its grid computed as the vision
 * processor does, and its `<|image_pad|>` placeholder expanded (src/template/ImageGrid.ts). Inference keeps the
 * template's one placeholder per image; SGLang expands it from `image_data` itself.
 *
 * **Details**
 * Images are `image_url` URLs: `data:` URIs (what dataset images become), `http(s)://` URLs (fetched), or file paths.
 * Only the header is needed for the size, which sharp reads without decoding the pixels (layers/platform/ImageCodec.ts).
 * Without a vision processor (`--tokenizer` without `preprocessor_config.json`), an observation whose rendered tokens
 * hold no image placeholder trains on its inference tokens (a text-only template drops the images); one whose tokens
 * do hold placeholders is refused, since its training tokens would be wrong.
 */
import { Effect, Result } from "effect"
import type * as Commit from "../../src/forest/Commit.ts"
import * as ImageGrid from "../../src/template/ImageGrid.ts"
import * as Thrown from "../../src/Thrown.ts"
import * as ImageCodec from "../platform/ImageCodec.ts"
import * as StepSpan from "../platform/StepSpan.ts"
import type * as Tokenizer from "../tokenizer/Tokenizer.ts"

/** A short name for an image in messages (a data URI is cut). */
const shortName = (url: string): string => (url.length > 64 ? `${url.slice(0, 60)}…` : url)

const bytesOf = (url: string): Effect.Effect<Buffer | string, string> => {
  const data = /^data:[^,]*?(;base64)?,/i.exec(url)
  if (data !== null) {
    const payload = url.slice(data[0].length)
    return Effect.succeed(
      data[1] === undefined ? Buffer.from(decodeURIComponent(payload)) : Buffer.from(payload, "base64")
    )
  }
  if (/^https?:\/\//i.test(url)) {
    return Effect.tryPromise({
      try: async (signal) => {
        const response = await fetch(url, { signal })
        if (!response.ok) throw new Error(`HTTP ${response.status}`)
        return Buffer.from(await response.arrayBuffer())
      },
      catch: (error) => `cannot fetch ${url}: ${Thrown.messageOf(error)}`
    }).pipe(
      Effect.timeoutOrElse({
        duration: "30 seconds",
        orElse: () => Effect.fail(`fetching ${url} took more than 30 seconds`)
      })
    )
  }
  return Effect.succeed(url.replace(/^file:\/\//i, ""))
}

/** Width and height of an image URL, in pixels. */
export const size = (url: string): Effect.Effect<{ readonly width: number; readonly height: number }, string> =>
  bytesOf(url).pipe(
    Effect.flatMap((input) =>
      ImageCodec.dimensions(input).pipe(Effect.mapError((reason) => `cannot read image ${shortName(url)}: ${reason}`))
    ),
    Effect.flatMap((meta) =>
      meta.width === undefined || meta.height === undefined
        ? Effect.fail(`cannot read the size of image ${shortName(url)}`)
        : Effect.succeed({ width: meta.width, height: meta.height })
    ),
    Effect.withSpan("Images.size")
  )

/**
 * The training view of an observation's `tokens` with `media` (its images in message order), or undefined when it
 * trains on `tokens` as they are. The failure says which image or placeholder is wrong.
 */
export const expandObservation = (
  tokenizer: Tokenizer.TokenizerShape,
  tokens: ReadonlyArray<number>,
  media: ReadonlyArray<string>
): Effect.Effect<Commit.ExpandedObservation | undefined, string> =>
  StepSpan.stepOf("Images.expandObservation", () => {
    const vision = tokenizer.vision
    if (vision !== undefined) return expandWithVision(vision, tokens, media)
    // A tokenizer without a processor: nothing to expand, unless the template rendered image placeholders.
    const pad = tokenizer.tokenToId("<|image_pad|>")
    if (pad === undefined || !tokens.includes(pad)) return Effect.succeed(undefined)
    return Effect.fail(
      `the chat template renders image placeholders, but the tokenizer directory ${tokenizer.source} has no ` +
        "preprocessor_config.json, so the images' training tokens cannot be expanded as the processor does; give " +
        "--tokenizer the model checkpoint directory"
    )
  })

const expandWithVision = (
  vision: NonNullable<Tokenizer.TokenizerShape["vision"]>,
  tokens: ReadonlyArray<number>,
  media: ReadonlyArray<string>
): Effect.Effect<Commit.ExpandedObservation | undefined, string> =>
  Effect.gen(function*() {
    if (media.length === 0 && !tokens.includes(vision.imagePadId)) return undefined
    const grids = yield* Effect.forEach(media, (url) =>
      size(url).pipe(
        Effect.flatMap(({ width, height }) =>
          Effect.fromResult(ImageGrid.gridOf(height, width, vision.config)).pipe(
            Effect.mapError((reason) => `image ${shortName(url)} (${width}x${height}): ${reason}`)
          )
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
