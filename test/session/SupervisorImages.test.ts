import { assert, describe, it } from "@effect/vitest"
import { Effect, Result, Schema } from "effect"
import * as Path from "node:path"
import sharp from "sharp"
import * as SessionDirectory from "../../layers/session/SessionDirectory.ts"
import * as Supervisor from "../../layers/session/Supervisor.ts"
import * as SessionInput from "../../src/session/SessionInput.ts"
import * as TempDir from "../support/TempDir.ts"

const decodeDataUri = async (url: string) => {
  const prefix = "data:image/png;base64,"
  assert.isTrue(url.startsWith(prefix), `expected a PNG data URI, got ${url.slice(0, 40)}`)
  const png = Buffer.from(url.slice(prefix.length), "base64")
  const meta = await sharp(png).metadata()
  const pixel = await sharp(png).raw().toBuffer()
  return { meta, pixel: [...pixel.subarray(0, 3)] }
}

const ImageUrlPart = Schema.Struct({
  type: Schema.Literal("image_url"),
  image_url: Schema.Struct({ url: Schema.String })
})

const red = { r: 255, g: 0, b: 0 }

describe("multimodal conversion at the process boundary", () => {
  it.live("converts a local RGBA PNG and a JPEG file to RGB PNG data URIs", () =>
    Effect.gen(function*() {
      const dir = yield* TempDir.scoped("supervisor-images-")
      const pngPath = Path.join(dir, "a.png")
      const jpgPath = Path.join(dir, "b.jpg")
      yield* Effect.promise(() =>
        sharp({ create: { width: 4, height: 3, channels: 4, background: { ...red, alpha: 0.5 } } }).png().toFile(
          pngPath
        )
      )
      yield* Effect.promise(() =>
        sharp({ create: { width: 5, height: 2, channels: 3, background: { r: 0, g: 0, b: 255 } } }).jpeg().toFile(
          jpgPath
        )
      )
      const fromPng = yield* Effect.promise(async () =>
        decodeDataUri(await Effect.runPromise(SessionDirectory.imageUrl({ _tag: "Path", path: pngPath })))
      )
      assert.strictEqual(fromPng.meta.format, "png")
      assert.strictEqual(fromPng.meta.channels, 3)
      assert.deepStrictEqual([fromPng.meta.width, fromPng.meta.height], [4, 3])
      assert.deepStrictEqual(fromPng.pixel, [255, 0, 0])

      const fromJpg = yield* Effect.promise(async () =>
        decodeDataUri(await Effect.runPromise(SessionDirectory.imageUrl({ _tag: "Path", path: jpgPath })))
      )
      assert.strictEqual(fromJpg.meta.format, "png")
      assert.strictEqual(fromJpg.meta.channels, 3)
      assert.deepStrictEqual([fromJpg.meta.width, fromJpg.meta.height], [5, 2])
      assert.isTrue((fromJpg.pixel[2] ?? 0) > 240 && (fromJpg.pixel[0] ?? 255) < 15)
    }))

  it.live("converts bytes (a greyscale image) to a 3-channel PNG and keeps data: and http(s) URLs", () =>
    Effect.gen(function*() {
      const grey = yield* Effect.promise(() =>
        sharp({ create: { width: 2, height: 2, channels: 3, background: { r: 128, g: 128, b: 128 } } })
          .toColourspace("b-w")
          .png()
          .toBuffer()
      )
      const url = yield* SessionDirectory.imageUrl({ _tag: "Bytes", bytes: grey })
      const decoded = yield* Effect.promise(() => decodeDataUri(url))
      assert.strictEqual(decoded.meta.channels, 3)
      assert.strictEqual(
        yield* SessionDirectory.imageUrl({ _tag: "Url", url: "https://example.com/x.png" }),
        "https://example.com/x.png"
      )
      assert.strictEqual(
        yield* SessionDirectory.imageUrl({ _tag: "Url", url: "data:image/jpeg;base64,AAAA" }),
        "data:image/jpeg;base64,AAAA"
      )
    }))

  it.live("gives the agent image_url content and reports an unreadable image by session and index", () =>
    Effect.gen(function*() {
      const dir = yield* TempDir.scoped("supervisor-images-")
      const pngPath = Path.join(dir, "a.png")
      yield* Effect.promise(() =>
        sharp({ create: { width: 1, height: 1, channels: 3, background: red } }).png().toFile(pngPath)
      )
      const options = { inputKey: "input", metadataKey: "metadata", multimodalKeys: { image: "images" } }
      const seen: Array<SessionInput.SessionInputFile> = []
      const supervisor = Supervisor.Supervisor.inProcess((input) =>
        Effect.sync(() => {
          seen.push(input.input)
        })
      )
      const input = Result.getOrThrow(
        SessionInput.fromRow({ input: "<image>Describe this image.", images: [pngPath] }, 0, options)
      )
      yield* supervisor.run({ sessionId: "s", groupId: "g", rolloutMode: "train", input })
      const content = seen[0]?.messages?.[0]?.["content"]
      assert.isTrue(Array.isArray(content))
      if (!Array.isArray(content)) return
      const [image, text] = content
      assert.deepStrictEqual(text, { type: "text", text: "Describe this image." })
      const url = Schema.decodeUnknownSync(ImageUrlPart)(image).image_url.url
      const decoded = yield* Effect.promise(() => decodeDataUri(url))
      assert.deepStrictEqual(decoded.pixel, [255, 0, 0])

      const missing = Result.getOrThrow(
        SessionInput.fromRow({ input: "<image>", images: [Path.join(dir, "missing.png")] }, 0, options)
      )
      const error = yield* supervisor.run({ sessionId: "s-9", groupId: "g", rolloutMode: "train", input: missing })
        .pipe(
          Effect.flip
        )
      assert.strictEqual(error._tag, "SessionInputError")
      assert.match(error.message, /^session s-9, field 'images\[0\]': cannot load image .*missing\.png/)
    }))
})
