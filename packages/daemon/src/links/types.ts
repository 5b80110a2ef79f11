/** One measured network path between two nodes. */
import { z } from 'zod';

export const linkKindSchema = z.enum(['rdma', 'thunderbolt', 'ethernet', 'wifi']);
export type LinkKindName = z.infer<typeof linkKindSchema>;

export const linkMeasurementSchema = z.object({
  /** Smaller peer id of the pair (a < b), so each pair has one canonical key. */
  a: z.string().max(128),
  b: z.string().max(128),
  kind: linkKindSchema,
  /** Interfaces used at each end, e.g. "en2" / "eth0". */
  aInterface: z.string().max(64),
  bInterface: z.string().max(64),
  /** Address probed (b's side). */
  address: z.string().max(64),
  /** Both ends have an active RDMA device on these interfaces (macOS 26.2+ Thunderbolt 5). */
  rdmaCapable: z.boolean(),
  latencyUs: z.number().nonnegative(),
  bandwidthGbps: z.number().nonnegative(),
  measuredAt: z.number(),
  /** Who ran the probe. */
  measuredBy: z.string().max(128),
});
export type LinkMeasurement = z.infer<typeof linkMeasurementSchema>;

export function linkKey(l: Pick<LinkMeasurement, 'a' | 'b' | 'aInterface' | 'bInterface'>): string {
  return `${l.a}|${l.b}|${l.aInterface}|${l.bInterface}`;
}
