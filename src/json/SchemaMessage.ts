/**
 * Schema failure texts written from the issue tree, with the path keys spelled by the caller (e.g. a settings field
 * as its command-line flag), instead of rewriting the formatted message with regular expressions.
 *
 * **Details**
 * The tree is flattened by Effect's own walk (`SchemaIssue.makeFormatterStandardSchemaV1`: the same messages, filters,
 * pointers and unions as the default formatter); each entry is then written as the default formatter writes it —
 * `<message>`, or `<message>\n  at <path>` — with `key` writing each path segment. With the default `key`
 * ({@link bracketKey}) the text equals `SchemaError.message`.
 */
import { SchemaIssue } from "effect"

/** One path segment as Effect writes it: `["field"]` for a string key, `[0]` for an index. */
export const bracketKey = (key: PropertyKey): string =>
  `[${typeof key === "string" ? JSON.stringify(key) : String(key)}]`

const flatten = SchemaIssue.makeFormatterStandardSchemaV1()

/** One failure of the flattened issue tree: its message and where it is. */
export interface Entry {
  readonly message: string
  readonly path: ReadonlyArray<PropertyKey>
}

/** The failures of a Schema issue, in the order the default formatter writes them. */
export const entries = (issue: SchemaIssue.Issue): ReadonlyArray<Entry> =>
  flatten(issue).issues.map(({ message, path }) => ({
    message,
    path: (path ?? []).map((segment) => typeof segment === "object" ? segment.key : segment)
  }))

/** One failure's text: `<message>`, or `<message>\n  at <path>` with each segment written by `key`. */
export const formatEntry = (entry: Entry, key: (segment: PropertyKey) => string = bracketKey): string =>
  entry.path.length === 0 ? entry.message : `${entry.message}\n  at ${entry.path.map(key).join("")}`

/** The text of a Schema issue, each path segment written by `key`. */
export const format = (issue: SchemaIssue.Issue, key: (segment: PropertyKey) => string = bracketKey): string =>
  entries(issue).map((entry) => formatEntry(entry, key)).join("\n")
