/**
 * The coordinator's serving decisions as pure functions: state, the placeable cluster, what the board
 * knows about instances and the clock in; cluster events out. Like the reducers, tested without a
 * socket. Only the coordinator node runs them (serving.ts feeds it requests and a tick); its memory
 * between steps is plain data that goes in and comes back out.
 *
 *   place    a model asked for (a request or `orchard load`): the existing instance, else a new one
 *   remove   an instance asked away
 *   failed   a runner of an instance failed: remove it, place the model again after a backoff; after
 *            MAX_ATTEMPTS failures in a row the model is marked failed and left alone until asked again
 *   tick     instances on nodes that left are replaced; due replacements are placed; a failed model
 *            whose files changed is cleared; instances idle past the keep-alive are unloaded; a clearly faster
 *            plan after a pod change gets a successor, and the old instance retires once idle; so does
 *            the duplicate a healed partition leaves (state/merge.ts names which one is kept)
 */
import type { Cluster } from '@orchard/partitioner';
import type { ModelDescription } from '../models/description.js';
import type { ClusterEvent } from '../state/events.js';
import type { PlacedPlan, PlacementRequest } from '../state/placed-plan.js';
import type { ClusterState, InstanceEntry } from '../state/types.js';
import { place, PlacementError, shouldUpgrade } from './placement.js';
import { servingProfile } from './profile.js';

/** Failed placements of one model in a row before it is marked failed. */
export const MAX_ATTEMPTS = 5;
/** Backoff before the n-th replacement of a failed model: BASE·2^(n-1), at most MAX. */
export const BACKOFF_BASE_MS = 1000;
export const BACKOFF_MAX_MS = 60_000;
/**
 * A superseded instance retires on a status showing it idle that was heard this long after its
 * successor became ready: until all nodes see the successor ready they may still route to the old one.
 */
export const RETIRE_SETTLE_MS = 3000;
/**
 * A superseded instance is removed this long after its successor was placed (or, for a duplicate left
 * by a healed partition, after the merge: `plan.supersedesSince`) even when never seen idle.
 */
export const RETIRE_AFTER_MS = 600_000;

export interface View {
  state: ClusterState;
  /** The cluster placement may use (nodes that stopped answering left out). */
  cluster: Cluster;
  now: number;
  ready(id: string): boolean;
  /** The driver's last status of `id`: load, how long it had been idle, and when it was heard. */
  status(id: string): { active: number; queued: number; at: number; idleMs?: number } | undefined;
  /** When the model's files last changed on a node holding them (ms; 0: unknown). */
  filesAt(model: string): number;
  /**
   * How long a node that stopped answering takes to drop out of `cluster` (ms): a replacement after a
   * node's loss waits this long, so it is not placed on the dead node again.
   */
  silenceMs: number;
  /** Instances idle this long are unloaded (the next request places the model again); null: never. */
  keepAliveMs: number | null;
  /**
   * The keep-alive the model's last request asked for (Ollama's per-request keep_alive), in place of
   * `keepAliveMs`: ms, null for never; undefined where no request asked.
   */
  keepAliveOf?(model: string): number | null | undefined;
}

export interface Fresh {
  instanceId(model: string): string;
  secret(): string;
}

/** What the coordinator remembers between steps (plain data). */
export interface Memory {
  /** Instances already being replaced, so a late failure report does not replace twice. */
  replaced: readonly string[];
  /** Replacements waiting for their time. */
  pending: readonly { model: string; requested: PlacementRequest; description: ModelDescription; dueAt: number; reason: string }[];
  /** Failed placements of each model in a row (reset once an instance of it serves). */
  failures: Readonly<Record<string, { count: number; reason: string }>>;
  /** When each successor instance was first seen ready. */
  successorReadyAt: Readonly<Record<string, number>>;
}

export const emptyMemory: Memory = { replaced: [], pending: [], failures: {}, successorReadyAt: {} };

export type Command =
  /** `explicit`: someone asked (`orchard load`), not a request: a failed mark is cleared and a pending replacement not waited for. */
  | { type: 'place'; model: string; description: ModelDescription; requested: PlacementRequest; exclusive: boolean; explicit: boolean }
  | { type: 'remove'; id: string }
  /** `load`: the model never served (its files, its fetch): counts towards giving up on the model. `serve`: it died serving (a node or link lost). */
  | { type: 'failed'; id: string; reason: string; phase: 'load' | 'serve' }
  | { type: 'tick' };

export interface Step {
  events: ClusterEvent[];
  memory: Memory;
  /** What happened, for the log. */
  notes: string[];
}

export function decide(view: View, memory: Memory, command: Command, fresh: Fresh): Step {
  const step: Step = { events: [], memory, notes: [] };
  switch (command.type) {
    case 'place': {
      if (command.explicit) {
        // A model marked failed gets another chance; a replacement waiting out its backoff goes now.
        if (view.state.failedModels[command.model]) step.events.push({ type: 'model-cleared', model: command.model, at: view.now });
        step.memory = { ...step.memory, failures: without(step.memory.failures, command.model), pending: step.memory.pending.filter((p) => p.model !== command.model) };
      } else if (view.state.failedModels[command.model] || step.memory.pending.some((p) => p.model === command.model)) {
        // Not on a request's behalf: a failed model waits for someone to load it, a replacement for its time.
        return step;
      }
      if (!findExisting(view.state, command.model, command.requested, command.exclusive)) {
        const e = placed(view, command.model, command.description, command.requested, fresh);
        step.events.push(e);
        step.notes.push(`placed ${command.model} as ${e.instance.id}`);
      }
      return step;
    }
    case 'remove':
      if (view.state.instances[command.id]) step.events.push(removed(command.id, view.now));
      return step;
    case 'failed':
      return replace(view, step, command.id, `a runner failed: ${command.reason}`, command.phase === 'load');
    case 'tick':
      return tick(view, step, fresh);
  }
}

/** An instance of `model` that serves the request: any (or, `exclusive`, one placed the same way). */
export function findExisting(state: ClusterState, model: string, req: PlacementRequest, exclusive: boolean): InstanceEntry | undefined {
  return Object.values(state.instances).find((e) => {
    if (e.model !== model) return false;
    if (!exclusive) return true;
    const r = e.plan.requested;
    return r.strategy === req.strategy && (r.nodes ?? 2) === (req.nodes ?? 2);
  });
}

function placed(view: View, model: string, description: ModelDescription, requested: PlacementRequest, fresh: Fresh): Extract<ClusterEvent, { type: 'instance-placed' }> {
  return placementEvent(view, model, planned(view, description, requested), fresh);
}

/** Where `description` would go now (throws PlacementError when nowhere). */
function planned(view: View, description: ModelDescription, requested: PlacementRequest, supersedes?: string): Omit<PlacedPlan, 'secret'> {
  const profile = servingProfile(description, { context: requested.context, sequences: requested.sequences });
  const p = place(description, view.cluster, requested, profile);
  return { ...p, requested, model: description, context: profile.contextTokens, sequences: profile.kvSequences, ...(supersedes ? { supersedes } : {}) };
}

function placementEvent(view: View, model: string, p: Omit<PlacedPlan, 'secret'>, fresh: Fresh): Extract<ClusterEvent, { type: 'instance-placed' }> {
  const plan: PlacedPlan = { ...p, secret: fresh.secret() };
  return { type: 'instance-placed', instance: { id: fresh.instanceId(model), model, placedAt: view.now, nodes: [...plan.ranks], plan } };
}

function removed(id: string, at: number): ClusterEvent {
  return { type: 'instance-removed', id, at };
}

function without<T>(r: Readonly<Record<string, T>>, key: string): Record<string, T> {
  const { [key]: _gone, ...rest } = r;
  return rest;
}

/** Removes instance `id` and schedules its model's placement on the live nodes. */
function replace(view: View, step: Step, id: string, reason: string, modelFault: boolean): Step {
  const entry = view.state.instances[id];
  if (!entry || step.memory.replaced.includes(id)) return step;
  const m = step.memory;
  const failures = modelFault ? { ...m.failures, [entry.model]: { count: (m.failures[entry.model]?.count ?? 0) + 1, reason } } : m.failures;
  const count = failures[entry.model]?.count ?? 0;
  step.events.push(removed(id, view.now));
  step.notes.push(`replacing ${id}: ${reason}`);
  const replaced = [...m.replaced.slice(-255), id];
  if (count >= MAX_ATTEMPTS) {
    step.events.push({ type: 'model-failed', model: entry.model, reason: reason.slice(0, 1000), attempts: count, at: view.now });
    step.notes.push(`giving up on ${entry.model} after ${count} failed placements: ${reason}`);
    step.memory = { ...m, replaced, failures: without(failures, entry.model) };
    return step;
  }
  // A model at fault waits out a growing backoff; a loss of nodes waits until the cluster view has left
  // the silent node out (it is still live in the state for a while).
  const delay = modelFault ? Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** (count - 1)) : view.silenceMs;
  const pending = [...m.pending, { model: entry.model, requested: entry.plan.requested, description: entry.plan.model, dueAt: view.now + delay, reason }];
  step.memory = { ...m, replaced, failures, pending };
  return step;
}

function tick(view: View, step: Step, fresh: Fresh): Step {
  const { state, now } = view;
  const live = new Set(Object.values(state.nodes).filter((n) => n.status === 'live').map((n) => n.peerId));
  for (const entry of Object.values(state.instances)) {
    const gone = entry.nodes.filter((n) => !live.has(n));
    if (gone.length) replace(view, step, entry.id, `node(s) ${gone.join(', ')} left`, false);
  }
  // A failed model whose files changed since gets another chance.
  for (const f of Object.values(state.failedModels)) {
    if (view.filesAt(f.model) > f.at) {
      step.events.push({ type: 'model-cleared', model: f.model, at: now });
      step.notes.push(`the files of ${f.model} changed since it failed: it may be placed again`);
    }
  }
  // An instance that serves clears its model's failure count.
  for (const entry of Object.values(state.instances)) {
    if (step.memory.failures[entry.model] && view.ready(entry.id)) step.memory = { ...step.memory, failures: without(step.memory.failures, entry.model) };
  }
  placeDue(view, step, fresh);
  unloadIdle(view, step);
  upgrade(view, step, fresh);
  retire(view, step);
  return step;
}

/** Unloads instances nobody used for the keep-alive time (as Ollama's keep_alive): memory back to the pod. */
function unloadIdle(view: View, step: Step): void {
  for (const e of Object.values(view.state.instances)) {
    const asked = view.keepAliveOf?.(e.model);
    const keep = asked === undefined ? view.keepAliveMs : asked;
    if (keep === null) continue;
    const s = view.status(e.id);
    if (!s || s.idleMs === undefined || s.active > 0 || s.queued > 0 || !view.ready(e.id)) continue;
    const idle = s.idleMs + (view.now - s.at);
    if (idle < keep) continue;
    step.events.push(removed(e.id, view.now));
    step.notes.push(`unloading ${e.id} (${e.model}): idle for ${Math.round(idle / 1000)} s; the next request places it again`);
  }
}

/** Due replacements: the layout asked for if it still fits, else the planner's choice. */
function placeDue(view: View, step: Step, fresh: Fresh): void {
  const due = step.memory.pending.filter((p) => p.dueAt <= view.now);
  if (!due.length) return;
  step.memory = { ...step.memory, pending: step.memory.pending.filter((p) => p.dueAt > view.now) };
  for (const p of due) {
    if (view.state.failedModels[p.model] || findExisting(view.state, p.model, p.requested, false)) continue;
    const attempts: PlacementRequest[] = p.requested.strategy === 'auto' ? [p.requested] : [p.requested, { strategy: 'auto', context: p.requested.context, sequences: p.requested.sequences }];
    for (const req of attempts) {
      try {
        step.events.push(placed(view, p.model, p.description, req, fresh));
        step.notes.push(`placed ${p.model} again (${req.strategy})`);
        break;
      } catch (err) {
        if (!(err instanceof PlacementError)) throw err;
        step.notes.push(`re-placement of ${p.model} (${req.strategy}) failed: ${err.message}`);
      }
    }
  }
}

/**
 * After a pod change, an auto-placed instance whose model now has a clearly faster plan gets a
 * successor: new requests go to it once it serves, and the old instance is removed when idle.
 */
function upgrade(view: View, step: Step, fresh: Fresh): void {
  const all = Object.values(view.state.instances);
  for (const e of all) {
    const p = e.plan;
    if (p.requested.strategy !== 'auto' || !view.ready(e.id)) continue;
    // One upgrade per model at a time (a succession ends when the old instance is gone).
    if (all.some((o) => o.model === e.model && o.plan.supersedes && view.state.instances[o.plan.supersedes])) continue;
    // Nor while two auto-placed copies take requests side by side (left by a healed partition the merge
    // could not pair): a successor of one would leave the other running beside it.
    const heads = all.filter((o) => o.model === e.model && o.plan.requested.strategy === 'auto' && !all.some((x) => x.plan.supersedes === o.id));
    if (heads.length > 1) continue;
    let next;
    try {
      next = planned(view, p.model, p.requested, e.id);
    } catch (err) {
      if (err instanceof PlacementError) continue;
      throw err;
    }
    if (!shouldUpgrade(p, next)) continue;
    const event = placementEvent(view, e.model, next, fresh);
    step.events.push(event);
    step.notes.push(`a faster plan for ${e.model} exists (${p.predicted?.decodeTokensPerSecond} -> ${next.predicted?.decodeTokensPerSecond} tok/s): placing ${event.instance.id} to succeed ${e.id}`);
  }
}

function retire(view: View, step: Step): void {
  const { state, now } = view;
  const readyAt: Record<string, number> = {};
  for (const [id, at] of Object.entries(step.memory.successorReadyAt)) if (state.instances[id]) readyAt[id] = at;
  for (const e of Object.values(state.instances)) {
    const old = e.plan.supersedes;
    if (!old || !state.instances[old] || !view.ready(e.id)) continue;
    const since = (readyAt[e.id] ??= now);
    // Idle only by a status the old instance's driver sent a while after the successor was ready, so it
    // counts every request routed to the old one before all nodes saw the successor. No status is not
    // idle: a coordinator that just took over has not heard one yet.
    const s = view.status(old);
    const idle = !!s && s.at > since + RETIRE_SETTLE_MS && s.active === 0 && s.queued === 0;
    if (idle || now - (e.plan.supersedesSince ?? e.placedAt) > RETIRE_AFTER_MS) {
      step.events.push(removed(old, now));
      step.notes.push(`retiring ${old}, superseded by ${e.id}`);
    }
  }
  step.memory = { ...step.memory, successorReadyAt: readyAt };
}
