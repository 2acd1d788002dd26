/**
 * `mistral`: `[TOOL_CALLS] [{"name": "f", "arguments": {...}}, …]`, or the newer `[TOOL_CALLS]NAME[ARGS]{...}`.
 *
 * **Details**
 * Each array element with a `name` becomes a call (arguments kept as the model's JSON text); an element that is not a
 * call object is malformed. When the JSON after `[TOOL_CALLS]` can never become valid, the rest of the text is malformed.
 */
import * as Json from "../../json/Json.ts"
import * as MarkerScan from "../MarkerScan.ts"
import * as ToolCallParser from "../ToolCallParser.ts"

const marker = "[TOOL_CALLS]"
const argsMarker = "[ARGS]"

const rule: MarkerScan.Rule = {
  start: marker,
  read: (text, at, final) => {
    const rest = (): MarkerScan.Block | undefined =>
      final ? { events: [ToolCallParser.malformed(text.slice(at))], end: text.length } : undefined
    let i = at + marker.length
    while (i < text.length && /\s/.test(text[i] ?? "")) i++
    if (i >= text.length) return rest()
    if (text[i] === "[") {
      const r = Json.readValue(text, i)
      if (r._tag !== "Ok") return rest()
      const events = r.spanned.elements.map((element) => {
        const raw = text.slice(element.start, element.end)
        const parsed = MarkerScan.callFromSpanned(text, element)
        return parsed === undefined
          ? ToolCallParser.malformed(raw)
          : ToolCallParser.call(parsed.name, parsed.arguments, raw)
      })
      return {
        events: events.length === 0 ? [ToolCallParser.malformed(text.slice(at, r.spanned.end))] : events,
        end: r.spanned.end
      }
    }
    const name = /^[A-Za-z0-9_.-]+/.exec(text.slice(i))?.[0] ?? ""
    const afterName = i + name.length
    const tail = text.slice(afterName, afterName + argsMarker.length)
    if (name === "" || tail !== argsMarker) {
      // Still possibly `NAME[ARGS]` when the text ends inside it.
      return !final && afterName + tail.length >= text.length && argsMarker.startsWith(tail) ? undefined : rest()
    }
    const r = Json.readValue(text, afterName + argsMarker.length)
    if (r._tag !== "Ok") return rest()
    return {
      events: [
        ToolCallParser.call(
          name,
          ToolCallParser.jsonText(text.slice(r.spanned.start, r.spanned.end)),
          text.slice(at, r.spanned.end)
        )
      ],
      end: r.spanned.end
    }
  }
}

export const format: ToolCallParser.Format = MarkerScan.format([rule])
