/**
 * The layout rule (docs/architecture.md), checked on every import of `src/` and `layers/`: `src/` imports `layers/`
 * only from the entry files, and no two concern folders import each other in a circle.
 *
 * **Details**
 * Imports are read from the source text (`import … from`, `export … from`, `import "…"` and `import("…")` with a
 * relative path), type-only imports included: a circle of types is still a circle of concepts. A concern is a folder
 * directly under `src/` or `layers/`; a file directly under `src/` other than an entry file (`errors.ts`, the index of
 * every concern's errors; `Thrown.ts`, the leaf of helpers for thrown values) is a node of its own, so a circle through
 * the index (template → errors.ts → generation → template) is a circle like any other. The entry files compose every
 * concern and are none. The circles that exist today are listed in {@link knownBackEdges}, each with what removes it;
 * the test fails on any circle between two or more nodes, whichever way its arrows point, and on a listed edge that
 * no longer closes one (so the list only shrinks). Only the entry files import the index; `Thrown.ts` imports nothing
 * of the project. Project modules are imported as namespaces (`import * as Forest from "./Forest.ts"`), as Effect imports its
 * own modules, so a name at its use site says which module it comes from; the public entry `src/index.ts` and
 * non-TypeScript files are imported by name.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"

const root = Path.join(import.meta.dirname, "..", "..")

/** One import: the importing file (relative to the root), its line, and the imported file. */
interface Edge {
  readonly from: string
  readonly line: number
  readonly to: string
}

const sourceFiles = (dir: string): Array<string> =>
  Fs.readdirSync(Path.join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = `${dir}/${entry.name}`
    if (entry.isDirectory()) return sourceFiles(path)
    return entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts") ? [path] : []
  })

const importPattern = /^(?:import|export)\b[^;]*?\bfrom\s*"([^"]+)"|^import\s*"([^"]+)"|\bimport\(\s*"([^"]+)"\s*\)/gm

/** Every relative import of `file` that lands in `src/` or `layers/`. */
const importsOf = (file: string): Array<Edge> => {
  const text = Fs.readFileSync(Path.join(root, file), "utf8")
  const edges: Array<Edge> = []
  for (const match of text.matchAll(importPattern)) {
    const specifier = match[1] ?? match[2] ?? match[3]
    if (specifier === undefined || !specifier.startsWith(".")) continue
    const to = Path.posix.normalize(Path.posix.join(Path.posix.dirname(file), specifier))
    if (!to.startsWith("src/") && !to.startsWith("layers/")) continue
    edges.push({ from: file, line: text.slice(0, match.index).split("\n").length, to })
  }
  return edges
}

const edges = [...sourceFiles("src"), ...sourceFiles("layers")].flatMap(importsOf)

const show = (edge: Edge) => `${edge.from}:${edge.line} → ${edge.to}`

/** The entry files, which compose the layers for their callers (the public API and the command). */
const isEntry = (file: string) => file === "src/index.ts" || file === "src/cli.ts" || file.startsWith("src/cli/")

/**
 * The node of a file in the concern graph: `src/<folder>` or `layers/<folder>`, a file directly under `src/` itself
 * (`src/errors.ts`), and undefined for the entry files.
 */
const concernOf = (file: string): string | undefined => {
  const parts = file.split("/")
  if (parts.length > 2) return `${parts[0]}/${parts[1]}`
  return file === "src/index.ts" || file === "src/cli.ts" ? undefined : file
}
/**
 * Concern edges that close a circle today, and what removes each. An edge listed here is left out of the circle
 * check; the test fails once it no longer closes a circle, so that it is removed from this list.
 */
const knownBackEdges: ReadonlyArray<{ readonly from: string; readonly to: string; readonly why: string }> = []

/** The concern graph without `skipped` edges: each concern's successors. */
const concernGraph = (skipped: ReadonlySet<string>) => {
  const graph = new Map<string, Set<string>>()
  for (const edge of edges) {
    const from = concernOf(edge.from)
    const to = concernOf(edge.to)
    if (from === undefined || to === undefined || from === to || skipped.has(`${from} ${to}`)) continue
    if (!graph.has(from)) graph.set(from, new Set())
    graph.get(from)?.add(to)
  }
  return graph
}

/** The strongly connected components of more than one concern (Tarjan). */
const circles = (graph: ReadonlyMap<string, ReadonlySet<string>>): Array<Set<string>> => {
  let next = 0
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: Array<string> = []
  const onStack = new Set<string>()
  const found: Array<Set<string>> = []
  const visit = (node: string): void => {
    index.set(node, next)
    low.set(node, next)
    next++
    stack.push(node)
    onStack.add(node)
    for (const succ of graph.get(node) ?? []) {
      if (!index.has(succ)) {
        visit(succ)
        low.set(node, Math.min(low.get(node)!, low.get(succ)!))
      } else if (onStack.has(succ)) {
        low.set(node, Math.min(low.get(node)!, index.get(succ)!))
      }
    }
    if (low.get(node) === index.get(node)) {
      const component = new Set<string>()
      for (let member = stack.pop(); member !== undefined; member = stack.pop()) {
        onStack.delete(member)
        component.add(member)
        if (member === node) break
      }
      if (component.size > 1) found.push(component)
    }
  }
  for (const node of graph.keys()) if (!index.has(node)) visit(node)
  return found
}

/** The named imports (`import { a } from "./x.ts"`) of project modules in every TypeScript file of the repository. */
const namedProjectImports = (): Array<string> => {
  const named = /^import\s+(?:type\s+)?\{[^}]*\}\s*from\s*"(\.[^"]+)"/gm
  return ["src", "layers", "test", "examples"].flatMap(sourceFiles).flatMap((file) => {
    const text = Fs.readFileSync(Path.join(root, file), "utf8")
    return [...text.matchAll(named)]
      .filter((match) => match[1]!.endsWith(".ts") && !match[1]!.endsWith("/index.ts"))
      .map((match) => `${file}:${text.slice(0, match.index).split("\n").length} imports { … } from ${match[1]}`)
  })
}

describe("the layout rule", () => {
  it("reads the imports of src/ and layers/", () => {
    // A guard for the reader above: the tree has hundreds of project imports, among them src/index.ts → layers/.
    assert.isAbove(edges.length, 300)
    assert.isTrue(edges.some((edge) => edge.from === "src/index.ts" && edge.to.startsWith("layers/")))
  })

  it("finds a circle of concerns, and none in a chain (the check below relies on it)", () => {
    const graph = new Map<string, ReadonlySet<string>>([
      ["layers/gateway", new Set(["layers/generation"])],
      ["layers/generation", new Set(["layers/engine", "src/forest"])],
      ["layers/engine", new Set(["layers/gateway"])],
      ["src/forest", new Set(["src/ids"])]
    ])
    assert.deepStrictEqual(circles(graph).map((component) => [...component].sort()), [[
      "layers/engine",
      "layers/gateway",
      "layers/generation"
    ]])
    assert.deepStrictEqual(circles(new Map([["src/forest", new Set(["src/ids"])]])), [])
    assert.strictEqual(concernOf("src/index.ts"), undefined)
    assert.strictEqual(concernOf("src/errors.ts"), "src/errors.ts")
    // A circle through the index is found like any other.
    assert.deepStrictEqual(
      circles(
        new Map([
          ["src/template", new Set(["src/errors.ts"])],
          ["src/errors.ts", new Set(["src/generation"])],
          ["src/generation", new Set(["src/template"])]
        ])
      ).map((component) => [...component].sort()),
      [["src/errors.ts", "src/generation", "src/template"]]
    )
    assert.strictEqual(concernOf("layers/engine/sglang/Http.ts"), "layers/engine")
  })

  it("src/ imports layers/ only from the entry files (src/index.ts, src/cli.ts, src/cli/)", () => {
    const offending = edges.filter((edge) =>
      edge.from.startsWith("src/") && !isEntry(edge.from) && edge.to.startsWith("layers/")
    )
    assert.deepStrictEqual(offending.map(show), [], `src/ imports layers/:\n${offending.map(show).join("\n")}`)
  })

  it("only the entry files import the error index src/errors.ts; src/Thrown.ts imports nothing of the project", () => {
    assert.isTrue(edges.some((edge) => edge.from === "src/errors.ts"), "src/errors.ts re-exports the concerns' errors")
    const offending = edges.filter((edge) =>
      (edge.to === "src/errors.ts" && !isEntry(edge.from)) || edge.from === "src/Thrown.ts"
    )
    assert.deepStrictEqual(
      offending.map(show),
      [],
      `import the module that defines the error, or src/Thrown.ts for messageOf / codeOf:\n${
        offending.map(show).join("\n")
      }`
    )
  })

  it("module names are PascalCase and unique in the package (but the entries index.ts, cli.ts and errors.ts)", () => {
    const entries = new Set(["src/index.ts", "src/cli.ts", "src/errors.ts"])
    const modules = ["src", "layers"].flatMap(sourceFiles).filter((file) => !entries.has(file))
    const offCase = modules.filter((file) => !/^[A-Z][A-Za-z0-9]*\.ts$/.test(Path.posix.basename(file)))
    assert.deepStrictEqual(offCase, [], `name these modules in PascalCase:\n${offCase.join("\n")}`)
    const byName = new Map<string, Array<string>>()
    for (const file of modules) {
      byName.set(Path.posix.basename(file), [...byName.get(Path.posix.basename(file)) ?? [], file])
    }
    const repeated = [...byName.values()].filter((files) => files.length > 1).map((files) => files.join(" and "))
    assert.deepStrictEqual(
      repeated,
      [],
      `give each a name of its own (as Effect's HttpServerError.ts):\n${repeated.join("\n")}`
    )
  })

  it("service keys have one style, relax-agentic/<Name>, and are unique", () => {
    const keys = ["src", "layers"].flatMap(sourceFiles).flatMap((file) =>
      [...Fs.readFileSync(Path.join(root, file), "utf8").matchAll(/"(relax-agentic\/[^"]*)"/g)].map((match) => ({
        file,
        key: match[1]!
      }))
    )
    assert.isAbove(keys.length, 20)
    const offStyle = keys.filter(({ key }) => !/^relax-agentic\/[A-Z][A-Za-z0-9]*$/.test(key))
    assert.deepStrictEqual(offStyle.map(({ file, key }) => `${file}: ${key}`), [])
    const seen = new Set<string>()
    const repeated = keys.filter(({ key }) => seen.has(key) || !seen.add(key))
    assert.deepStrictEqual(repeated.map(({ file, key }) => `${file}: ${key}`), [])
  })

  it("project modules are imported as namespaces (import * as Name), except the public entry src/index.ts", () => {
    const offending = namedProjectImports()
    assert.deepStrictEqual(offending, [], `use \`import * as Module from "…"\`:\n${offending.join("\n")}`)
  })

  it("no two concern folders of src/ or layers/ import each other in a circle", () => {
    const skipped = new Set(knownBackEdges.map((edge) => `${edge.from} ${edge.to}`))
    const found = circles(concernGraph(skipped))
    const report = found.map((component) =>
      `circle between ${[...component].sort().join(", ")}:\n` +
      edges
        .filter((edge) => {
          const from = concernOf(edge.from)
          const to = concernOf(edge.to)
          return from !== undefined && to !== undefined && from !== to && component.has(from) && component.has(to) &&
            !skipped.has(`${from} ${to}`)
        })
        .map((edge) => `  ${show(edge)}`)
        .join("\n")
    )
    assert.deepStrictEqual(report, [], report.join("\n"))
  })

  it("the gateway holds no cluster code: scale-out reaches it only through its Forwarder port", () => {
    const offending = edges.filter((edge) =>
      edge.from.startsWith("layers/gateway/") &&
      (edge.to.startsWith("layers/cluster/") || edge.to.startsWith("src/cluster/"))
    )
    assert.deepStrictEqual(offending.map(show), [])
  })

  it("no module under src/ or layers/ is over 600 lines (one that long holds more than one concept), but the flag table", () => {
    // src/config/FlagTable.ts is a data table, one row per flag, not logic (docs/architecture.md).
    const long = ["src", "layers"].flatMap(sourceFiles).filter((file) =>
      file !== "src/config/FlagTable.ts" && Fs.readFileSync(Path.join(root, file), "utf8").split("\n").length > 600
    )
    assert.deepStrictEqual(long, [], `split these by concept:\n${long.join("\n")}`)
  })

  it("the indexes (src/index.ts, the public API; src/errors.ts, the errors) only re-export", () => {
    for (const file of ["src/index.ts", "src/errors.ts"]) {
      const text = Fs.readFileSync(Path.join(root, file), "utf8")
      const rest = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\/\/.*$/gm, "")
        .replace(/^export\s+(?:type\s+)?(?:\*(?:\s+as\s+\w+)?|\{[^}]*\})\s*from\s*"[^"]+"\s*;?/gm, "").trim()
      assert.strictEqual(rest, "", `${file} holds more than re-exports; move it to a module of its concern`)
    }
  })

  it("every listed back edge still closes a circle (remove it from knownBackEdges once it does not)", () => {
    const graph = concernGraph(new Set())
    const full = circles(graph)
    const stale = knownBackEdges.filter((edge) =>
      graph.get(edge.from)?.has(edge.to) !== true ||
      !full.some((component) => component.has(edge.from) && component.has(edge.to))
    )
    assert.deepStrictEqual(stale.map((edge) => `${edge.from} → ${edge.to}`), [])
  })
})
