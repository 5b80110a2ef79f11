/**
 * The optional verbs addon: the install step never fails, a missing build is reported as "RDMA addon not
 * built" (and links run on the fallback), and where Debian's libibverbs-dev is installed the addon builds,
 * loads and reports "no RDMA devices" on kernels without RDMA (ENOSYS from ibv_get_device_list).
 * Nothing here talks to RDMA hardware: there is none on these machines.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { addonStatus, DEFAULT_ADDON_PATH, loadVerbsAddon, nativeVerbs } from '../../src/rdma/native.js';
import { createRdmaGroup } from '../../src/rdma/index.js';
import { memoryControl, memoryFallbacks } from './helpers.js';

const INSTALL = fileURLToPath(new URL('../../native/install.mjs', import.meta.url));
const FAKE_SRC = fileURLToPath(new URL('./fixtures/fake-verbs.c', import.meta.url));
const FAKE_RUN = fileURLToPath(new URL('./fixtures/native-fake-run.ts', import.meta.url));
const HAVE_HEADERS = existsSync('/usr/include/infiniband/verbs.h');
const HAVE_COMPILER = spawnSync('c++', ['--version']).status === 0;
const KERNEL_HAS_RDMA = existsSync('/sys/class/infiniband') && readdirSync('/sys/class/infiniband').length > 0;

describe('RDMA addon loading', () => {
  it('the install step exits 0 even when it does nothing', () => {
    const r = spawnSync(process.execPath, [INSTALL], { env: { ...process.env, ORCHARD_SKIP_RDMA_BUILD: '1' }, encoding: 'utf8' });
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/RDMA addon build skipped/);
  });

  it('a missing build is reported as "RDMA addon not built" and every link falls back', async () => {
    const missing = '/nonexistent/orchard_verbs.node';
    expect(addonStatus(missing)).toEqual({ state: 'not-built', reason: 'RDMA addon not built' });
    const { verbs, status } = nativeVerbs(missing);
    expect(verbs).toBeNull();
    const control = memoryControl();
    const fb = memoryFallbacks();
    const made = await Promise.all(
      [0, 1].map((rank) =>
        createRdmaGroup({ rank, size: 2, verbs, deviceFor: () => 'rdma_en1', control: control(rank), fallback: fb.forRank(rank) }),
      ),
    );
    expect(made[0]!.choices).toEqual([{ peer: 1, transport: 'fallback', reason: `RDMA addon not built or no verbs library` }]);
    const bufs = [Float32Array.of(1, 2), Float32Array.of(10, 20)];
    await Promise.all(made.map((m, r) => m.group.allReduce(bufs[r]!)));
    expect(Array.from(bufs[0]!)).toEqual([11, 22]);
    await Promise.all(made.map((m) => m.group.close()));
    expect(status.reason).toBe('RDMA addon not built');
  });

  it.runIf(HAVE_HEADERS && HAVE_COMPILER)('with libibverbs-dev the addon builds, loads, and reports the devices it finds', () => {
    if (!existsSync(DEFAULT_ADDON_PATH)) {
      const r = spawnSync(process.execPath, [INSTALL], { encoding: 'utf8', timeout: 300_000 });
      expect(r.status).toBe(0);
    }
    expect(existsSync(DEFAULT_ADDON_PATH), 'node-gyp build of native/ failed: see native/build-log.txt').toBe(true);
    const { addon, reason } = loadVerbsAddon();
    expect(reason).toBe('');
    const lib = addon!.libraryStatus();
    expect(lib).toMatchObject({ kind: 'rdma-core', headers: true, loaded: true, library: 'libibverbs.so.1' });
    const status = addonStatus();
    if (KERNEL_HAS_RDMA) {
      expect(status.state).toBe('ready');
    } else {
      // This kernel has no RDMA: ibv_get_device_list returns NULL with ENOSYS.
      expect(status).toMatchObject({ state: 'no-devices', kind: 'rdma-core', library: 'libibverbs.so.1' });
      expect(status.reason).toMatch(/^no RDMA devices/);
      expect(nativeVerbs().verbs).toBeNull();
      expect(() => addon!.openDevice('rdma_en1')).toThrow(/ibv_get_device_list|no RDMA device/);
      // Handles are checked before anything reaches the library.
      expect(() => addon!.allocPd(12345)).toThrow(/EINVAL: unknown device handle 12345/);
      // The native busy-poll entry point exists; without a device no completion queue can be made to run it.
      expect(() => addon!.pollCqAsync(12345, 1, 10)).toThrow(/unknown completion queue handle 12345/);
      const slab = addon!.allocSlab(10);
      expect(slab.byteLength).toBe(4096);
    }
  });

  it.runIf(HAVE_HEADERS && HAVE_COMPILER)(
    'end to end through the real addon against a fake verbs library: control path, inline data path, native poll thread',
    () => {
      if (!existsSync(DEFAULT_ADDON_PATH)) spawnSync(process.execPath, [INSTALL], { encoding: 'utf8', timeout: 300_000 });
      const dir = mkdtempSync(path.join(os.tmpdir(), 'orchard-fake-verbs-'));
      try {
        const lib = path.join(dir, 'libfakeverbs.so');
        const cc = spawnSync('cc', ['-shared', '-fPIC', '-o', lib, FAKE_SRC, '-lpthread'], { encoding: 'utf8' });
        expect(cc.status, cc.stderr).toBe(0);
        const run = spawnSync(process.execPath, ['--import', 'tsx', FAKE_RUN], {
          env: { ...process.env, ORCHARD_VERBS_LIBRARY: lib },
          encoding: 'utf8',
          timeout: 60_000,
        });
        expect(run.status, run.stderr).toBe(0);
        const out = JSON.parse(run.stdout.trim().split('\n').pop()!);
        expect(out.status).toMatchObject({ state: 'ready', library: lib, devices: ['rdma_en9'] });
        expect(out.choices).toEqual([
          [{ peer: 1, transport: 'rdma', reason: 'rdma_en9' }],
          [{ peer: 0, transport: 'rdma', reason: 'rdma_en9' }],
        ]);
        expect(out.checks).toEqual({
          'allReduce-1': true,
          'allReduce-1023': true,
          'allReduce-40003': true,
          'send-1MB': true,
          allGather: true,
          barrier: true,
        });
        expect(out.nativeWaits).toBeGreaterThan(0);
        // The fake puts the IPv4-mapped GID at index 2 and refuses RTR with any other sgid_index.
        expect(out.readiness.devices[0]).toMatchObject({ device: 'rdma_en9', ready: true, ipv4Gid: { index: 2, ipv4: '10.9.9.9' } });
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});
