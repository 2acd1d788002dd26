/**
 * NumPy's `.npy` format (version 1.0) for 2-D little-endian float32 arrays: what `pixel_values` sidecar files are
 * (docs/outputs.md), readable with `numpy.load` alone.
 *
 * **Details**
 * The header is the magic `\x93NUMPY`, version 1.0, a little-endian uint16 length, and a Python dict literal padded
 * with spaces and ended by a newline so that the data starts at a multiple of 64 bytes.
 */

const MAGIC = "\x93NUMPY"

/** The header of a C-ordered `<f4` array of `shape`. */
export const header = (shape: readonly [number, number]): Uint8Array => {
  const dict = `{'descr': '<f4', 'fortran_order': False, 'shape': (${shape[0]}, ${shape[1]}), }`
  const unpadded = MAGIC.length + 2 + 2 + dict.length + 1
  const total = Math.ceil(unpadded / 64) * 64
  const text = dict + " ".repeat(total - unpadded) + "\n"
  const out = new Uint8Array(total)
  for (let i = 0; i < MAGIC.length; i++) out[i] = MAGIC.charCodeAt(i)
  out[6] = 1
  out[7] = 0
  out[8] = text.length & 0xff
  out[9] = text.length >> 8
  for (let i = 0; i < text.length; i++) out[10 + i] = text.charCodeAt(i)
  return out
}

/** The bytes of `values` as little-endian float32 (a copy only on a big-endian host). */
export const littleEndian = (values: Float32Array): Uint8Array => {
  const bytes = new Uint8Array(values.buffer, values.byteOffset, values.byteLength)
  if (new Uint8Array(new Float32Array([1]).buffer)[3] === 0x3f) return bytes
  const swapped = new Uint8Array(bytes.length)
  const view = new DataView(swapped.buffer)
  for (let i = 0; i < values.length; i++) view.setFloat32(i * 4, values[i]!, true)
  return swapped
}

/** float32 values from their little-endian bytes (a copy, so the values are aligned whatever the bytes' offset). */
export const fromLittleEndian = (bytes: Uint8Array): Float32Array<ArrayBuffer> => {
  const values = new Float32Array(Math.floor(bytes.length / 4))
  const view = new DataView(bytes.buffer, bytes.byteOffset, values.length * 4)
  for (let i = 0; i < values.length; i++) values[i] = view.getFloat32(i * 4, true)
  return values
}

/** A 2-D float32 array read from `.npy` bytes; the failure says what is not as expected. */
export const read = (
  bytes: Uint8Array
): { readonly shape: readonly [number, number]; readonly data: Float32Array<ArrayBuffer> } | string => {
  for (let i = 0; i < MAGIC.length; i++) if (bytes[i] !== MAGIC.charCodeAt(i)) return "not a .npy file"
  const major = bytes[6]
  const length = major === 1
    ? bytes[8]! | (bytes[9]! << 8)
    : new DataView(bytes.buffer, bytes.byteOffset).getUint32(8, true)
  const start = major === 1 ? 10 : 12
  const text = new TextDecoder().decode(bytes.subarray(start, start + length))
  if (!/'descr': '<f4'/.test(text) || !/'fortran_order': False/.test(text)) return `unsupported array: ${text.trim()}`
  const shape = /'shape': \((\d+), (\d+)\)/.exec(text)
  if (shape === null) return `not a 2-D array: ${text.trim()}`
  const rows = Number(shape[1])
  const columns = Number(shape[2])
  const data = fromLittleEndian(bytes.subarray(start + length, start + length + rows * columns * 4))
  return data.length === rows * columns ? { shape: [rows, columns], data } : "the file ends before its data"
}
