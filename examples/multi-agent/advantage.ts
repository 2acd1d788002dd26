/**
 * The multi-agent example's custom advantage (`--agentic-custom-advantage-path examples/multi-agent/advantage.ts#advantage`).
 *
 * Input: one record per Session of the Group, in Group order, keyed by export name, holding each export's metadata.
 * Output: the same shape with one number per context. `main` gets its outcome centered over the Group; every searcher
 * gets the same centered outcome scaled by its usefulness (1 when its finding contained the answer, else 0), so an
 * unhelpful searcher keeps its context with zero credit.
 */
type Metadata = Readonly<Record<string, unknown>>

const numberOf = (value: unknown): number => (typeof value === "number" && Number.isFinite(value) ? value : 0)

export const advantage = (
  metadataBySession: ReadonlyArray<Readonly<Record<string, Metadata>>>
): Array<Record<string, number>> => {
  const outcomes = metadataBySession.map((contexts) => numberOf(contexts["main"]?.["outcome"]))
  const mean = outcomes.reduce((sum, outcome) => sum + outcome, 0) / outcomes.length
  return metadataBySession.map((contexts, i) => {
    const centered = outcomes[i]! - mean
    return Object.fromEntries(
      Object.entries(contexts).map((
        [name, metadata]
      ) => [name, name === "main" ? centered : centered * numberOf(metadata["usefulness"])])
    )
  })
}

export default advantage
