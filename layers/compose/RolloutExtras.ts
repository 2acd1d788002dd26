/**
 * What a program can give a rollout besides its options (`makeRollout`, `createRollout`, ...): an in-process agent,
 * where the lines go, embedded engine tuning, the directory hook paths are relative to.
 */
import type * as EmbeddedEngine from "../engine/EmbeddedEngine.ts"
import type * as Telemetry from "../observability/Telemetry.ts"
import type * as Supervisor from "../session/Supervisor.ts"

/** Extras a program can give `makeRollout` besides the options. */
export interface MakeRolloutExtras {
  /** Run this Effect function per Session instead of spawning `--agent-command`. */
  readonly agent?: Supervisor.InProcessAgent | undefined
  /** Where event lines and the progress bar go (default: stdout, the bar on a TTY). */
  readonly telemetry?: Telemetry.Sink | undefined
  /** Embedded engine tuning (e.g. `EmbeddedEngine.instant` for tests); the policy and seed come from the options. */
  readonly embedded?: Omit<EmbeddedEngine.EmbeddedEngineOptions, "policy"> | undefined
  /** Directory hook paths (`--embedded-policy`, `--custom-rm-path`, ...) are relative to (default: `process.cwd()`). */
  readonly cwd?: string | undefined
}
