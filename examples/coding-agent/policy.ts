/**
 * The embedded engine's policy for the coding example (`--embedded-policy examples/coding-agent/policy.ts#policy`):
 * a scripted model that fixes off-by-one bugs with the agent's tools.
 *
 * **Details**
 * It runs the tests, lists `src/`, reads the source file, patches the first line that one of its off-by-one rules
 * recognizes, runs the tests again and reports. Like a real model it makes mistakes, decided by a hash of the task and
 * the request's sampling seed (`--rollout-seed` plus the Session's position in its Group, so the same seed gives the
 * same samples): about three Sessions in ten apply a wrong fix (the tests still fail: reward 0), and about two in ten
 * first run a command that fails (`cat` of a file that does not exist) and then recover. Rewards therefore differ inside
 * a Group and GRPO advantages are not all zero. The text uses the Qwen3 formats the `qwen3` reasoning parser and the
 * `qwen25` tool-call parser read.
 */
import { createHash } from "node:crypto"
import type * as Engine from "../../layers/engine/Engine.ts"

type Message = Engine.PolicyRequest["messages"][number]

const textOf = (content: Message["content"]): string =>
  typeof content === "string"
    ? content
    : content.map((part) => (typeof part["text"] === "string" ? part["text"] : "")).join("")

const toolCall = (thought: string, name: string, args: Record<string, string>): string =>
  `<think>\n${thought}\n</think>\n\n<tool_call>\n${JSON.stringify({ name, arguments: args })}\n</tool_call>`

const answer = (thought: string, text: string): string => `<think>\n${thought}\n</think>\n\n${text}`

/** An off-by-one rule: a pattern, the fix, and the plausible wrong edit the model sometimes makes instead. */
interface Rule {
  readonly find: RegExp
  readonly fix: string
  readonly wrong: string
}

const rules: ReadonlyArray<Rule> = [
  { find: /\[(\w+)\.length\]/, fix: "[$1.length - 1]", wrong: "[$1.length + 1]" },
  { find: /let (\w+) = 1;/, fix: "let $1 = 0;", wrong: "let $1 = 2;" },
  { find: /, (\w+) - 1\)/, fix: ", $1)", wrong: ", $1 + 1)" },
  { find: /Math\.floor\(/, fix: "Math.ceil(", wrong: "Math.round(" },
  { find: /(\w+) > 0;/, fix: "$1 >= 0;", wrong: "$1 > 1;" },
  { find: /(\w+) < (\w+);/, fix: "$1 <= $2;", wrong: "$1 < $2 - 1;" }
]

/** A byte of the hash of the task and the seed: < 77 (30%) a wrong fix; 77..127 (20%) a failed command first. */
const draw = (task: string, seed: number | string): number =>
  createHash("sha256").update(`${seed}\n${task}`).digest()[0]!

/** The last assistant tool call and the observation that answered it. */
const lastCall = (
  messages: ReadonlyArray<Message>
): { readonly name: string; readonly args: Record<string, string> } | undefined => {
  for (let i = messages.length - 1; i >= 0; i--) {
    const call = messages[i]!.tool_calls?.[0]
    if (call !== undefined) {
      return { name: call.function.name ?? "", args: JSON.parse(call.function.arguments) as Record<string, string> }
    }
  }
  return undefined
}

export const policy = (request: Engine.PolicyRequest): string => {
  const messages = request.messages
  const task = textOf(messages.find((m) => m.role === "user")?.content ?? "")
  const testCommand = /`([^`]+)`/.exec(task)?.[1]
  if (testCommand === undefined) {
    return answer("The task does not say how to run the tests.", "I cannot tell how to run the tests.")
  }
  const roll = draw(task, request.seed ?? request.sessionId)
  const last = lastCall(messages)
  const observation = textOf(messages[messages.length - 1]?.content ?? "")
  const patched = messages.some((m) => m.tool_calls?.some((call) => call.function.name === "apply_patch") === true)

  if (last === undefined) return toolCall("First I run the tests to see what fails.", "bash", { command: testCommand })
  if (last.name === "bash" && last.args["command"] === testCommand) {
    if (!patched) {
      return roll >= 77 && roll < 128
        ? toolCall("The tests fail. The code is probably in src/index.js.", "bash", { command: "cat src/index.js" })
        : toolCall("The tests fail. Let me see the source files.", "bash", { command: "ls src" })
    }
    return /^# fail 0$/m.test(observation)
      ? answer("All tests pass now.", "Fixed the off-by-one bug; the tests pass.")
      : answer("The tests still fail after my change.", "I could not fix the bug: the tests still fail.")
  }
  if (last.name === "bash" && last.args["command"]?.startsWith("cat ") === true) {
    return toolCall("That file does not exist. Let me list src/.", "bash", { command: "ls src" })
  }
  if (last.name === "bash" && last.args["command"] === "ls src") {
    const file = observation.split(/\s+/).find((name) => name.endsWith(".js"))
    return file === undefined
      ? answer("There is no source file.", "I could not find the source file.")
      : toolCall(`I read src/${file}.`, "read_file", { path: `src/${file}` })
  }
  if (last.name === "read_file") {
    const line = observation.split("\n").find((text) => rules.some((rule) => rule.find.test(text)))
    const rule = rules.find((r) => line !== undefined && r.find.test(line))
    if (line === undefined || rule === undefined) {
      return answer("I see no off-by-one here.", "I could not find the bug.")
    }
    const replace = line.replace(rule.find, roll < 77 ? rule.wrong : rule.fix)
    return toolCall(`This line is off by one: ${line.trim()}`, "apply_patch", {
      path: last.args["path"] ?? "",
      search: line,
      replace
    })
  }
  if (last.name === "apply_patch") {
    return observation.startsWith("error")
      ? answer("The patch did not apply.", "I could not apply my fix.")
      : toolCall("Patched. Now I run the tests again.", "bash", { command: testCommand })
  }
  return answer("I am not sure what to do next.", "I stop here.")
}

export default policy
