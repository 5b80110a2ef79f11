#!/usr/bin/env node
// The installed `orchard` command: runs the TypeScript sources through tsx (no build step).
import { register } from 'tsx/esm/api';
register();
const { runCli } = await import('../src/cli/main.ts');
await runCli(process.argv.slice(2));
