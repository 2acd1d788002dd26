/**
 * A real browser for the page tests: Chromium from `@sparticuz/chromium` driven by `playwright-core` (both brought
 * by `npm ci`), with every console error and page error collected.
 */
import chromium from "@sparticuz/chromium"
import { Effect } from "effect"
import { mkdirSync } from "node:fs"
import { join } from "node:path"
import { type Browser, chromium as playwright, type Page } from "playwright-core"

/** Where the page tests write their screenshots (git-ignored). */
export const artifacts = join(import.meta.dirname, "..", "..", "test-artifacts", "inspect")

/** A page and the console / page errors it has logged so far. */
export interface OpenPage {
  readonly page: Page
  readonly errors: Array<string>
}

/** A browser for the enclosing scope, closed with it. */
export const browser: Effect.Effect<Browser, never, import("effect").Scope.Scope> = Effect.acquireRelease(
  Effect.promise(async () =>
    playwright.launch({ executablePath: await chromium.executablePath(), args: chromium.args, headless: true })
  ),
  (b) => Effect.promise(() => b.close())
)

/** Open `url` in a new page of `b` (1600 x 1000), collecting console errors and uncaught page errors. */
export const open = (b: Browser, url: string): Effect.Effect<OpenPage> =>
  Effect.promise(async () => {
    const page = await b.newPage({ viewport: { width: 1600, height: 1000 } })
    const errors: Array<string> = []
    page.on("console", (message) => {
      if (message.type() === "error") errors.push(message.text())
    })
    page.on("pageerror", (error) => errors.push(String(error)))
    // Nothing may leave the machine: any request that is not the inspector's own fails the test.
    await page.route("**/*", (route) => {
      const target = new URL(route.request().url())
      if (target.protocol === "file:" || target.hostname === "127.0.0.1") return route.continue()
      errors.push(`request outside the inspector: ${route.request().url()}`)
      return route.abort()
    })
    await page.goto(url)
    await page.waitForSelector("body[data-ready=true]", { timeout: 30_000 })
    return { page, errors }
  })

/** Save a screenshot of `page` as `name` under {@link artifacts}; returns its path. */
export const screenshot = (page: Page, name: string): Effect.Effect<string> =>
  Effect.promise(async () => {
    mkdirSync(artifacts, { recursive: true })
    const path = join(artifacts, name)
    await page.screenshot({ path })
    return path
  })
