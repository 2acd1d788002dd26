/**
 * The LoRA part of the SGLang double (test/support/FakeSglang.ts), as SGLang answers it (docs/lora.md; SGLang's
 * `http_server.load_lora_adapter` / `unload_lora_adapter`, `LoRARegistry`, `TokenizerManager._resolve_lora_path`):
 * - `POST /load_lora_adapter {lora_name, lora_path, pinned}`: a name already loaded is a 400; a path without
 *   `adapter_config.json` is a 400; past `maxLoadedLoras` the least recently used *unpinned* adapter is evicted
 *   silently (200), and when every other one is pinned the answer is a 400 while the new adapter stays registered.
 * - `POST /unload_lora_adapter {lora_name}`: an unknown name is a 400 ("does not exist"); the name is unregistered at
 *   once, and the answer waits until every running request using it has finished (nothing is aborted).
 * - `/generate` with `lora_path`: a name never loaded is a 400 ("Got LoRA adapter that has never been loaded"); a name
 *   unloaded or evicted is reloaded implicitly from its old path (SGLang keeps every name in `lora_ref_cache`); the
 *   request holds the adapter (in-flight counter) until it answers.
 * - A router has no LoRA routes: 404 with an empty body.
 */
import { existsSync } from "node:fs"
import type { ServerResponse } from "node:http"
import { join } from "node:path"

/** One adapter SGLang knows by name. */
interface Known {
  readonly path: string
  readonly pinned: boolean
  /** Registered now (not unloaded or evicted). */
  registered: boolean
  inFlight: number
  lastUsed: number
}

/** The LoRA state of one fake server, and what a test checks. */
export interface FakeLora {
  /** Names registered now. */
  readonly loaded: () => ReadonlyArray<string>
  /** The most names registered at once so far. */
  readonly mostLoaded: () => number
  /** Implicit reloads by `/generate` (a name unloaded or evicted and asked for again). */
  readonly reloads: () => number
  /** Adapters evicted silently past `maxLoadedLoras`. */
  readonly evicted: ReadonlyArray<string>
  /** The next `n` loads answer 400 (a worker refusing an adapter). */
  readonly failNextLoads: (n: number) => void
  /** The next `n` unloads answer 500 (a worker that cannot confirm the unload). */
  readonly failNextUnloads: (n: number) => void
  /** The server restarted: it knows no adapter any more. */
  readonly restart: () => void
}

export interface FakeLoraOptions {
  /** `--max-loaded-loras` (default: no limit). */
  readonly maxLoadedLoras?: number | undefined
  /** Router mode: no LoRA routes. */
  readonly router: boolean
  /** Called once an adapter is registered, before the load answers. */
  readonly onLoaded?: ((name: string, path: string) => Promise<void>) | undefined
}

const json = (res: ServerResponse, status: number, body: unknown) => {
  if (res.writableEnded || res.destroyed) return
  res.writeHead(status, { "content-type": "application/json" })
  res.end(JSON.stringify(body))
}

const field = (body: unknown, key: string): unknown =>
  body !== null && typeof body === "object" ? (body as Record<string, unknown>)[key] : undefined

/** The LoRA routes and checks of one fake server. */
export const make = (options: FakeLoraOptions) => {
  const known = new Map<string, Known>()
  const evicted: Array<string> = []
  const unloadWaiters: Array<{ readonly name: string; readonly resume: () => void }> = []
  let clock = 0
  let most = 0
  let reloads = 0
  let failLoads = 0
  let failUnloads = 0
  const registered = () => [...known.entries()].filter(([, k]) => k.registered).map(([name]) => name)
  const touch = () => {
    most = Math.max(most, registered().length)
  }

  /** `LoRARegistry.register` past `--max-loaded-loras`: evict the LRU unpinned adapter other than `name`. */
  const evictFor = (name: string): string | undefined => {
    const max = options.maxLoadedLoras
    if (max === undefined || registered().length <= max) return undefined
    const victims = [...known.entries()].filter(([n, k]) => k.registered && !k.pinned && n !== name)
      .sort((a, b) => a[1].lastUsed - b[1].lastUsed)
    const victim = victims[0]
    if (victim === undefined) {
      return "Didn't find any LoRA adapters when trying to evict LRU LoRA adapter. " +
        `(current number of adapters: ${registered().length}, max allowed: ${max})`
    }
    victim[1].registered = false
    evicted.push(victim[0])
    return undefined
  }

  const load = (body: unknown, res: ServerResponse) => {
    const name = field(body, "lora_name")
    const path = field(body, "lora_path")
    if (typeof name !== "string" || typeof path !== "string") {
      return json(res, 400, { success: false, error_message: "lora_name and lora_path are required" })
    }
    if (failLoads > 0) {
      failLoads--
      return json(res, 400, { success: false, error_message: `Failed to load LoRA adapter ${name}: injected` })
    }
    if (known.get(name)?.registered === true) {
      return json(res, 400, {
        success: false,
        error_message: `The LoRA adapter ${name} is already loaded. Please unload it first.`
      })
    }
    if (!existsSync(join(path, "adapter_config.json"))) {
      return json(res, 400, {
        success: false,
        error_message: `Failed to load LoRA adapter ${name}: Can't find 'adapter_config.json' at '${path}'`
      })
    }
    known.set(name, {
      path,
      pinned: field(body, "pinned") === true,
      registered: true,
      inFlight: 0,
      lastUsed: clock++
    })
    const refused = evictFor(name)
    touch()
    const answer = () =>
      refused !== undefined
        ? json(res, 400, { success: false, error_message: refused })
        : json(res, 200, {
          success: true,
          error_message: null,
          loaded_adapters: Object.fromEntries(registered().map((n) => [n, known.get(n)?.path ?? null]))
        })
    if (options.onLoaded === undefined) return answer()
    void options.onLoaded(name, path).then(answer)
  }

  const unload = (body: unknown, res: ServerResponse) => {
    const name = field(body, "lora_name")
    const entry = typeof name === "string" ? known.get(name) : undefined
    if (typeof name !== "string" || entry === undefined || !entry.registered) {
      return json(res, 400, {
        success: false,
        error_message: `LoRA with name ${String(name)} does not exist. Loaded LoRAs: ${registered().join(", ")}`
      })
    }
    if (failUnloads > 0) {
      failUnloads--
      return json(res, 500, { success: false, error_message: `unload of ${name} failed: injected` })
    }
    entry.registered = false
    const done = () => json(res, 200, { success: true, error_message: null })
    if (entry.inFlight === 0) return done()
    unloadWaiters.push({ name, resume: done })
  }

  return {
    /** Answers the LoRA routes; false for any other path. */
    route: (method: string | undefined, path: string, body: unknown, res: ServerResponse): boolean => {
      if (method !== "POST" || (path !== "/load_lora_adapter" && path !== "/unload_lora_adapter")) return false
      if (options.router) {
        res.writeHead(404)
        res.end()
        return true
      }
      if (path === "/load_lora_adapter") load(body, res)
      else unload(body, res)
      return true
    },
    /**
     * `_validate_and_resolve_lora` then `acquire`: the refusal's message, or undefined once the request holds the
     * adapter.
     */
    acquire: (name: string | undefined): string | undefined => {
      if (name === undefined) return undefined
      const entry = known.get(name)
      if (entry === undefined) {
        return `Got LoRA adapter that has never been loaded: ${name}\nAll loaded adapters: dict_keys([${
          registered().map((n) => `'${n}'`).join(", ")
        }]).`
      }
      if (!entry.registered) {
        entry.registered = true
        reloads++
        evictFor(name)
        touch()
      }
      entry.inFlight++
      entry.lastUsed = clock++
      return undefined
    },
    /** The request that held `name` answered. */
    release: (name: string | undefined): void => {
      if (name === undefined) return
      const entry = known.get(name)
      if (entry === undefined) return
      entry.inFlight = Math.max(0, entry.inFlight - 1)
      if (entry.inFlight > 0) return
      for (const waiter of unloadWaiters.filter((w) => w.name === name)) {
        unloadWaiters.splice(unloadWaiters.indexOf(waiter), 1)
        waiter.resume()
      }
    },
    state: {
      loaded: registered,
      mostLoaded: () => most,
      reloads: () => reloads,
      evicted,
      failNextLoads: (n: number) => {
        failLoads += n
      },
      failNextUnloads: (n: number) => {
        failUnloads += n
      },
      restart: () => known.clear()
    } satisfies FakeLora
  }
}
