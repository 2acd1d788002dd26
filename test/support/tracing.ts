/** A tracer that records the spans it starts, and the name of a span's parent, for tests that check traces. */
import { Option, Tracer } from "effect"

/** A tracer that keeps every span it starts, in order. */
export const recordingTracer = () => {
  const spans: Array<Tracer.NativeSpan> = []
  const tracer = Tracer.make({
    span(options) {
      const span = new Tracer.NativeSpan(options)
      spans.push(span)
      return span
    }
  })
  return { spans, tracer }
}

/** The name of a (parent) span, `null` for none or an external one. */
export const spanName = (span: Option.Option<Tracer.AnySpan>): string | null =>
  Option.match(span, { onNone: () => null, onSome: (parent) => parent._tag === "Span" ? parent.name : null })
