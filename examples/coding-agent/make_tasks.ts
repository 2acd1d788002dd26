/**
 * Generates the coding example's dataset, `data/train.jsonl`: one small repository per row, each with one off-by-one
 * bug in `src/` and a `node:test` file in `test/` that fails until the bug is fixed.
 *
 * **Details**
 * A row is `{"input": <the task>, "metadata": {"task_id", "files", "test_command", "test_files"}}`: `files` maps
 * each path to its content (the repository travels in the dataset, so the agent server can make an isolated working
 * copy of it for every Session), `test_command` runs the tests with plain `node` (no test runner to install), and
 * `test_files` names the files the reward hook restores before running them, so an agent that edits the tests
 * instead of the code gains nothing. Run `npx tsx examples/coding-agent/make_tasks.ts` to rewrite the file; the
 * output is deterministic.
 */
import { writeFileSync } from "node:fs"

interface Task {
  readonly name: string
  /** The module's source with the bug. */
  readonly source: string
  /** The body of the test file (after the imports). */
  readonly tests: string
}

const tasks: ReadonlyArray<Task> = [
  {
    name: "sumTo",
    source: `/** The sum 1 + 2 + ... + n. */
export const sumTo = (n) => {
  let total = 0
  for (let i = 0; i < n; i++) total += i
  return total
}
`,
    tests: `test("sums 1..n", () => {
  assert.strictEqual(sumTo(1), 1)
  assert.strictEqual(sumTo(4), 10)
  assert.strictEqual(sumTo(10), 55)
})
`
  },
  {
    name: "lastItem",
    source: `/** The last element of a non-empty array. */
export const lastItem = (xs) => {
  return xs[xs.length]
}
`,
    tests: `test("returns the last element", () => {
  assert.strictEqual(lastItem([3]), 3)
  assert.strictEqual(lastItem([1, 2, 7]), 7)
})
`
  },
  {
    name: "countVowels",
    source: `/** How many of the characters of s are vowels (a, e, i, o, u). */
export const countVowels = (s) => {
  let count = 0
  for (let i = 1; i < s.length; i++) if ("aeiou".includes(s[i])) count++
  return count
}
`,
    tests: `test("counts every vowel", () => {
  assert.strictEqual(countVowels("banana"), 3)
  assert.strictEqual(countVowels("apple"), 2)
  assert.strictEqual(countVowels("xyz"), 0)
})
`
  },
  {
    name: "firstN",
    source: `/** The first n elements of xs. */
export const firstN = (xs, n) => {
  return xs.slice(0, n - 1)
}
`,
    tests: `test("takes n elements", () => {
  assert.deepStrictEqual(firstN([1, 2, 3, 4], 2), [1, 2])
  assert.deepStrictEqual(firstN([5, 6], 1), [5])
})
`
  },
  {
    name: "pageCount",
    source: `/** How many pages of perPage items hold all items. */
export const pageCount = (items, perPage) => {
  return Math.floor(items / perPage)
}
`,
    tests: `test("counts a partial last page", () => {
  assert.strictEqual(pageCount(10, 5), 2)
  assert.strictEqual(pageCount(11, 5), 3)
  assert.strictEqual(pageCount(1, 5), 1)
})
`
  },
  {
    name: "countdown",
    source: `/** n, n - 1, ..., 1, 0. */
export const countdown = (n) => {
  const out = []
  for (let i = n; i > 0; i--) out.push(i)
  return out
}
`,
    tests: `test("counts down to zero", () => {
  assert.deepStrictEqual(countdown(3), [3, 2, 1, 0])
  assert.deepStrictEqual(countdown(0), [0])
})
`
  },
  {
    name: "range",
    source: `/** The integers from a to b, both included. */
export const range = (a, b) => {
  const out = []
  for (let i = a; i < b; i++) out.push(i)
  return out
}
`,
    tests: `test("includes both ends", () => {
  assert.deepStrictEqual(range(2, 5), [2, 3, 4, 5])
  assert.deepStrictEqual(range(7, 7), [7])
})
`
  },
  {
    name: "evens",
    source: `/** The even numbers from 0 to n, both included. */
export const evens = (n) => {
  const out = []
  for (let i = 0; i < n; i += 2) out.push(i)
  return out
}
`,
    tests: `test("includes n when it is even", () => {
  assert.deepStrictEqual(evens(6), [0, 2, 4, 6])
  assert.deepStrictEqual(evens(3), [0, 2])
})
`
  }
]

const row = (task: Task, index: number) => {
  const source = `src/${task.name}.js`
  const test = `test/${task.name}.test.js`
  const testFile = `import assert from "node:assert"
import { test } from "node:test"
import { ${task.name} } from "../${source}"

${task.tests}`
  return {
    input: `The tests of this repository fail. Find the bug in src/ and fix it; do not change the tests. ` +
      `Run the tests with \`node ${test}\`.`,
    metadata: {
      task_id: `code-${String(index).padStart(3, "0")}`,
      files: { "package.json": `{ "type": "module" }\n`, [source]: task.source, [test]: testFile },
      test_command: ["node", test],
      test_files: [test]
    }
  }
}

const target = new URL("./data/train.jsonl", import.meta.url)
writeFileSync(target, tasks.map((task, i) => JSON.stringify(row(task, i))).join("\n") + "\n")
console.log(`wrote ${tasks.length} tasks to ${target.pathname}`)
