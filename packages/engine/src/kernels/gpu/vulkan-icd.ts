/**
 * Whether a Vulkan driver manifest (ICD) exists where the Vulkan loader looks, checked before Dawn is
 * loaded on Linux. Without any, Dawn's Vulkan backend can only fail, and the loader prints several lines
 * of native warnings on stderr on the way; checking first keeps `--backend auto` quiet and a
 * `--backend gpu` failure to one line.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

function manifestsIn(path: string): boolean {
  try {
    const st = statSync(path);
    if (st.isFile()) return true;
    if (st.isDirectory()) return readdirSync(path).some((f) => f.endsWith('.json'));
  } catch {
    // missing or unreadable: no driver there
  }
  return false;
}

/** The places searched, in the loader's order (env overrides first). */
export function vulkanIcdSearchPaths(env: NodeJS.ProcessEnv = process.env): { paths: string[]; fromEnv: boolean } {
  const list = (v: string | undefined) => (v ?? '').split(':').filter((s) => s !== '');
  const override = [...list(env.VK_DRIVER_FILES), ...list(env.VK_ICD_FILENAMES)];
  if (override.length) return { paths: [...override, ...list(env.VK_ADD_DRIVER_FILES)], fromEnv: true };
  const configDirs = list(env.XDG_CONFIG_DIRS).length ? list(env.XDG_CONFIG_DIRS) : ['/etc/xdg'];
  const dataHome = env.XDG_DATA_HOME || join(env.HOME || homedir(), '.local/share');
  const dataDirs = list(env.XDG_DATA_DIRS).length ? list(env.XDG_DATA_DIRS) : ['/usr/local/share', '/usr/share'];
  const paths = [
    ...list(env.VK_ADD_DRIVER_FILES),
    ...configDirs.map((d) => join(d, 'vulkan/icd.d')),
    '/etc/vulkan/icd.d',
    join(dataHome, 'vulkan/icd.d'),
    ...dataDirs.map((d) => join(d, 'vulkan/icd.d')),
  ];
  return { paths, fromEnv: false };
}

/** Null when a manifest exists, else a one-line reason naming where it looked. */
export function missingVulkanDriver(env: NodeJS.ProcessEnv = process.env): string | null {
  const { paths, fromEnv } = vulkanIcdSearchPaths(env);
  if (paths.some((p) => existsSync(p) && manifestsIn(p))) return null;
  return fromEnv
    ? `no Vulkan driver: VK_ICD_FILENAMES/VK_DRIVER_FILES name no existing driver manifest (${paths.join(':')})`
    : 'no Vulkan driver installed (no ICD manifest in /usr/share/vulkan/icd.d or the other Vulkan loader paths)';
}
