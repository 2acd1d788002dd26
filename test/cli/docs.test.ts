import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Cli from "../../src/cli.ts"
import * as TrainingSample from "../../src/forest/TrainingSample.ts"

const root = Path.join(import.meta.dirname, "..", "..")
const docs = Path.join(root, "docs")
const pages = Fs.readdirSync(docs).filter((name) => name.endsWith(".md"))
const read = (name: string) => Fs.readFileSync(Path.join(docs, name), "utf8")

describe("the user guide", () => {
  it("embeds the flags reference generated from the flag table", () => {
    assert.include(read("flags.md"), Cli.flagsReference())
  })

  it("names only flags the command has (other programs' flags only between foreign-flags markers)", () => {
    const known = new Set([
      ...[...Cli.rolloutFlags, ...Cli.serveFlags, ...Cli.clusterFlags, ...Cli.probeFlags].map((spec) =>
        `--${spec.name}`
      ),
      ...Cli.inspectFlagNames,
      ...Cli.replayFlagNames,
      ...Cli.rescoreFlagNames,
      "--row",
      "--help",
      "--version"
    ])
    for (const page of [...pages.map((name) => Path.join("docs", name)), "README.md"]) {
      // SGLang's launch flags and Relax's own flags are quoted between `<!-- foreign-flags -->` and
      // `<!-- /foreign-flags -->`.
      const text = Fs.readFileSync(Path.join(root, page), "utf8")
        .replace(/<!-- foreign-flags -->[\s\S]*?<!-- \/foreign-flags -->/g, "")
      for (const [flag] of text.matchAll(/(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9]/g)) {
        assert.isTrue(known.has(flag), `${page} mentions ${flag}, which relax-agentic does not have`)
      }
    }
  })

  it("links only pages that exist", () => {
    for (const page of pages) {
      for (const [, target] of read(page).matchAll(/\]\(([\w.-]+\.md)(?:#[\w-]+)?\)/g)) {
        assert.isTrue(Fs.existsSync(Path.join(docs, target!)), `${page} links ${target}, which does not exist`)
      }
    }
  })

  it("documents the sample statuses the schema allows, and never promises `aborted` (parked requests stay internal)", () => {
    assert.deepStrictEqual([...TrainingSample.Status.literals], ["completed", "truncated"])
    const row = read("outputs.md").split("\n").find((line) => line.startsWith("| `status` |"))
    assert.isDefined(row)
    const named = [...row!.matchAll(/`(\w+)`/g)].map((m) => m[1]).filter((w) => w !== "status")
    assert.deepStrictEqual(
      named,
      ["completed", "truncated", "aborted"],
      "outputs.md's status row: the two statuses, then why not `aborted`"
    )
    assert.include(row!, "never `aborted`")
  })

  it("source comments cite only pages in this repository (no reference notes kept outside it)", () => {
    const outside =
      /relax-behaviour|sglang-and-tokenizers\.md|agentic-rollout-guide|effect4-cookbook|\.\.\/shared\/|\/work\//
    const sources = (dir: string): Array<string> =>
      Fs.readdirSync(Path.join(root, dir), { withFileTypes: true }).flatMap((entry) =>
        entry.isDirectory()
          ? sources(Path.join(dir, entry.name))
          : entry.name.endsWith(".ts")
          ? [Path.join(dir, entry.name)]
          : []
      )
    for (const file of [...sources("src"), ...sources("layers")]) {
      const lines = Fs.readFileSync(Path.join(root, file), "utf8").split("\n")
      lines.forEach((line, i) => assert.notMatch(line, outside, `${file}:${i + 1} cites a file outside the repository`))
    }
  })
})
