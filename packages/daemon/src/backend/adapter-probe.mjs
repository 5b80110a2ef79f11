// Child process for backend/select.ts: asks Dawn for the adapter `auto` would get and prints its info
// as JSON. Run apart from the daemon/CLI so that Dawn's and the Vulkan loader's native warnings
// (written straight to fd 2) stay out of the user's terminal when no hardware GPU is found.
const { create } = await import(process.argv[2]);
const gpu = create(process.platform === 'linux' ? ['backend=vulkan'] : []);
const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
const i = adapter?.info;
const info = i && { vendor: i.vendor, architecture: i.architecture, device: i.device, description: i.description, isFallbackAdapter: i.isFallbackAdapter };
process.stdout.write(JSON.stringify({ info: info ?? null }) + '\n');
process.exit(0);
