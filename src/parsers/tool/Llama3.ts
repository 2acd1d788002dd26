/**
 * `llama3`: `<|python_tag|>{"name": "f", "parameters": {...}}`, several separated by `;` (or repeated tags), or an
 * output that starts with a bare `{`.
 *
 * **Details**
 * Objects are read one after another; text that cannot be read as JSON up to the next `{` is malformed (it stays in
 * the text), and the first character that is neither JSON nor a separator ends the calls: the rest is plain text.
 */
import * as Json from "../../json/Json.ts"
import * as MarkerScan from "../MarkerScan.ts"
import * as ToolCallParser from "../ToolCallParser.ts"

const tag = "<|python_tag|>"

/** Read `{…}; {…}` from `from`; `undefined` = needs more text. */
const readSequence = (text: string, from: number, final: boolean): MarkerScan.Block | undefined => {
  const events: Array<ToolCallParser.Event> = []
  let i = from
  let end = from
  let skipped = ""
  const flushSkipped = () => {
    if (skipped !== "") events.push(ToolCallParser.malformed(skipped))
    skipped = ""
  }
  for (;;) {
    while (i < text.length && (/\s/.test(text[i] ?? "") || text[i] === ";")) i++
    if (text.startsWith(tag, i)) {
      i += tag.length
      end = i
      continue
    }
    if (i >= text.length || (!final && tag.startsWith(text.slice(i)))) {
      if (!final) return undefined
      flushSkipped()
      return { events, end: skipped === "" ? end : text.length }
    }
    if (text[i] !== "{") {
      flushSkipped()
      return { events, end }
    }
    const r = Json.readValue(text, i)
    if (r._tag === "Incomplete") {
      if (!final) return undefined
      skipped += text.slice(i)
      flushSkipped()
      return { events, end: text.length }
    }
    if (r._tag === "Invalid") {
      const next = text.indexOf("{", i + 1)
      const stop = next < 0 ? text.length : next
      skipped += text.slice(i, stop)
      i = stop
      end = stop
      if (next < 0) {
        flushSkipped()
        return { events, end }
      }
      continue
    }
    flushSkipped()
    const raw = text.slice(r.spanned.start, r.spanned.end)
    const parsed = MarkerScan.callFromSpanned(text, r.spanned)
    events.push(
      parsed === undefined ? ToolCallParser.malformed(raw) : ToolCallParser.call(parsed.name, parsed.arguments, raw)
    )
    i = r.spanned.end
    end = i
  }
}

const rules: ReadonlyArray<MarkerScan.Rule> = [{ start: tag, read: (text, at, final) => readSequence(text, at, final) }]

export const format: ToolCallParser.Format = {
  scanner: () => {
    let atStart = true
    return {
      step: (text, final) => {
        if (atStart) {
          const lead = text.length - text.trimStart().length
          if (lead === text.length && !final) return { events: [], consumed: 0 }
          atStart = false
          if (text[lead] === "{") {
            const block = readSequence(text, lead, final)
            if (block === undefined) {
              atStart = true
              return { events: [], consumed: 0 }
            }
            const rest = MarkerScan.scanRules(text, final, rules, block.end)
            return {
              events: [ToolCallParser.text(text.slice(0, lead)), ...block.events, ...rest.events],
              consumed: rest.consumed
            }
          }
        }
        return MarkerScan.scanRules(text, final, rules)
      }
    }
  }
}
