// Where a CPU profile's call frame comes from: a package (effect split by module), one of our files, a node module, or
// the native/GC/idle bucket. Shared by summary.mjs and stalls.mjs.
export const category = (url) => {
  if (!url) return "(native/gc/idle)"
  const m = url.match(/node_modules\/(@[^/]+\/[^/]+|[^/]+)\/(?:dist\/)?(.*)/)
  if (m) return m[1] === "effect" ? "effect/" + m[2].split("/").slice(0, 2).join("/") : m[1]
  const r = url.match(/\/(src|layers|test)\/(.*)/)
  if (r) return r[1] + "/" + r[2]
  if (url.startsWith("node:")) return "node:" + url.slice(5).split("/")[0]
  return url
}
