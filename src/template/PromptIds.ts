/**
 * The token ids of recently encoded root observations (a Session's first request: its whole rendered prompt), by
 * their text, so that the Sessions of a Group, which start from one prompt, tokenize it once.
 *
 * **Details**
 * A root observation is the whole conversation rendered with the generation prompt (src/template/ObservationDelta.ts
 * `rootPlan`), often thousands of tokens; its encode is the largest part of a Session's first request (the
 * pre-tokenizer and the BPE step over every character). The n samples of a Group send the same first request, and
 * every retry of a prompt renders the same text again. Ids are a function of the text alone (the tokenizer is fixed
 * for the process), so a text seen before gets the ids it had; the Map compares whole texts, never a digest. What is
 * kept (each text and its ids) is bounded by `maxBytes` in all, least recently used first out; `0` keeps nothing.
 * The ids handed out are frozen: every holder shares them.
 */

/** A kept entry's weight: the text (at most 2 bytes a character) and its ids (8 bytes each as a JS array). */
const weight = (text: string, ids: ReadonlyArray<number>): number => text.length * 2 + ids.length * 8 + 64

/** Root observation ids by their text (see the module's details). */
export class PromptIds {
  private readonly kept = new Map<string, ReadonlyArray<number>>()
  private bytes = 0

  private readonly maxBytes: number

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes
  }

  /** The ids kept for `text` (and it becomes the most recently used), or `undefined`. */
  get(text: string): ReadonlyArray<number> | undefined {
    const ids = this.kept.get(text)
    if (ids === undefined) return undefined
    this.kept.delete(text)
    this.kept.set(text, ids)
    return ids
  }

  /**
   * Keep `ids` as the ids of `text` (when they fit under the bound); returns the ids to use, frozen when kept (the
   * array given is not copied: the caller hands it over).
   */
  keep(text: string, ids: ReadonlyArray<number>): ReadonlyArray<number> {
    const w = weight(text, ids)
    if (w > this.maxBytes) return ids
    const old = this.kept.get(text)
    if (old !== undefined) {
      this.kept.delete(text)
      this.bytes -= weight(text, old)
    }
    const frozen = Object.freeze(ids)
    this.kept.set(text, frozen)
    this.bytes += w
    for (const [oldest, oldIds] of this.kept) {
      if (this.bytes <= this.maxBytes) break
      this.kept.delete(oldest)
      this.bytes -= weight(oldest, oldIds)
    }
    return frozen
  }

  /** Bytes kept in all, by the weight above (tests). */
  get size(): number {
    return this.bytes
  }

  /** How many texts are kept (tests). */
  get count(): number {
    return this.kept.size
  }
}

/** The default bound: about 300 prompts of 14 KB (3,500 tokens) each. */
export const defaultBytes = 16 * 1024 * 1024
