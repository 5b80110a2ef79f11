import { describe, expect, it } from 'vitest';
import { bandwidth, bytes, downloadLinks, downloadSources, hubPlanText, latency, linkKind, rate, ringLayout, withNames } from '../web/format.js';

describe('dashboard formatting', () => {
  it('writes sizes, latencies, bandwidths and speeds for people', () => {
    // Binary units, as `orchard status` writes memory.
    expect(bytes(3_444_864)).toBe('3.3 MiB');
    expect(bytes(128 * 2 ** 30)).toBe('128 GiB');
    expect(bytes(24 * 2 ** 30)).toBe('24.0 GiB');
    expect(bytes(410e9)).toBe('382 GiB');
    expect(bytes(512)).toBe('512 B');
    expect(bytes(null)).toBe('–');
    expect(latency(42.4)).toBe('42 µs');
    expect(latency(1500)).toBe('1.5 ms');
    expect(latency(25_000)).toBe('25 ms');
    expect(bandwidth(6.54)).toBe('6.5 Gb/s');
    expect(bandwidth(80)).toBe('80 Gb/s');
    expect(bandwidth(0.25)).toBe('250 Mb/s');
    expect(rate(71.34)).toBe('71.3 tok/s');
    expect(rate(640.9)).toBe('641 tok/s');
    expect(rate(null)).toBe('–');
  });

  it('says where a download came from and which links it uses, peers by name', () => {
    const names = new Map([['12D3KooWpeerA', 'studio-a']]);
    expect(downloadSources({ hub: 10e6, '12D3KooWpeerA': 52.4e6, '12D3KooWpeerZZZZZZZZ': 0 }, names)).toBe('hub 9.5 MiB · studio-a 50.0 MiB');
    expect(downloadSources(undefined, names)).toBe('');
    expect(downloadLinks([{ source: '12D3KooWpeerA', link: '10.10.0.1:4000', rate: 950e6 }, { source: 'hub', link: 'hub', rate: 12e6 }], names)).toBe('studio-a 10.10.0.1:4000 906 MiB/s · hub 11.4 MiB/s');
  });

  it('names every link kind and falls back for unknown ones', () => {
    expect(linkKind('rdma').label).toBe('RDMA');
    expect(linkKind('thunderbolt').label).toBe('Thunderbolt TCP');
    expect(linkKind('ethernet').label).toBe('Ethernet');
    expect(linkKind('wifi').dash).not.toBe('');
    expect(linkKind('carrier-pigeon').label).toBe('carrier-pigeon');
  });

  it('puts nodes apart inside the box', () => {
    for (let n = 1; n <= 8; n++) {
      const pos = ringLayout(n, 620, 380, 48);
      expect(pos).toHaveLength(n);
      for (const p of pos) {
        expect(p.x).toBeGreaterThanOrEqual(0);
        expect(p.x).toBeLessThanOrEqual(620);
        expect(p.y).toBeGreaterThanOrEqual(0);
        expect(p.y).toBeLessThanOrEqual(380);
      }
      for (let i = 0; i < n; i++) for (let j = i + 1; j < n; j++) expect(Math.hypot(pos[i].x - pos[j].x, pos[i].y - pos[j].y), `${n} nodes: ${i}-${j}`).toBeGreaterThan(100);
    }
  });

  it('replaces peer ids in planner text with names', () => {
    expect(withNames('Fits on 12D3KooWabc, not on 12D3KooWxyz', new Map([['12D3KooWabc', 'pear'], ['12D3KooWxyz', 'apple']]))).toBe('Fits on pear, not on apple');
  });

  it("says whether a hub model fits the pod before its pull, and each node's bytes", () => {
    const base = { repo: 'org/m', weightsBytes: 40 * 2 ** 30, strategy: 'pipeline', decodeTokensPerSecond: 21.46, reason: null };
    const nodes = [
      { node: '12D3KooWaaaa', name: 'studio-a', weightsBytes: 24 * 2 ** 30, totalBytes: 30 * 2 ** 30, availableBytes: 96 * 2 ** 30 },
      { node: '12D3KooWbbbb', name: null, weightsBytes: 16 * 2 ** 30, totalBytes: 20 * 2 ** 30, availableBytes: 48 * 2 ** 30 },
    ];
    expect(hubPlanText({ ...base, loadable: true, fits: true, nodes }, new Map([['12D3KooWbbbb', 'mini-b']]))).toEqual({
      verdict: 'org/m (40.0 GiB of weights) fits over 2 nodes (pipeline), 21.5 tok/s predicted',
      nodes: ['studio-a: 24.0 GiB of weights, 30.0 GiB in all of 96.0 GiB free', 'mini-b: 16.0 GiB of weights, 20.0 GiB in all of 48.0 GiB free'],
    });
    expect(hubPlanText({ ...base, loadable: true, fits: false, nodes: [], strategy: null, reason: 'needs 41 GiB, 12D3KooWbbbb has 20' }, new Map([['12D3KooWbbbb', 'mini-b']])).verdict).toBe('org/m (40.0 GiB of weights) does not fit this pod: needs 41 GiB, mini-b has 20');
    expect(hubPlanText({ ...base, loadable: false, fits: false, nodes: [], reason: 'quant_method "awq" is not supported' })).toEqual({ verdict: 'org/m cannot be loaded: quant_method "awq" is not supported', nodes: [] });
  });
});
