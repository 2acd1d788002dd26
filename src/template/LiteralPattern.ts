/**
 * Regular expressions that find literal strings (special-token literals, added-token contents) in text.
 */

/** `text` with every regular-expression metacharacter escaped. */
export const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/**
 * A pattern matching any of `literals` (empty ones left out), longest first: at a position where several match, the
 * longest wins, and a search finds the leftmost match. `undefined` when there is no literal to match.
 */
export const alternation = (literals: ReadonlyArray<string>, flags = ""): RegExp | undefined => {
  const distinct = [...new Set(literals)].filter((literal) => literal.length > 0).sort((a, b) => b.length - a.length)
  return distinct.length === 0 ? undefined : new RegExp(distinct.map(escapeRegExp).join("|"), flags)
}
