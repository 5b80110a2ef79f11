/** Child-process helper for context.test.ts: opens a context with the environment it was given, prints the outcome as JSON. */
import { createGpuContext } from '../../src/kernels/gpu/context.js';

try {
  const ctx = await createGpuContext({ allowSoftware: process.argv.includes('--software') });
  console.log(JSON.stringify({ ok: true, adapter: ctx.adapter }));
  ctx.destroy();
} catch (err) {
  console.log(JSON.stringify({ ok: false, name: (err as Error).name, message: (err as Error).message }));
}
