import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseBridge, parseMulticastRoute, runDoctor, type CommandOutput, type DoctorEnv } from '../../src/doctor/index.js';

const fx = (name: string) => readFileSync(join(__dirname, 'fixtures', name), 'utf8');
const mac = (name: string) => readFileSync(join(__dirname, '..', 'fixtures', 'macos', name), 'utf8');
const ok = (stdout: string): CommandOutput => ({ code: 0, stdout, stderr: '' });
const missing: CommandOutput = { code: 127, stdout: '', stderr: '' };

function env(overrides: Partial<DoctorEnv> & { outputs?: Record<string, CommandOutput> } = {}): DoctorEnv {
  const outputs = overrides.outputs ?? {};
  return {
    platform: 'darwin',
    nodeVersion: 'v20.20.2',
    dataDir: '/Users/ada/.orchard',
    apiHost: '127.0.0.1',
    apiPort: 52415,
    run: async (cmd, args) => outputs[[cmd, ...args].join(' ')] ?? missing,
    portFree: async () => true,
    orchardAnswers: async () => false,
    diskFreeBytes: async () => 500 * 1024 ** 3,
    models: async () => [],
    bundledModelPresent: async () => true,
    ...overrides,
  };
}

const byId = async (e: DoctorEnv) => Object.fromEntries((await runDoctor(e)).map((r) => [r.id, r]));

describe('orchard doctor checks', () => {
  it('a well set-up Mac with RDMA: everything ok except the port without an IPv4 address', async () => {
    const r = await byId(
      env({
        outputs: {
          'route -n get 224.0.0.251': ok(fx('route-get-224-darwin.txt')),
          'ifconfig bridge0': ok(fx('ifconfig-bridge0-off.txt')),
          'rdma_ctl status': ok(mac('rdma_ctl-status.txt')),
          'ibv_devinfo -v': ok(mac('ibv_devinfo.txt')),
          'ifconfig en2': ok(fx('ifconfig-en2.txt')),
          'ifconfig en3': ok(fx('ifconfig-en3.txt')),
        },
      }),
    );
    expect(r['multicast'].status).toBe('ok');
    expect(r['thunderbolt-bridge'].status).toBe('ok');
    expect(r['rdma-enabled'].status).toBe('ok');
    expect(r['rdma-ports']).toMatchObject({ status: 'warn' });
    expect(r['rdma-ports'].fix).toContain('rdma_en4');
    expect(r['rdma-ipv4']).toMatchObject({ status: 'fail' });
    expect(r['rdma-ipv4'].detail).toContain('en3');
    expect(r['rdma-ipv4'].detail).not.toContain('en2');
  });

  it('RDMA disabled: says how to enable it from Recovery and stops there', async () => {
    const r = await byId(env({ outputs: { 'rdma_ctl status': ok(mac('rdma_ctl-status-disabled.txt')) } }));
    expect(r['rdma-enabled'].status).toBe('warn');
    expect(r['rdma-enabled'].fix).toContain('rdma_ctl enable');
    expect(r['rdma-ports']).toBeUndefined();
  });

  it('Thunderbolt Bridge on: warns with the command that turns it off', async () => {
    const r = await byId(env({ outputs: { 'ifconfig bridge0': ok(fx('ifconfig-bridge0-on.txt')) } }));
    expect(r['thunderbolt-bridge'].status).toBe('warn');
    expect(r['thunderbolt-bridge'].detail).toContain('en2, en3');
    expect(r['thunderbolt-bridge'].fix).toContain('networksetup -setnetworkserviceenabled "Thunderbolt Bridge" off');
    expect(parseBridge(ok(fx('ifconfig-bridge0-off.txt')))).toMatchObject({ up: false, members: ['en2', 'en3'] });
  });

  it('old Node, busy port, little disk, broken store: each fails with its fix', async () => {
    const r = await byId(
      env({
        nodeVersion: 'v18.19.0',
        portFree: async () => false,
        diskFreeBytes: async () => 2 * 1024 ** 3,
        models: async () => ({ error: '/x/models: EACCES' }),
      }),
    );
    expect(r['node'].status).toBe('fail');
    expect(r['api-port']).toMatchObject({ status: 'fail', detail: 'in use by another program' });
    expect(r['api-port'].fix).toContain('--api-port');
    expect(r['disk'].status).toBe('fail');
    expect(r['models'].status).toBe('fail');
  });

  it('a busy port held by Orchard itself is fine', async () => {
    const r = await byId(env({ portFree: async () => false, orchardAnswers: async () => true }));
    expect(r['api-port'].status).toBe('ok');
  });

  it('Linux: multicast route parsing, and no route means a warning naming --bootstrap', async () => {
    expect(parseMulticastRoute('linux', ok(fx('ip-route-get-224-linux.txt')))).toEqual({ routable: true, iface: 'eth0' });
    const r = await byId(env({ platform: 'linux', outputs: { 'ip route get 224.0.0.251': { code: 2, stdout: '', stderr: 'RTNETLINK answers: Network is unreachable' } } }));
    expect(r['multicast'].status).toBe('warn');
    expect(r['multicast'].fix).toContain('--bootstrap');
    expect(r['thunderbolt-bridge'].status).toBe('skip');
  });
});
