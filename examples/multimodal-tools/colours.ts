/**
 * The colours of the multimodal example: the squares' palette (the answers) and the images' background.
 *
 * **Details**
 * Shared by the data generator (which paints them), the policy (which names what it sees by the nearest palette
 * colour) and the test (which checks whether a zoomed view shows the answer's colour).
 */

/** An RGB colour. */
export interface Rgb {
  readonly r: number
  readonly g: number
  readonly b: number
}

/** The colours a square can have, by name. */
export const palette = {
  red: { r: 220, g: 40, b: 40 },
  green: { r: 40, g: 170, b: 60 },
  blue: { r: 40, g: 80, b: 220 },
  yellow: { r: 235, g: 200, b: 30 },
  purple: { r: 140, g: 50, b: 180 },
  orange: { r: 240, g: 130, b: 20 }
} as const satisfies Record<string, Rgb>

export type ColourName = keyof typeof palette

/** The background of every image. */
export const background: Rgb = { r: 215, g: 215, b: 215 }

/** Squared RGB distance. */
export const distance = (a: Rgb, b: Rgb): number => (a.r - b.r) ** 2 + (a.g - b.g) ** 2 + (a.b - b.b) ** 2

/** The palette colour nearest to `colour`. */
export const nearest = (colour: Rgb): ColourName =>
  (Object.keys(palette) as Array<ColourName>).reduce((best, name) =>
    distance(palette[name], colour) < distance(palette[best], colour) ? name : best
  )
