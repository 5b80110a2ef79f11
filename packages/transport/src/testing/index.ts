export { runGroupConformance, type GroupFactory, type ConformanceOptions } from './conformance.js';
export { createLocalTcpGroups, type LocalTcpOptions } from './local-tcp.js';
export { spawnRanks, type RankProcess, type SpawnRanksOptions } from './ranks.js';
export { startMesh, type Mesh, type MeshOptions } from './mesh.js';
