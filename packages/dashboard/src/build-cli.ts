/** `pnpm --filter @orchard/dashboard build`: builds (or finds cached) assets and says where. */
import { buildDashboard } from './build.js';

const r = await buildDashboard();
const size = [...r.assets.values()].reduce((n, a) => n + a.body.length, 0);
console.log(`dashboard ${r.hash}: ${r.built ? 'built' : 'cached'}, ${(size / 1024).toFixed(1)} KiB in ${r.assets.size} files`);
