import { Effect, Context } from "effect"
import { sglangGateway, embeddedGateway, registerSessions, gatewayTarget } from "./servers.ts"
import { start } from "./child.ts"
import { conversation } from "./conversation.ts"
const clients = Number(process.argv[3] ?? 64), turns = Number(process.argv[4] ?? 10)
Effect.runPromise(Effect.scoped(Effect.gen(function*() {
  const standIn = start("./sglangStandIn.ts")
  const client = start("./loadClient.ts")
  const { url } = yield* Effect.promise(() => standIn.call<{ url: string }>({ outputIds: [562, 151645] }))
  const ctx = process.argv[2] === "e" ? yield* embeddedGateway() : yield* sglangGateway(url)
  for (let i = 0; i < 2; i++) {
  const ids = yield* Effect.promise(() => registerSessions(ctx, clients))
  const t = gatewayTarget("g", ctx, ids)
  const r = yield* Effect.promise(() => client.call<any>({ kind: "conversations", targets: [t], clients, turns, history: conversation(30, 470), turnBytes: 300, interleave: false }))
  console.log((clients * turns * 1000 / r[0].wallMs).toFixed(0), "req/s")
  }
  yield* Effect.promise(() => standIn.close())
  yield* Effect.promise(() => client.close())
}))).catch((e) => console.error("ERR", e))
