/** `networksetup -listallhardwareports`: blocks of "Hardware Port: X / Device: enN / Ethernet Address". */
import type { InterfaceKind } from '../types.js';

export interface HardwarePort {
  port: string;
  device: string;
  mac: string | null;
  kind: InterfaceKind;
}

export function hardwarePortKind(port: string): InterfaceKind {
  // "Thunderbolt Bridge" is the bridge0 aggregate, not a cable; it must stay off in loops anyway.
  if (/^Thunderbolt\s+\d+$/i.test(port)) return 'thunderbolt';
  if (/wi-?fi|airport/i.test(port)) return 'wifi';
  if (/ethernet|lan|usb.*lan/i.test(port)) return 'ethernet';
  return 'other';
}

export function parseHardwarePorts(text: string): HardwarePort[] {
  const ports: HardwarePort[] = [];
  let current: Partial<HardwarePort> | null = null;
  const flush = () => {
    if (current?.port && current.device) {
      ports.push({ port: current.port, device: current.device, mac: current.mac ?? null, kind: hardwarePortKind(current.port) });
    }
    current = null;
  };
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    let m: RegExpExecArray | null;
    if ((m = /^Hardware Port:\s*(.+)$/.exec(line))) {
      flush();
      current = { port: m[1] };
    } else if ((m = /^Device:\s*(\S+)$/.exec(line)) && current) {
      current.device = m[1];
    } else if ((m = /^Ethernet Address:\s*(\S+)$/.exec(line)) && current) {
      current.mac = m[1] === 'N/A' ? undefined : m[1];
    }
  }
  flush();
  return ports;
}
