/**
 * The multimodal example's harness: a vision agent with a `zoom` tool, through the official `openai` client pointed at
 * RELAX_BASE_URL, as the guide's deepeyes example does.
 *
 * **Details**
 * The task's image arrives in RELAX_INPUT_JSON already as OpenAI `image_url` content (relax-agentic converted the
 * dataset's `<image>` placeholder and path). The model may call `zoom` with a region of that image; the tool crops the
 * region with sharp, scales it to 224 x 224, and answers with a **tool observation that carries the image** as
 * `image_url` content, so the next request shows the model the zoomed view. The reward is 1 when the final answer
 * names the square's colour (`metadata.answer`), with the number of zooms as a helper metric.
 */
import { writeFileSync } from "node:fs"
import OpenAI from "openai"
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions"
import sharp from "sharp"
import * as ChatAgent from "../chatAgent.ts"

interface SessionInput {
  readonly messages?: Array<ChatCompletionMessageParam>
  readonly metadata?: { readonly answer?: string; readonly task_id?: string }
}

/** The side of the zoomed view the tool returns, in pixels. */
export const zoomSize = 224

const zoomTool: ChatCompletionTool = {
  type: "function",
  function: {
    name: "zoom",
    description: `Crop a region of the input image and see it enlarged to ${zoomSize} x ${zoomSize} pixels.`,
    parameters: {
      type: "object",
      properties: {
        x: { type: "integer", description: "left edge, in pixels of the input image" },
        y: { type: "integer", description: "top edge" },
        width: { type: "integer" },
        height: { type: "integer" }
      },
      required: ["x", "y", "width", "height"]
    }
  }
}

/** The first `image_url` of the messages, decoded. */
const firstImage = (messages: ReadonlyArray<ChatCompletionMessageParam>): Buffer => {
  for (const message of messages) {
    if (!Array.isArray(message.content)) continue
    for (const part of message.content) {
      if (part.type === "image_url") {
        const url = part.image_url.url
        const comma = url.indexOf(",")
        if (!url.startsWith("data:") || comma < 0) {
          throw new Error(`expected a data: URI image, got ${url.slice(0, 40)}`)
        }
        return Buffer.from(url.slice(comma + 1), "base64")
      }
    }
  }
  throw new Error("the task has no image")
}

/** Crop `region` (clamped to the image) and scale it to the zoomed view: a PNG data URI. */
const zoom = async (
  image: Buffer,
  args: Record<string, unknown>
): Promise<{ readonly text: string; readonly url?: string }> => {
  const { width = 0, height = 0 } = await sharp(image).metadata()
  const num = (key: string) => Math.round(Number(args[key]))
  const left = Math.max(0, Math.min(width - 1, num("x")))
  const top = Math.max(0, Math.min(height - 1, num("y")))
  const w = Math.min(width - left, num("width"))
  const h = Math.min(height - top, num("height"))
  if (!(w > 0 && h > 0)) {
    return { text: `error: the region ${JSON.stringify(args)} is empty or outside the ${width} x ${height} image` }
  }
  const png = await sharp(image).extract({ left, top, width: w, height: h }).resize(zoomSize, zoomSize).png().toBuffer()
  return {
    text: `zoomed into x=${left} y=${top} width=${w} height=${h}`,
    url: `data:image/png;base64,${png.toString("base64")}`
  }
}

const main = async () => {
  const input = ChatAgent.readInput<SessionInput>()
  const client = new OpenAI({
    baseURL: ChatAgent.env("RELAX_BASE_URL"),
    apiKey: ChatAgent.env("RELAX_SESSION_ID"),
    timeout: 9_999_000,
    maxRetries: 0
  })
  const messages: Array<ChatCompletionMessageParam> = [
    { role: "system", content: "You answer questions about images. Use the zoom tool to look at small details." },
    ...(input.messages ?? [])
  ]
  const image = firstImage(messages)
  let zooms = 0
  const final = await ChatAgent.toolLoop({
    client,
    messages,
    tools: [zoomTool],
    maxTurns: 5,
    answer: async (call) => {
      zooms++
      let args: Record<string, unknown> = {}
      try {
        args = JSON.parse(call.function.arguments) as Record<string, unknown>
      } catch {
        // an unreadable call zooms nowhere: the tool says the region is empty
      }
      const view = await zoom(image, args)
      // The observation carries the zoomed image as image_url content.
      return view.url === undefined
        ? view.text
        : [{ type: "text", text: view.text }, { type: "image_url", image_url: { url: view.url } }]
    }
  })
  const answer = input.metadata?.answer
  const correct = answer !== undefined && new RegExp(`\\b${answer}\\b`, "i").test(final)
  writeFileSync(
    ChatAgent.env("RELAX_OUTPUT_JSON"),
    JSON.stringify({
      metadata: { task_id: input.metadata?.task_id ?? null, zooms },
      reward: { score: correct ? 1 : 0, zooms }
    })
  )
}

ChatAgent.runAgent(main)
