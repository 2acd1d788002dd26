/**
 * The one error writer of the gateway: an error rendered in a protocol's shape as the status, headers and body text
 * that go on the wire.
 *
 * **Details**
 * Both error sinks write what this returns: the model route on Node's response (layers/gateway/ModelRoute.ts
 * `sendError`; a forwarded request's answer, `answerForwarded`) and Effect's router for every other path
 * (layers/gateway/Gateway.ts `unknownRoute`). The body is
 * `JSON.stringify` of the adapter's `renderError` body; the sink adds `content-type: application/json` and the
 * length. A 405 (a model path asked with another method) also says `allow: POST`, a 503 (cluster mode: the Session's
 * runner cannot be reached) `retry-after: 1`.
 */
import type * as Completion from "./Completion.ts"
import type * as ProtocolError from "./ProtocolError.ts"

/** An error answer ready to write. */
export interface ErrorAnswer {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  /** The JSON body text. */
  readonly body: string
}

/** Render `error` in the shape of `adapter`'s protocol (docs/requests.md, "Error bodies"). */
export const render = (adapter: Completion.Adapter, error: ProtocolError.AnyError): ErrorAnswer => {
  const rendered = adapter.renderError(error)
  return {
    status: rendered.status,
    headers: rendered.status === 405
      ? { ...rendered.headers, allow: "POST" }
      : rendered.status === 503
      ? { ...rendered.headers, "retry-after": "1" }
      : rendered.headers,
    body: JSON.stringify(rendered.body)
  }
}
