export { ModelStore, MANIFEST_FILE, type ModelManifest, type PullOptions, type PullResult, type PullEvent, type StoredFile } from './store.js';
export { HubClient, validateRepoId, type HubFile, type HubRepo, type HubOptions } from './hub.js';
export { downloadFile, type DownloadOptions } from './download.js';
export { fetchSafetensorsSubset, stageTensorFilter, type TensorSelection } from './safetensors-range.js';
export { manifestForFile, downloadFromPeers, chunkCid, CHUNK_SIZE, type ChunkSource, type FileManifest, type ChunkRef } from './chunks.js';
export { StoreError, ChecksumError } from './errors.js';
