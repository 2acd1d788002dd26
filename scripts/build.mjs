/**
 * The package build: TypeScript's own emit (tsconfig.build.json) of `src/` and `layers/` to `dist/` as ESM JavaScript
 * with declaration files and source maps (sources inlined: the tarball ships no `.ts`), plus the inspector's static page.
 *
 * `node scripts/build.mjs` (`npm run build`; `npm pack` and `npm publish` run it through `prepack`). The repository
 * itself runs from the sources (Node's type stripping), so the development loop needs no build.
 */
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Path from "node:path"

const root = Path.resolve(import.meta.dirname, "..")
const dist = Path.join(root, "dist")

Fs.rmSync(dist, { recursive: true, force: true })
const tsc = Path.join(Path.dirname(createRequire(import.meta.url).resolve("typescript/package.json")), "bin", "tsc")
execFileSync(process.execPath, [tsc, "-p", Path.join(root, "tsconfig.build.json")], { cwd: root, stdio: "inherit" })

// Files the code reads at run time beside its modules.
Fs.cpSync(Path.join(root, "layers", "inspect", "page"), Path.join(dist, "layers", "inspect", "page"), {
  recursive: true
})

// Declaration emit keeps the sources' `.ts` specifiers; a consumer's compiler resolves `.js` ones to the `.d.ts` files
// under every module resolution, without `allowImportingTsExtensions`.
const relativeTs = /(\bfrom\s+|\bimport\s*\(\s*|\bimport\s+)(["'])(\.\.?\/[^"']*?)\.ts\2/g
const declarations = (dir) =>
  Fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? declarations(Path.join(dir, entry.name))
      : entry.name.endsWith(".d.ts")
      ? [Path.join(dir, entry.name)]
      : []
  )
for (const file of declarations(dist)) {
  const text = Fs.readFileSync(file, "utf8")
  const rewritten = text.replace(relativeTs, (_match, head, quote, path) => `${head}${quote}${path}.js${quote}`)
  if (rewritten !== text) Fs.writeFileSync(file, rewritten)
}
