/**
 * Checkouts' benchmarks side by side in one job: `node test/bench/compare.ts <rounds> <base dir> <other dir>… --
 * <bench args…>` runs `node --expose-gc test/bench/run.ts <bench args…>` in each checkout (its own sources and
 * node_modules), rotating which goes first each round, and prints each round's CPU-per-request and memory figures
 * and, at the end, their medians and each checkout's ratio to the base (the first).
 *
 * **Details**
 * What it reads from the printed tables: `floor`/`history`'s "gateway CPU/req" per path and row (and the floor
 * server's own, and the gateway's over it in the same round: the floor is the same code in every checkout),
 * `simulation`'s CPU per request, `sessions`' bytes per stored token and longest stalls, `memory`'s bytes per token
 * per layout. The environment passes through (e.g. `SIM_COUNT=1000`). For a checkout without its own
 * `node_modules`, hard-link one: `git worktree add /tmp/before <commit> && cp -al node_modules /tmp/before/node_modules`.
 */
import { execFileSync } from "node:child_process"
import { resolve } from "node:path"

interface Table {
  readonly title: string
  readonly rows: ReadonlyArray<Record<string, string>>
}

/** The tables `Harness.printResult` printed: a `## title` line, the column names, dashes, then the rows. */
const tables = (output: string): ReadonlyArray<Table> => {
  const lines = output.split("\n")
  const found: Array<Table> = []
  for (let i = 0; i < lines.length; i++) {
    const title = lines[i]!
    if (!title.startsWith("## ") || i + 2 >= lines.length) continue
    const dashes = lines[i + 2]!
    const spans: Array<[number, number]> = []
    for (const match of dashes.matchAll(/-+/g)) spans.push([match.index, match.index + match[0].length])
    const names = spans.map(([a, b]) => lines[i + 1]!.slice(a, b).trim())
    const rows: Array<Record<string, string>> = []
    for (let j = i + 3; j < lines.length && lines[j]!.trim() !== "" && !lines[j]!.startsWith("  ·"); j++) {
      const line = lines[j]!
      rows.push(Object.fromEntries(names.map((name, k) => [name, line.slice(spans[k]![0], spans[k]![1]).trim()])))
    }
    found.push({ title: title.slice(3), rows })
  }
  return found
}

/** Milliseconds of a `Harness.formatMs` figure ("651 µs", "1.05 ms", "2.3 s"). */
const ms = (text: string): number => {
  const match = /([\d.,]+)\s*(µs|ms|s)\b/.exec(text)
  if (match === null) return Number.NaN
  const value = Number(match[1]!.replaceAll(",", ""))
  return match[2] === "µs" ? value / 1000 : match[2] === "ms" ? value : value * 1000
}

/** KiB of a `Harness.formatBytes` figure ("24.7 KiB", "912 B", "1.2 MiB"). */
const kib = (text: string): number => {
  const match = /([\d.,]+)\s*(B|KiB|MiB)\b/.exec(text)
  if (match === null) return Number.NaN
  const value = Number(match[1]!.replaceAll(",", ""))
  return match[2] === "B" ? value / 1024 : match[2] === "KiB" ? value : value * 1024
}

/** The figures compared, by name: CPU in µs a request, bytes a token, stalls in ms. */
const figures = (output: string): Map<string, number> => {
  const out = new Map<string, number>()
  for (const table of tables(output)) {
    for (const row of table.rows) {
      if (row["gateway CPU/req"] !== undefined) {
        const turns = row["turns"] ?? row["clients"] ?? ""
        const name = `${table.title.slice(0, 24)} ${row["path"]} ${turns}`
        const gateway = ms(row["gateway CPU/req"]) * 1000
        out.set(`${name}: gateway CPU µs/req`, gateway)
        // The floor server is the same code in every checkout, measured in the same process and round: what moves it
        // is the process's state (its collector's work, the machine's load), which moves the gateway's figure too.
        if (row["floor CPU/req"] !== undefined) {
          const floor = ms(row["floor CPU/req"]) * 1000
          out.set(`${name}: floor CPU µs/req`, floor)
          out.set(`${name}: gateway ÷ floor CPU`, gateway / floor)
        }
      }
      const measure = row["measure"] ?? ""
      const value = row["value"] ?? ""
      if (measure.startsWith("CPU time of this process")) {
        const perRequest = /\(([^)]*) per request\)/.exec(value)
        if (perRequest !== null) out.set("simulation: CPU µs/req", ms(perRequest[1]!) * 1000)
      }
      if (measure.startsWith("bytes per stored token") || measure.trim().startsWith("of which the")) {
        out.set(`sessions: ${measure.trim()}`, Number(value))
      }
      if (measure.startsWith("longest stall")) out.set(`sessions: ${measure} (ms)`, ms(value))
      if (measure.startsWith("first turns through")) {
        const each = /\(([^)]*) each\)/.exec(value)
        if (each !== null) out.set("sessions: first turn, wall ms each", ms(each[1]!))
      }
      if (measure.startsWith("heap per Session")) out.set("sessions: heap per Session (KiB)", kib(value))
      if (row["bytes/token"] !== undefined && row["layout"] !== undefined) {
        out.set(`memory ${row["turns"]} ${row["layout"]}: B/token`, Number(row["bytes/token"]))
      }
    }
  }
  return out
}

const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].filter((v) => !Number.isNaN(v)).sort((a, b) => a - b)
  if (sorted.length === 0) return Number.NaN
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

const args = process.argv.slice(2)
const split = args.indexOf("--")
const rounds = Number(args[0])
const dirs = split < 0 ? [] : args.slice(1, split)
const benchArgs = split < 0 ? [] : args.slice(split + 1)
if (!(rounds > 0) || dirs.length < 2 || benchArgs.length === 0) {
  throw new Error("usage: node test/bench/compare.ts <rounds> <base dir> <other dir>… -- <bench args…>")
}
const sides = dirs.map((dir, i) => ({ name: i === 0 ? "base" : `#${i}`, dir: resolve(dir) }))
const seen = new Map<string, Array<Map<string, number>>>(sides.map((side) => [side.name, []]))
for (let round = 0; round < rounds; round++) {
  // Each round starts from another checkout, so none always runs first (or last).
  const order = sides.map((_, i) => sides[(i + round) % sides.length]!)
  for (const side of order) {
    const output = execFileSync(process.execPath, ["--expose-gc", "test/bench/run.ts", ...benchArgs], {
      cwd: side.dir,
      encoding: "utf8",
      maxBuffer: 64 * 1024 * 1024,
      stdio: ["ignore", "pipe", "inherit"]
    })
    const got = figures(output)
    seen.get(side.name)!.push(got)
    console.log(`round ${round + 1} ${side.name} (${side.dir}):`)
    for (const [name, value] of got) console.log(`  ${name}: ${value.toFixed(2)}`)
  }
}
const names = [...new Set(seen.get("base")!.flatMap((m) => [...m.keys()]))]
const each = (side: string, name: string) =>
  seen.get(side)!.map((m) => ((value) => value.toFixed(value < 10 ? 2 : 1))(m.get(name) ?? Number.NaN)).join(" / ")
const medianOf = (side: string, name: string) => median(seen.get(side)!.map((m) => m.get(name) ?? Number.NaN))
console.log(`\nmedians of ${rounds} rounds (each round's figures in brackets), ratio to base:`)
for (const side of sides) console.log(`  ${side.name}: ${side.dir}`)
for (const name of names) {
  const base = medianOf("base", name)
  const others = sides.slice(1).map((side) => {
    const value = medianOf(side.name, name)
    return `${side.name} ${value.toFixed(2)} [${each(side.name, name)}] ${(value / base).toFixed(3)}×`
  })
  console.log(`  ${name}: base ${base.toFixed(2)} [${each("base", name)}], ${others.join(", ")}`)
}
