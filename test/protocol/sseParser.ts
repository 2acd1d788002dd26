/**
 * A tiny SSE parser for the protocol tests: it reads wire text back into frames the way an EventSource does
 * (comment lines, `event:` names, multi-line `data:`), so tests assert on what a client would see.
 */
export interface ParsedEvent {
  readonly event: string | undefined
  readonly data: string
}

export interface Parsed {
  readonly comments: ReadonlyArray<string>
  readonly events: ReadonlyArray<ParsedEvent>
}

export const parseSse = (text: string): Parsed => {
  const comments: Array<string> = []
  const events: Array<ParsedEvent> = []
  if (!text.endsWith("\n\n") && text.length > 0) throw new Error(`SSE text does not end with a blank line: ${text}`)
  for (const block of text.split(/\r\n\r\n|\n\n|\r\r/)) {
    if (block === "") continue
    let event: string | undefined
    const data: Array<string> = []
    for (const line of block.split(/\r\n|\r|\n/)) {
      if (line.startsWith(":")) {
        comments.push(line.slice(1).trimStart())
        continue
      }
      const colon = line.indexOf(":")
      const field = colon === -1 ? line : line.slice(0, colon)
      const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "")
      if (field === "event") event = value
      else if (field === "data") data.push(value)
      else throw new Error(`unexpected SSE field ${field}`)
    }
    if (data.length > 0) events.push({ event, data: data.join("\n") })
  }
  return { comments, events }
}

/** The JSON payloads of the parsed events (`[DONE]` kept as the string). */
export const payloads = (parsed: Parsed): ReadonlyArray<unknown> =>
  parsed.events.map((e) => (e.data === "[DONE]" ? e.data : JSON.parse(e.data)))
