/**
 * The daemon's house plan: its rooms stand on floors, and an import only ever points down (or across
 * one floor). Built from the sources with TypeScript's own pre-processor, so type imports, re-exports
 * and dynamic imports all count. A new circle or a new upward arrow fails here, naming it; the few
 * that remain are listed below, each with its reason. (The engine's plan: packages/engine/test/house.test.ts.)
 */
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { circles, importGraph, upwardArrows, type Floors } from '../../../test/harness/house.js';

const SRC = join(dirname(fileURLToPath(import.meta.url)), '../src');

/**
 * Floors, lowest first. A file belongs to the floor of the longest prefix that matches its path
 * under src/; where a room's files stand on different floors, the prefixes say which.
 */
const FLOORS: Floors = [
  // Setting parsers that config/options.ts reads flags through (pure: names, regions, signed offers).
  ['setting-parsers', ['backend/select.ts', 'network/settings.ts', 'network/offer.ts', 'network/signed.ts']],
  ['config', ['config/', 'colors.ts', 'logger.ts', 'polyfills.ts']],
  // What a node is and measures: hardware profile, links, capability, identity, compute backend.
  ['node-facts', ['profile/', 'links/', 'capability/', 'identity/', 'backend/', 'doctor/']],
  ['model-description', ['models/description.ts']],
  // What a served model asks of the planner (context, prompt chunk): pure, read by models/hub-plan.ts too.
  ['serving-profile', ['serving/profile.ts']],
  // A generation request, its events and errors, as every dialect, the executor and the network speak them.
  ['requests', ['requests/']],
  // The replicated cluster state and the control messages that carry it.
  ['state', ['state/', 'control/']],
  ['p2p-node', ['node/']],
  ['store', ['store/']],
  ['models', ['models/']],
  // The control plane (identity, libp2p node, replicated state, profile, links): serving stands on it.
  ['daemon', ['daemon.ts']],
  // Chat formats: templates, tool-call formats, reasoning; the prompt a request becomes.
  ['prompt', ['prompt/']],
  // Each API's request and reply shapes translated to and from requests/.
  ['dialects', ['dialects/']],
  ['runner', ['runner/']],
  ['serving', ['serving/']],
  ['network', ['network/']],
  ['dashboard', ['dashboard/']],
  ['http', ['http/', 'request-log.ts']],
  ['orchard', ['orchard.ts']],
  ['cli', ['cli/', 'service/']],
  ['index', ['index.ts']],
];

/** Upward arrows that remain, each with its reason. */
const UPWARD_EXCEPTIONS: Record<string, string> = {};

/** Circles that remain (as their sorted files), each with its reason. */
const CIRCLE_EXCEPTIONS: Record<string, string> = {};

describe('daemon house plan', () => {
  const graph = importGraph(SRC);

  it('reads the real import graph', () => {
    expect(graph.get('orchard.ts')?.length).toBeGreaterThan(5);
    expect(graph.get('http/server.ts')).toContain('http/openai.ts');
  });

  it('has no import circles beyond the listed ones', () => {
    expect(circles(graph)).toEqual(Object.keys(CIRCLE_EXCEPTIONS).sort());
  });

  it('has no arrow from a lower floor to a higher one beyond the listed ones', () => {
    expect(upwardArrows(graph, FLOORS)).toEqual(Object.keys(UPWARD_EXCEPTIONS).sort());
  });

  it('keeps serving/ and dialects/ apart: both speak requests/ and prompt/', () => {
    const offending = [...graph].flatMap(([from, targets]) => (from.startsWith('serving/') ? targets.filter((t) => t.startsWith('dialects/')).map((t) => `${from} -> ${t}`) : []));
    expect(offending).toEqual([]);
  });

  it('has every room of src/ in the README rooms table', () => {
    const readme = readFileSync(join(SRC, '../README.md'), 'utf8');
    const table = readme.slice(readme.indexOf('## Rooms (src/)'), readme.indexOf('## A chat request'));
    const rooms = readdirSync(SRC, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => `\`${e.name}/\``);
    expect(rooms.filter((r) => !table.includes(r))).toEqual([]);
  });

  it('hands serving, the network port and the dashboard narrow ports, never the whole Daemon', () => {
    const offending = [...graph].flatMap(([from, targets]) => (from !== 'orchard.ts' && from !== 'index.ts' && targets.includes('daemon.ts') ? [from] : []));
    expect(offending).toEqual([]);
  });
});
