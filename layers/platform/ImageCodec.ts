/**
 * Images read through sharp (libvips), the one module that touches it: a dataset image converted to the PNG an
 * agent is given (layers/session/SessionDirectory.ts), an image's size for its training tokens
 * (layers/generation/Images.ts), and its RGB pixels for `pixel_values` (layers/vision/).
 *
 * **Details**
 * Input is a file path or the image's bytes. A failure is sharp's own message, which callers wrap with the image's
 * name and where it came from.
 */
import { Effect } from "effect"
import sharp from "sharp"
import * as Thrown from "../../src/Thrown.ts"

/** The image as an RGB PNG (alpha dropped, converted to sRGB): what agents get for a dataset image. */
export const toRgbPng = (input: string | Uint8Array): Effect.Effect<Buffer, string> =>
  Effect.tryPromise({
    try: () => sharp(input).removeAlpha().toColourspace("srgb").png().toBuffer(),
    catch: Thrown.messageOf
  })

/** The image's header: its width and height in pixels when the format records them (the pixels are not decoded). */
export const dimensions = (
  input: string | Uint8Array
): Effect.Effect<{ readonly width: number | undefined; readonly height: number | undefined }, string> =>
  Effect.tryPromise({
    try: () => sharp(input).metadata(),
    catch: Thrown.messageOf
  }).pipe(Effect.map((meta) => ({ width: meta.width, height: meta.height })))

/**
 * The image's pixels as Pillow's `Image.open(...).convert("RGB")` gives them: 8-bit RGB, interleaved, alpha dropped
 * (not composited), grey replicated to three channels, the embedded ICC profile ignored and EXIF orientation not
 * applied (Pillow does neither). A truncated or corrupt image fails (sharp's `failOn: "warning"`).
 */
export const decodeRgb = (
  input: string | Uint8Array
): Effect.Effect<
  { readonly width: number; readonly height: number; readonly channels: 3; readonly data: Uint8Array },
  string
> =>
  Effect.tryPromise({
    try: () =>
      sharp(input, { ignoreIcc: true, failOn: "warning" }).removeAlpha().toColourspace("srgb").raw().toBuffer({
        resolveWithObject: true
      }),
    catch: Thrown.messageOf
  }).pipe(
    Effect.flatMap(({ data, info }) =>
      info.channels === 3
        ? Effect.succeed({ width: info.width, height: info.height, channels: 3 as const, data: new Uint8Array(data) })
        : Effect.fail(`decoded to ${info.channels} channels, expected 3`)
    )
  )
