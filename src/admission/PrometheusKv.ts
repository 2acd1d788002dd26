/**
 * A worker's KV figures from its Prometheus `/metrics` text (docs/sglang.md "KV scheduling"), as Relax reads them.
 *
 * **Details**
 * Reads `sglang:max_total_num_tokens`, `sglang:num_used_tokens`, `sglang:token_usage` and `sglang:full_token_usage`;
 * labels are ignored and duplicate lines (one per TP / DP rank) are combined by their maximum. Usage is `token_usage`,
 * else `full_token_usage`, else (when that is 0 and the capacity is > 0) `num_used_tokens ÷ capacity`. A text without
 * `sglang:max_total_num_tokens` is `undefined`: the server runs without `--enable-metrics`, or is not SGLang.
 */

/** One worker's figures. */
export interface KvFigures {
  readonly maxTotalNumTokens: number
  readonly usedTokens: number
  readonly usage: number
}

const names = [
  "sglang:max_total_num_tokens",
  "sglang:num_used_tokens",
  "sglang:token_usage",
  "sglang:full_token_usage"
] as const

/** The figures in `text`, or `undefined` when it has no `sglang:max_total_num_tokens`. */
export const parse = (text: string): KvFigures | undefined => {
  const found = new Map<string, number>()
  for (const line of text.split("\n")) {
    if (line.length === 0 || line.startsWith("#")) continue
    const name = names.find((n) => line.startsWith(n) && (line[n.length] === "{" || line[n.length] === " "))
    if (name === undefined) continue
    const rest = line[name.length] === "{" ? line.slice(line.lastIndexOf("}") + 1) : line.slice(name.length)
    const value = Number(rest.trim().split(/\s+/)[0])
    if (!Number.isFinite(value)) continue
    found.set(name, Math.max(found.get(name) ?? -Infinity, value))
  }
  const capacity = found.get("sglang:max_total_num_tokens")
  if (capacity === undefined) return undefined
  const used = found.get("sglang:num_used_tokens") ?? 0
  const usage = found.get("sglang:token_usage") ?? found.get("sglang:full_token_usage") ?? 0
  return {
    maxTotalNumTokens: capacity,
    usedTokens: used,
    usage: usage === 0 && capacity > 0 ? used / capacity : usage
  }
}

/** The gauges as a worker serves them (what the SGLang double and the embedded engine's `/metrics` write). */
export const render = (figures: KvFigures, labels = "model_name=\"relax\""): string =>
  [
    "# TYPE sglang:max_total_num_tokens gauge",
    `sglang:max_total_num_tokens{${labels}} ${figures.maxTotalNumTokens}`,
    "# TYPE sglang:num_used_tokens gauge",
    `sglang:num_used_tokens{${labels}} ${figures.usedTokens}`,
    "# TYPE sglang:token_usage gauge",
    `sglang:token_usage{${labels}} ${figures.usage}`,
    ""
  ].join("\n")
