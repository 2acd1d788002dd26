/**
 * LoRA adapters on SGLang (docs/lora.md): `POST /load_lora_adapter` and `POST /unload_lora_adapter` on each worker
 * itself, since a router (the SGLang Model Gateway) has no LoRA routes (a 404 with an empty body there).
 *
 * **Details**
 * - `workers` is the list control calls fan out to, read fresh from a router: a worker registered later is found by
 *   the next publication, and the publisher loads the live versions on it before it may serve a Session.
 * - A load is sent `pinned` when asked: SGLang evicts the least recently used *unpinned* adapter silently when a load
 *   goes past `--max-loaded-loras`, so a published version must be pinned to stay.
 * - An unload answers once every running request using the adapter has finished (SGLang waits for them; nothing is
 *   aborted). An unload of a name the worker does not hold is a success: the adapter is gone.
 */
import { Effect, Schema } from "effect"
import * as LoraWire from "../../../src/lora/LoraWire.ts"
import * as Engine from "../Engine.ts"
import * as Http from "./Http.ts"
import type * as Workers from "./Workers.ts"

/** The message of a LoRA route's answer (`error_message`, else SGLang's usual error shapes). */
const messageOf = (body: string): string => {
  try {
    const decoded = Schema.decodeUnknownSync(LoraWire.LoraUpdateResponse)(JSON.parse(body))
    if (typeof decoded.error_message === "string" && decoded.error_message.length > 0) return decoded.error_message
  } catch {
    // not the LoRA answer's shape: SGLang's other error bodies
  }
  return Http.errorMessage(body)
}

/** A LoRA route's answer: 200 with `success` true, else the refusal naming the worker and the adapter. */
const checked = (url: string, path: string, adapter: string) => (answer: Http.Answer) =>
  Effect.gen(function*() {
    if (answer.status === 200) {
      const decoded = yield* Http.decodeJson(LoraWire.LoraUpdateResponse, url, path, answer)
      if (decoded.success) return
    }
    return yield* new Engine.EngineError({
      reason: answer.status === 200 ? "refused" : "status",
      detail: `SGLang at ${url}${path} refused LoRA adapter ${adapter} (HTTP ${answer.status}): ` +
        messageOf(answer.body) +
        (answer.status === 404 ? " (is the server launched with --enable-lora? a router has no LoRA routes)" : ""),
      url,
      status: answer.status
    })
  })

/** The adapter port over `workers`. */
export const make = (http: Http.Http, workers: Workers.Workers): Engine.AdapterPort => ({
  workers: workers.controlTargets(true),
  load: (worker, adapter) =>
    http.request(
      worker,
      "/load_lora_adapter",
      "POST",
      {
        lora_name: adapter.name,
        lora_path: adapter.path,
        ...(adapter.pinned ? { pinned: true } : {})
      } satisfies LoraWire.LoadLoraAdapterRequest
    ).pipe(
      Effect.flatMap(checked(worker, "/load_lora_adapter", adapter.name))
    ),
  unload: (worker, name) =>
    http.request(
      worker,
      "/unload_lora_adapter",
      "POST",
      { lora_name: name } satisfies LoraWire.UnloadLoraAdapterRequest
    )
      .pipe(
        Effect.flatMap(checked(worker, "/unload_lora_adapter", name)),
        Effect.catchIf(
          (error) => error.status === 400 && LoraWire.isUnknownAdapter(error.detail),
          () => Effect.void
        )
      )
})
