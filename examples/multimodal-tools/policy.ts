/**
 * The embedded engine's policy for the multimodal example (`--embedded-policy examples/multimodal-tools/policy.ts#policy`):
 * a scripted vision model that really looks at the images it is sent.
 *
 * **Details**
 * First turn: it looks at the task's image at low resolution (40 x 30, one "cell" per 16 x 16 pixels), where the small
 * square shows as a faint spot whose colour is washed out, and calls `zoom` on a 96 x 96 region around the spot.
 * Next turn: it reads the zoomed view in the tool observation (the image the tool returned, as the engine received it)
 * and names the colour of the pixels that differ from the background, or says it sees none. About three Sessions in
 * ten misjudge where the spot is and zoom into the mirrored place, where there is nothing (decided by the image and the
 * request's sampling seed, so the same seed gives the same samples): their answer is wrong. The text uses the Qwen3
 * formats the `qwen3` reasoning parser and the `qwen25` tool-call parser read.
 */
import { createHash } from "node:crypto"
import sharp from "sharp"
import type * as Engine from "../../layers/engine/Engine.ts"
import * as Colours from "./colours.ts"

type Message = Engine.PolicyRequest["messages"][number]

/** The `image_url` URLs of a message, in order. */
const imagesOf = (message: Message | undefined): Array<string> =>
  message === undefined || typeof message.content === "string"
    ? []
    : message.content.flatMap((part) => {
      const image = part["image_url"]
      // A content part is JSON: read its url field without trusting the shape.
      const url = typeof image === "object" && image !== null ? (image as Record<string, unknown>)["url"] : undefined
      return part["type"] === "image_url" && typeof url === "string" ? [url] : []
    })

const decode = (url: string): Buffer => Buffer.from(url.slice(url.indexOf(",") + 1), "base64")

/** The image's pixels at `width` x `height` (RGB). */
const pixels = async (url: string, width?: number, height?: number) => {
  const image = sharp(decode(url)).removeAlpha()
  const { data, info } = await (width === undefined ? image : image.resize(width, height, { fit: "fill" }))
    .raw()
    .toBuffer({ resolveWithObject: true })
  const at = (i: number): Colours.Rgb => ({ r: data[3 * i]!, g: data[3 * i + 1]!, b: data[3 * i + 2]! })
  return { width: info.width, height: info.height, count: info.width * info.height, at }
}

const errs = (image: string, seed: number | string): boolean =>
  createHash("sha256").update(`${seed}\n${image}`).digest()[0]! % 10 < 3

const toolCall = (thought: string, args: Record<string, number>): string =>
  `<think>\n${thought}\n</think>\n\n<tool_call>\n${JSON.stringify({ name: "zoom", arguments: args })}\n</tool_call>`

/** First turn: find the spot in a 40 x 30 view and zoom around it. */
const locate = async (image: string, seed: number | string): Promise<string> => {
  const full = await sharp(decode(image)).metadata()
  const view = await pixels(image, 40, 30)
  let spot = 0
  for (let i = 1; i < view.count; i++) {
    if (Colours.distance(view.at(i), Colours.background) > Colours.distance(view.at(spot), Colours.background)) spot = i
  }
  const cell = (full.width ?? 640) / view.width
  const centerX = ((spot % view.width) + 0.5) * cell
  const centerY = (Math.floor(spot / view.width) + 0.5) * cell
  // The mistake: the spot taken for its mirror image.
  const x = errs(image, seed) ? (full.width ?? 640) - centerX : centerX
  const clamp = (v: number, size: number) => Math.round(Math.max(0, Math.min(size - 96, v - 48)))
  return toolCall(
    `There is a small spot near (${Math.round(x)}, ${
      Math.round(centerY)
    }), too small to tell its colour. I will zoom in.`,
    { x: clamp(x, full.width ?? 640), y: clamp(centerY, full.height ?? 480), width: 96, height: 96 }
  )
}

/** Next turn: name the colour of the zoomed view's non-background pixels. */
const identify = async (zoomed: string): Promise<string> => {
  const view = await pixels(zoomed)
  const sum = { r: 0, g: 0, b: 0, n: 0 }
  for (let i = 0; i < view.count; i++) {
    const p = view.at(i)
    if (Colours.distance(p, Colours.background) < 40 * 40) continue
    sum.r += p.r
    sum.g += p.g
    sum.b += p.b
    sum.n++
  }
  const seen = `The zoomed view (${view.width} x ${view.height})`
  if (sum.n === 0) return `<think>\n${seen} is plain grey.\n</think>\n\nI do not see a coloured square there.`
  const name = Colours.nearest({ r: sum.r / sum.n, g: sum.g / sum.n, b: sum.b / sum.n })
  return `<think>\n${seen} shows a ${name} square.\n</think>\n\nThe square is ${name}.`
}

export const policy = async (request: Engine.PolicyRequest): Promise<string> => {
  const last = request.messages[request.messages.length - 1]
  if (last?.role === "tool") {
    const zoomed = imagesOf(last)[0]
    return zoomed === undefined ? "<think>\nThe zoom failed.\n</think>\n\nI cannot tell." : identify(zoomed)
  }
  const image = request.messages.flatMap(imagesOf)[0]
  if (image === undefined) return "I see no image, so I cannot answer."
  return locate(image, request.seed ?? request.sessionId)
}

export default policy
