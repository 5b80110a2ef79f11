/** Shapes of the daemon's JSON this page reads (GET /api/cluster, /api/instances, /api/dashboard/*). */
export interface NodeView {
  id: string;
  name: string;
  hostname: string;
  chip: string;
  memoryBytes: number;
  availableBytes: number;
  gpuCores: number | null;
  cpuCores: number;
  os: string;
  memoryBandwidthGBps?: number;
  tflops?: number;
  /** 1-minute load average divided by cores (0..1+), when the node reports it. */
  load?: number | null;
}

export interface LinkView {
  a: string;
  b: string;
  kind: string;
  latencyUs: number;
  bandwidthGbps: number;
}

export interface PathView extends LinkView {
  aInterface: string;
  bInterface: string;
  address: string;
  rdmaCapable: boolean;
  measuredAt: number;
}

export interface ClusterView {
  nodes: NodeView[];
  links: LinkView[];
  paths: PathView[];
  mode: 'open' | 'private';
  coordinator: string | null;
  change?: string;
}

export interface Prediction {
  decodeTokensPerSecond: number;
  prefillTokensPerSecond: number;
  ttftMs: number;
}

export interface InstanceView {
  id: string;
  model: string;
  placedAt: number;
  nodes: string[];
  strategy: string;
  stages: { layers: [number, number]; nodes: string[] }[];
  tensorParallel: number;
  requested: { strategy: string; nodes?: number };
  predicted: Prediction | null;
  status: { ready: boolean; active: number; queued: number; capacity: number; failed: string | null; decodeTokensPerSecond?: number | null } | null;
  /** Added by the dashboard routes: the planner's prediction for this exact layout. */
  layoutPredicted?: Prediction | null;
  /** Tokens of context the instance serves (prompt + answer). */
  context?: number | null;
}

export interface PlanStageView {
  nodes: string[];
  layers: [number, number];
  tensorParallel: number;
  transport: string;
  heads: number[];
}

export interface AlternativeView {
  strategy: string;
  nodes: string[];
  stages: PlanStageView[];
  predicted: Prediction | null;
  rejected: string;
}

export interface PlanPreview {
  model: string;
  /** What a load with strategy auto would place (the layout the engine runs). */
  placement: { strategy: string; layout: { stages: [number, number][]; tensor: number }; ranks: string[]; predicted: Prediction | null; explanation: string[] } | null;
  /** Tokens of context an instance of this model serves. */
  contextTokens?: number | null;
  /** The planner's view: the best plan, the runners-up and why each lost. */
  planner: { strategy: string; stages: PlanStageView[]; predicted: Prediction; alternatives: AlternativeView[]; explanation: string[]; model: { weightsBytes: number; layers: number } } | null;
  error: string | null;
}

export interface ProgressView {
  node: string;
  model: string;
  phase: 'download' | 'load' | 'ready' | 'failed';
  done: number;
  total: number;
  file?: string;
  message?: string;
  /** Bytes by source: "hub" or a peer id. */
  sources?: Record<string, number>;
  links?: Array<{ source: string; link: string; bytes: number; rate: number }>;
  /** Peers dropped for serving bad bytes. */
  badPeers?: string[];
  at: number;
}

/** GET /api/network: the wide-area network as this node sees it (daemon: network/status.ts). */
export interface NetworkNodeView {
  peer: string;
  self: boolean;
  online: boolean;
  pod: string;
  nodes: { name: string; chip: string; memoryBytes: number }[];
  region: { label: string; lat: number; lon: number } | null;
  models: { name: string; state: 'serving' | 'loadable'; decodeTps: number | null }[];
  lending: 'idle' | 'share' | null;
  pricePer1M: number;
  tokensServed: number;
  jobsServed: number;
  reputation: number;
  rttMs: number | null;
  path: 'direct' | 'relayed' | null;
}

export interface NetworkView {
  network: string;
  self: { peer: string; addresses: string[]; reachable: boolean | null; relayReservations: string[] };
  routing: { enabled: boolean; priceCap: number | null; trusted: string[] | null };
  lending: { enabled: boolean; mode: 'idle' | 'share'; share: number; pricePer1M: number; maxTokensPerJob: number; running: number; served: number; refused: number; preempted: number };
  nodes: NetworkNodeView[];
  balances: { peer: string; earned: number; spent: number; net: number; tokensServed: number; tokensRequested: number }[];
  receipts: number;
  jobs: { job: string; role: 'requested' | 'served'; peer: string; model: string; at: number; ok: boolean; tokens: number; charge: number; path: 'direct' | 'relayed' | null; found: 'dht' | 'known' | null; error: string | null }[];
}

/** `GET /api/dashboard/hub-plan?repo=`: what pulling a hub model would give the pod, before its pull. */
export interface HubPlanView {
  repo: string;
  loadable: boolean;
  fits: boolean;
  weightsBytes: number;
  strategy: string | null;
  nodes: Array<{ node: string; name: string | null; weightsBytes: number; totalBytes: number; availableBytes: number }>;
  decodeTokensPerSecond: number | null;
  reason: string | null;
}
