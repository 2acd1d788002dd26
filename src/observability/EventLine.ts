/**
 * The text of the operator's lines (docs/outputs.md "Event lines"): `AGENTIC ROLLOUT event=<event> key=value ...`
 * and `AGENTIC <message>`, with field values printed as the reference prints them (Python's `str`).
 *
 * **Details**
 * On a TTY the label is an ANSI badge and the body magenta; otherwise plain text that `grep` finds. A field whose
 * value is `undefined` or `null` is left out. Where the lines go is layers/observability/Telemetry.ts.
 */

/** A value an event line can carry. */
export type FieldValue =
  | string
  | number
  | boolean
  | null
  | undefined
  | { readonly [key: string]: string | number | boolean | null }

const RESET = "\u001b[0m"
const MAGENTA = "\u001b[1;38;5;213m"
const badge = (label: string, background: number, tty: boolean): string =>
  tty ? `\u001b[48;5;${background}m\u001b[1;38;5;231m ${label} ${RESET}` : label

/** Python `str()` of a value, as the reference's log helper renders fields. */
export const pythonStr = (value: Exclude<FieldValue, undefined>): string => {
  if (value === null) return "None"
  if (typeof value === "boolean") return value ? "True" : "False"
  if (typeof value === "number") {
    return Number.isFinite(value)
      ? String(value)
      : value > 0
      ? "inf"
      : value < 0
      ? "-inf"
      : "nan"
  }
  if (typeof value === "string") return value
  const entries = Object.entries(value).map(([k, v]) => `'${k}': ${typeof v === "string" ? `'${v}'` : pythonStr(v)}`)
  return `{${entries.join(", ")}}`
}

/** The event line without a trailing newline. */
export const formatEvent = (
  event: string,
  fields: Readonly<Record<string, FieldValue>>,
  tty: boolean
): string => {
  const parts = [`event=${event}`]
  for (const [key, value] of Object.entries(fields)) {
    if (value === undefined || value === null) continue
    parts.push(`${key}=${pythonStr(value)}`)
  }
  const body = parts.join(" ")
  return `${badge("AGENTIC ROLLOUT", 60, tty)} ${tty ? `${MAGENTA}${body}${RESET}` : body}`
}

/** `AGENTIC <message>` */
export const formatStatus = (message: string, tty: boolean): string =>
  `${badge("AGENTIC", 54, tty)} ${tty ? `${MAGENTA}${message}${RESET}` : message}`
