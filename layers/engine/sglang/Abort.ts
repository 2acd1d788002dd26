/**
 * Stopping a generation on SGLang: `POST /abort_request {rid}` on every worker.
 *
 * **Details**
 * SGLang matches rids by prefix (`Scheduler.abort_request`), so rids are fixed-length (src/engine/Rid.ts). Aborting
 * never fails: a worker that does not answer 200 is logged (the request may run to its end there). With a router the
 * list is its current one (at most a second old).
 *
 * SGLang answers `/abort_request` at once (`http_server.abort_request` hands an `AbortReq` to the scheduler and
 * returns): the aborted generation's own answer (partial output, finish `abort`) arrives later on its `/generate`
 * request. Callers wait for that answer (the generation gate waits for every aborted attempt to return), never for
 * this call.
 */
import { Effect } from "effect"
import type * as SglangWire from "../../../src/engine/sglang/SglangWire.ts"
import * as Http from "./Http.ts"
import type * as Workers from "./Workers.ts"

/** Abort `rid` on every worker; failures are logged. */
export const abort = (http: Http.Http, workers: Workers.Workers, rid: string): Effect.Effect<void> =>
  Effect.flatMap(workers.controlTargets(false), (urls) =>
    Effect.forEach(
      urls,
      (url) =>
        http.request(url, "/abort_request", "POST", { rid } satisfies SglangWire.AbortRequest, Http.noHeaders, 10_000)
          .pipe(
            Effect.flatMap(Http.ok(url, "/abort_request")),
            Effect.catch((error) => Effect.logWarning(`abort of rid ${rid} failed: ${error.message}`))
          ),
      { concurrency: "unbounded", discard: true }
    ))
