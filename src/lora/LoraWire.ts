/**
 * SGLang's LoRA routes (`http_server.load_lora_adapter` / `unload_lora_adapter`; docs/lora.md): the bodies sent and
 * the answer read.
 */
import { Schema } from "effect"

/** `POST /load_lora_adapter` (`LoadLoRAAdapterReqInput`). */
export const LoadLoraAdapterRequest = Schema.Struct({
  lora_name: Schema.String,
  lora_path: Schema.String,
  /** Never evicted to make room past `--max-loaded-loras`. */
  pinned: Schema.optionalKey(Schema.Boolean)
})
export type LoadLoraAdapterRequest = typeof LoadLoraAdapterRequest.Type

/** `POST /unload_lora_adapter` (`UnloadLoRAAdapterReqInput`). */
export const UnloadLoraAdapterRequest = Schema.Struct({ lora_name: Schema.String })
export type UnloadLoraAdapterRequest = typeof UnloadLoraAdapterRequest.Type

/** Both routes' answer (`LoRAUpdateOutput`): 200 on success, 400 with `success: false` and a message otherwise. */
export const LoraUpdateResponse = Schema.Struct({
  success: Schema.Boolean,
  error_message: Schema.optionalKey(Schema.NullOr(Schema.String)),
  loaded_adapters: Schema.optionalKey(Schema.NullOr(Schema.Record(Schema.String, Schema.Unknown)))
})
export type LoraUpdateResponse = typeof LoraUpdateResponse.Type

/** SGLang's unload of a name it does not hold (`LoRARegistry.unregister`): the adapter is gone either way. */
export const isUnknownAdapter = (message: string): boolean =>
  /does not exist|not found|never been loaded/i.test(message)
