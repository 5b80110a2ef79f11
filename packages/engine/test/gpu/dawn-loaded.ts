/** Child-process helper for lazy-dawn.test.ts: imports the engine, optionally probes, and says whether Dawn's native module is loaded. */
export {};
const engine = await import('../../src/index.js');
const loaded = () => (process.report.getReport() as unknown as { sharedObjects: string[] }).sharedObjects.some((s) => /dawn\.node$/.test(s));
const afterImport = loaded();
const probe = await engine.chooseGpu('auto');
console.log(JSON.stringify({ afterImport, afterProbe: loaded(), reason: probe.reason }));
probe.ctx?.destroy();
