/**
 * The training sample as a trainer receives it and as one line of `rollout_<id>.jsonl` (docs/outputs.md
 * "`rollout_<id>.jsonl`").
 */
import { Schema, SchemaTransformation } from "effect"
import * as Npy from "../vision/Npy.ts"

/**
 * How the sample's context ends. Never `aborted`: a generation interrupted at a step boundary (`--partial-rollout`,
 * `--fully-async`) is parked and resumed inside the runtime, and only its finished response is exported (Relax: "Partial
 * rollout state must remain internal to runtime").
 */
export const Status = Schema.Literals(["completed", "truncated"])
export type Status = typeof Status.Type

/** A reward as exported or scored: a number, an object (primary value chosen by `--reward-key`), or null. */
export const Reward = Schema.NullOr(Schema.Union([Schema.Number, Schema.Record(Schema.String, Schema.Json)]))
export type Reward = typeof Reward.Type

/** The base credit: one scalar for the whole context, or one value per continuation token. */
export const Advantage = Schema.NullOr(Schema.Union([Schema.Number, Schema.Array(Schema.Number)]))
export type Advantage = typeof Advantage.Type

/**
 * float32 values on a JSON wire (the trainer RPC, the cluster's members): the base64 text of their little-endian
 * bytes (docs/trainer.md "Binary arrays").
 */
export const Float32ArrayFromBase64 = Schema.Uint8ArrayFromBase64.pipe(
  Schema.decodeTo(
    Schema.instanceOf(Float32Array),
    SchemaTransformation.transform({
      decode: (bytes: Uint8Array): Float32Array<ArrayBuffer> => Npy.fromLittleEndian(bytes),
      encode: (values: Float32Array<ArrayBuffer>): Uint8Array => Npy.littleEndian(values)
    })
  )
)

const Shape = Schema.Tuple([Schema.Int, Schema.Int])

/**
 * One image's `pixel_values` as the TypeScript API and the RPC give them: `shape` `[patches, channels *
 * temporal_patch_size * patch_size²]`, row after row.
 */
export const PixelArray = Schema.Struct({
  dtype: Schema.Literal("float32"),
  shape: Shape,
  data: Float32ArrayFromBase64
})
export type PixelArray = typeof PixelArray.Type

/**
 * One image's `pixel_values` as `rollout_<id>.jsonl` names them: `shape` float32 values (little-endian, row after row)
 * at byte `offset` of `file` (a `.npy` beside the JSONL file; docs/outputs.md).
 */
export const PixelFile = Schema.Struct({
  file: Schema.String,
  offset: Schema.Int,
  shape: Shape,
  dtype: Schema.Literal("float32")
})
export type PixelFile = typeof PixelFile.Type

const ImageGridThw = Schema.Array(Schema.Tuple([Schema.Int, Schema.Int, Schema.Int]))

export const TrainingSample = Schema.Struct({
  /** The rollout step. */
  rollout_id: Schema.Int,
  /** Group (prompt) index in the step. */
  group_index: Schema.Int,
  /** Sample index inside the step. */
  index: Schema.Int,
  session_id: Schema.String,
  /** The explicit record's `name`, or null for an implicit export. */
  export_name: Schema.NullOr(Schema.String),
  /** Prompt + continuation token ids (training view). */
  tokens: Schema.Array(Schema.Int),
  /** Length of the continuation (everything after the prompt). */
  response_length: Schema.Int,
  /** Per continuation token: 1 on generated ids, 0 on observation ids. */
  loss_mask: Schema.Array(Schema.Int),
  /** Per continuation token: the engine's logprob on generated ids, 0.0 on observations. */
  rollout_log_probs: Schema.Array(Schema.Number),
  /** `[start, end)` of each response turn in continuation coordinates. */
  turn_spans: Schema.Array(Schema.Tuple([Schema.Int, Schema.Int])),
  prompt: Schema.String,
  response: Schema.String,
  reward: Reward,
  advantage: Advantage,
  status: Status,
  /** The engine weight version of every generation attempt, in order. */
  weight_versions: Schema.Array(Schema.String),
  /**
   * With versioned LoRA (docs/lora.md): the adapter version of every generation attempt, beside `weight_versions`;
   * all one version, the one the Session was bound to (also `metadata.lora_version`).
   */
  lora_versions: Schema.optionalKey(Schema.Array(Schema.String)),
  metadata: Schema.Record(Schema.String, Schema.Json),
  label: Schema.NullOr(Schema.Json),
  /** The images of the lineage's observations, in prompt order; only on samples with images. */
  multimodal_inputs: Schema.optionalKey(Schema.Struct({ images: Schema.Array(Schema.String) })),
  /**
   * What the vision processor gives training besides the expanded `tokens`: `image_grid_thw` of every image, in the
   * order of `multimodal_inputs.images`, and with `--multimodal-train-inputs pixels` (the default) each image's
   * `pixel_values` (arrays in the API and the RPC, file references in `rollout_<id>.jsonl`); only on samples whose
   * images were expanded (a vision `--tokenizer`).
   */
  multimodal_train_inputs: Schema.optionalKey(Schema.Struct({
    image_grid_thw: ImageGridThw,
    pixel_values: Schema.optionalKey(Schema.Array(Schema.Union([PixelArray, PixelFile])))
  })),
  /**
   * With `--use-rollout-routing-replay` (Relax's `rollout_routed_experts`): per sequence position but the last
   * (`tokens.length − 1` rows), the MoE expert ids (`layers × topk`, layer after layer) of the forward step that
   * processed that token, as SGLang's requests reported them: prompt and observation positions included, so a
   * trainer can replay the routing of the whole sequence.
   */
  rollout_routed_experts: Schema.optionalKey(Schema.Array(Schema.Array(Schema.Int)))
})
export type TrainingSample = typeof TrainingSample.Type

/**
 * A sample on the cluster wire (src/cluster/ClusterWire.ts): `pixel_values` are arrays only. A runner's samples never
 * name a sidecar file (references are made when `rollout_<id>.jsonl` is written), and the cluster's binary (msgpack)
 * codec cannot carry the `PixelArray | PixelFile` union: both members have the same literal field (`dtype:
 * "float32"`), so its layout fails to build ("Binary layout sentinel collision") and every Session's result stream
 * dies on its first event.
 */
export const WireSample = TrainingSample.mapFields((fields) => ({
  ...fields,
  multimodal_train_inputs: Schema.optionalKey(Schema.Struct({
    image_grid_thw: ImageGridThw,
    pixel_values: Schema.optionalKey(Schema.Array(PixelArray))
  }))
}))
export type WireSample = typeof WireSample.Type

/** `sample` for the cluster wire ({@link WireSample}); a sidecar reference in it is a bug (a defect). */
export const toWire = (sample: TrainingSample): WireSample => {
  for (const value of sample.multimodal_train_inputs?.pixel_values ?? []) {
    if (!("data" in value)) {
      throw new Error(
        `sample ${sample.index} names a pixel_values file (${value.file}); the cluster wire carries arrays`
      )
    }
  }
  return sample as WireSample
}
