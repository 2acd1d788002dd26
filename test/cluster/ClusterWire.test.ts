/**
 * The cluster's RPC codec (msgpack, effect/encoding SchemaBinary) must build for the wire's schemas: a `Done` event
 * carries a Session's samples, `pixel_values` arrays included (issue 40). Regression: the `PixelArray | PixelFile`
 * union (both with `dtype: "float32"`) made the layout fail ("Binary layout sentinel collision"), every Session's
 * event stream died on its first event, the controller stopped each Session before its agent ran and cluster e2e tests
 * hung. With debug dumps a Session's first context also carries its forest and replay record (issue 39). A Group's
 * stream (`RunGroup`, issue 42) carries every kind of event, each naming its Session, and its request names the Group's
 * Sessions. A runner's polls (`PollRunner`) carry several Groups' polls one way and each Group's answer the other (a
 * refusal or a whole-Group failure among them, of the `PollFailure` union), with the runner's room when asked.
 */
import { Schema } from "effect"
import { SchemaBinary } from "effect/encoding"
import { describe, expect, it } from "vitest"
import * as GroupEntity from "../../layers/cluster/GroupEntity.ts"
import * as ClusterWire from "../../src/cluster/ClusterWire.ts"
import * as Fingerprint from "../../src/cluster/Fingerprint.ts"
import type * as DebugView from "../../src/forest/DebugView.ts"
import * as TrainingSample from "../../src/forest/TrainingSample.ts"
import type * as ForestDump from "../../src/inspect/ForestDump.ts"
import * as ReplayRecord from "../../src/replay/Record.ts"
import * as ClusterRollout from "../support/clusterRollout.ts"

const sample = (
  pixels: ReadonlyArray<TrainingSample.PixelArray | TrainingSample.PixelFile>
): TrainingSample.TrainingSample => ({
  rollout_id: 0,
  group_index: 0,
  index: 0,
  session_id: "s",
  export_name: null,
  tokens: [1, 2, 3],
  response_length: 1,
  loss_mask: [0, 0, 1],
  rollout_log_probs: [-0.5],
  turn_spans: [[2, 3]],
  prompt: "p",
  response: "r",
  reward: 1,
  advantage: null,
  status: "completed",
  weight_versions: ["0"],
  metadata: {},
  label: null,
  multimodal_inputs: { images: ["data:image/png;base64,AA=="] },
  multimodal_train_inputs: { image_grid_thw: [[1, 2, 2]], pixel_values: pixels }
})

/** A Group of two as a request that starts it names it. */
const group = ClusterRollout.plannedGroup(2)

describe("ClusterWire on the cluster's binary codec", () => {
  it("a Done event with pixel_values arrays round-trips (the codec builds)", () => {
    const codec = SchemaBinary.toCodec(ClusterWire.GroupEvent)
    const data = new Float32Array([0.5, -1.25, 3, 4, 5, 6])
    const full = sample([{ dtype: "float32", shape: [2, 3], data }])
    const event: ClusterWire.GroupEvent = {
      _tag: "Done",
      sessionId: "s",
      result: { sessionId: "s", samples: [TrainingSample.toWire(full)], debug: [], parserFailures: 0 }
    }
    const bytes = Schema.encodeSync(codec)(event)
    const back = Schema.decodeSync(codec)(bytes)
    expect(back._tag).toBe("Done")
    const pixels = back._tag === "Done" ? back.result.samples[0]?.multimodal_train_inputs?.pixel_values : undefined
    expect(pixels?.[0]?.shape).toEqual([2, 3])
    expect(Array.from(pixels?.[0]?.data ?? [])).toEqual(Array.from(data))
  })

  it("a Done event's debug facts round-trip whole: a turn's cache counts, LoRA versions and moved attempts too", () => {
    const codec = SchemaBinary.toCodec(ClusterWire.GroupEvent)
    const turn: DebugView.Turn = {
      turn_idx: 0,
      resp_state_hash: "r",
      parent_state_hash: "o",
      rollout_id: 0,
      request_id: "q",
      abort_count: 1,
      status: "completed",
      response_length: 3,
      wall_elapsed_s: 0.5,
      generation_elapsed_s: 0.25,
      weight_versions: ["0", "1"],
      lora_versions: ["a@1", "a@1"],
      cached_tokens: 4,
      prompt_tokens: 9,
      moved_attempts: [{ attempt: 0, worker: "http://127.0.0.1:1", cause: "worker died" }]
    }
    const debug: ClusterWire.ContextDebug = {
      view: {
        session_id: "s",
        leaf_state_hash: "r",
        state_hashes: [{ hash: "o", kind: "obs", tokens: 9 }, { hash: "r", kind: "resp", tokens: 3 }],
        terminal_status: "completed",
        turn_count: 1,
        turns: [turn]
      },
      counters: { requests: 1, generations: 2, parserFailures: 0, droppedToolCalls: 0 }
    }
    const event: ClusterWire.GroupEvent = {
      _tag: "Done",
      sessionId: "s",
      result: { sessionId: "s", samples: [], debug: [debug], parserFailures: 0 }
    }
    const back = Schema.decodeSync(codec)(Schema.encodeSync(codec)(event))
    expect(back._tag === "Done" ? back.result.debug : undefined).toEqual([debug])
  })

  it("a Done event with a Session's forest and replay record round-trips", () => {
    const codec = SchemaBinary.toCodec(ClusterWire.GroupEvent)
    const forest: ForestDump.ForestDump = {
      root: "r",
      nodes: [{
        hash: "h",
        parent: "r",
        kind: "resp",
        messages: [{ role: "assistant", content: [{ type: "text", text: "hi" }] }],
        tokens: [5, 6],
        rollout_id: 0,
        abort_count: 0,
        logprobs: [-0.25, -1.5]
      }],
      leaves: ["h"]
    }
    const replay: ReplayRecord.SessionRecord = {
      version: ReplayRecord.version,
      generation: {
        tokenizer: null,
        tool_call_parser: "qwen25",
        reasoning_parser: null,
        strict_match: false,
        skip_special_tokens: false,
        allow_special_tokens: false,
        fail_unparsed_turns: false,
        apply_chat_template_kwargs: { enable_thinking: false }
      },
      mode: "train",
      sampling: { temperature: 1, top_p: 1, top_k: -1, max_new_tokens: 8, stop: [], stop_token_ids: [] },
      max_context_len: null,
      started_at: 1,
      requests: [{
        at: 2,
        done_at: 3,
        protocol: "messages",
        stream: true,
        model: "m",
        keep: 0,
        messages: [{ role: "user", content: "hi" }],
        stop: [],
        logprobs: false,
        rollout_ids: [0, 0],
        attempts: [{
          at: 2,
          done_at: 3,
          rid: "x",
          n: 2,
          ids: [5, 6],
          finish: { type: "stop" },
          weight_version: "0",
          prompt_tokens: 4,
          cached_tokens: 0
        }],
        body: { keys: ["model", "messages"], fields: { model: "m", messages: [{ role: "user", content: "hi" }] } },
        answer: { status: 200, frames: [{ event: "message_stop", data: { type: "message_stop" } }] }
      }]
    }
    const view = {
      session_id: "s",
      leaf_state_hash: "h",
      state_hashes: [],
      terminal_status: "completed",
      turn_count: 1,
      turns: []
    } as const
    const counters = { requests: 1, generations: 1, parserFailures: 0, droppedToolCalls: 0 }
    const event: ClusterWire.GroupEvent = {
      _tag: "Done",
      sessionId: "s",
      result: { sessionId: "s", samples: [], debug: [{ view, counters, forest, replay }], parserFailures: 0 }
    }
    const back = Schema.decodeSync(codec)(Schema.encodeSync(codec)(event))
    expect(back._tag === "Done" ? back.result.debug[0] : undefined).toEqual({ view, counters, forest, replay })
  })

  it("every Group stream event and RunGroup's request round-trip, each event naming its Session", () => {
    const codec = SchemaBinary.toCodec(ClusterWire.GroupEvent)
    const events: ReadonlyArray<ClusterWire.GroupEvent> = [
      { _tag: "FirstRequest", sessionId: "s1" },
      { _tag: "Alive" },
      { _tag: "Gate", sessionId: "s2", state: { interrupted: true, protected: false } },
      { _tag: "Done", sessionId: "s3", result: { sessionId: "s3", samples: [], debug: [], parserFailures: 2 } },
      { _tag: "Failed", sessionId: "s4", type: "SessionStopped", detail: "Session s4 was stopped by its controller" }
    ]
    for (const event of events) expect(Schema.decodeSync(codec)(Schema.encodeSync(codec)(event))).toEqual(event)
    const payload = SchemaBinary.toCodec(GroupEntity.RunGroup.payloadSchema)
    const request = {
      runner: "r",
      controller: "c",
      group,
      sessions: [{ sessionId: "s1", position: 0 }, { sessionId: "s2", position: 1 }],
      config: { rolloutTemperature: "1" }
    }
    expect(Schema.decodeSync(payload)(Schema.encodeSync(payload)(request))).toEqual(request)
  })

  it("a PollGroup answer with the runner's room, and its request asking for it, read across versions", () => {
    // What an earlier runner answers (no `Room` in its union) reads as the new answer, and back; the room comes last.
    const earlier = SchemaBinary.toCodec(Schema.Array(ClusterWire.GroupEvent))
    const now = SchemaBinary.toCodec(GroupEntity.PollGroup.successSchema)
    const events: ReadonlyArray<ClusterWire.GroupEvent> = [
      { _tag: "FirstRequest", sessionId: "s1" },
      { _tag: "Alive" },
      { _tag: "Gate", sessionId: "s2", state: { interrupted: false, protected: true } },
      { _tag: "Done", sessionId: "s3", result: { sessionId: "s3", samples: [], debug: [], parserFailures: 0 } },
      { _tag: "Failed", sessionId: "s4", type: "SessionStopped", detail: "stopped" }
    ]
    expect(Schema.decodeSync(now)(Schema.encodeSync(earlier)(events))).toEqual(events)
    expect(Schema.decodeSync(earlier)(Schema.encodeSync(now)(events))).toEqual(events)
    const withRoom = [...events, { _tag: "Room" as const, used: 3, free: null, draining: true }]
    expect(Schema.decodeSync(now)(Schema.encodeSync(now)(withRoom))).toEqual(withRoom)
    // A request asking for the room reads on an earlier runner, which ignores `room`.
    const request = SchemaBinary.toCodec(GroupEntity.PollGroup.payloadSchema)
    const { room: _, ...earlierFields } = GroupEntity.PollGroup.payloadSchema.fields
    const earlierRequest = SchemaBinary.toCodec(Schema.Struct(earlierFields))
    const poll = {
      runner: "r",
      controller: "c",
      sessions: [{ sessionId: "s1", position: 0, arrived: true, gate: null }],
      grant: null,
      received: ["s0"],
      place: false,
      room: true
    }
    expect(Schema.decodeSync(request)(Schema.encodeSync(request)(poll))).toEqual(poll)
    const { room: __, ...withoutRoom } = poll
    expect(Schema.decodeSync(earlierRequest)(Schema.encodeSync(request)(poll))).toEqual(withoutRoom)
  })

  it("a PollRunner request and its answer round-trip: a Group refused at its placement, the runner's room", () => {
    const request = SchemaBinary.toCodec(GroupEntity.PollRunner.payloadSchema)
    const poll = {
      runner: "r",
      controller: "c",
      polls: [
        {
          group,
          sessions: [
            { sessionId: "s1", position: 0, arrived: false, gate: null },
            { sessionId: "s2", position: 1, arrived: false, gate: null }
          ],
          grant: null,
          place: true
        },
        {
          sessions: [{ sessionId: "t1", position: 0, arrived: true, gate: { interrupted: true, protected: false } }],
          grant: { rolloutId: 3, weights: { seq: 2, version: "7", paused: "abort" as const } },
          place: false
        }
      ],
      config: Fingerprint.toText({ rolloutTemperature: "1", tokenizer: "null" }),
      received: ["s0"],
      room: true
    }
    expect(Schema.decodeSync(request)(Schema.encodeSync(request)(poll))).toEqual(poll)
    const answer = SchemaBinary.toCodec(GroupEntity.PollRunner.successSchema)
    const refused = new ClusterWire.PlacementRefusedError({
      runner: "r",
      address: "10.0.0.2:7000",
      decision: "full",
      used: 3,
      free: 1,
      capacity: 4
    })
    const answers: ClusterWire.RunnerPollAnswers = {
      answers: [
        { events: [], failure: refused },
        {
          events: [
            { _tag: "FirstRequest", sessionId: "t1" },
            { _tag: "Done", sessionId: "t1", result: { sessionId: "t1", samples: [], debug: [], parserFailures: 0 } }
          ]
        },
        { events: [], failure: new ClusterWire.SessionFailedError({ type: "ConfigMismatch", detail: "differs" }) },
        { events: [] }
      ],
      room: { used: 3, free: null, draining: true }
    }
    const back = Schema.decodeSync(answer)(Schema.encodeSync(answer)(answers))
    expect(back).toEqual(answers)
    expect(back.answers[0]?.failure).toBeInstanceOf(ClusterWire.PlacementRefusedError)
    expect(back.answers[0]?.failure?.message).toBe(refused.message)
    expect(back.answers[2]?.failure?._tag).toBe("SessionFailedError")
    // Without a room (the message did not ask), and with no poll at all.
    expect(Schema.decodeSync(answer)(Schema.encodeSync(answer)({ answers: [] }))).toEqual({ answers: [] })
  })

  it("a sidecar reference is refused on the wire (a defect, never sent)", () => {
    expect(() => TrainingSample.toWire(sample([{ file: "f.npy", offset: 0, shape: [2, 3], dtype: "float32" }])))
      .toThrow(/cluster wire carries arrays/)
  })
})
