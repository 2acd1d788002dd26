/**
 * `gpt-oss`: Harmony tool calls, `<|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{json}<|call|>`.
 *
 * **Details**
 * The name is the recipient's part after the last `.`. Analysis-channel messages (reasoning) are not content and are
 * left out, as SGLang does; the content of other messages (final, commentary preambles) is plain text.
 */
import * as Harmony from "../Harmony.ts"
import * as ToolCallParser from "../ToolCallParser.ts"

export const format: ToolCallParser.Format = {
  scanner: () => ({
    step: (text, final) => {
      const { consumed, items } = Harmony.scan(text, final)
      const events = items.flatMap((item): ReadonlyArray<ToolCallParser.Event> => {
        if (item._tag === "Text") return [ToolCallParser.text(item.text)]
        if (item.recipient !== undefined) {
          const name = item.recipient.split(".").at(-1) ?? ""
          return [ToolCallParser.call(name, ToolCallParser.jsonText(item.content), item.raw)]
        }
        if (item.channel === "analysis") return []
        return [ToolCallParser.text(item.content)]
      })
      return { events, consumed }
    }
  })
}
