/**
 * The LoRA flags' rules (docs/lora.md "Flags"), with Relax's names: `--lora-adapter-mode` serves the trainer's
 * adapters, in place; `--enable-versioned-lora-publication` makes them versions, which needs `--fully-async` (Relax
 * also requires `--use-agentic-rollout`, which this command always is).
 */
/** How the rollout uses LoRA adapters (layers/lora/LoraVersions.ts). */
export type Mode = "off" | "in-place" | "versioned"

/** The options the rules read (fields of the rollout's options, src/config/RolloutOptions.ts). */
interface LoraFields {
  readonly loraAdapterMode: boolean
  readonly enableVersionedLoraPublication: boolean
  readonly fullyAsync: boolean
  readonly sglangLoraPath?: string | undefined
  readonly embeddedPolicy?: string | undefined
  readonly engine: string
}

/** The mode the flags select. */
export const modeOf = (options: LoraFields): Mode =>
  !options.loraAdapterMode ? "off" : options.enableVersionedLoraPublication ? "versioned" : "in-place"

/** The first LoRA flag that conflicts with the others: its field and what to do; undefined when they agree. */
export const problem = (
  options: LoraFields
): { readonly field: keyof LoraFields; readonly detail: string } | undefined => {
  if (options.enableVersionedLoraPublication && !options.loraAdapterMode) {
    return {
      field: "enableVersionedLoraPublication",
      detail: "needs --lora-adapter-mode (the trainer's adapters served as LoRA adapters); add it"
    }
  }
  if (options.enableVersionedLoraPublication && !options.fullyAsync) {
    return {
      field: "enableVersionedLoraPublication",
      detail: "needs --fully-async: versions are published while generation runs, each Session keeping its own; " +
        "add --fully-async, or drop this flag for in-place updates"
    }
  }
  if (!options.loraAdapterMode) return undefined
  if (options.sglangLoraPath !== undefined) {
    return {
      field: "sglangLoraPath",
      detail: "names a fixed adapter you loaded yourself, while --lora-adapter-mode has the rollout load the " +
        "trainer's adapters: give one of the two"
    }
  }
  if (options.engine === "embedded" && options.embeddedPolicy !== undefined) {
    return {
      field: "loraAdapterMode",
      detail: "the embedded engine cannot apply an adapter under --embedded-policy (the policy writes the text); " +
        "drop --embedded-policy, or use --engine sglang"
    }
  }
  return undefined
}
