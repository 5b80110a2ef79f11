/** @orchard/dashboard: the web front end the daemon serves at `/`, built on demand (see build.ts). */
export { buildDashboard, sourceHash, WEB_DIR, type DashboardAsset, type DashboardBuild } from './build.js';
