import { defineConfig } from 'vitest/config';

// One run covers every package's unit tests and the cross-package tests in test/.
// Forks (not threads) because several suites start servers, child processes and
// network namespaces, and a crash in one must not take the others down.
export default defineConfig({
  test: {
    include: ['packages/*/test/**/*.test.ts', 'test/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default'],
  },
});
