/**
 * Pure functions that turn a kernel's published runtime status into what the panel and the
 * status bar say. No DOM here, so the wording is the same everywhere.
 */
import { IRuntime } from './api';

/** A runtime's counters as of `now` (seconds since the epoch), extrapolated from its last publication.
 *
 * A kernel writes its status only when something changes: between two writes the elapsed
 * time, the idle time (while nothing runs) and the cost keep growing at a known rate.
 */
export interface ILiveRuntime {
  backend: string;
  workers: number;
  running: number;
  queued: number;
  elapsed: number;
  idle: number;
  /** null: no bill (a pool on your own machine with no rate set) */
  cost: number | null;
  /** per worker-hour, null with no bill */
  price: number | null;
}

export function liveRuntime(rt: IRuntime, now: number): ILiveRuntime {
  const since = rt.updated !== undefined ? Math.max(now - rt.updated, 0) : 0;
  const workers = rt.workers ?? 0;
  const running = rt.running ?? 0;
  const queued = rt.queued ?? 0;
  const busy = running + queued > 0;
  const elapsed = (rt.elapsed ?? 0) + since;
  const idle = busy ? 0 : (rt.idle ?? 0) + since;
  const price = rt.price ?? null;
  // the kernel's own cost plus what the time since its last write added (workers bill while idle)
  const cost =
    price === null ? null : (rt.cost ?? (workers * (rt.elapsed ?? 0) * price) / 3600) + (workers * since * price) / 3600;
  return { backend: rt.backend ?? '?', workers, running, queued, elapsed, idle, cost, price };
}

/** "45 s", "12 min", "1 h 05 min": a duration as people read it. */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) {
    return `${s} s`;
  }
  const minutes = Math.floor(s / 60);
  if (minutes < 60) {
    return `${minutes} min`;
  }
  const hours = Math.floor(minutes / 60);
  return `${hours} h ${String(minutes % 60).padStart(2, '0')} min`;
}

/** Cost in dollars ("$0.08"): two decimals, more for amounts under a cent so they do not read $0.00. */
export function formatCost(cost: number): string {
  if (cost > 0 && cost < 0.01) {
    return `$${cost.toFixed(4)}`;
  }
  return `$${cost.toFixed(2)}`;
}

/** "$0.08 so far at $0.10/worker-hour", or "no bill (your own machine)": a cost always with its rate. */
export function formatBill(live: ILiveRuntime): string {
  if (live.cost === null || live.price === null) {
    return 'no bill (your own machine)';
  }
  const price = Number.isInteger(Math.round(live.price * 1e6) / 1e4) ? live.price.toFixed(2) : String(live.price);
  return `${formatCost(live.cost)} so far at $${price}/worker-hour`;
}

/** "3 of 5 exercises passed": a progress count with what it counts. */
export function formatProgress(done: number, total: number, what: string, verb: string): string {
  return `${done} of ${plural(total, what)} ${verb}`;
}

export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** The idle warning for a runtime idle at least `threshold` seconds, else null. */
export function idleWarning(live: ILiveRuntime, threshold: number): string | null {
  if (live.running + live.queued > 0 || live.idle < threshold) {
    return null;
  }
  return `Idle cluster: ${formatDuration(live.idle)} idle, ${formatBill(live)} — stop it?`;
}

/** One line for the status bar: workers, running tasks and cost, or "idle". */
export function statusBarText(rt: IRuntime | null, now: number): string {
  if (rt === null || rt.state !== 'running') {
    return 'Eugo: idle';
  }
  const live = liveRuntime(rt, now);
  const tasks = live.running + live.queued > 0 ? `${live.running} running` + (live.queued ? `, ${live.queued} queued` : '') : 'idle';
  return `Eugo: ${plural(live.workers, 'worker')}, ${tasks}, ${formatBill(live)}`;
}
