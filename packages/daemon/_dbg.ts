setTimeout(() => {
  const hs = (process as any)._getActiveHandles();
  console.error('handles:', hs.map((h: any) => h.constructor?.name + (h.hasRef ? ` ref=${h.hasRef()}` : '')));
  console.error('resources:', (process as any).getActiveResourcesInfo());
}, 30000).unref();
process.argv = [process.argv[0]!, '/x/cli/main.ts', ...process.argv.slice(2)];
const { main } = await import('./src/cli/main.js');
const code = await main(process.argv.slice(2));
console.error('main returned', code);
