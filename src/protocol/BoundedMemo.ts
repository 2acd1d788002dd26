/**
 * A bounded memo from strings to strings, for a pure text function that sees the same inputs again and again (an
 * agent echoes its whole history on every request).
 *
 * **Details**
 * Two generations: new entries go into the current one; when it holds `generationChars` characters (keys and values
 * together), it becomes the previous one and the oldest is dropped, and an entry found in the previous generation
 * moves back into the current one. So at most twice `generationChars` characters are held, and what is still in use
 * survives a turnover. An entry larger than a quarter of a generation is not kept.
 */
export class TextMemo {
  private current = new Map<string, string>()
  private previous = new Map<string, string>()
  private chars = 0

  private readonly generationChars: number

  constructor(generationChars: number) {
    this.generationChars = generationChars
  }

  get(key: string): string | undefined {
    const hit = this.current.get(key)
    if (hit !== undefined) return hit
    const old = this.previous.get(key)
    if (old !== undefined) this.set(key, old)
    return old
  }

  set(key: string, value: string): void {
    const size = key.length + value.length
    if (size > this.generationChars / 4) return
    if (this.chars + size > this.generationChars) {
      this.previous = this.current
      this.current = new Map()
      this.chars = 0
    }
    this.current.set(key, value)
    this.chars += size
  }
}
