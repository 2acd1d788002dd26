/**
 * `relax-agentic replay <output-dir | debug dump>`: re-drive each recorded Session through today's generation core
 * and say whether it is identical (docs/debugging.md "Replay"); `--timed --sglang-url URL` replays the requests
 * against a live engine with the recorded gaps instead.
 *
 * **Details**
 * One line per Session: `identical`, or its first divergence (request, field, token index, recorded vs now); the
 * Sessions a truncated file cut off are named after them. The command fails (exit code 1) when any Session diverged
 * or could not be read, so it can gate CI.
 */
import { Console, Effect, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import * as Replay from "../../layers/replay/Replay.ts"
import * as TimedReplay from "../../layers/replay/TimedReplay.ts"
import * as CommandFlags from "./CommandFlags.ts"
import * as UserError from "./UserError.ts"

const flags = {
  sessions: Flag.String("session").pipe(
    Flag.atLeast(0),
    Flag.withDescription("Replay only this Session (repeat for several; default: every Session)")
  ),
  tokenizer: CommandFlags.optionalString(
    "tokenizer",
    "Replay with another tokenizer directory (default: the recorded one)"
  ),
  toolCallParser: CommandFlags.optionalString(
    "agentic-tool-call-parser",
    "Replay with another tool-call parser (default: the recorded one)"
  ),
  reasoningParser: CommandFlags.optionalString(
    "agentic-reasoning-parser",
    "Replay with another reasoning parser (default: the recorded one)"
  ),
  timed: CommandFlags.toggle(
    "timed",
    "Send the requests to a live engine (--sglang-url) with the recorded gaps between them"
  ),
  sglangUrl: CommandFlags.optionalString("sglang-url", "The SGLang server a --timed replay sends the requests to")
}

/** The flags of `replay` (docs/debugging.md; the docs test checks the pages name only flags that exist). */
export const replayFlagNames: ReadonlyArray<string> = CommandFlags.flagNames(flags)

/** `relax-agentic replay <path> [--session ID ...] [--tokenizer DIR] [--agentic-tool-call-parser NAME] ...`. */
export const replayCommand = Command.make(
  "replay",
  {
    path: Argument.String("path").pipe(
      Argument.withDescription("An --output-dir, or one --save-debug-rollout-data file")
    ),
    ...flags
  },
  (values) =>
    Effect.gen(function*() {
      const sessions = values.sessions
      const tokenizer = Option.getOrUndefined(values.tokenizer)
      if (values.timed) {
        const url = Option.getOrUndefined(values.sglangUrl)
        if (url === undefined) {
          return yield* UserError.make("--timed needs --sglang-url URL: the engine to replay against")
        }
        const report = yield* TimedReplay.replayTimed(values.path, { sessions, tokenizer, sglangUrl: url }).pipe(
          Effect.mapError((error) => UserError.make(error.message))
        )
        for (const line of TimedReplay.reportLines(report)) yield* Console.log(line)
        return
      }
      if (Option.isSome(values.sglangUrl)) {
        return yield* UserError.make("--sglang-url is for --timed replays; a replay answers with the recorded ids")
      }
      const report = yield* Replay.replay(values.path, {
        sessions,
        tokenizer,
        toolCallParser: Option.getOrUndefined(values.toolCallParser),
        reasoningParser: Option.getOrUndefined(values.reasoningParser)
      }).pipe(Effect.mapError((error) => UserError.make(error.message)))
      for (const line of Replay.reportLines(report)) yield* Console.log(line)
      if (!report.identical) {
        const diverged = report.sessions.filter((s) => s.divergence !== undefined).length
        return yield* UserError.make(
          `replay: ${diverged} of ${report.sessions.length} Session(s) diverged` +
            (report.unreadable.length === 0 ? "" : `, ${report.unreadable.length} could not be read`)
        )
      }
      yield* Console.log(`replay: all ${report.sessions.length} Session(s) identical`)
    })
).pipe(Command.withDescription(
  "Replay the recorded Sessions of a run through today's code and compare states, samples and answers " +
    "(--timed --sglang-url URL: against a live engine with the recorded gaps)."
))
