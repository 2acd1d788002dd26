/**
 * OpenAI Harmony message framing (gpt-oss), shared by the `gpt-oss` tool-call and reasoning parsers.
 *
 * **Details**
 * A message is `[<|start|>ROLE]<|channel|>CHANNEL[ to=RECIPIENT][<|constrain|>json]<|message|>CONTENT` ended by
 * `<|end|>`, `<|call|>` or `<|return|>` (or by the next message's header, or the end of the output). The first message
 * usually has no `<|start|>assistant` because the generation prompt already holds it. Text outside any message is
 * plain text.
 */
import * as MarkerScan from "./MarkerScan.ts"

export type Item =
  | { readonly _tag: "Text"; readonly text: string }
  | {
    readonly _tag: "Message"
    readonly channel: string | undefined
    readonly recipient: string | undefined
    readonly content: string
    /** The whole message, markers included. */
    readonly raw: string
  }

const headerStarts = ["<|start|>", "<|channel|>"]
const contentEnds = ["<|end|>", "<|call|>", "<|return|>"]
const messageMarker = "<|message|>"

/** Split text into plain text and messages; unless `final`, stops before an unfinished message. */
export const scan = (
  text: string,
  final: boolean
): { readonly items: ReadonlyArray<Item>; readonly consumed: number } => {
  const items: Array<Item> = []
  const push = (s: string) => {
    if (s !== "") items.push({ _tag: "Text", text: s })
  }
  let i = 0
  for (;;) {
    const next = MarkerScan.earliest(text, i, headerStarts)
    if (next === undefined) {
      const hold = final ? 0 : MarkerScan.partialSuffix(text, i, headerStarts)
      push(text.slice(i, text.length - hold))
      return { items, consumed: text.length - hold }
    }
    push(text.slice(i, next.at))
    const at = next.at
    const bodyAt = text.indexOf(messageMarker, at)
    const nextHeader = MarkerScan.earliest(text, at + next.marker.length, ["<|start|>"])
    const headerEnd = bodyAt >= 0 && (nextHeader === undefined || bodyAt < nextHeader.at) ? bodyAt : -1
    if (headerEnd < 0 && (!final && nextHeader === undefined)) return { items, consumed: at }
    const header = text.slice(at, headerEnd < 0 ? (nextHeader?.at ?? text.length) : headerEnd)
    let content = ""
    let end = at + header.length
    if (headerEnd >= 0) {
      const contentAt = headerEnd + messageMarker.length
      const stop = MarkerScan.earliest(text, contentAt, [...contentEnds, ...headerStarts])
      if (stop === undefined && !final) return { items, consumed: at }
      const contentEnd = stop?.at ?? text.length
      content = text.slice(contentAt, contentEnd)
      end = stop === undefined
        ? text.length
        : contentEnds.includes(stop.marker)
        ? stop.at + stop.marker.length
        : stop.at
    }
    items.push({
      _tag: "Message",
      channel: /<\|channel\|>\s*([A-Za-z0-9_]+)/.exec(header)?.[1],
      recipient: /\bto=([^\s<]+)/.exec(header)?.[1],
      content,
      raw: text.slice(at, end)
    })
    i = end
  }
}
