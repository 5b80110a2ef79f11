/**
 * What one node tells the pod about itself. Gossiped as JSON, so the schema doubles as the
 * validator for profiles received from peers (see control/messages.ts).
 */
import { z } from 'zod';
import { nodeGpuSchema } from './gpu.js';

export const interfaceKindSchema = z.enum(['thunderbolt', 'ethernet', 'wifi', 'loopback', 'other']);
export type InterfaceKind = z.infer<typeof interfaceKindSchema>;

export const netInterfaceSchema = z.object({
  name: z.string().max(64),
  kind: interfaceKindSchema,
  /** Hardware port label on macOS ("Thunderbolt 1"), absent elsewhere. */
  hardwarePort: z.string().max(128).optional(),
  mac: z.string().max(64).optional(),
  /** CIDR strings, e.g. "10.0.0.2/24". */
  ipv4: z.array(z.string().max(64)).max(16),
  ipv6: z.array(z.string().max(64)).max(16),
});
export type NetInterface = z.infer<typeof netInterfaceSchema>;

export const thunderboltPortSchema = z.object({
  bus: z.string().max(128),
  /** This Mac's domain UUID on this bus. */
  domainUuid: z.string().max(64),
  /** Link rate the receptacle reports, in Gbit/s (80 = Thunderbolt 5, 40 = Thunderbolt 4). */
  speedGbps: z.number().nullable(),
  /** Receptacle number ("Thunderbolt N" hardware port), when reported. */
  receptacle: z.number().int().nullable(),
  /** IP interface of this port (enX), from `networksetup`; null when unknown. */
  interface: z.string().max(64).nullable(),
  connected: z.boolean(),
  /** Domain UUIDs of the Macs cabled to this port (matched against peers' `domainUuid`s). */
  remoteDomainUuids: z.array(z.string().max(64)).max(16),
  remoteNames: z.array(z.string().max(128)).max(16),
});
export type ThunderboltPort = z.infer<typeof thunderboltPortSchema>;

export const rdmaDeviceSchema = z.object({
  name: z.string().max(64),
  /** IP interface paired with the device (rdma_en2 -> en2). */
  interface: z.string().max(64).nullable(),
  portState: z.string().max(64).nullable(),
  active: z.boolean(),
  /** An IPv4-mapped GID (::ffff:a.b.c.d) exists; without it queue pairs cannot reach RTR. */
  ipv4Gid: z.boolean(),
});
export type RdmaDevice = z.infer<typeof rdmaDeviceSchema>;

export const rdmaStateSchema = z.object({
  /** `rdma_ctl status`: true/false on macOS, null where the tool does not exist. */
  enabled: z.boolean().nullable(),
  devices: z.array(rdmaDeviceSchema).max(32),
  /**
   * The transport's verdict (rdmaReadiness): the addon and verbs library work and a device is ready, so links
   * from this node can use RDMA. Absent from older daemons (then only `devices` counts).
   */
  available: z.boolean().optional(),
  /** One line for `orchard status`, e.g. "RDMA unavailable: no RDMA devices; links use TCP". */
  summary: z.string().max(1000).optional(),
});
export type RdmaState = z.infer<typeof rdmaStateSchema>;

export const capabilitySchema = z.object({
  memoryBandwidthGBps: z.number().nonnegative(),
  /** Dense f32 matmul throughput. */
  matmulGflops: z.number().nonnegative(),
  method: z.string().max(200),
  measuredAt: z.number(),
});
export type Capability = z.infer<typeof capabilitySchema>;

export const nodeProfileSchema = z.object({
  peerId: z.string().max(128),
  name: z.string().max(128),
  hostname: z.string().max(256),
  os: z.object({ platform: z.string().max(32), release: z.string().max(64), arch: z.string().max(32) }),
  chip: z.string().max(128),
  cpu: z.object({
    cores: z.number().int().nonnegative(),
    performanceCores: z.number().int().nonnegative().nullable(),
    efficiencyCores: z.number().int().nonnegative().nullable(),
  }),
  gpuCores: z.number().int().nonnegative().nullable(),
  memory: z.object({ totalBytes: z.number().nonnegative(), availableBytes: z.number().nonnegative() }),
  diskFreeBytes: z.number().nonnegative().nullable(),
  /** 1-minute load average per CPU core (1 = every core busy); absent from older daemons. */
  load: z.number().nonnegative().max(1e4).optional(),
  interfaces: z.array(netInterfaceSchema).max(64),
  thunderbolt: z.array(thunderboltPortSchema).max(16),
  rdma: rdmaStateSchema,
  capability: capabilitySchema.nullable(),
  /**
   * The GPU this node's runners compute on (WebGPU adapter, GPU-visible memory, measured copy bandwidth);
   * null or absent when they run on the CPU. Software adapters appear only when explicitly allowed.
   */
  gpu: nodeGpuSchema.nullable().optional(),
  /**
   * Bytes this node keeps for an instance it runs outside the planner's plan (its draft model and prefix
   * cache, serving/reserved-memory.ts); the cluster view takes them off `memory.availableBytes`. Absent
   * from older daemons.
   */
  reservedBytes: z.number().nonnegative().max(1e15).optional(),
  /** TCP port of this node's link-probe server (links/). */
  probePort: z.number().int().min(0).max(65535),
  updatedAt: z.number(),
});
export type NodeProfile = z.infer<typeof nodeProfileSchema>;
