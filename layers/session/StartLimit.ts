/**
 * A limit on agents *starting* at once (`--agent-max-starting`, docs/runtime.md "Agents starting at once"): a
 * Session's agent takes a start permit before it is launched and gives it back at its first model request (or when it
 * ends), so a step of many Groups does not start every agent, sandbox and container in the same second.
 *
 * **Details**
 * The limit wraps a `SupervisorShape`: `run` waits for a permit, then runs the agent as before. The permit is held
 * while the agent starts up (a sandbox booting, a repository cloned), not while it works: its first model request
 * (`SessionLaunch.firstRequest`, the first-request barrier's ticket) returns it, so the barrier can never wait on a
 * permit held by a Session of the same Group. Without `firstRequest` (`relax-agentic check`) the permit is held until
 * the agent ends. The limit applies per process: the single process in single-process mode, each runner in a cluster.
 */
import { Deferred, Effect, Semaphore } from "effect"
import type * as Supervisor from "./Supervisor.ts"

/** `supervisor` with at most `maxStarting` agents between their launch and their first model request. */
export const limit = (
  supervisor: Supervisor.SupervisorShape,
  maxStarting: number
): Effect.Effect<Supervisor.SupervisorShape> =>
  Effect.map(Semaphore.make(maxStarting), (permits): Supervisor.SupervisorShape => ({
    ...supervisor,
    run: (launch) =>
      Effect.scoped(Effect.gen(function*() {
        // Returned exactly once: at the first model request, or when the agent ends (also by interruption).
        const returned = yield* Deferred.make<void>()
        const giveBack = Effect.flatMap(Deferred.succeed(returned, undefined), (first) =>
          first ? permits.release(1) : Effect.void)
        yield* Effect.acquireRelease(permits.take(1), () =>
          giveBack)
        if (launch.firstRequest !== undefined) {
          yield* Effect.forkScoped(Effect.andThen(launch.firstRequest, giveBack))
        }
        return yield* supervisor.run(launch)
      }))
  }))
