/** Interface kind on Linux from sysfs facts (passed in, so the rule is testable). */
import type { InterfaceKind } from '../types.js';

export interface SysfsFacts {
  /** /sys/class/net/<if>/wireless or phy80211 exists. */
  wireless: boolean;
  /** Driver name from /sys/class/net/<if>/device/driver, if any. */
  driver: string | null;
}

export function linuxInterfaceKind(name: string, facts: SysfsFacts): InterfaceKind {
  if (name === 'lo') return 'loopback';
  if (facts.wireless || /^wl/.test(name)) return 'wifi';
  // thunderbolt-net names its interfaces thunderbolt0.. and binds the "thunderbolt-net" driver.
  if (/^thunderbolt/.test(name) || facts.driver === 'thunderbolt-net') return 'thunderbolt';
  return 'ethernet';
}
