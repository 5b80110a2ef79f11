import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { clusterKeyFingerprint, parseClusterKey, readClusterKey, writeClusterKey } from '../../src/identity/cluster-key.js';
import { duplicateIdentityMessage, foreignAddresses } from '../../src/identity/duplicate.js';
import { loadOrCreatePeerKey } from '../../src/identity/peer-key.js';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';
import { classifyDialError, dialFailureMessage } from '../../src/node/dial-errors.js';

const tmp = () => mkdtempSync(join(os.tmpdir(), 'orchard-id-'));

describe('identity', () => {
  it('the peer key persists across restarts, private to the user', async () => {
    const dir = tmp();
    const first = await loadOrCreatePeerKey(dir);
    const again = await loadOrCreatePeerKey(dir);
    expect(first.created).toBe(true);
    expect(again.created).toBe(false);
    expect(peerIdFromPrivateKey(again.key).toString()).toBe(peerIdFromPrivateKey(first.key).toString());
    expect(statSync(first.path).mode & 0o777).toBe(0o600);
    expect(peerIdFromPrivateKey((await loadOrCreatePeerKey(tmp())).key).toString()).not.toBe(peerIdFromPrivateKey(first.key).toString());
  });

  it('a corrupt peer key is an error naming the file, never silently replaced', async () => {
    const dir = tmp();
    writeFileSync(join(dir, 'peer.key'), 'garbage');
    await expect(loadOrCreatePeerKey(dir)).rejects.toThrow(/peer\.key is not a valid peer key/);
    expect(readFileSync(join(dir, 'peer.key'), 'utf8')).toBe('garbage');
  });

  it('cluster keys: written in the pnet format, parsed back, refused when malformed or when overwriting', () => {
    const path = join(tmp(), 'pod.key');
    const key = writeClusterKey(path);
    expect(new TextDecoder().decode(key)).toMatch(/^\/key\/swarm\/psk\/1\.0\.0\/\n\/base16\/\n[0-9a-f]{64}$/);
    expect(readClusterKey(path)).toEqual(key);
    expect(clusterKeyFingerprint(key)).toMatch(/^[0-9a-f]{12}$/);
    expect(() => writeClusterKey(path)).toThrow(/already exists; pass --force/);
    expect(() => parseClusterKey('hello', 'x.key')).toThrow(/x\.key is not an Orchard cluster key/);
    expect(() => readClusterKey(join(tmp(), 'missing.key'))).toThrow(/cannot read cluster key .*ENOENT/);
  });

  it('duplicate identity: foreign addresses only, and a message with the fix', () => {
    const ours = ['/ip4/127.0.0.1/tcp/52416/p2p/X', '/ip4/10.0.0.1/tcp/52416/p2p/X'];
    expect(foreignAddresses(['/ip4/127.0.0.1/tcp/52416/p2p/X', '/ip4/10.0.0.2/tcp/52416'], ours)).toEqual(['/ip4/10.0.0.2/tcp/52416']);
    expect(foreignAddresses(ours, ours)).toEqual([]);
    const msg = duplicateIdentityMessage('X', ['/ip4/10.0.0.2/tcp/52416'], '/home/u/.orchard/peer.key');
    expect(msg).toMatch(/10\.0\.0\.2.*peer id X.*copied.*delete \/home\/u\/\.orchard\/peer\.key/);
  });

  it('pnet failures read as "not in this cluster", network failures as unreachable', () => {
    expect(classifyDialError(new Error('connect ECONNREFUSED 10.0.0.2:52416'))).toBe('unreachable');
    expect(classifyDialError(Object.assign(new Error('All promises were rejected'), { errors: [new Error('connect EHOSTUNREACH')] }))).toBe('unreachable');
    for (const raw of ['Invalid length, got 8', 'read ECONNRESET', 'unexpected end of input', 'The operation was aborted due to timeout']) {
      expect(classifyDialError(new Error(raw))).toBe('not-in-cluster');
    }
    expect(dialFailureMessage('not-in-cluster', 'P', true)).toBe('peer P is not in this cluster (it has no cluster key or a different one)');
    expect(dialFailureMessage('not-in-cluster', 'P', false)).toMatch(/private pod.*--cluster-key/);
  });
});
