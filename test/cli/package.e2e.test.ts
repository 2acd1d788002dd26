/**
 * The package as a TypeScript trainer installs it: `npm pack` (which builds dist/ through `prepack`), the tarball
 * installed into a fresh project from the npm registry, then plain Node imports it and runs a step on the embedded
 * engine, a strict `nodenext` compile type-checks a trainer against its declarations, the installed command answers
 * `rollout --help` and `check`, and CommonJS `require` loads it (Node's require of ES modules).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFile, execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Example from "../support/example.ts"
import * as TempDir from "../support/TempDir.ts"

const root = Example.root

interface Ran {
  readonly code: number
  readonly stdout: string
  /** stdout and stderr. */
  readonly output: string
}

/** Run `file args` in `cwd` with the project's Node first on PATH; its exit code and output, never a failure. */
const exec = (file: string, args: ReadonlyArray<string>, cwd: string) =>
  Effect.callback<Ran>((resume) => {
    const child = execFile(file, [...args], {
      cwd,
      maxBuffer: 64 * 1024 * 1024,
      env: { ...process.env, PATH: `${Path.dirname(process.execPath)}${Path.delimiter}${process.env["PATH"] ?? ""}` }
    }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === "number" ? error.code : 1
      resume(Effect.succeed({ code, stdout, output: `${stdout}${stderr}` }))
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })

const node = (args: ReadonlyArray<string>, cwd: string) => exec(process.execPath, args, cwd)

interface PackedFile {
  readonly path: string
}
interface Packed {
  readonly filename: string
  readonly size: number
  readonly files: ReadonlyArray<PackedFile>
}

// The consumer project: a one-turn agent in plain JavaScript (no SDK), its data, a trainer script and a typed trainer.
const agent = `import { readFileSync, writeFileSync } from "node:fs"
const input = JSON.parse(readFileSync(process.env.RELAX_INPUT_JSON, "utf8"))
const response = await fetch(new URL("v1/chat/completions", process.env.RELAX_BASE_URL), {
  method: "POST",
  headers: { "content-type": "application/json", authorization: "Bearer " + process.env.RELAX_SESSION_ID },
  body: JSON.stringify({ model: "policy", messages: input.messages, max_tokens: 16 })
})
if (!response.ok) throw new Error("model answered " + response.status + ": " + (await response.text()))
await response.json()
writeFileSync(process.env.RELAX_OUTPUT_JSON, JSON.stringify({ reward: 1 }))
`

const trainerScript = `import { createRollout } from "relax-agentic"
const rollout = await createRollout({
  promptData: "data.jsonl",
  nSamplesPerPrompt: 2,
  rolloutBatchSize: 2,
  agentCwd: process.cwd(),
  agentCommand: JSON.stringify(process.execPath) + " agent.mjs",
  agentTimeout: 60,
  rolloutMaxResponseLen: 16
})
try {
  const step = await rollout.step(0)
  const sample = step.samples[0]
  console.log(JSON.stringify({ samples: step.samples.length, tokens: sample.tokens.length, mask: sample.loss_mask.length }))
} finally {
  await rollout.close()
}
`

const typedTrainer = `import { Effect } from "effect"
import { createRollout, makeTrainer, TrainerService, type Results, type RolloutOptionsInput } from "relax-agentic"

const options: RolloutOptionsInput = { promptData: "data.jsonl", agentCommand: "node agent.mjs", nSamplesPerPrompt: 2 }

export const promises = async (): Promise<number> => {
  const rollout = await createRollout(options)
  try {
    const step: Results.StepResult = await rollout.step(0)
    return step.samples.length
  } finally {
    await rollout.close()
  }
}

export const effects = Effect.gen(function*() {
  const trainer = yield* TrainerService
  const step = yield* trainer.step(0)
  return step.samples.map((sample) => sample.tokens.length)
}).pipe(Effect.provide(makeTrainer(options)))
`

const tsconfig = {
  compilerOptions: {
    target: "ES2022",
    module: "nodenext",
    moduleResolution: "nodenext",
    strict: true,
    skipLibCheck: true,
    noEmit: true,
    types: ["node"]
  },
  include: ["trainer.ts"]
}

/** A Node.js older than 22.19 on PATH outside any node_modules (a machine's system Node), if there is one. */
const olderNode = (): string | undefined =>
  (process.env["PATH"] ?? "").split(Path.delimiter).filter((dir) => dir !== "" && !dir.includes("node_modules"))
    .map((dir) => Path.join(dir, "node"))
    .find((file) => {
      if (!Fs.existsSync(file)) return false
      const [major = 0, minor = 0] = execFileSync(file, ["--version"], { encoding: "utf8" }).trim().slice(1).split(".")
        .map(Number)
      return major < 22 || (major === 22 && minor < 19)
    })

describe("the installed package", () => {
  it.live(
    "packs without tests, installs, imports, type-checks, runs its command and a step",
    () =>
      Effect.gen(function*() {
        const project = yield* TempDir.scoped("package-consumer-")

        const packed = yield* exec("npm", ["pack", "--json", "--pack-destination", project], root)
        assert.strictEqual(packed.code, 0, packed.output)
        const report = JSON.parse(packed.stdout) as ReadonlyArray<Packed>
        const tarball = report[0]
        assert.isDefined(tarball)
        const paths = tarball.files.map((file) => file.path)
        assert.include(paths, "dist/src/index.js")
        assert.include(paths, "dist/src/index.d.ts")
        assert.include(paths, "dist/layers/inspect/page/index.html")
        assert.include(paths, "bin/relax-agentic.mjs")
        assert.include(paths, "LICENSE")
        assert.deepStrictEqual(
          paths.filter((path) =>
            /^(test|scripts|src|layers|examples)\//.test(path) || /\.test\.|dprint\.json/.test(path)
          ),
          []
        )

        Fs.writeFileSync(
          Path.join(project, "package.json"),
          JSON.stringify({ name: "consumer", private: true, type: "module" })
        )
        const installed = yield* exec(
          "npm",
          [
            "install",
            "--prefer-offline",
            "--no-audit",
            "--no-fund",
            Path.join(project, tarball.filename),
            "@types/node@22"
          ],
          project
        )
        assert.strictEqual(installed.code, 0, installed.output)

        Fs.writeFileSync(Path.join(project, "agent.mjs"), agent)
        Fs.writeFileSync(
          Path.join(project, "data.jsonl"),
          ["What is 2 + 3?", "What is 7 - 4?"].map((input) => JSON.stringify({ input })).join("\n") + "\n"
        )
        Fs.writeFileSync(Path.join(project, "trainer.mjs"), trainerScript)
        Fs.writeFileSync(Path.join(project, "trainer.ts"), typedTrainer)
        Fs.writeFileSync(Path.join(project, "tsconfig.json"), JSON.stringify(tsconfig))

        // (a) plain Node imports the build and runs a step on the embedded engine.
        const step = yield* node(["trainer.mjs"], project)
        assert.strictEqual(step.code, 0, step.output)
        const summary = JSON.parse(step.stdout.trim().split("\n").at(-1) ?? "{}") as {
          samples: number
          tokens: number
          mask: number
        }
        assert.strictEqual(summary.samples, 4)
        assert.isAbove(summary.tokens, summary.mask)
        assert.isAbove(summary.mask, 0)

        // (b) a strict nodenext compile of a trainer against the declarations.
        const tsc = Path.join(root, "node_modules", "typescript", "bin", "tsc")
        const typed = yield* node([tsc, "-p", "tsconfig.json"], project)
        assert.strictEqual(typed.code, 0, typed.output)

        // (c) the installed command, from the build with plain Node.
        const bin = Path.join(project, "node_modules", ".bin", "relax-agentic")
        const help = yield* exec(bin, ["rollout", "--help"], project)
        assert.strictEqual(help.code, 0, help.output)
        assert.include(help.output, "--prompt-data")
        const check = yield* exec(bin, [
          "check",
          "--prompt-data",
          "data.jsonl",
          "--rollout-batch-size",
          "2",
          "--agent-cwd",
          project,
          "--agent-command",
          "node agent.mjs"
        ], project)
        assert.strictEqual(check.code, 0, check.output)

        // On an older Node.js the installed command names what to install, never a command that needs the checkout.
        const older = olderNode()
        if (older !== undefined) {
          const refused = yield* exec(older, [
            Path.join(project, "node_modules", "relax-agentic", "bin", "relax-agentic.mjs"),
            "--help"
          ], project)
          assert.strictEqual(refused.code, 1, refused.output)
          assert.include(refused.output, "Install Node.js 22.19 or newer")
          assert.notInclude(refused.output, "npx relax-agentic")
          assert.notInclude(refused.output, "npm start")
        }

        // (d) CommonJS: require() of the ES module build works (Node >= 22.12 loads ES modules without top-level await).
        Fs.writeFileSync(
          Path.join(project, "trainer.cjs"),
          "const R = require('relax-agentic')\nconsole.log(typeof R.createRollout, typeof R.makeTrainer)\n"
        )
        const required = yield* node(["trainer.cjs"], project)
        assert.strictEqual(required.code, 0, required.output)
        assert.include(required.output, "function function")
      }).pipe(Effect.scoped),
    600_000
  )
})
