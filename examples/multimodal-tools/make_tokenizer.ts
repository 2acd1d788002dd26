/**
 * Writes a Qwen2.5-VL-style tokenizer directory for running the multimodal example without downloading a model:
 * `runs/multimodal-tools/tokenizer/` (what `rollout.json`'s `tokenizer` names).
 *
 * **Details**
 * It is the bundled Qwen3 `tokenizer.json` (which has Qwen2-VL's `<|vision_start|>`, `<|image_pad|>` and
 * `<|vision_end|>` tokens), Qwen2-VL's chat template (one `<|vision_start|><|image_pad|><|vision_end|>` per image
 * part) and Qwen2.5-VL's `preprocessor_config.json`: the directory the tests use (test/support/VisionTokenizer.ts).
 * With it the samples hold the processor-expanded image tokens a Qwen2.5-VL trainer expects. With a real model, pass
 * its checkpoint directory as `--tokenizer` instead.
 */
import { mkdirSync, rmSync } from "node:fs"
import * as Path from "node:path"
import * as VisionTokenizer from "../../test/support/VisionTokenizer.ts"

const dir = Path.join(import.meta.dirname, "..", "..", "runs", "multimodal-tools", "tokenizer")
rmSync(dir, { recursive: true, force: true })
mkdirSync(dir, { recursive: true })
VisionTokenizer.writeDirectory(dir)
console.log(`wrote a Qwen2.5-VL-style tokenizer directory to ${dir}`)
