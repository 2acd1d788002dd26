import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as SessionInput from "../../src/session/SessionInput.ts"

const failure = <A, E>(result: Result.Result<A, E>): E => {
  if (Result.isSuccess(result)) throw new Error("expected a failure")
  return result.failure
}

const images = { inputKey: "input", metadataKey: "metadata", multimodalKeys: { image: "images" } }

describe("session input from a dataset row", () => {
  it("turns a string input into one user message and keeps the metadata", () => {
    const prepared = Result.getOrThrow(SessionInput.fromRow({ input: "Which city?", metadata: { task_id: "t1" } }, 0))
    assert.deepStrictEqual(SessionInput.toInputFile(prepared, []), {
      messages: [{ role: "user", content: "Which city?" }],
      metadata: { task_id: "t1" }
    })
  })

  it("keeps the shape of a message list", () => {
    const messages = [
      { role: "system", content: "You are a helpful research assistant." },
      { role: "user", content: [{ type: "text", text: "Which city hosted the event?" }], name: "u" }
    ]
    const prepared = Result.getOrThrow(SessionInput.fromRow({ input: messages }, 0))
    assert.deepStrictEqual(SessionInput.toInputFile(prepared, []), { messages, metadata: {} })
  })

  it("supports metadata-only tasks and custom keys, and keeps the label out of the agent's input", () => {
    const options = { inputKey: "prompt", metadataKey: "task", labelKey: "answer" }
    const prepared = Result.getOrThrow(SessionInput.fromRow({ task: { repo: "x" }, answer: "Paris" }, 4, options))
    assert.strictEqual(prepared.label, "Paris")
    assert.deepStrictEqual(SessionInput.toInputFile(prepared, []), { metadata: { repo: "x" } })
  })

  it("names the row and field of an unusable input", () => {
    assert.strictEqual(
      failure(SessionInput.fromRow({ input: 3 }, 7)).message,
      "dataset row 7, field 'input': must be a string or a list of messages, got number"
    )
    assert.strictEqual(
      failure(SessionInput.fromRow({ input: [{ content: "x" }] }, 2)).message,
      "dataset row 2, field 'input[0].role': a message needs a string 'role' (user, assistant, system, tool)"
    )
    assert.strictEqual(
      failure(SessionInput.fromRow({ input: "x", metadata: [1] }, 1)).message,
      "dataset row 1, field 'metadata': metadata must be a JSON object, got a list"
    )
    assert.include(failure(SessionInput.fromRow({ prompt: "x" }, 0)).message, "neither 'input' nor 'metadata'")
  })
})

describe("multimodal rows", () => {
  it("joins each <image> placeholder with one image value, in order", () => {
    const row = {
      input: [
        { role: "system", content: "Look carefully." },
        { role: "user", content: "<image>Compare with <image>." }
      ],
      images: ["/data/a.png", "https://example.com/b.jpg"]
    }
    const prepared = Result.getOrThrow(SessionInput.fromRow(row, 0, images))
    assert.deepStrictEqual(prepared.images, [
      { _tag: "Path", path: "/data/a.png" },
      { _tag: "Url", url: "https://example.com/b.jpg" }
    ])
    assert.deepStrictEqual(
      SessionInput.toInputFile(prepared, ["data:image/png;base64,AAA", "https://example.com/b.jpg"]),
      {
        messages: [
          { role: "system", content: "Look carefully." },
          {
            role: "user",
            content: [
              { type: "image_url", image_url: { url: "data:image/png;base64,AAA" } },
              { type: "text", text: "Compare with " },
              { type: "image_url", image_url: { url: "https://example.com/b.jpg" } },
              { type: "text", text: "." }
            ]
          }
        ],
        metadata: {}
      }
    )
  })

  it("expands placeholders inside text parts and leaves other parts alone", () => {
    const row = {
      input: [{
        role: "user",
        content: [{ type: "text", text: "Describe <image>" }, { type: "text", text: "briefly" }]
      }],
      images: "data:image/png;base64,BBB"
    }
    const prepared = Result.getOrThrow(SessionInput.fromRow(row, 0, images))
    assert.deepStrictEqual(SessionInput.toInputFile(prepared, ["data:image/png;base64,BBB"]).messages, [
      {
        role: "user",
        content: [
          { type: "text", text: "Describe " },
          { type: "image_url", image_url: { url: "data:image/png;base64,BBB" } },
          { type: "text", text: "briefly" }
        ]
      }
    ])
  })

  it("classifies paths, URLs, bytes and {bytes, path} objects", () => {
    const bytes = new Uint8Array([1, 2, 3])
    assert.deepStrictEqual(SessionInput.imageSource("DATA:image/png;base64,x"), {
      _tag: "Url",
      url: "DATA:image/png;base64,x"
    })
    assert.deepStrictEqual(SessionInput.imageSource("http://h/x.png"), { _tag: "Url", url: "http://h/x.png" })
    assert.deepStrictEqual(SessionInput.imageSource("rel/x.png"), { _tag: "Path", path: "rel/x.png" })
    assert.deepStrictEqual(SessionInput.imageSource(bytes), { _tag: "Bytes", bytes })
    assert.deepStrictEqual(SessionInput.imageSource({ bytes: "AQID", path: "ignored.png" }), { _tag: "Bytes", bytes })
    assert.deepStrictEqual(SessionInput.imageSource({ bytes: null, path: "/p.png" }), { _tag: "Path", path: "/p.png" })
    assert.isUndefined(SessionInput.imageSource(42))
  })

  it("rejects a row whose image count differs from its placeholder count, naming the row", () => {
    const error = failure(SessionInput.fromRow({ input: "<image>Describe.", images: ["/a.png", "/b.png"] }, 12, images))
    assert.strictEqual(
      error.message,
      "dataset row 12, field 'images': 2 image(s) but 1 <image> placeholder(s) in 'input'; " +
        "each image needs exactly one <image> placeholder"
    )
    assert.include(
      failure(SessionInput.fromRow({ input: "<image><image>", images: ["/a.png"] }, 3, images)).message,
      "dataset row 3"
    )
  })

  it("rejects image values it cannot read and modalities other than image", () => {
    assert.strictEqual(
      failure(SessionInput.fromRow({ input: "<image>", images: [5] }, 0, images)).message,
      "dataset row 0, field 'images[0]': an image must be a path, a data:/http(s) URL, bytes, or {bytes, path}; got number"
    )
    const video = { ...images, multimodalKeys: { video: "videos" } }
    assert.include(
      failure(SessionInput.fromRow({ input: "x", videos: ["/v.mp4"] }, 0, video)).message,
      "modality 'video'"
    )
  })
})
