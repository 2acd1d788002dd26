/**
 * The report of `relax-agentic check --probe-engine` (docs/sglang.md, "Check your SGLang"): one row per behaviour of
 * SGLang the gateway relies on, with what was sent, what was expected, what was seen and a verdict.
 *
 * **Details**
 * - `ok`: the server behaves as relax-agentic relies on;
 * - `differs-but-handled`: it behaves otherwise, and relax-agentic copes (the row says how, and what it costs);
 * - `breaks`: a rollout on this server would fail or record wrong samples; the check exits non-zero;
 * - `skipped`: not probed (a flag it needs is not set, or the request budget ran out).
 */
import { Schema } from "effect"

export const Verdict = Schema.Literals(["ok", "differs-but-handled", "breaks", "skipped"])
export type Verdict = typeof Verdict.Type

export const Row = Schema.Struct({
  /** A short name of the behaviour. */
  name: Schema.String,
  /** What relax-agentic relies on. */
  relied: Schema.String,
  sent: Schema.String,
  expected: Schema.String,
  seen: Schema.String,
  verdict: Verdict,
  /** Where docs/sglang.md explains the row. */
  doc: Schema.String
})
export type Row = typeof Row.Type

export const Report = Schema.Struct({
  /** The servers probed. */
  targets: Schema.Array(Schema.String),
  /** `/generate` requests the probe sent, and its budget. */
  requests: Schema.Int,
  budget: Schema.Int,
  rows: Schema.Array(Row)
})
export type Report = typeof Report.Type

/** The anchor every row's explanation is under. */
export const docSection = "docs/sglang.md#check-your-sglang"

/** Whether a row breaks a rollout (the check then exits non-zero). */
export const breaks = (report: Report): boolean => report.rows.some((row) => row.verdict === "breaks")

const mark: Record<Verdict, string> = {
  ok: "OK    ",
  "differs-but-handled": "DIFFERS",
  breaks: "BREAKS",
  skipped: "SKIP  "
}

/** The report as the check prints it: one block per row. */
export const render = (report: Report): string => {
  const lines = [
    `SGLang conformance probe of ${report.targets.join(", ")} (${report.requests} of ${report.budget} /generate ` +
    "requests)"
  ]
  for (const row of report.rows) {
    lines.push(
      `[${mark[row.verdict]}] ${row.name}`,
      `    relied on: ${row.relied}`,
      `    sent:      ${row.sent}`,
      `    expected:  ${row.expected}`,
      `    seen:      ${row.seen}`,
      `    docs:      ${row.doc}`
    )
  }
  const count = (verdict: Verdict) => report.rows.filter((row) => row.verdict === verdict).length
  lines.push(
    `${count("ok")} ok, ${count("differs-but-handled")} differ but handled, ${count("breaks")} break, ` +
      `${count("skipped")} skipped.`
  )
  return lines.join("\n")
}
