/**
 * The cluster's part of the command (docs/scale-out.md): `relax-agentic runner`, and the controller role `rollout` /
 * `serve` take with `--cluster-database-url`.
 *
 * **Details**
 * A runner resolves the same configuration as the controller (flags and `--config`), joins the cluster at
 * `--runner-address`, serves the agent-facing gateway (forwarding requests for Sessions it does not hold) and hosts
 * the Groups of the shards it owns until it is stopped (SIGTERM / Ctrl-C): then its shards move to the other runners
 * and every agent it launched is reaped.
 */
import { Console, Deferred, Duration, Effect, Exit, Layer, Option, Predicate } from "effect"
import { CliError, Command } from "effect/cli"
import { randomBytes } from "node:crypto"
import * as Os from "node:os"
import * as AdmissionWriter from "../../layers/cluster/AdmissionWriter.ts"
import * as ClusterJoin from "../../layers/cluster/ClusterJoin.ts"
import * as Fleet from "../../layers/cluster/Fleet.ts"
import * as Forward from "../../layers/cluster/Forward.ts"
import * as ForwardAnswer from "../../layers/cluster/ForwardAnswer.ts"
import * as Host from "../../layers/cluster/Host.ts"
import * as HostEntity from "../../layers/cluster/HostEntity.ts"
import * as LoraWriter from "../../layers/cluster/LoraWriter.ts"
import * as MemberTable from "../../layers/cluster/MemberTable.ts"
import * as Remote from "../../layers/cluster/Remote.ts"
import * as SingleWriter from "../../layers/cluster/SingleWriter.ts"
import * as Engine from "../../layers/engine/Engine.ts"
import * as Gateway from "../../layers/gateway/Gateway.ts"
import * as FairScheduler from "../../layers/platform/FairScheduler.ts"
import * as RolloutConfig from "../../layers/rollout/RolloutConfig.ts"
import * as SessionRunner from "../../layers/rollout/SessionRunner.ts"
import * as GenerationGate from "../../layers/schedule/GenerationGate.ts"
import * as Fingerprint from "../cluster/Fingerprint.ts"
import * as ClusterFlags from "../cluster/Flags.ts"
import * as Slots from "../cluster/Slots.ts"
import * as Settings from "../config/Settings.ts"
import { type ClusterRole, servicesFromSettings } from "../index.ts"
import * as LoraOptions from "../lora/LoraOptions.ts"
import * as Thrown from "../Thrown.ts"
import * as CheckCommand from "./CheckCommand.ts"
import * as CommandFlags from "./CommandFlags.ts"
import * as SettingsFromFlags from "./SettingsFromFlags.ts"
import * as Shutdown from "./Shutdown.ts"
import * as UserError from "./UserError.ts"

const valueOf = (values: CommandFlags.FlagValues, name: string): string | number | boolean | undefined => {
  const value = values[name]
  if (value === undefined || Option.isNone(value)) return undefined
  const inner = value.value
  return typeof inner === "string" || typeof inner === "number" || typeof inner === "boolean" ? inner : undefined
}

const seconds = (
  values: CommandFlags.FlagValues,
  name: string,
  fallback: Duration.Duration
): Effect.Effect<Duration.Duration, CliError.UserError> => {
  const value = valueOf(values, name)
  if (value === undefined) return Effect.succeed(fallback)
  return typeof value === "number" && value > 0
    ? Effect.succeed(Duration.millis(Math.round(value * 1000)))
    : Effect.fail(UserError.make(`--${name}: ${String(value)} is not a positive number of seconds`))
}

/**
 * The cluster settings of the command line (`--cluster-*`, RELAX_CLUSTER_DATABASE_URL), or `undefined` without a
 * database URL (single-process mode).
 */
export const clusterOptionsFromFlags = (
  values: CommandFlags.FlagValues,
  env: Readonly<Record<string, string | undefined>> = process.env
): Effect.Effect<ClusterJoin.ClusterOptions | undefined, CliError.UserError> =>
  Effect.gen(function*() {
    const url = valueOf(values, "cluster-database-url") ?? (env["RELAX_CLUSTER_DATABASE_URL"] || undefined)
    if (url === undefined) return undefined
    if (typeof url !== "string" || !/^postgres(ql)?:\/\//.test(url)) {
      return yield* UserError.make(`--cluster-database-url: expects postgres://user:password@host:port/database`)
    }
    const shards = valueOf(values, "cluster-shards") ?? ClusterJoin.defaults.shardsPerGroup
    if (typeof shards !== "number" || !Number.isInteger(shards) || shards < 1) {
      return yield* UserError.make(`--cluster-shards: ${String(shards)} is not a positive integer`)
    }
    return {
      databaseUrl: url,
      shardsPerGroup: shards,
      lockExpiration: yield* seconds(values, "cluster-lock-expiration", ClusterJoin.defaults.lockExpiration),
      lockRefresh: yield* seconds(values, "cluster-lock-refresh", ClusterJoin.defaults.lockRefresh),
      healthCheck: yield* seconds(values, "cluster-health-check", ClusterJoin.defaults.healthCheck),
      refreshAssignments: ClusterJoin.defaults.refreshAssignments,
      callTimeout: yield* seconds(values, "cluster-call-timeout", ClusterJoin.defaults.callTimeout)
    } satisfies ClusterJoin.ClusterOptions
  })

/** Settings a cluster cannot run yet (docs/scale-out.md "Not yet"): refused with the flag to change. */
export const clusterProblem = (_settings: Settings.RolloutSettings): string | undefined => undefined

/** How members keep their `relax_agentic_members` row fresh, and when a row counts as stale. */
const membersTiming = (options: ClusterJoin.ClusterOptions) => ({
  refresh: options.lockRefresh,
  freshness: options.lockExpiration
})

/**
 * The controller's announcement (layers/cluster/MemberTable.ts): refused when a live runner has other sample-changing
 * settings; warns when the live runners' `--runner-slots` cannot hold the Sessions the settings keep resident.
 */
const controllerMember = (options: ClusterJoin.ClusterOptions) =>
  Layer.effectDiscard(Effect.gen(function*() {
    const settings = yield* RolloutConfig.RolloutConfig
    const runners = yield* MemberTable.join({
      id: randomBytes(8).toString("hex"),
      role: "controller",
      address: `${Os.hostname()} pid ${process.pid}`,
      fingerprint: Fingerprint.of(settings)
    }, membersTiming(options)).pipe(Effect.map((members) => members.filter((m) => m.role === "runner")))
    const capacity = CheckCommand.capacityOf(settings)
    const short = Slots.shortfall(runners, capacity.requiredSlots, capacity.rule)
    if (runners.length === 0) yield* Effect.logInfo("no runner has joined the cluster yet; Groups wait for one")
    else if (short !== undefined) yield* Effect.logWarning(short)
  })).pipe(Layer.provide(ClusterJoin.sql(options)))

/**
 * `relax-agentic check --cluster-database-url …`: the live runners' `--runner-slots` as lines of the capacity table,
 * and a warning when they cannot hold the Sessions `settings` keep resident (`undefined` without a cluster).
 */
export const runnerCapacity = (
  values: CommandFlags.FlagValues,
  settings: Settings.RolloutSettings
): Effect.Effect<{ readonly lines: string; readonly warning: string | undefined } | undefined, CliError.UserError> =>
  Effect.gen(function*() {
    const options = yield* clusterOptionsFromFlags(values)
    if (options === undefined) return undefined
    const runners = yield* MemberTable.live(options.lockExpiration).pipe(
      Effect.map((members) => members.filter((m) => m.role === "runner")),
      Effect.provide(ClusterJoin.sql(options)),
      Effect.mapError((error) => UserError.make(`--cluster-database-url: ${error.message}`))
    )
    const capacity = CheckCommand.capacityOf(settings)
    return {
      lines: Slots.render(runners),
      warning: Slots.shortfall(runners, capacity.requiredSlots, capacity.rule)
    }
  })

/**
 * The controller's role: its Groups' Sessions run on the cluster's runners, and its weight changes and step
 * boundaries reach every runner (one client-only member and one fleet, shared by the three).
 */
export const controllerRole = (options: ClusterJoin.ClusterOptions): ClusterRole => {
  const membership = ClusterJoin.client(options).pipe(Layer.provide(controllerMember(options)))
  const fleet = Fleet.layer({ callTimeout: options.callTimeout, shards: options.shardsPerGroup }).pipe(
    Layer.provideMerge(membership)
  )
  return {
    sessionRunner: Remote.layer({ callTimeout: options.callTimeout, shards: options.shardsPerGroup }).pipe(
      Layer.provide(fleet)
    ),
    gate: (mode) => Fleet.gateLayer(mode).pipe(Layer.provide(fleet)),
    engine: (engine) => Fleet.engineLayer.pipe(Layer.provide(engine), Layer.provide(fleet)),
    // The step's KV admission metrics come from the fleet's ledger (the controller sends no attempts).
    admissionCoordinator: AdmissionWriter.coordinatorLayer(options.callTimeout).pipe(Layer.provide(membership)),
    // The trainer publishes LoRA versions through the fleet's registry.
    loraVersions: (mode) => LoraWriter.versionsLayer(mode, options.callTimeout).pipe(Layer.provide(membership))
  }
}

/**
 * The fleet's single writers a runner can host, over its engine: `kv-admission` with admission on, `lora-versions`
 * with versioned LoRA (docs/architecture.md "Single writers in a cluster").
 */
const fleetWriters = (settings: Settings.RolloutSettings) =>
  Layer.effect(
    SingleWriter.Writers,
    Effect.gen(function*() {
      const admission = yield* Effect.provide(
        Effect.gen(function*() {
          return yield* SingleWriter.Writers
        }),
        AdmissionWriter.writersLayer(Settings.admission(settings))
      )
      const engine = yield* Engine.Engine
      return new Map([...admission, ...LoraWriter.writerEntries(LoraOptions.modeOf(settings), engine)])
    })
  )

/** Every service of a runner: the rollout's services (no `Rollout`), the Group entity, forwarding, membership. */
export const runnerLayer = (
  settings: Settings.RolloutSettings,
  options: ClusterJoin.ClusterOptions,
  address: ClusterJoin.Address,
  listen: ClusterJoin.Address | undefined,
  publicUrl: string | undefined,
  hostOptions: Host.HostOptions = {},
  forwarding: Pick<Forward.Options, "splice"> = {}
) => {
  // Refused at join when a live controller has other sample-changing settings, before taking any shard.
  const member = MemberTable.layer({
    id: randomBytes(8).toString("hex"),
    role: "runner",
    address: `${address.host}:${address.port}`,
    slots: hostOptions.slots,
    fingerprint: Fingerprint.of(settings)
  }, membersTiming(options)).pipe(Layer.provide(ClusterJoin.sql(options)))
  const membership = ClusterJoin.runner(options, address, listen).pipe(Layer.provide(member))
  const services = servicesFromSettings(settings, {}, {
    forwarder: Forward.layer(`${address.host}:${address.port}`, {
      ...forwarding,
      shards: options.shardsPerGroup,
      callTimeout: options.callTimeout
    }).pipe(Layer.provide(membership)),
    agentBaseUrl: publicUrl,
    // Every runner's attempts reserve against the one fleet ledger (docs/architecture.md "Single writers").
    admissionCoordinator: AdmissionWriter.coordinatorLayer(options.callTimeout).pipe(Layer.provide(membership)),
    // Every runner's Sessions bind their LoRA version through the one fleet registry.
    loraVersions: (mode) => LoraWriter.versionsLayer(mode, options.callTimeout).pipe(Layer.provide(membership))
  })
  // The fleet's single writers this runner can host (the one owning a writer's shard runs it).
  const writers = SingleWriter.entityLayer.pipe(
    Layer.provide(fleetWriters(settings)),
    Layer.provide(membership)
  )
  const host = Layer.unwrap(Effect.gen(function*() {
    const gateway = yield* Gateway.Gateway
    const answer = yield* ForwardAnswer.make({
      maxJsonDepth: Gateway.defaultMaxJsonDepth,
      gateway: peerGatewayOrigin(gateway, address)
    })
    return Host.Host.layer(`${address.host}:${address.port}`, answer, hostOptions)
  })).pipe(
    Layer.provide(SessionRunner.SessionRunner.layer),
    Layer.provide(GenerationGate.GenerationGate.layer(Settings.retentionMode(settings)))
  )
  return Layer.merge(HostEntity.layer, writers).pipe(
    Layer.provideMerge(host),
    Layer.provide(membership),
    Layer.provideMerge(services),
    Layer.provide(FairScheduler.layer())
  )
}

/**
 * The origin at which the other runners reach this runner's gateway (the direct hop of forwarded requests): the
 * gateway's own host, or the `--runner-address` host when the gateway listens on every interface.
 */
export const peerGatewayOrigin = (
  gateway: { readonly host: string; readonly port: number },
  address: ClusterJoin.Address
): string => {
  const wildcard = gateway.host === "0.0.0.0" || gateway.host === "::" || gateway.host === "[::]" || gateway.host === ""
  const host = wildcard ? address.host : gateway.host
  return `http://${host.includes(":") && !host.startsWith("[") ? `[${host}]` : host}:${gateway.port}`
}

/**
 * What a runner that could not start says: its cluster port not opened (taken by another process, or an address not
 * of this machine) names the flag and the address; anything else its own message.
 */
export const runnerJoinMessage = (error: unknown, listen: ClusterJoin.Address): string => {
  if (!Predicate.isTagged(error, "SocketServerError") || !Predicate.hasProperty(error, "reason")) {
    return Thrown.messageOf(error)
  }
  const cause = Predicate.hasProperty(error.reason, "cause") ? error.reason.cause : error.reason
  const code = Predicate.hasProperty(cause, "code") ? String(cause.code) : undefined
  return `--runner-address / --runner-listen-address: cannot listen on ${listen.host}:${listen.port} (${
    Thrown.messageOf(cause)
  }); ${
    code === "EADDRINUSE"
      ? "another process holds that port: give this runner a free port"
      : "give an address of this machine (or listen on 0.0.0.0 with --runner-listen-address)"
  }`
}

/** How long a SIGTERMed runner waits for its resident Groups by default (`--runner-drain-timeout`). */
export const defaultDrainTimeout = Duration.seconds(300)

/** The largest Group these settings run, with the flag that sets it (`--runner-slots` must hold it). */
export const largestGroup = (settings: Settings.RolloutSettings): { readonly size: number; readonly flag: string } =>
  (settings.evalInterval === undefined ? [] : settings.evalDatasets).reduce(
    (largest, d) =>
      d.nSamplesPerEvalPrompt > largest.size
        ? { size: d.nSamplesPerEvalPrompt, flag: `--n-samples-per-eval-prompt of ${d.name}` }
        : largest,
    { size: settings.nSamplesPerPrompt, flag: "--n-samples-per-prompt" }
  )

/** `relax-agentic runner [flags]`. */
export const runnerCommand = Command.make(
  "runner",
  CommandFlags.flagsOf([...CommandFlags.rolloutFlags, ...ClusterFlags.memberFlags, ...ClusterFlags.runnerFlags]),
  (values) =>
    Effect.gen(function*() {
      const settings = yield* Effect.mapError(SettingsFromFlags.settingsFromFlags(values), (error) =>
        UserError.make(error._tag === "RolloutConfigError" ? SettingsFromFlags.configMessage(error) : error.message))
      const options = yield* clusterOptionsFromFlags(values)
      if (options === undefined) {
        return yield* UserError.make(
          "--cluster-database-url: `runner` needs the cluster's PostgreSQL URL (or RELAX_CLUSTER_DATABASE_URL)"
        )
      }
      const problem = clusterProblem(settings)
      if (problem !== undefined) {
        return yield* UserError.make(problem)
      }
      const addressText = valueOf(values, "runner-address")
      const address = typeof addressText === "string" ? ClusterFlags.parseAddress(addressText) : undefined
      if (address === undefined) {
        return yield* UserError.make(
          `--runner-address: expects host:port that the other members can dial (got ${
            String(addressText ?? "nothing")
          })`
        )
      }
      const listenText = valueOf(values, "runner-listen-address")
      const listen = typeof listenText === "string" ? ClusterFlags.parseAddress(listenText) : undefined
      if (listenText !== undefined && listen === undefined) {
        return yield* UserError.make(`--runner-listen-address: expects host:port (got ${String(listenText)})`)
      }
      const orphanTimeout = yield* seconds(values, "cluster-orphan-timeout", Host.orphanAfter)
      const publicUrl = valueOf(values, "gateway-public-url")
      if (publicUrl !== undefined && (typeof publicUrl !== "string" || !/^https?:\/\//.test(publicUrl))) {
        return yield* UserError.make(
          `--gateway-public-url: expects an http(s) URL such as http://lb.internal:8000/agentic_api/`
        )
      }
      const splice = valueOf(values, "gateway-splice") ?? true
      if (typeof splice !== "boolean") {
        return yield* UserError.make(`--gateway-splice: expects true or false (got ${String(splice)})`)
      }
      const slots = valueOf(values, "runner-slots")
      if (slots !== undefined && (typeof slots !== "number" || !Number.isInteger(slots) || slots < 1)) {
        return yield* UserError.make(`--runner-slots: ${String(slots)} is not a positive integer`)
      }
      const largest = largestGroup(settings)
      if (typeof slots === "number" && slots < largest.size) {
        return yield* UserError.make(
          `--runner-slots: ${slots} cannot hold a whole Group of ${largest.size} Sessions (${largest.flag}); ` +
            `a Group is placed on one runner, so give each runner at least ${largest.size} slots`
        )
      }
      const drainTimeout = yield* seconds(values, "runner-drain-timeout", defaultDrainTimeout)
      const drainRequested = yield* Deferred.make<void>()
      yield* Shutdown.onDrain(() => Deferred.doneUnsafe(drainRequested, Exit.void))
      yield* Effect.gen(function*() {
        const gateway = yield* Gateway.Gateway
        const host = yield* Host.Host
        yield* Console.log(
          `relax-agentic runner ${host.incarnation} joined the cluster at ${address.host}:${address.port}; ` +
            `gateway ${gateway.agentBaseUrl}; agents use ${publicUrl ?? gateway.agentBaseUrl}; ` +
            `slots ${typeof slots === "number" ? slots : "unlimited"}`
        )
        // SIGTERM: take no new Group from the signal on (set in its handler: no Reserve served after the signal is
        // granted), let the resident ones finish (up to --runner-drain-timeout), then leave.
        yield* Shutdown.onDrain(() => {
          host.startDraining()
          Deferred.doneUnsafe(drainRequested, Exit.void)
        })
        yield* Deferred.await(drainRequested)
        const drained = yield* host.drain.pipe(Effect.timeoutOption(drainTimeout))
        if (Option.isNone(drained)) {
          yield* Console.log(
            `relax-agentic runner ${host.incarnation}: --runner-drain-timeout (${
              Duration.format(drainTimeout)
            }) passed; stopping the ${yield* host
              .hosted} Session(s) still running (their Groups are refilled elsewhere)`
          )
        }
        yield* Console.log(`relax-agentic runner ${host.incarnation} drained; leaving the cluster`)
      }).pipe(
        Effect.provide(
          runnerLayer(
            settings,
            options,
            address,
            listen,
            typeof publicUrl === "string" ? publicUrl : undefined,
            // An answered end waits for its receipt while the controller may still repeat the poll (its deadline).
            {
              ...(typeof slots === "number" ? { slots } : {}),
              orphanTimeout,
              answeredGrace: Duration.times(options.callTimeout, 2)
            },
            { splice }
          )
        ),
        Effect.mapError((error) => UserError.make(runnerJoinMessage(error, listen ?? address)))
      )
    })
).pipe(Command.withDescription(
  "Join a cluster as a runner (docs/scale-out.md): host the Groups of the shards it owns (agents, forests, " +
    "generation) and serve the agent gateway. Takes the flags of `rollout` (the same --config) plus --cluster-*."
))
