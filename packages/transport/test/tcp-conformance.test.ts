import { runGroupConformance } from '../src/testing/conformance.js';
import { createLocalTcpGroups } from '../src/testing/local-tcp.js';

runGroupConformance('tcp (loopback, one process)', (size) => createLocalTcpGroups(size, { timeoutMs: 5000 }));
