/**
 * Prelaunch (docs/runtime.md "Prelaunch", `--agentic-prelaunch`): the next step's agents start while resident
 * capacity is free, so their start-up (imports, tools, environments) overlaps the current step.
 *
 * **Details**
 * Prelaunch changes when agent processes start, never when requests run: a prelaunched Session's first request is
 * held at the first-request barrier (layers/schedule/FirstRequestBarrier.ts) until its Group's lease. It acts in two
 * places of the leasing decision (src/schedule/Leasing.ts), both only when a next step follows:
 * - `nextMoves` starts Groups up to full capacity instead of up to what the step still needs (`fillCapacity`);
 * - `closePrepare` keeps the Groups still in Prepare resident for the next step (`keepPrepare`) instead of stopping
 *   them and starting their rows again, first, in the next step.
 * Training Sessions then stay resident during Eval, which the capacity table counts (`Settings.capacity`); Eval pools
 * never prelaunch, and the progress bar shows `prepared=M` (layers/observability/Telemetry.ts).
 */

/** Whether a step prelaunches for the one after it: with `--agentic-prelaunch`, and only when a next step follows. */
export const carriesOver = (prelaunch: boolean, nextStep: boolean): boolean => prelaunch && nextStep
