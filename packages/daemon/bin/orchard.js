#!/usr/bin/env node
// The installed `orchard` command: runs the TypeScript sources through tsx (no build step).
import { register } from 'tsx/esm/api';
register();
const { main } = await import('../src/cli/main.ts');
const code = await main(process.argv.slice(2));
if (code !== 0) process.exitCode = code;
