// `node --expose-gc test/support/sessionMemoryProbe.ts [sessions]`: prints the JSON of `SessionMemory.measure` (the
// memory guard's child process: vitest's workers cannot force collections).
import * as SessionMemory from "./sessionMemory.ts"

const gc: unknown = Reflect.get(globalThis, "gc")
if (typeof gc !== "function") throw new Error("run with node --expose-gc")
const sessions = Number(process.argv[2] ?? 1000)
const result = await SessionMemory.measure(sessions, () => void Reflect.apply(gc, undefined, []))
process.stdout.write(`${JSON.stringify(result)}\n`)
