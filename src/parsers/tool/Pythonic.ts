/**
 * `pythonic`: a Python list of calls with keyword arguments, `[f(a=1, b='x'), g()]`, optionally wrapped in Llama-4's
 * `<|python_start|>…<|python_end|>` (the wrapper tokens are removed from the text).
 *
 * **Details**
 * Values are Python literals (strings, numbers, `True`/`False`/`None`, lists, tuples, dicts) converted to JSON, so the
 * arguments are compact JSON built from them. A `[` starts a call list only when followed by `name(`; a list that
 * starts like one but cannot be read is malformed (up to its first `]`).
 */
import * as Json from "../../json/Json.ts"
import * as MarkerScan from "../MarkerScan.ts"
import * as ToolCallParser from "../ToolCallParser.ts"

class Stop {
  readonly incomplete: boolean

  constructor(incomplete: boolean) {
    this.incomplete = incomplete
  }
}

const identifier = /[A-Za-z_][A-Za-z0-9_]*/y

/** Read `[call, …]` at `at`; returns the calls and the end, or throws `Stop`. */
const readCallList = (text: string, at: number) => {
  let i = at
  const fail = (incomplete: boolean): never => {
    throw new Stop(incomplete)
  }
  const need = () => {
    if (i >= text.length) fail(true)
  }
  const ws = () => {
    while (i < text.length && /\s/.test(text[i] ?? "")) i++
  }
  const expect = (c: string) => {
    ws()
    need()
    if (text[i] !== c) fail(false)
    i++
  }
  const ident = (): string => {
    ws()
    need()
    identifier.lastIndex = i
    const m = identifier.exec(text)
    if (m === null) return fail(false)
    i += m[0].length
    if (i >= text.length) fail(true)
    return m[0]
  }
  const str = (): string => {
    const quote = text[i]
    i++
    let out = ""
    for (;;) {
      need()
      const c = text[i] ?? ""
      if (c === quote) {
        i++
        return out
      }
      if (c === "\n") fail(false)
      if (c === "\\") {
        i++
        need()
        const e = text[i] ?? ""
        const simple: Record<string, string> = {
          n: "\n",
          t: "\t",
          r: "\r",
          "\\": "\\",
          "'": "'",
          "\"": "\"",
          "0": "\0"
        }
        if (e === "u" || e === "x") {
          const len = e === "u" ? 4 : 2
          const hex = text.slice(i + 1, i + 1 + len)
          if (hex.length < len) {
            i = text.length
            fail(true)
          }
          if (!/^[0-9a-fA-F]+$/.test(hex)) fail(false)
          out += String.fromCharCode(parseInt(hex, 16))
          i += len + 1
          continue
        }
        out += simple[e] ?? "\\" + e
        i++
        continue
      }
      out += c
      i++
    }
  }
  const sequence = (close: string, item: () => void) => {
    ws()
    need()
    if (text[i] === close) {
      i++
      return
    }
    for (;;) {
      item()
      ws()
      need()
      if (text[i] === ",") {
        i++
        ws()
        need()
        if (text[i] === close) {
          i++
          return
        }
        continue
      }
      if (text[i] === close) {
        i++
        return
      }
      fail(false)
    }
  }
  const literal = (): unknown => {
    ws()
    need()
    const c = text[i] ?? ""
    if (c === "'" || c === "\"") return str()
    if (c === "[" || c === "(") {
      i++
      const items: Array<unknown> = []
      sequence(c === "[" ? "]" : ")", () => items.push(literal()))
      return items
    }
    if (c === "{") {
      i++
      const obj: Record<string, unknown> = {}
      sequence("}", () => {
        const key = literal()
        if (typeof key !== "string" && typeof key !== "number") fail(false)
        expect(":")
        Json.setOwn(obj, String(key), literal())
      })
      return obj
    }
    const loose = /[-+0-9.eE]+/y
    loose.lastIndex = i
    const looseLength = loose.exec(text)?.[0].length ?? 0
    if (looseLength > 0 && i + looseLength >= text.length) fail(true)
    const number = /-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?/y
    number.lastIndex = i
    const n = number.exec(text)
    if (n !== null) {
      i += n[0].length
      need()
      return Number(n[0])
    }
    const word = /[A-Za-z_]+/y
    word.lastIndex = i
    const w = word.exec(text)?.[0] ?? ""
    i += w.length
    need()
    if (w === "True") return true
    if (w === "False") return false
    if (w === "None") return null
    return fail(false)
  }
  const calls: Array<{ readonly name: string; readonly args: Record<string, unknown>; readonly raw: string }> = []
  expect("[")
  sequence("]", () => {
    ws()
    const start = i
    const name = ident()
    expect("(")
    const args: Record<string, unknown> = {}
    sequence(")", () => {
      const key = ident()
      expect("=")
      Json.setOwn(args, key, literal())
    })
    calls.push({ name, args, raw: text.slice(start, i) })
  })
  return { calls, end: i }
}

const opensCallList = /\[\s*[A-Za-z_][A-Za-z0-9_]*\s*\(/y
const couldOpen = /^\[\s*(?:[A-Za-z_][A-Za-z0-9_]*\s*)?$/

const listRule: MarkerScan.Rule = {
  start: "[",
  read: (text, at, final) => {
    opensCallList.lastIndex = at
    if (!opensCallList.test(text)) {
      if (!final && couldOpen.test(text.slice(at))) return undefined
      return { events: [ToolCallParser.text("[")], end: at + 1 }
    }
    try {
      const { calls, end } = readCallList(text, at)
      return { events: calls.map((c) => ToolCallParser.call(c.name, ToolCallParser.value(c.args), c.raw)), end }
    } catch (error) {
      if (!(error instanceof Stop)) throw error
      if (error.incomplete && !final) return undefined
      const close = text.indexOf("]", at)
      const end = error.incomplete || close < 0 ? text.length : close + 1
      return { events: [ToolCallParser.malformed(text.slice(at, end))], end }
    }
  }
}

const wrapper = (token: string): MarkerScan.Rule => ({
  start: token,
  read: (_text, at) => ({ events: [], end: at + token.length })
})

const rules = [listRule, wrapper("<|python_start|>"), wrapper("<|python_end|>")]

export const format: ToolCallParser.Format = MarkerScan.format(rules)
