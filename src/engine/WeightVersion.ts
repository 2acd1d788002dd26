/**
 * Weight versions: the version after an update, and the version(s) one engine attempt ran on.
 *
 * **Details**
 * SGLang stamps `meta_info.weight_version` when an answer leaves the server, not when its tokens were generated, so
 * the version an attempt ran on comes from the update protocol the gateway drives: the *boundaries* (updates, pauses,
 * resumes) that happened while the attempt was in flight, and whether it ended in an abort. {@link attemptVersions}
 * follows what SGLang does at each boundary (`TokenizerManager.pause_generation`, `http_server.update_weight_version`):
 * - `Update` (`/update_weight_version` with `abort_all_requests`): every request the scheduler holds is aborted;
 * - `Pause` `abort`: every request in flight is aborted (running ones with their partial output, queued ones with none)
 *   and the call returns once none is left; requests arriving later wait at `is_pause_cond` until the resume, so they
 *   run wholly on the new weights;
 * - `Pause` `retract` / `in_place`: requests stay in the scheduler (retracted to the waiting queue, or where they are)
 *   and continue after the resume: tokens before the pause come from the old weights, the rest from the new;
 * - `Resume`: generation continues on the version given (the trainer's push set it).
 */
import { Schema } from "effect"

/** SGLang's `/pause_generation` modes (`PauseGenerationReqInput.mode`). */
export const PauseMode = Schema.Literals(["abort", "retract", "in_place"])
export type PauseMode = typeof PauseMode.Type

/** A change of weights, or of whether generation runs, that an attempt in flight may cross. */
export type Boundary =
  | { readonly _tag: "Update"; readonly version: string }
  | { readonly _tag: "Pause"; readonly mode: PauseMode }
  | { readonly _tag: "Resume"; readonly version: string }

/** The version(s) an attempt ran on, and whether a weight update or pause (not a failure) cut it. */
export interface AttemptVersions {
  /** Oldest first; one entry unless SGLang kept the attempt across a `retract` / `in_place` pause. */
  readonly versions: ReadonlyArray<string>
  /** The attempt ended in an abort that an update or an `abort` pause caused: its request resumes, it is not failing. */
  readonly cutByUpdate: boolean
}

/**
 * The version after an update without an explicit one: an integer version counts up (`"3"` → `"4"`); any other
 * version is replaced by the number of updates so far.
 */
export const next = (current: string, updates: number): string => {
  const n = Number(current)
  return Number.isSafeInteger(n) && String(n) === current ? String(n + 1) : String(updates)
}

/** Does SGLang abort the requests it holds at this boundary? */
const cuts = (boundary: Boundary): boolean =>
  boundary._tag === "Update" || (boundary._tag === "Pause" && boundary.mode === "abort")

/** The versions an attempt running on `from` sees through `kept` (boundaries that abort nothing): each resume's. */
const keptThrough = (from: string, kept: ReadonlyArray<Boundary>): Array<string> => {
  const versions = [from]
  for (const boundary of kept) {
    if (boundary._tag === "Resume" && boundary.version !== versions[versions.length - 1]) {
      versions.push(boundary.version)
    }
  }
  return versions
}

/** The version in effect after `boundaries`, starting from `from`. */
const versionAfter = (from: string, boundaries: ReadonlyArray<Boundary>): string =>
  boundaries.reduce((version, b) => (b._tag === "Pause" ? version : b.version), from)

/**
 * The version(s) an attempt that started on `start` ran on, given the boundaries it crossed (in order), whether it
 * ended in an abort, and SGLang's label on its answer.
 *
 * **Details**
 * - No boundary crossed: SGLang's label (the attempt's own version when the server sends none).
 * - Aborted: the first update or `abort` pause it crossed cut it (`cutByUpdate`); its tokens ran before it, on
 *   `start` and on the version of every resume of a `retract` / `in_place` pause it was kept across before. With no
 *   such boundary the abort was another one (a step boundary, an interruption), after every boundary crossed.
 * - Finished: no update or `abort` pause cut it, so it reached the scheduler after the last one it crossed: after an
 *   update it ran on that update's version; after an `abort` pause, on the resume's version (it waited at
 *   `is_pause_cond`), or on the version before the pause when it finished while still paused (it slipped past the
 *   abort). Resumes of later `retract` / `in_place` pauses add their versions.
 *
 * An attempt in flight at a `retract` / `in_place` pause lists both versions even if it was still in SGLang's waiting
 * queue (and so ran wholly on the new weights): SGLang's answer does not say which.
 */
export const attemptVersions = (
  start: string,
  crossed: ReadonlyArray<Boundary>,
  aborted: boolean,
  label: string | undefined
): AttemptVersions => {
  if (crossed.length === 0) return { versions: [label ?? start], cutByUpdate: false }
  if (aborted) {
    const cut = crossed.findIndex(cuts)
    return {
      versions: keptThrough(start, cut === -1 ? crossed : crossed.slice(0, cut)),
      cutByUpdate: cut !== -1
    }
  }
  let last = crossed.length - 1
  while (last >= 0 && !cuts(crossed[last]!)) last--
  if (last === -1) return { versions: keptThrough(start, crossed), cutByUpdate: false }
  const boundary = crossed[last]!
  if (boundary._tag === "Update") {
    return { versions: keptThrough(boundary.version, crossed.slice(last + 1)), cutByUpdate: false }
  }
  // After an `abort` pause: the attempt waited at `is_pause_cond` for the resume, unless it finished first.
  const rest = crossed.slice(last + 1)
  const at = rest.findIndex((b) => b._tag === "Resume")
  const resumed = rest[at]
  if (resumed === undefined || resumed._tag !== "Resume") {
    return { versions: [versionAfter(start, crossed.slice(0, last))], cutByUpdate: false }
  }
  return { versions: keptThrough(resumed.version, rest.slice(at + 1)), cutByUpdate: false }
}
