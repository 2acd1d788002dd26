/** A command's refusal of what the user typed: the message is both the cause and what the user reads. */
import { CliError } from "effect/cli"

/** A `CliError.UserError` that says `message` (what was wrong, where, what to do). */
export const make = (message: string): CliError.UserError =>
  new CliError.UserError({ cause: message, userMessage: message })
