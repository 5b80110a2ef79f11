export { ModelStore, MANIFEST_FILE, type ModelManifest, type PullOptions, type PullResult, type PullEvent, type StoredFile, type PodAccess, type FileSourceKind, type StatFs, type StoreOptions } from './store.js';
export { HubClient, validateRepoId, type HubFile, type HubRepo, type HubOptions } from './hub.js';
export { stageTensorFilter, type TensorSelection } from './safetensors-range.js';
export { StoreError, ChecksumError, DiskError, DiskSpaceError, ModelRefusedError } from './errors.js';
export { completenessOf, incompleteMessage, type Completeness } from './completeness.js';
export { checkModelFiles, readHubHeader, type HeaderSource } from './check-before-pull.js';
