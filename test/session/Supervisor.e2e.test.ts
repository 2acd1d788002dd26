import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Result } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ProcessGroup from "../../layers/session/ProcessGroup.ts"
import * as Supervisor from "../../layers/session/Supervisor.ts"
import type * as AgentSpec from "../../src/session/AgentSpec.ts"
import * as SessionInput from "../../src/session/SessionInput.ts"
import * as TempDir from "../support/TempDir.ts"

const fixtures = Path.join(import.meta.dirname, "..", "fixtures", "agents")

const tempDir = () => TempDir.forTest("supervisor-test-")

const prepared = (row: Record<string, unknown>): SessionInput.Prepared =>
  Result.getOrThrow(SessionInput.fromRow(row, 0))

const launch = (overrides: Partial<Supervisor.SessionLaunch> = {}): Supervisor.SessionLaunch => ({
  sessionId: "session-7",
  groupId: "group-3",
  rolloutMode: "train",
  input: prepared({ input: "Which city hosted the event?", metadata: { task_id: "example-001" } }),
  ...overrides
})

const spec = (command: string, cwd: string, extra: Partial<AgentSpec.AgentSpec> = {}): AgentSpec.AgentSpec => ({
  command,
  cwd,
  env: {},
  timeoutSeconds: 60,
  ...extra
})

const local = (options: Omit<Supervisor.LocalProcessOptions, "baseUrl">) =>
  Supervisor.Supervisor.localProcess({ ...options, baseUrl: "http://127.0.0.1:9/agentic_api/" })

/** A zombie (`Z`) has exited; PID 1 here does not reap re-parented children, so it may linger. */
const isDead = ProcessGroup.hasExited

/** Wait (real time) until `path` exists, then return its lines. */
const awaitLines = (path: string) =>
  Effect.gen(function*() {
    for (let i = 0; i < 500; i++) {
      if (Fs.existsSync(path)) return Fs.readFileSync(path, "utf8").trim().split("\n")
      yield* Effect.sleep(Duration.millis(20))
    }
    return yield* Effect.die(new Error(`${path} was never written`))
  })

describe("Supervisor.LocalProcess", () => {
  it.live("runs the command with bash -lc in --agent-cwd, with the RELAX_* variables and --agent-env", () =>
    Effect.gen(function*() {
      const cwd = tempDir()
      const supervisor = local({
        spec: spec(`bash ${fixtures}/report-env.sh`, cwd, { env: { FOO: "bar", BAZ: "qux=1" } })
      })
      const outcome = yield* supervisor.run(launch())
      assert.strictEqual(outcome.exitCode, 0)
      assert.strictEqual(outcome.output.kind, "implicit")
      if (outcome.output.kind !== "implicit") return
      assert.strictEqual(outcome.output.reward, 1)
      const seen = outcome.output.metadata ?? {}
      assert.strictEqual(seen["cwd"], Fs.realpathSync(cwd))
      assert.strictEqual(seen["base_url"], "http://127.0.0.1:9/agentic_api/")
      assert.strictEqual(seen["session_id"], "session-7")
      assert.strictEqual(seen["group_id"], "group-3")
      assert.strictEqual(seen["rollout_mode"], "train")
      assert.strictEqual(seen["foo"], "bar")
      assert.strictEqual(seen["baz"], "qux=1")
      const ioDir = String(seen["io_dir"])
      assert.isTrue(Path.basename(ioDir).startsWith("relax-agentic-command-"))
      assert.strictEqual(seen["input_json"], Path.join(ioDir, "session_input.json"))
      assert.strictEqual(seen["output_json"], Path.join(ioDir, "session_output.json"))
      assert.deepStrictEqual(seen["input"], {
        messages: [{ role: "user", content: "Which city hosted the event?" }],
        metadata: { task_id: "example-001" }
      })
      assert.include(outcome.logTail, `agent started in ${Fs.realpathSync(cwd)}`)
      assert.isFalse(Fs.existsSync(ioDir), "the IO directory is removed after the session")
    }))

  it.live("keeps the IO directory and its log when keepSessionIo is on", () =>
    Effect.gen(function*() {
      const cwd = tempDir()
      const ioRoot = tempDir()
      const outcome = yield* local({ spec: spec(`bash ${fixtures}/report-env.sh`, cwd), keepSessionIo: true, ioRoot })
        .run(launch())
      assert.strictEqual(outcome.output.kind, "implicit")
      const [ioDir] = Fs.readdirSync(ioRoot)
      assert.isDefined(ioDir)
      const dir = Path.join(ioRoot, ioDir ?? "")
      assert.deepStrictEqual(Fs.readdirSync(dir).sort(), ["run.log", "session_input.json", "session_output.json"])
      assert.strictEqual(
        Fs.readFileSync(Path.join(dir, "session_input.json"), "utf8"),
        "{\"messages\":[{\"role\":\"user\",\"content\":\"Which city hosted the event?\"}],\"metadata\":{\"task_id\":\"example-001\"}}"
      )
      assert.include(Fs.readFileSync(Path.join(dir, "run.log"), "utf8"), "agent started in")
    }))

  it.live("reports a non-zero exit with the reference wording and the tail of stdout and stderr", () =>
    Effect.gen(function*() {
      const logDir = tempDir()
      const error = yield* local({ spec: spec(`bash ${fixtures}/fail.sh`, tempDir()), logDir })
        .run(launch())
        .pipe(Effect.flip)
      assert.strictEqual(error._tag, "AgentExecutionError")
      if (error._tag !== "AgentExecutionError") return
      assert.strictEqual(error.reason, "exit")
      assert.strictEqual(error.exitCode, 3)
      assert.strictEqual(error.logTail, "step 1 ok\ntool crashed: boom\n")
      const logPath = Path.join(logDir, "session-7.log")
      assert.strictEqual(
        error.message,
        `Managed command agent exited with code 3.\n(full log: ${logPath})\nstep 1 ok\ntool crashed: boom`
      )
      assert.isTrue(Fs.existsSync(logPath))
    }))

  it.live("bounds the attached log tail to 8 KiB", () =>
    Effect.gen(function*() {
      const error = yield* local({ spec: spec("seq 1 20000; echo LAST; exit 1", tempDir()) }).run(launch()).pipe(
        Effect.flip
      )
      assert.strictEqual(error._tag, "AgentExecutionError")
      if (error._tag !== "AgentExecutionError") return
      assert.strictEqual(Buffer.byteLength(error.logTail), 8192)
      assert.isTrue(error.logTail.endsWith("20000\nLAST\n"))
    }))

  it.live("reports a signal as a negative exit code", () =>
    Effect.gen(function*() {
      const error = yield* local({ spec: spec("echo before; kill -KILL $$", tempDir()) }).run(launch()).pipe(
        Effect.flip
      )
      assert.strictEqual(error._tag, "AgentExecutionError")
      if (error._tag !== "AgentExecutionError") return
      assert.strictEqual(error.reason, "signal")
      assert.strictEqual(error.exitCode, -9)
      assert.strictEqual(error.signal, "SIGKILL")
      assert.strictEqual(error.message, "Managed command agent exited with code -9 (SIGKILL).\nbefore")
    }))

  it.live("stops the whole process group when the active-time budget expires", () =>
    Effect.gen(function*() {
      const pidsFile = Path.join(tempDir(), "pids")
      const supervisor = local({
        spec: spec(`bash ${fixtures}/sleeper.sh`, tempDir(), { env: { PIDS_FILE: pidsFile }, timeoutSeconds: 0.2 })
      })
      const budget = yield* supervisor.makeBudget
      const fiber = yield* supervisor.run(launch({ budget })).pipe(Effect.flip, Effect.forkChild)
      const pids = (yield* awaitLines(pidsFile)).map(Number)
      assert.strictEqual(pids.length, 2)
      assert.isTrue(pids.every((pid) => !isDead(pid)), "the agent runs while the budget is not started")
      yield* budget.start
      const error = yield* Fiber.join(fiber)
      assert.strictEqual(error._tag, "AgentExecutionError")
      if (error._tag !== "AgentExecutionError") return
      assert.strictEqual(error.reason, "timeout")
      assert.strictEqual(error.message, "Managed command agent timed out after 0.2 seconds.\nsleeper waiting")
      for (const pid of pids) assert.isTrue(isDead(pid), `pid ${pid} survived the timeout`)
    }))

  it.live("interrupting the session fiber reaps the process group and removes the IO directory", () =>
    Effect.gen(function*() {
      const pidsFile = Path.join(tempDir(), "pids")
      const ioRoot = tempDir()
      const supervisor = local({
        spec: spec(`bash ${fixtures}/sleeper.sh`, tempDir(), { env: { PIDS_FILE: pidsFile } }),
        ioRoot
      })
      const fiber = yield* supervisor.run(launch()).pipe(Effect.forkChild)
      const pids = (yield* awaitLines(pidsFile)).map(Number)
      assert.strictEqual(Fs.readdirSync(ioRoot).length, 1)
      yield* Fiber.interrupt(fiber)
      for (const pid of pids) assert.isTrue(isDead(pid), `pid ${pid} survived the interruption`)
      assert.deepStrictEqual(Fs.readdirSync(ioRoot), [])
    }))

  it.live("kills with SIGKILL after the grace period an agent that ignores SIGTERM", () =>
    Effect.gen(function*() {
      const pidsFile = Path.join(tempDir(), "pids")
      const supervisor = local({
        spec: spec(`trap '' TERM; bash ${fixtures}/sleeper.sh`, tempDir(), { env: { PIDS_FILE: pidsFile } }),
        killGrace: Duration.millis(300)
      })
      const fiber = yield* supervisor.run(launch()).pipe(Effect.forkChild)
      const pids = (yield* awaitLines(pidsFile)).map(Number)
      yield* Fiber.interrupt(fiber)
      for (const pid of pids) assert.isTrue(isDead(pid), `pid ${pid} survived SIGKILL`)
    }))

  it.live("stops a child left behind by a clean exit and still reads the output", () =>
    Effect.gen(function*() {
      const pidsFile = Path.join(tempDir(), "pids")
      const outcome = yield* local({
        spec: spec(`bash ${fixtures}/leave-child.sh`, tempDir(), { env: { PIDS_FILE: pidsFile } })
      }).run(launch())
      assert.deepStrictEqual(outcome.output, { kind: "implicit", reward: 0.5 })
      const [pid] = Fs.readFileSync(pidsFile, "utf8").trim().split("\n").map(Number)
      assert.isTrue(pid !== undefined && isDead(pid), "the backgrounded child was stopped")
    }))

  it.live("parses explicit JSONL records written by the agent, with unknown-key warnings", () =>
    Effect.gen(function*() {
      const command = `printf '%s\\n' ` +
        `'{"name":"main","messages":[{"role":"user","content":"a"}],"reward":1}' ` +
        `'{"name":"searcher_0","messages":[{"role":"user","content":"b"}],"note":"x"}' > "$RELAX_OUTPUT_JSON"`
      const outcome = yield* local({ spec: spec(command, tempDir()) }).run(launch())
      assert.strictEqual(outcome.output.kind, "explicit")
      if (outcome.output.kind !== "explicit") return
      assert.deepStrictEqual(outcome.output.records.map((record) => record.name), ["main", "searcher_0"])
      assert.strictEqual(outcome.warnings.length, 1)
      assert.include(outcome.warnings[0], "line 2: Session output record ignoring unknown keys: ['note']")
    }))

  it.live("reports unusable output as invalid output naming the line and field", () =>
    Effect.gen(function*() {
      const command = `echo working; printf '%s\\n' ` +
        `'{"name":"main","messages":[{"role":"user","content":"a"}]}' ` +
        `'{"name":"main","messages":[{"role":"user","content":"b"}]}' > "$RELAX_OUTPUT_JSON"`
      const error = yield* local({ spec: spec(command, tempDir()) }).run(launch()).pipe(Effect.flip)
      assert.strictEqual(error._tag, "AgentExecutionError")
      assert.strictEqual(
        error.message,
        "Managed command agent produced invalid output: line 2, field 'name': " +
          "Session output record name must be unique within one explicit export: 'main'\nworking"
      )
    }))

  it.live("a session directory that cannot be created is a typed prepare error, not a defect", () =>
    Effect.gen(function*() {
      const blocker = Path.join(tempDir(), "a-file")
      Fs.writeFileSync(blocker, "")
      const error = yield* local({ spec: spec("true", tempDir()), ioRoot: Path.join(blocker, "io") }).run(launch())
        .pipe(
          Effect.flip
        )
      assert.strictEqual(error._tag, "AgentExecutionError")
      if (error._tag !== "AgentExecutionError") return
      assert.strictEqual(error.reason, "prepare")
      assert.match(
        error.message,
        /^Managed command agent's session directory could not be prepared: cannot create the session directory in .*a-file\/io: ENOTDIR.*Check that the temporary directory \(TMPDIR\) exists, is writable and has free space\.$/
      )
    }))

  it.live("keeps only failed Sessions' logs under logDir by default, every log with keepLogs all", () =>
    Effect.gen(function*() {
      const logDir = Path.join(tempDir(), "logs")
      const failing = yield* local({ spec: spec("echo failing; exit 4", tempDir()), logDir })
        .run(launch({ sessionId: "s-failed" }))
        .pipe(Effect.flip)
      assert.strictEqual(
        failing._tag === "AgentExecutionError" ? failing.logPath : "",
        Path.join(logDir, "s-failed.log")
      )
      const ok = `printf '{"reward": 1}' > "$RELAX_OUTPUT_JSON"; echo fine`
      yield* local({ spec: spec(ok, tempDir()), logDir }).run(launch({ sessionId: "s-ok" }))
      assert.deepStrictEqual(Fs.readdirSync(logDir), ["s-failed.log"])
      assert.strictEqual(Fs.readFileSync(Path.join(logDir, "s-failed.log"), "utf8"), "failing\n")
      yield* local({ spec: spec(ok, tempDir()), logDir, keepLogs: "all" }).run(launch({ sessionId: "s-all" }))
      assert.deepStrictEqual(Fs.readdirSync(logDir).sort(), ["s-all.log", "s-failed.log"])
      assert.strictEqual(Fs.readFileSync(Path.join(logDir, "s-all.log"), "utf8"), "fine\n")
    }))

  it.live("an interrupted Session's log is not kept as a failure", () =>
    Effect.gen(function*() {
      const logDir = Path.join(tempDir(), "logs")
      const pidsFile = Path.join(tempDir(), "pids")
      const fiber = yield* local({
        spec: spec(`bash ${fixtures}/sleeper.sh`, tempDir(), { env: { PIDS_FILE: pidsFile } }),
        logDir
      }).run(launch()).pipe(Effect.forkChild)
      yield* awaitLines(pidsFile)
      yield* Fiber.interrupt(fiber)
      assert.isFalse(Fs.existsSync(Path.join(logDir, "session-7.log")))
    }))

  it.live("adds nothing to the agent's environment beyond the parent's, --agent-env and the seven RELAX_* variables", () =>
    Effect.gen(function*() {
      const parentEnv = { PATH: process.env["PATH"] ?? "/usr/bin:/bin", FROM_PARENT: "kept" }
      // What a login shell adds by itself (PWD, SHLVL, profile scripts), measured with the same parent environment.
      const cwd = tempDir()
      const baseline = new Set(
        ChildProcess.execFileSync("/bin/bash", ["-lc", "env -0"], { cwd, env: parentEnv, encoding: "utf8" })
          .split("\0").filter((line) => line.length > 0).map((line) => line.slice(0, line.indexOf("=")))
      )
      const command = `env -0 > "$RELAX_SESSION_IO_DIR/../env-${
        Path.basename(cwd)
      }"; printf '{}' > "$RELAX_OUTPUT_JSON"`
      const ioRoot = tempDir()
      yield* local({ spec: spec(command, cwd, { env: { FROM_AGENT_ENV: "given" } }), ioRoot, parentEnv }).run(launch())
      const dumped = Fs.readFileSync(Path.join(ioRoot, `env-${Path.basename(cwd)}`), "utf8")
        .split("\0").filter((line) => line.length > 0).map((line) => line.slice(0, line.indexOf("=")))
      const added = dumped.filter((key) => !baseline.has(key)).sort()
      assert.deepStrictEqual(added, [
        "FROM_AGENT_ENV",
        "RELAX_BASE_URL",
        "RELAX_GROUP_ID",
        "RELAX_INPUT_JSON",
        "RELAX_OUTPUT_JSON",
        "RELAX_ROLLOUT_MODE",
        "RELAX_SESSION_ID",
        "RELAX_SESSION_IO_DIR"
      ])
      assert.include(dumped, "FROM_PARENT")
    }))

  it.live("reports an agent that cannot be started", () =>
    Effect.gen(function*() {
      const cwd = tempDir()
      const supervisor = local({ spec: spec("true", cwd) })
      Fs.rmSync(cwd, { recursive: true })
      const error = yield* supervisor.run(launch()).pipe(Effect.flip)
      assert.strictEqual(error._tag, "AgentExecutionError")
      if (error._tag !== "AgentExecutionError") return
      assert.strictEqual(error.reason, "spawn")
      assert.match(error.message, /^Managed command agent could not be started: .*ENOENT/)
    }))
})

describe("resolveAgentSpec", () => {
  it.effect("resolves --agent-cwd to an existing directory", () =>
    Effect.gen(function*() {
      const cwd = tempDir()
      const resolved = yield* Supervisor.resolveAgentSpec({ command: "  bash run.sh ", cwd, env: ["FOO=bar"] })
      assert.deepStrictEqual(resolved, { command: "bash run.sh", cwd, env: { FOO: "bar" }, timeoutSeconds: 1800 })
    }))

  it.effect("rejects a --agent-cwd that does not exist", () =>
    Effect.gen(function*() {
      const missing = Path.join(tempDir(), "nope")
      const error = yield* Supervisor.resolveAgentSpec({ command: "true", cwd: missing }).pipe(Effect.flip)
      assert.strictEqual(error.message, `--agent-cwd: managed agent cwd must be an existing directory: ${missing}`)
    }))

  it.effect("rejects --agent-env keys starting with RELAX_", () =>
    Effect.gen(function*() {
      const error = yield* Supervisor.resolveAgentSpec({ command: "true", cwd: tempDir(), env: ["RELAX_BASE_URL=x"] })
        .pipe(
          Effect.flip
        )
      assert.strictEqual(error.option, "--agent-env")
      assert.include(error.message, "key 'RELAX_BASE_URL' is reserved")
    }))
})
