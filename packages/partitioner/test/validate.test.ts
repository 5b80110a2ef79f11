import { describe, expect, it } from 'vitest';
import { InputError } from '../src/errors.js';
import { parseCluster } from '../src/validate.js';
import { exampleCluster } from './helpers.js';

describe('cluster validation names the offending field', () => {
  const good = () => structuredClone(exampleCluster('mixed-desk')) as unknown as Record<string, any>;
  const fieldOf = (raw: unknown): string => {
    try {
      parseCluster(raw);
    } catch (e) {
      expect(e).toBeInstanceOf(InputError);
      return (e as InputError).field;
    }
    throw new Error('expected an error');
  };

  it('accepts every example cluster', () => {
    for (const name of ['4x-m3-ultra-tb5-rdma', '4x-m3-ultra-tb5-tcp', '2x-m4-max-tb5-rdma', '2x-m4-max-tb5-tcp', '4x-mac-mini-m4-pro-ethernet', 'mixed-desk']) {
      expect(parseCluster(exampleCluster(name)).nodes.length).toBeGreaterThan(0);
    }
  });

  it('accepts a node with nothing available (it just holds no layers)', () => {
    const c = good();
    c.nodes[3].availableBytes = 0;
    expect(parseCluster(c).nodes[3].availableBytes).toBe(0);
  });

  it('rejects bad nodes and links', () => {
    let c = good();
    c.nodes[2].availableBytes = 'lots';
    expect(fieldOf(c)).toBe('nodes[2].availableBytes');
    c = good();
    c.nodes[1].availableBytes = c.nodes[1].memoryBytes + 1;
    expect(fieldOf(c)).toBe('nodes[1].availableBytes');
    c = good();
    c.nodes[3].id = c.nodes[0].id;
    expect(fieldOf(c)).toBe('nodes[3].id');
    c = good();
    c.links[4].kind = 'carrier-pigeon';
    expect(fieldOf(c)).toBe('links[4].kind');
    c = good();
    c.links[0].b = 'nobody';
    expect(fieldOf(c)).toBe('links[0].b');
    c = good();
    c.links[1].latencyUs = -1;
    expect(fieldOf(c)).toBe('links[1].latencyUs');
    c = good();
    delete c.nodes[0].memoryBytes;
    expect(fieldOf(c)).toBe('nodes[0].memoryBytes');
    c = good();
    c.nodes[0].availableBytes = -5;
    expect(fieldOf(c)).toBe('nodes[0].availableBytes');
    expect(fieldOf({ nodes: [] })).toBe('nodes');
    expect(fieldOf([])).toBe('(root)');
  });
});
