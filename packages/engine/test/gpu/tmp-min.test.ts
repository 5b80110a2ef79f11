import { it, expect } from 'vitest';
import { openTestGpu } from './gpu-env.js';
it('opens', async () => {
  console.log('before');
  const g = await openTestGpu();
  console.log('after', g.skip, g.ctx?.adapter.description);
  g.ctx?.destroy();
  expect(1).toBe(1);
});
