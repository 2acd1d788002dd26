import * as SeededRandom from "../support/SeededRandom.ts"

/** Chunkings of a text used to check that streaming gives the one-shot result. */
export const splits = (text: string): ReadonlyArray<ReadonlyArray<string>> => {
  const chars = Array.from(text)
  const out: Array<Array<string>> = []
  for (const size of [1, 2, 3, 5, 8, 13]) {
    const chunks: Array<string> = []
    for (let i = 0; i < chars.length; i += size) chunks.push(chars.slice(i, i + size).join(""))
    out.push(chunks)
  }
  // Every two-way split, and a seeded pseudo-random multi-way split.
  for (let i = 0; i <= chars.length; i++) out.push([chars.slice(0, i).join(""), chars.slice(i).join("")])
  const random = SeededRandom.floats(chars.length * 7919 + 17)
  for (let k = 0; k < 5; k++) {
    const chunks: Array<string> = []
    for (let i = 0; i < chars.length;) {
      const n = 1 + Math.floor(random() * 12)
      chunks.push(chars.slice(i, i + n).join(""), "")
      i += n
    }
    out.push(chunks)
  }
  return out
}
