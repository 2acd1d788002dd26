/**
 * Session input: what a dataset row becomes in the file named by `RELAX_INPUT_JSON`.
 *
 * **Details**
 * `--input-key` (default `input`) maps to `messages`: a string becomes one user message, a message list keeps its
 * shape. `--metadata-key` (default `metadata`) maps to `metadata`; `--label-key` is kept for the training sample
 * and not shown to the agent. With `--multimodal-keys '{"image":"images"}'` every `<image>` placeholder in the
 * messages' text is joined, in order, with one value of the mapped field; the number of values must equal the
 * number of placeholders. Loading the images and encoding them as `data:` URIs is I/O and happens at the process
 * boundary (the Supervisor layer), which then calls {@link toInputFile} with the resulting URLs.
 */
import { Result, Schema } from "effect"
import * as SessionError from "./SessionError.ts"

/** The placeholder that marks where a dataset image goes. */
export const ImagePlaceholder = "<image>"

/** The content of `session_input.json` (compact UTF-8 JSON). */
export const SessionInputFile = Schema.Struct({
  messages: Schema.optionalKey(Schema.Array(Schema.JsonObject)),
  metadata: Schema.optionalKey(Schema.JsonObject)
})
export type SessionInputFile = typeof SessionInputFile.Type

/** How dataset fields map to the Session input (the CLI's `--input-key`, `--metadata-key`, ...). */
export interface InputOptions {
  readonly inputKey: string
  readonly metadataKey: string
  readonly labelKey?: string | undefined
  /** Modality -> dataset field, e.g. `{ image: "images" }`. Only `image` is converted for agents. */
  readonly multimodalKeys?: Readonly<Record<string, string>> | undefined
}

export const defaultInputOptions: InputOptions = { inputKey: "input", metadataKey: "metadata" }

/** Where an image comes from; `Url` (a `data:` / `http(s)://` URL) is passed to the agent unchanged. */
export type ImageSource =
  | { readonly _tag: "Url"; readonly url: string }
  | { readonly _tag: "Path"; readonly path: string }
  | { readonly _tag: "Bytes"; readonly bytes: Uint8Array }

/** A dataset row prepared for one Group: raw messages (placeholders still in place), metadata, label, images. */
export interface Prepared {
  /** Absent for metadata-only tasks (the harness builds its messages from metadata). */
  readonly messages?: ReadonlyArray<Schema.JsonObject> | undefined
  readonly metadata: Schema.JsonObject
  readonly label?: Schema.Json | undefined
  /** One entry per `<image>` placeholder, in order of appearance. */
  readonly images: ReadonlyArray<ImageSource>
}

/** The input of a Session without a global dataset (`--disable-rollout-global-dataset`): an empty object. */
export const empty: Prepared = { metadata: {}, images: [] }

const isJsonObject = Schema.is(Schema.JsonObject)
const isJson = Schema.is(Schema.Json)

const fail = (row: number, field: string, reason: string) =>
  Result.fail(new SessionError.SessionInputError({ row, field, detail: reason }))

const isUrl = (value: string): boolean => /^(data:|https?:\/\/)/i.test(value)

const decodeBase64 = (text: string): Uint8Array => Uint8Array.from(Buffer.from(text, "base64"))

/** Classify one dataset image value: a URL, a path, raw bytes, or a `{bytes, path}` object (HF datasets). */
export const imageSource = (value: unknown): ImageSource | undefined => {
  if (typeof value === "string") {
    return isUrl(value) ? { _tag: "Url", url: value } : { _tag: "Path", path: value }
  }
  if (value instanceof Uint8Array) return { _tag: "Bytes", bytes: value }
  if (value !== null && typeof value === "object") {
    const bytes: unknown = "bytes" in value ? value.bytes : undefined
    if (bytes instanceof Uint8Array) return { _tag: "Bytes", bytes }
    if (typeof bytes === "string" && bytes.length > 0) return { _tag: "Bytes", bytes: decodeBase64(bytes) }
    const path: unknown = "path" in value ? value.path : undefined
    if (typeof path === "string" && path.length > 0) return imageSource(path)
  }
  return undefined
}

/** Count `<image>` placeholders in a message's text (string content or `text` parts). */
const countPlaceholders = (message: Schema.JsonObject): number => {
  const count = (text: string) => text.split(ImagePlaceholder).length - 1
  const content = message["content"]
  if (typeof content === "string") return count(content)
  if (Array.isArray(content)) {
    let n = 0
    for (const part of content) {
      if (isJsonObject(part) && part["type"] === "text" && typeof part["text"] === "string") n += count(part["text"])
    }
    return n
  }
  return 0
}

const decodeMessages = (
  row: number,
  key: string,
  value: unknown
): Result.Result<ReadonlyArray<Schema.JsonObject>, SessionError.SessionInputError> => {
  if (typeof value === "string") return Result.succeed([{ role: "user", content: value }])
  if (!Array.isArray(value)) {
    return fail(row, key, `must be a string or a list of messages, got ${describe(value)}`)
  }
  const messages: Array<Schema.JsonObject> = []
  for (const [index, message] of value.entries()) {
    if (!isJsonObject(message)) {
      return fail(row, `${key}[${index}]`, `must be a message object, got ${describe(message)}`)
    }
    if (typeof message["role"] !== "string") {
      return fail(row, `${key}[${index}].role`, "a message needs a string 'role' (user, assistant, system, tool)")
    }
    messages.push(message)
  }
  return Result.succeed(messages)
}

const describe = (value: unknown): string => value === null ? "null" : Array.isArray(value) ? "a list" : typeof value

const collectImages = (
  row: number,
  record: Readonly<Record<string, unknown>>,
  options: InputOptions
): Result.Result<ReadonlyArray<ImageSource>, SessionError.SessionInputError> => {
  const images: Array<ImageSource> = []
  for (const [modality, field] of Object.entries(options.multimodalKeys ?? {})) {
    const raw = record[field]
    const values: ReadonlyArray<unknown> = raw === undefined || raw === null ? [] : Array.isArray(raw) ? raw : [raw]
    if (modality !== "image") {
      if (values.length > 0) {
        return fail(
          row,
          field,
          `--multimodal-keys maps modality '${modality}', but agentic rollout converts only images to ` +
            `image_url content; remove the mapping or convert the data to images`
        )
      }
      continue
    }
    for (const [index, value] of values.entries()) {
      const source = imageSource(value)
      if (source === undefined) {
        return fail(
          row,
          `${field}[${index}]`,
          `an image must be a path, a data:/http(s) URL, bytes, or {bytes, path}; got ${describe(value)}`
        )
      }
      images.push(source)
    }
  }
  return Result.succeed(images)
}

/**
 * Prepare one dataset row (index `row`, used in every error) as a Session input.
 *
 * **Details**
 * Fails when the input field is neither a string nor a message list, when metadata is not an object, when the row
 * has neither input nor metadata, or when the image count differs from the `<image>` placeholder count.
 */
export const fromRow = (
  record: Readonly<Record<string, unknown>>,
  row: number,
  options: InputOptions = defaultInputOptions
): Result.Result<Prepared, SessionError.SessionInputError> =>
  Result.gen(function*() {
    const rawInput = record[options.inputKey]
    const rawMetadata = record[options.metadataKey]
    if ((rawInput === undefined || rawInput === null) && (rawMetadata === undefined || rawMetadata === null)) {
      return yield* fail(
        row,
        options.inputKey,
        `the row has neither '${options.inputKey}' nor '${options.metadataKey}'; check --input-key and --metadata-key`
      )
    }
    const messages = rawInput === undefined || rawInput === null
      ? undefined
      : yield* decodeMessages(row, options.inputKey, rawInput)
    let metadata: Schema.JsonObject = {}
    if (rawMetadata !== undefined && rawMetadata !== null) {
      if (!isJsonObject(rawMetadata)) {
        return yield* fail(row, options.metadataKey, `metadata must be a JSON object, got ${describe(rawMetadata)}`)
      }
      metadata = rawMetadata
    }
    let label: Schema.Json | undefined
    if (options.labelKey !== undefined) {
      const rawLabel = record[options.labelKey]
      if (rawLabel !== undefined) {
        if (!isJson(rawLabel)) return yield* fail(row, options.labelKey, "the label must be a JSON value")
        label = rawLabel
      }
    }
    const images = yield* collectImages(row, record, options)
    const placeholders = (messages ?? []).reduce((n, message) => n + countPlaceholders(message), 0)
    if (images.length !== placeholders) {
      const field = Object.values(options.multimodalKeys ?? {})[0] ?? options.inputKey
      return yield* fail(
        row,
        field,
        `${images.length} image(s) but ${placeholders} ${ImagePlaceholder} placeholder(s) in '${options.inputKey}'; ` +
          `each image needs exactly one ${ImagePlaceholder} placeholder`
      )
    }
    const prepared: Prepared = { metadata, images }
    return {
      ...prepared,
      ...(messages === undefined ? {} : { messages }),
      ...(label === undefined ? {} : { label })
    }
  })

const imagePart = (url: string): Schema.JsonObject => ({ type: "image_url", image_url: { url } })

const splitText = (text: string, next: () => string): ReadonlyArray<Schema.JsonObject> => {
  const segments = text.split(ImagePlaceholder)
  const parts: Array<Schema.JsonObject> = []
  segments.forEach((segment, index) => {
    if (index > 0) parts.push(imagePart(next()))
    if (segment.length > 0) parts.push({ type: "text", text: segment })
  })
  return parts
}

/**
 * Replace every `<image>` placeholder, in order, with an OpenAI `image_url` part holding the next URL.
 *
 * **Details**
 * A string content with placeholders becomes a part list (`image_url` / `text` parts, empty text dropped); a
 * content without placeholders is left as it is. `urls` must hold one URL per placeholder (as {@link fromRow}
 * guarantees for `Prepared.images`).
 */
export const attachImages = (
  messages: ReadonlyArray<Schema.JsonObject>,
  urls: ReadonlyArray<string>
): ReadonlyArray<Schema.JsonObject> => {
  let cursor = 0
  const next = (): string => {
    const url = urls[cursor++]
    if (url === undefined) throw new RangeError(`attachImages: ${urls.length} URL(s) for more placeholders`)
    return url
  }
  return messages.map((message) => {
    const content = message["content"]
    if (typeof content === "string") {
      return content.includes(ImagePlaceholder) ? { ...message, content: splitText(content, next) } : message
    }
    if (Array.isArray(content)) {
      const parts = content.flatMap((part): ReadonlyArray<Schema.Json> =>
        isJsonObject(part) && part["type"] === "text" && typeof part["text"] === "string" &&
          part["text"].includes(ImagePlaceholder)
          ? splitText(part["text"], next)
          : [part]
      )
      return { ...message, content: parts }
    }
    return message
  })
}

/** The `session_input.json` content of a prepared row, given one resolved URL per image. */
export const toInputFile = (prepared: Prepared, urls: ReadonlyArray<string>): SessionInputFile =>
  prepared.messages === undefined
    ? { metadata: prepared.metadata }
    : { messages: attachImages(prepared.messages, urls), metadata: prepared.metadata }
