/**
 * How `relax-agentic` ends on SIGINT / SIGTERM: a shutdown with a deadline, a second signal that ends it at once, and
 * one last line saying what was interrupted and what was written (docs/runtime.md "Shutdown").
 *
 * **Details**
 * The first signal interrupts the command's fiber: its scopes close (every agent process group is stopped: SIGTERM,
 * SIGKILL after the grace period; the gateway and the engine connections close), and the command's report line is
 * printed last. If that has not finished within `deadlineMs` (a file or network operation that never settles), or a
 * second signal arrives, every agent process group still registered is SIGKILLed at once, whatever else is pending is
 * abandoned with a line naming it, and the report line is printed. The process then ends by the signal it received
 * (its default action, so a calling shell sees "killed by SIGINT" and stops its loop, as with any well-behaved tool),
 * never through `process.exit`: that joins libuv's file-system threads and hangs as long as one of them is blocked.
 * After the first signal the gateway's 499 "client disconnected" warnings are not shown: those clients are the agents
 * being stopped, and their generations are not committed.
 *
 * A command may ask to be *drained* by SIGTERM instead (`onDrain`; a cluster runner: docs/scale-out.md "Draining a
 * runner"): the first SIGTERM then only calls its hook, the command ends on its own once drained, and the deadline
 * does not run. A second signal (or SIGINT) during the drain stops it as above.
 */
import { Effect, Layer, Logger, Runtime } from "effect"
import * as Files from "../../layers/rollout/Files.ts"
import * as ProcessGroup from "../../layers/session/ProcessGroup.ts"
import * as Thrown from "../Thrown.ts"

/**
 * How long a shutdown may take before what is still pending is abandoned: above the agents' stop (5 s grace, then
 * SIGKILL), below the 30 s a container orchestrator (Kubernetes' default grace period) waits before its own SIGKILL.
 */
export const deadlineMs = 20_000

/** The signal being handled, once one arrived. */
let received: NodeJS.Signals | undefined
/** The command's last line for an interruption by `signal` (set by the running command; printed once). */
let report: ((signal: NodeJS.Signals) => string | undefined) | undefined
let reported = false
/** What SIGTERM starts instead of the shutdown (`onDrain`), and whether it was started. */
let drain: (() => void) | undefined
let draining = false

/** Register the line an interrupted command ends with (the rollout's `RunReport.interruptedLine`). */
export const onInterrupted = (line: (signal: NodeJS.Signals) => string | undefined): Effect.Effect<void> =>
  Effect.sync(() => {
    report = line
  })

/**
 * Make the first SIGTERM call `hook` (start draining) instead of interrupting the command; a second signal, or
 * SIGINT, still interrupts it.
 */
export const onDrain = (hook: () => void): Effect.Effect<void> =>
  Effect.sync(() => {
    drain = hook
  })

/** Whether a shutdown signal arrived. */
export const signalled = (): boolean => received !== undefined

const printReport = (signal: NodeJS.Signals): void => {
  if (reported) return
  reported = true
  let line: string | undefined
  try {
    line = report?.(signal)
  } catch (error) {
    line = `Interrupted by ${signal} (the run's report failed: ${Thrown.messageOf(error)})`
  }
  // stdout and stderr writes are synchronous on Linux (files, pipes, terminals): the line is out before the end.
  process.stdout.write(`${line ?? `Interrupted by ${signal}`}\n`)
}

/** End the process by `signal`'s default action (Node's own handler resets the terminal and re-raises it). */
const endBy = (signal: NodeJS.Signals): void => {
  process.removeAllListeners("SIGINT")
  process.removeAllListeners("SIGTERM")
  process.kill(process.pid, signal)
}

const abandon = (signal: NodeJS.Signals, why: string): void => {
  const killed = ProcessGroup.killAllNow()
  const pending = Files.inFlight()
  process.stderr.write(
    `relax-agentic: ${why}: SIGKILLed ${killed} agent process group(s); abandoned ` +
      (pending.length > 0
        ? `the write(s) of ${pending.join(", ")} and the rest of the shutdown\n`
        : "the rest of the shutdown (closing the gateway and the engine connections)\n")
  )
  printReport(signal)
  endBy(signal)
}

/**
 * Run the command as the process's main program: `NodeRuntime.runMain`'s contract (exit code from the teardown;
 * interruption on SIGINT / SIGTERM) with the deadline, the second signal and the report line of the module comment.
 */
export const runMain = Runtime.makeRunMain(({ fiber, teardown }) => {
  const onSignal = (signal: NodeJS.Signals) => {
    if (received !== undefined) return abandon(received, `${signal} received again`)
    if (signal === "SIGTERM" && drain !== undefined && !draining) {
      draining = true
      process.stderr.write(
        "relax-agentic: SIGTERM received: draining (taking no new work, letting what runs finish; " +
          "SIGTERM or Ctrl-C again to stop at once)\n"
      )
      return drain()
    }
    received = signal
    process.stderr.write(
      `relax-agentic: ${signal} received: stopping every agent and closing (at most ${deadlineMs / 1000} s; ` +
        `${signal === "SIGINT" ? "Ctrl-C" : signal} again to stop at once)\n`
    )
    setTimeout(() => abandon(signal, `the shutdown did not finish within ${deadlineMs / 1000} s`), deadlineMs).unref()
    fiber.interruptUnsafe(fiber.id)
  }
  process.on("SIGINT", onSignal)
  process.on("SIGTERM", onSignal)
  fiber.addObserver((exit) => {
    teardown(exit, (code) => {
      if (received !== undefined) {
        printReport(received)
        return endBy(received)
      }
      process.removeListener("SIGINT", onSignal)
      process.removeListener("SIGTERM", onSignal)
      if (code !== 0) process.exit(code)
    })
  })
})

const isClientDisconnect = (message: unknown): boolean =>
  (Array.isArray(message) ? message : [message]).some((part) =>
    typeof part === "string" && part.startsWith("client disconnected")
  )

/**
 * The default logger, except that after a shutdown signal the gateway's "client disconnected" warnings are dropped
 * (see the module comment).
 */
export const loggerLayer: Layer.Layer<never> = Logger.layer([
  Logger.make((options) => {
    if (received !== undefined && isClientDisconnect(options.message)) return
    Logger.defaultLogger.log(options)
  })
])
