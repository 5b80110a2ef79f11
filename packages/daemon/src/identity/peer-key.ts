/**
 * The node's libp2p identity: an Ed25519 key kept in the data dir, so the peer id survives
 * restarts. Written once with mode 0600; a corrupt file is an error naming the file, never silently
 * replaced (replacing it would give the node a new identity behind the user's back).
 */
import { generateKeyPair, privateKeyFromProtobuf, privateKeyToProtobuf } from '@libp2p/crypto/keys';
import type { PrivateKey } from '@libp2p/interface';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const PEER_KEY_FILE = 'peer.key';

export async function loadOrCreatePeerKey(dataDir: string): Promise<{ key: PrivateKey; path: string; created: boolean }> {
  const path = join(dataDir, PEER_KEY_FILE);
  if (existsSync(path)) {
    try {
      return { key: privateKeyFromProtobuf(readFileSync(path)), path, created: false };
    } catch (err) {
      throw new Error(`${path} is not a valid peer key (${(err as Error).message}); move it away to create a new identity`);
    }
  }
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const key = await generateKeyPair('Ed25519');
  writeFileSync(path, privateKeyToProtobuf(key), { mode: 0o600, flag: 'wx' });
  return { key, path, created: true };
}
