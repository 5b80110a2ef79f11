/**
 * The cluster key is libp2p's pre-shared swarm key (pnet), in its text format:
 *   /key/swarm/psk/1.0.0/\n/base16/\n<64 hex chars>
 * Daemons holding the same key form a private pod; everyone else is "not in this cluster".
 */
import { generateKey } from '@libp2p/pnet';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';

const KEY_RE = /^\/key\/swarm\/psk\/1\.0\.0\/\n\/base16\/\n([0-9a-f]{64})\s*$/i;

export function newClusterKey(): Uint8Array {
  const bytes = new Uint8Array(95);
  generateKey(bytes);
  return bytes;
}

/** Validates and normalises a key file's contents; throws naming the file on anything else. */
export function parseClusterKey(text: string, source: string): Uint8Array {
  const m = KEY_RE.exec(text.replace(/\r\n/g, '\n'));
  if (!m) throw new Error(`${source} is not an Orchard cluster key (expected the 3-line /key/swarm/psk/1.0.0/ format written by \`orchard key new\`)`);
  return new TextEncoder().encode(`/key/swarm/psk/1.0.0/\n/base16/\n${m[1].toLowerCase()}`);
}

export function readClusterKey(path: string): Uint8Array {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`cannot read cluster key ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  return parseClusterKey(text, path);
}

export function writeClusterKey(path: string, force = false): Uint8Array {
  if (existsSync(path) && !force) throw new Error(`${path} already exists; pass --force to overwrite it (nodes using the old key will drop out)`);
  const key = newClusterKey();
  writeFileSync(path, key, { mode: 0o600 });
  return key;
}

/** Short, non-secret id to compare keys across machines ("same key?") without showing the key. */
export function clusterKeyFingerprint(key: Uint8Array): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 12);
}
