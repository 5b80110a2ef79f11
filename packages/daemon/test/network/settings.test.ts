import { describe, expect, it } from 'vitest';
import { describeLending, lendingChanges } from '../../src/cli/commands/lend.js';
import { credits, formatNetworkStatus } from '../../src/cli/format-network.js';
import { resolveOptions } from '../../src/config/options.js';
import { DEFAULT_LENDING } from '../../src/network/lending.js';
import { parseRegion } from '../../src/network/settings.js';
import type { NetworkStatus } from '../../src/network/status.js';

const env = { ORCHARD_DATA_DIR: '/tmp/orchard-settings-test-none' };

describe('network settings', () => {
  it('no --network: no network at all, and network flags alone are an error naming --network', () => {
    expect(resolveOptions({}, env).network).toBeNull();
    expect(() => resolveOptions({ networkBootstrap: ['/ip4/1.2.3.4/tcp/1'] }, env)).toThrow('--network-bootstrap needs --network NAME');
  });

  it('--network with its settings, from flags or the environment', () => {
    const o = resolveOptions({ network: 'home-pods', networkBootstrap: ['/ip4/1.2.3.4/tcp/52418/p2p/X'], networkRegion: 'Berlin@52.5,13.4', networkMaxPrice: '2000' }, env);
    expect(o.network).toEqual({
      name: 'home-pods',
      bootstrap: ['/ip4/1.2.3.4/tcp/52418/p2p/X'],
      listen: ['/ip4/0.0.0.0/tcp/52417'],
      announce: [],
      privateAddresses: false,
      region: { label: 'Berlin', lat: 53, lon: 13 },
      route: true,
      maxPrice: 2000,
      trusted: null,
    });
    const e = resolveOptions({}, { ...env, ORCHARD_NETWORK: 'lab', ORCHARD_NETWORK_ROUTE: 'off', ORCHARD_NETWORK_TRUSTED: 'A,B' });
    expect(e.network).toMatchObject({ name: 'lab', route: false, trusted: ['A', 'B'] });
  });

  it('bad values are errors naming the setting', () => {
    expect(() => resolveOptions({ network: 'Has Spaces' }, env)).toThrow(/--network "Has Spaces": network names are lower-case/);
    expect(() => resolveOptions({ network: 'x', networkMaxPrice: '-3' }, env)).toThrow(/--network-max-price must be a whole number/);
    expect(() => parseRegion('Berlin')).toThrow(/LABEL@LAT,LON/);
    expect(() => parseRegion('Nowhere@91,0')).toThrow(/latitude must be -90..90/);
    expect(parseRegion(' Cape Town @-33.9,18.4')).toEqual({ label: 'Cape Town', lat: -34, lon: 18 });
  });
});

describe('orchard lend and orchard network status', () => {
  it('lend flags become policy fields; bad ones are refused before anything is sent', () => {
    expect(lendingChanges({ url: 'x', mode: 'share', share: '0.25', price: '1500', models: 'a, b', allow: 'all', deny: '', maxModelGb: '8' })).toEqual({
      mode: 'share',
      share: 0.25,
      pricePer1M: 1500,
      models: ['a', 'b'],
      allow: null,
      deny: [],
      maxModelBytes: 8 * 2 ** 30,
    });
    expect(() => lendingChanges({ url: 'x', mode: 'always' })).toThrow('--mode must be idle or share');
    expect(() => lendingChanges({ url: 'x', price: '1.5' })).toThrow('--price must be a whole number');
    expect(describeLending(DEFAULT_LENDING)).toContain('lending: off');
    expect(describeLending({ ...DEFAULT_LENDING, enabled: true })).toContain('only while nobody here uses the pod');
  });

  it('prints nodes, balances in credits and how each job went', () => {
    const me = '12D3KooWMeMeMeMeMeMeMeMeMeMeMeMeMeMeMeMeMeMeMeMe1111';
    const far = '12D3KooWFarFarFarFarFarFarFarFarFarFarFarFarFar2222';
    const s: NetworkStatus = {
      network: 'home',
      self: { peer: me, addresses: [], reachable: false, relayReservations: ['/ip4/1.2.3.4/tcp/1/p2p/R/p2p-circuit'] },
      routing: { enabled: true, priceCap: 3000, trusted: null },
      lending: { ...DEFAULT_LENDING, localActive: 0, running: 0, served: 0, refused: 0, preempted: 0 },
      nodes: [
        { peer: far, self: false, online: true, pod: 'lan-c', nodes: [{ name: 'm', chip: 'Apple M4 Max', memoryBytes: 128 * 2 ** 30 }], region: { label: 'Lisbon', lat: 39, lon: -9 }, models: [{ name: 'orchard-demo', state: 'serving', decodeTps: 120 }], lending: 'idle', pricePer1M: 1000, load: { active: 0, queued: 0 }, firstSeen: 1, lastOffer: 2, tokensServed: 42, jobsServed: 1, reputation: 1, rttMs: 31.4, path: 'relayed' },
      ],
      balances: [
        { peer: far, earned: 42_000, spent: 0, net: 42_000, tokensServed: 42, tokensRequested: 0, jobsServed: 1, jobsRequested: 0 },
        { peer: me, earned: 0, spent: 42_000, net: -42_000, tokensServed: 0, tokensRequested: 42, jobsServed: 0, jobsRequested: 1 },
      ],
      receipts: 1,
      jobs: [{ job: 'j', role: 'requested', peer: far, model: 'orchard-demo', at: 0, ok: true, tokens: 42, charge: 42_000, path: 'relayed', found: 'dht', error: null, tried: [{ peer: me, code: 'busy' }] }],
    };
    const text = formatNetworkStatus(s);
    expect(text).toContain('behind NAT, reachable through 1 relay reservation(s)');
    expect(text).toMatch(/lan-c\s+…rFar2222\s+online\s+Lisbon\s+Apple M4 Max 128 GiB\s+orchard-demo 120 tok\/s\s+42 tok\s+31 ms\s+relayed\s+1\.00/);
    expect(text).toMatch(/…MeMe1111 \(this\)\s+0\s+0\.042\s+-0\.042/);
    expect(text).toContain('requested orchard-demo by …rFar2222: 42 tokens, 0.042 credits [relayed, found via DHT, after …MeMe1111 busy]');
    expect(credits(1_500_000)).toBe('1.5');
  });
});
