/**
 * Images read through sharp (libvips), the one module that touches it: a dataset image converted to the PNG an
 * agent is given (layers/session/SessionDirectory.ts), and an image's size for its training tokens
 * (layers/generation/Images.ts).
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
