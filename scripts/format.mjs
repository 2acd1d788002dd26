/**
 * The formatter: dprint's TypeScript and JSON plugins (the configuration Effect's own repository uses, `dprint.json`),
 * run through `@dprint/formatter` so that no platform binary and no plugin download is needed.
 *
 * `node scripts/format.mjs` rewrites every file that is not formatted; `--check` lists them and exits 1.
 */
import { createContext } from "@dprint/formatter"
import * as Json from "@dprint/json"
import * as Typescript from "@dprint/typescript"
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"

const root = Path.resolve(import.meta.dirname, "..")
const config = JSON.parse(Fs.readFileSync(Path.join(root, "dprint.json"), "utf8"))
const { typescript, json, includes: _includes, excludes, plugins: _plugins, ...global } = config
const context = createContext(global)
context.addPlugin(Fs.readFileSync(Typescript.getPath()), typescript ?? {})
context.addPlugin(Fs.readFileSync(Json.getPath()), json ?? {})

const extensions = /\.(ts|mts|mjs|js|json)$/
const excluded = (file) =>
  excludes.some((pattern) => file === pattern || file.startsWith(pattern.replace(/\/?\*\*$/, "") + "/"))
// Tracked and untracked files git does not ignore: the tree a clean clone has, plus new files.
const files = execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard"], {
  cwd: root,
  encoding: "utf8"
})
  .split("\n")
  .filter((file) => extensions.test(file) && !excluded(file) && Fs.existsSync(Path.join(root, file)))

const check = process.argv.includes("--check")
const unformatted = []
for (const file of files) {
  const path = Path.join(root, file)
  const text = Fs.readFileSync(path, "utf8")
  const formatted = context.formatText({ filePath: path, fileText: text })
  if (formatted === text) continue
  unformatted.push(file)
  if (!check) Fs.writeFileSync(path, formatted)
}
if (check && unformatted.length > 0) {
  process.stderr.write(
    `${unformatted.length} file(s) not formatted (run \`npm run format\`):\n${unformatted.join("\n")}\n`
  )
  process.exit(1)
}
process.stdout.write(
  `${check ? "checked" : "formatted"} ${files.length} files${check ? "" : `, ${unformatted.length} rewritten`}\n`
)
