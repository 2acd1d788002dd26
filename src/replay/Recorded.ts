/**
 * The recorded Sessions of debug dumps, as `replay` and `rescore` read them (docs/debugging.md): each Session's replay
 * record, forest and sample records, and the Sessions a truncated file cut off.
 *
 * **Details**
 * A dump line is a debug record (src/inspect/Dump.ts's Schema); a Session's first record carries its `forest` and its
 * `replay` record (src/replay/Record.ts). A last line that is not JSON (a file cut mid-line) ends what is read of its
 * file (a line that is not JSON before the last is not a dump at all): the Sessions read before it are whole, the one it belonged to is named (its id read off the line's text).
 * A replay record of another format version fails the whole read with {@link ReplayFormatError}, naming the version.
 */
import { Data, Schema } from "effect"
import * as Dump from "../inspect/Dump.ts"
import type * as ForestDump from "../inspect/ForestDump.ts"
import * as Json from "../json/Json.ts"
import * as Record from "./Record.ts"

/** One recorded Session: where it was read, its replay record, its forest and its sample records in dump order. */
export interface Session {
  readonly sessionId: string
  readonly file: string
  readonly record: Record.SessionRecord
  readonly forest: ForestDump.ForestDump
  readonly samples: ReadonlyArray<Dump.DebugRecord>
}

/** A Session that cannot be replayed, and why. */
export interface Unreadable {
  readonly sessionId: string | undefined
  readonly file: string
  readonly line: number
  readonly reason: string
}

export interface Read {
  readonly sessions: ReadonlyArray<Session>
  readonly unreadable: ReadonlyArray<Unreadable>
}

/** The dump cannot be replayed at all: not a debug dump, no replay record, or another format version. */
export class ReplayFormatError extends Data.TaggedError("ReplayFormatError")<{
  readonly reason: "version" | "no-record" | "not-a-record"
  readonly file: string
  readonly line: number
  readonly detail: string
}> {
  override get message() {
    switch (this.reason) {
      case "version":
        return `${this.file}:${this.line}: replay record format version ${this.detail}; this relax-agentic reads ` +
          `version ${Record.version} only. Replay it with the relax-agentic that wrote it, or rerun the rollout with ` +
          "--save-debug-rollout-data to record it again (docs/debugging.md)"
      case "no-record":
        return `${this.file}: no replay record in it (${this.detail}). replay reads the debug dumps a rollout writes ` +
          "with --save-debug-rollout-data (not its rollout_<id>.jsonl samples); rerun the rollout with it " +
          "(docs/debugging.md)"
      case "not-a-record":
        return `${this.file}:${this.line}: not a debug-dump record (${this.detail}); replay reads the files ` +
          "--save-debug-rollout-data writes (docs/outputs.md \"The debug dump\")"
    }
  }
}

const decodeDebug = Schema.decodeUnknownExit(Dump.DebugRecord)
const decodeVersion = Schema.decodeUnknownExit(Record.Versioned)
const decodeRecord = Schema.decodeUnknownExit(Record.SessionRecord)

/** The Session id a cut line still shows, if its start survived. */
const sessionIdIn = (text: string): string | undefined => /"session_id":"([^"]+)"/.exec(text)?.[1]

/** Read the debug records of one dump file's text (training sample lines are skipped). */
export const readFile = (file: string, text: string): Read | ReplayFormatError => {
  const sessions = new Map<string, { first: Session | undefined; samples: Array<Dump.DebugRecord>; line: number }>()
  const unreadable: Array<Unreadable> = []
  const lines = text.split("\n")
  let records = 0
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!
    if (raw.trim() === "") continue
    let value: unknown
    try {
      value = JSON.parse(raw)
    } catch {
      // A file cut mid-line ends with that line (no line break after it); a line that is not JSON elsewhere is not a
      // record at all.
      if (i < lines.length - 1) {
        return new ReplayFormatError({ reason: "not-a-record", file, line: i + 1, detail: "the line is not JSON" })
      }
      const sessionId = sessionIdIn(raw)
      unreadable.push({ sessionId, file, line: i + 1, reason: "its record is cut off (the file is truncated here)" })
      if (sessionId !== undefined) sessions.delete(sessionId)
      break
    }
    // A training sample line (an --output-dir's rollout_<id>.jsonl) carries no replay record.
    if (!Json.isObject(value) || !("state_hashes" in value)) continue
    records++
    const decoded = decodeDebug(value)
    if (decoded._tag === "Failure") {
      return new ReplayFormatError({
        reason: "not-a-record",
        file,
        line: i + 1,
        detail: String(decoded.cause)
      })
    }
    const debug = decoded.value
    const entry = sessions.get(debug.session_id) ?? { first: undefined, samples: [], line: i + 1 }
    sessions.set(debug.session_id, entry)
    entry.samples.push(debug)
    const replay = value["replay"]
    if (replay === undefined || debug.forest === undefined) continue
    const versioned = decodeVersion(replay)
    if (versioned._tag === "Failure" || versioned.value.version !== Record.version) {
      return new ReplayFormatError({
        reason: "version",
        file,
        line: i + 1,
        detail: versioned._tag === "Failure" ? "(none)" : String(versioned.value.version)
      })
    }
    const record = decodeRecord(replay)
    if (record._tag === "Failure") {
      return new ReplayFormatError({ reason: "not-a-record", file, line: i + 1, detail: String(record.cause) })
    }
    entry.first = {
      sessionId: debug.session_id,
      file,
      record: record.value,
      forest: debug.forest,
      samples: entry.samples
    }
  }
  const out: Array<Session> = []
  for (const [sessionId, entry] of sessions) {
    if (entry.first !== undefined) out.push(entry.first)
    else {
      unreadable.push({
        sessionId,
        file,
        line: entry.line,
        reason: "its first record (with its forest and replay record) is missing"
      })
    }
  }
  if (records > 0 && out.length === 0 && unreadable.every((u) => u.reason.startsWith("its first record"))) {
    return new ReplayFormatError({
      reason: "no-record",
      file,
      line: 0,
      detail: "written before replay records, or by cluster runners not given --save-debug-rollout-data"
    })
  }
  return { sessions: out, unreadable }
}
