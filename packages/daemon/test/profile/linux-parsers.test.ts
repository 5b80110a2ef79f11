import { describe, expect, it } from 'vitest';
import { linuxInterfaceKind } from '../../src/profile/linux/interfaces.js';
import { parseCpuinfo, parseMeminfo } from '../../src/profile/linux/proc.js';

describe('Linux profile parsers', () => {
  it('meminfo in kB -> bytes, MemAvailable preferred', () => {
    const text = 'MemTotal:       24576000 kB\nMemFree:         1000000 kB\nMemAvailable:   20000000 kB\n';
    expect(parseMeminfo(text)).toEqual({ totalBytes: 24576000 * 1024, availableBytes: 20000000 * 1024 });
    expect(parseMeminfo('MemTotal: 10 kB\nMemFree: 4 kB\n').availableBytes).toBe(4096);
  });
  it('cpuinfo counts processors', () => {
    const text = 'processor\t: 0\nmodel name\t: AMD EPYC 9654\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 9654\n';
    expect(parseCpuinfo(text)).toEqual({ model: 'AMD EPYC 9654', cores: 2 });
  });
  it('interface kinds', () => {
    expect(linuxInterfaceKind('lo', { wireless: false, driver: null })).toBe('loopback');
    expect(linuxInterfaceKind('wlp2s0', { wireless: true, driver: 'iwlwifi' })).toBe('wifi');
    expect(linuxInterfaceKind('thunderbolt0', { wireless: false, driver: null })).toBe('thunderbolt');
    expect(linuxInterfaceKind('enp5s0', { wireless: false, driver: 'thunderbolt-net' })).toBe('thunderbolt');
    expect(linuxInterfaceKind('eth0', { wireless: false, driver: 'veth' })).toBe('ethernet');
  });
});
