/**
 * Why agents are slow to start (docs/troubleshooting.md "Agents are slow to start"): from the time each agent took from
 * its launch to its first model request, and the time a login shell (`bash -lc true`) takes on this machine, the one
 * line the operator is shown.
 *
 * **Details**
 * Agents start under `bash -lc`, so every agent first runs the login profile; a profile that runs `pyenv init` (and its
 * `pyenv rehash`, which many shells starting at once wait for one by one) costs each agent a second or more before its
 * own code runs. The line is shown once the median launch → first request of the Sessions seen so far is above
 * {@link slowMedianSeconds}, and names the cause the process can see: the login shell's own time when it is a large part
 * of that median, else the agent's own startup.
 */
import * as Statistics from "../stats/Statistics.ts"

/** The median launch → first request above which agents count as slow to start. */
export const slowMedianSeconds = 1

/** Sessions seen before the median is judged (fewer would let one slow agent decide). */
export const minSessions = 4

/** A login shell taking at least this share of the median is named as the cause. */
const shellShare = 0.5

/** Whether agents count as slow to start after these launch → first request times (seconds). */
export const isSlow = (firstRequestSeconds: ReadonlyArray<number>): boolean =>
  firstRequestSeconds.length >= minSessions && Statistics.median(firstRequestSeconds) > slowMedianSeconds

const seconds = (value: number): string => `${value.toFixed(1)} s`

/**
 * The line to show for these launch → first request times (seconds) and the login shell's time (`undefined` when it
 * could not be measured), or `undefined` while agents are not slow to start (or too few Sessions were seen).
 */
export const slowStartLine = (
  firstRequestSeconds: ReadonlyArray<number>,
  loginShellSeconds: number | undefined
): string | undefined => {
  if (!isSlow(firstRequestSeconds)) return undefined
  const typical = Statistics.median(firstRequestSeconds)
  const head = `Agents are slow to start: ${seconds(typical)} from launch to first model request (median of ` +
    `${firstRequestSeconds.length} Sessions).`
  const fix = "See docs/troubleshooting.md \"Agents are slow to start\"."
  if (loginShellSeconds !== undefined && loginShellSeconds >= shellShare * typical) {
    return `${head} A login shell (bash -lc true) takes ${seconds(loginShellSeconds)} here: agents start under ` +
      `bash -lc, so most of it is your login profile (e.g. pyenv init). ${fix}`
  }
  const shell = loginShellSeconds === undefined
    ? "the login shell's time could not be measured"
    : `a login shell (bash -lc true) takes only ${seconds(loginShellSeconds)} here`
  return `${head} ${shell[0]!.toUpperCase()}${shell.slice(1)}, so it is the agent's own startup (imports, a sandbox, ` +
    `a clone). ${fix}`
}
