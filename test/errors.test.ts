/**
 * The error vocabulary (docs/architecture.md "Errors"): src/errors.ts lists every tagged error of src/, and every
 * tagged error of src/ and layers/ is named `…Error` with free text in `detail` (never in `reason`), and the text of a thrown value is `Thrown.messageOf`.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ErrorIndex from "../src/errors.ts"
import * as Thrown from "../src/Thrown.ts"

const root = Path.join(import.meta.dirname, "..")

const sources = (dir: string): ReadonlyArray<string> =>
  Fs.readdirSync(Path.join(root, dir), { recursive: true, encoding: "utf8" })
    .filter((file) => file.endsWith(".ts"))
    .map((file) => Path.join(dir, file))

/** The entry files import layers/, so the index (which src/ modules import) cannot re-export from them. */
const isEntry = (file: string): boolean =>
  file === Path.join("src", "index.ts") || file === Path.join("src", "cli.ts") ||
  file.startsWith(Path.join("src", "cli") + Path.sep)

/** `class Name extends Data.TaggedError(...)` / `Schema.TaggedError<...>()(...)` / `Schema.TaggedErrorClass`. */
const taggedErrors = (file: string): ReadonlyArray<string> =>
  [
    ...Fs.readFileSync(Path.join(root, file), "utf8").matchAll(
      /class\s+(\w+)\s+extends\s+(?:Data\.TaggedError|Schema\.TaggedError|Schema\.TaggedErrorClass)\b/g
    )
  ].map((match) => match[1]!)

describe("the error vocabulary", () => {
  it("src/errors.ts re-exports every tagged error of src/ (outside the entry files)", () => {
    const declared = sources("src").filter((file) => !isEntry(file)).flatMap((file) =>
      taggedErrors(file).map((name) => ({ name, file }))
    )
    assert.isAbove(declared.length, 20)
    const exported = new Set(Object.keys(ErrorIndex))
    for (const { file, name } of declared) {
      assert.isTrue(exported.has(name), `${name} (${file}) is missing from src/errors.ts`)
    }
  })

  it("names every tagged error …Error", () => {
    for (const file of [...sources("src"), ...sources("layers")]) {
      for (const name of taggedErrors(file)) {
        assert.isTrue(name.endsWith("Error"), `${name} (${file}) must be named …Error`)
      }
    }
  })

  it("keeps free text out of `reason` (a literal kind; free text goes in `detail`)", () => {
    const fieldsOf = /class\s+(\w+)\s+extends\s+Data\.TaggedError\("\w+"\)<\{([\s\S]*?)\}>/g
    const freeText: Array<string> = []
    for (const file of [...sources("src"), ...sources("layers")]) {
      const text = Fs.readFileSync(Path.join(root, file), "utf8")
      for (const [, name, fields] of text.matchAll(fieldsOf)) {
        if (/\breason\??:\s*string\b/.test(fields!)) freeText.push(`${name} (${file})`)
      }
    }
    assert.deepStrictEqual(freeText, [], "rename the free-text `reason` to `detail`")
  })

  it("has one messageOf for thrown values", () => {
    assert.strictEqual(Thrown.messageOf(new TypeError("bad input")), "bad input")
    assert.strictEqual(Thrown.messageOf("plain text"), "plain text")
    assert.strictEqual(Thrown.messageOf(42), "42")
  })

  it("leaves no local copy of messageOf in src/ or layers/", () => {
    const copy = /instanceof Error\s*\?\s*[\w.]+\.message\s*:\s*String\(/
    const copies = [...sources("src"), ...sources("layers")].filter((file) =>
      file !== Path.join("src", "Thrown.ts") && copy.test(Fs.readFileSync(Path.join(root, file), "utf8"))
    )
    assert.deepStrictEqual(copies, [], "use Thrown.messageOf (src/Thrown.ts)")
  })
})
