/**
 * Address facts decided on parsed addresses (node:net), never on how a string starts: "127.x" is
 * loopback, "127.example.com" is a host name like any other.
 */
import { BlockList, isIP } from 'node:net';

const loopback = new BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4');
loopback.addAddress('::1', 'ipv6');

/** `[::1]` -> `::1`; anything else unchanged. */
function unbracket(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

/** True for an IP address in 127.0.0.0/8 or ::1 (IPv4-mapped forms included). Host names are not addresses. */
export function isLoopbackAddress(address: string): boolean {
  const a = unbracket(address.trim());
  const family = isIP(a);
  if (family === 0) return false;
  return loopback.check(a, family === 6 ? 'ipv6' : 'ipv4');
}

/** A host to bind or connect to that can only mean this machine: a loopback address, or the name localhost. */
export function isLoopbackHost(host: string): boolean {
  const h = host.trim().toLowerCase();
  return h === 'localhost' || h === 'localhost.' || isLoopbackAddress(h);
}
