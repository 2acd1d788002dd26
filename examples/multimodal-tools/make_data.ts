/**
 * Generates the multimodal example's dataset: `data/images/*.png` (640 x 480, light grey, one small coloured square
 * somewhere) and `data/train.jsonl`, whose rows ask for the square's colour with an `<image>` placeholder and keep
 * the image path in `images` (mapped with `--multimodal-keys '{"image":"images"}'`).
 *
 * **Details**
 * The square is 16 pixels wide: in a whole-image view a model can tell where something is but hardly its colour,
 * which is what the agent's `zoom` tool is for. Run `npx tsx examples/multimodal-tools/make_data.ts` to rewrite the
 * files; the output is deterministic.
 */
import { mkdirSync, writeFileSync } from "node:fs"
import sharp from "sharp"
import * as Colours from "./colours.ts"

const rows: ReadonlyArray<{ readonly colour: Colours.ColourName; readonly left: number; readonly top: number }> = [
  { colour: "red", left: 92, top: 71 },
  { colour: "blue", left: 503, top: 388 },
  { colour: "green", left: 311, top: 122 },
  { colour: "yellow", left: 57, top: 402 },
  { colour: "purple", left: 574, top: 48 },
  { colour: "orange", left: 240, top: 290 }
]

const main = async () => {
  const dir = new URL("./data/", import.meta.url)
  mkdirSync(new URL("./images/", dir), { recursive: true })
  const lines: Array<string> = []
  for (const [i, row] of rows.entries()) {
    const name = `images/square-${i}.png`
    const square = await sharp({
      create: { width: 16, height: 16, channels: 3, background: Colours.palette[row.colour] }
    })
      .png().toBuffer()
    await sharp({ create: { width: 640, height: 480, channels: 3, background: Colours.background } })
      .composite([{ input: square, left: row.left, top: row.top }])
      .png()
      .toFile(new URL(name, dir).pathname)
    lines.push(JSON.stringify({
      input: "<image>What colour is the small square in this picture? Answer with one word.",
      // Relative to the working directory relax-agentic runs in (the repository root).
      images: [`examples/multimodal-tools/data/${name}`],
      label: row.colour,
      metadata: { task_id: `mm-${String(i).padStart(3, "0")}`, answer: row.colour }
    }))
  }
  writeFileSync(new URL("./train.jsonl", dir), lines.join("\n") + "\n")
  console.log(`wrote ${rows.length} rows and images to ${dir.pathname}`)
}

main().catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
