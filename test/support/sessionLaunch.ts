/**
 * A Session's launch as the Supervisor gets it, for tests of what runs around an agent's start (the start limit, the
 * slow-start watch): one user message, no images, `firstRequest` done when the agent's first model request arrives.
 */
import type { Effect } from "effect"
import type * as Supervisor from "../../layers/session/Supervisor.ts"

export const sessionLaunch = (sessionId: string, firstRequest: Effect.Effect<void>): Supervisor.SessionLaunch => ({
  sessionId,
  groupId: "g-0",
  rolloutMode: "train",
  input: { messages: [{ role: "user", content: "Hi" }], metadata: {}, images: [] },
  firstRequest
})
