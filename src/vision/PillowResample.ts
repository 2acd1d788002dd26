/**
 * Pillow's `Image.resize` on an 8-bit RGB image, computed as Pillow computes it (`libImaging/Resample.c`), so that an
 * image resized here equals the one the reference image processor feeds its model, byte for byte.
 *
 * **Details**
 * The convolution filters (bicubic, bilinear, lanczos, box, hamming) are Pillow's two-pass separable resample: the
 * kernel support is widened by the scale on a downscale (Pillow's antialiasing), each output pixel's weights are
 * normalised to sum 1, turned into 22-bit fixed point (`PRECISION_BITS`), and accumulated with a rounding half
 * added; the horizontal pass runs first, over the rows the vertical pass uses, into an 8-bit intermediate, and a pass
 * whose size does not change is skipped. Nearest is Pillow's affine scale: the source pixel under each output pixel's
 * centre. `resample` numbers are Pillow's (`PIL.Image.Resampling`), as `preprocessor_config.json` writes them.
 */

/** Pillow's resampling filters by their `Resampling` number. */
export const Resample = {
  nearest: 0,
  lanczos: 1,
  bilinear: 2,
  bicubic: 3,
  box: 4,
  hamming: 5
} as const
export type Resample = (typeof Resample)[keyof typeof Resample]

export const isResample = (n: number): n is Resample => Number.isInteger(n) && n >= 0 && n <= 5

/** An 8-bit image, channels interleaved (`width * height * channels` bytes, row after row). */
export interface Image8 {
  readonly width: number
  readonly height: number
  readonly channels: number
  readonly data: Uint8Array
}

interface Filter {
  readonly support: number
  readonly weight: (x: number) => number
}

const sinc = (x: number): number => {
  if (x === 0) return 1
  const px = x * Math.PI
  return Math.sin(px) / px
}

const filters: Record<Exclude<Resample, 0>, Filter> = {
  [Resample.box]: { support: 0.5, weight: (x) => (x > -0.5 && x <= 0.5 ? 1 : 0) },
  [Resample.bilinear]: {
    support: 1,
    weight: (x) => {
      const a = Math.abs(x)
      return a < 1 ? 1 - a : 0
    }
  },
  [Resample.hamming]: {
    support: 1,
    weight: (x) => {
      const a = Math.abs(x)
      if (a === 0) return 1
      if (a >= 1) return 0
      const px = a * Math.PI
      return (Math.sin(px) / px) * (0.54 + 0.46 * Math.cos(px))
    }
  },
  [Resample.bicubic]: {
    support: 2,
    // Keys' cubic convolution with a = -0.5, in Pillow's operation order.
    weight: (x) => {
      const a = -0.5
      const t = Math.abs(x)
      if (t < 1) return ((a + 2) * t - (a + 3)) * t * t + 1
      if (t < 2) return (((t - 5) * t + 8) * t - 4) * a
      return 0
    }
  },
  [Resample.lanczos]: { support: 3, weight: (x) => (x >= -3 && x < 3 ? sinc(x) * sinc(x / 3) : 0) }
}

const PRECISION_BITS = 32 - 8 - 2

/** Per output pixel: the first input pixel, how many it reads, and their fixed-point weights (`ksize` apart). */
interface Coefficients {
  readonly ksize: number
  readonly bounds: Int32Array
  readonly weights: Int32Array
}

/** Pillow's `precompute_coeffs` + `normalize_coeffs_8bpc` for a box of `[0, inSize)` onto `outSize` pixels. */
const coefficients = (inSize: number, outSize: number, filter: Filter): Coefficients => {
  const scale = inSize / outSize
  const filterScale = scale < 1 ? 1 : scale
  const support = filter.support * filterScale
  const ksize = Math.ceil(support) * 2 + 1
  const bounds = new Int32Array(outSize * 2)
  const weights = new Int32Array(outSize * ksize)
  const k = new Float64Array(ksize)
  for (let xx = 0; xx < outSize; xx++) {
    const center = (xx + 0.5) * scale
    const ss = 1 / filterScale
    // C's (int) cast truncates toward zero.
    const xmin = Math.max(0, Math.trunc(center - support + 0.5))
    const xmax = Math.min(inSize, Math.trunc(center + support + 0.5)) - xmin
    let ww = 0
    for (let x = 0; x < xmax; x++) {
      const w = filter.weight((x + xmin - center + 0.5) * ss)
      k[x] = w
      ww += w
    }
    for (let x = 0; x < ksize; x++) {
      const normalized = x < xmax ? (ww !== 0 ? k[x]! / ww : k[x]!) : 0
      weights[xx * ksize + x] = Math.trunc(
        normalized < 0 ? -0.5 + normalized * (1 << PRECISION_BITS) : 0.5 + normalized * (1 << PRECISION_BITS)
      )
    }
    bounds[xx * 2] = xmin
    bounds[xx * 2 + 1] = xmax
  }
  return { ksize, bounds, weights }
}

const clip8 = (sum: number): number => {
  const v = sum >> PRECISION_BITS
  return v < 0 ? 0 : v > 255 ? 255 : v
}

const horizontal = (input: Image8, rowOffset: number, rows: number, c: Coefficients, width: number): Image8 => {
  const ch = input.channels
  const out = new Uint8Array(width * rows * ch)
  const src = input.data
  for (let yy = 0; yy < rows; yy++) {
    const rowStart = (yy + rowOffset) * input.width * ch
    for (let xx = 0; xx < width; xx++) {
      const xmin = c.bounds[xx * 2]!
      const xmax = c.bounds[xx * 2 + 1]!
      const kOffset = xx * c.ksize
      for (let b = 0; b < ch; b++) {
        let ss = 1 << (PRECISION_BITS - 1)
        for (let x = 0; x < xmax; x++) ss += src[rowStart + (x + xmin) * ch + b]! * c.weights[kOffset + x]!
        out[(yy * width + xx) * ch + b] = clip8(ss)
      }
    }
  }
  return { width, height: rows, channels: ch, data: out }
}

const vertical = (input: Image8, c: Coefficients, height: number): Image8 => {
  const ch = input.channels
  const rowBytes = input.width * ch
  const out = new Uint8Array(rowBytes * height)
  const src = input.data
  for (let yy = 0; yy < height; yy++) {
    const ymin = c.bounds[yy * 2]!
    const ymax = c.bounds[yy * 2 + 1]!
    const kOffset = yy * c.ksize
    for (let i = 0; i < rowBytes; i++) {
      let ss = 1 << (PRECISION_BITS - 1)
      for (let y = 0; y < ymax; y++) ss += src[(y + ymin) * rowBytes + i]! * c.weights[kOffset + y]!
      out[yy * rowBytes + i] = clip8(ss)
    }
  }
  return { width: input.width, height, channels: ch, data: out }
}

/** Pillow's nearest resize (`ImagingScaleAffine`): the source pixel under each output pixel's centre. */
const nearest = (input: Image8, width: number, height: number): Image8 => {
  const ch = input.channels
  const out = new Uint8Array(width * height * ch)
  const xs = new Int32Array(width)
  const xScale = input.width / width
  const yScale = input.height / height
  let xo = xScale * 0.5
  for (let x = 0; x < width; x++) {
    xs[x] = Math.min(input.width - 1, Math.trunc(xo))
    xo += xScale
  }
  let yo = yScale * 0.5
  for (let y = 0; y < height; y++) {
    const yin = Math.min(input.height - 1, Math.trunc(yo))
    yo += yScale
    for (let x = 0; x < width; x++) {
      const from = (yin * input.width + xs[x]!) * ch
      out.set(input.data.subarray(from, from + ch), (y * width + x) * ch)
    }
  }
  return { width, height, channels: ch, data: out }
}

/** `image.resize((width, height), resample)` as Pillow computes it for an 8-bit image. */
export const resize = (input: Image8, width: number, height: number, resample: Resample): Image8 => {
  if (input.width === width && input.height === height) return { ...input, data: input.data.slice() }
  if (resample === Resample.nearest) return nearest(input, width, height)
  const filter = filters[resample]
  const horiz = coefficients(input.width, width, filter)
  const vert = coefficients(input.height, height, filter)
  let image = input
  if (width !== input.width) {
    // Only the rows the vertical pass reads, with its bounds shifted to them.
    const first = vert.bounds[0]!
    const last = vert.bounds[height * 2 - 2]! + vert.bounds[height * 2 - 1]!
    for (let i = 0; i < height; i++) vert.bounds[i * 2] = vert.bounds[i * 2]! - first
    image = horizontal(input, first, last - first, horiz, width)
  }
  return height !== input.height ? vertical(image, vert, height) : image
}
