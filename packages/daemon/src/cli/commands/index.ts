import type { Command } from 'commander';
import { registerChat } from './chat.js';
import { registerBench } from './bench/index.js';
import { registerCluster } from './cluster.js';
import { registerDoctor } from './doctor.js';
import { registerKey } from './key.js';
import { registerLoad } from './load.js';
import { registerLogs } from './logs.js';
import { registerPlan } from './plan.js';
import { registerLend } from './lend.js';
import { registerNetwork } from './network.js';
import { registerPull } from './pull.js';
import { registerRelay } from './relay.js';
import { registerRun } from './run.js';
import { registerService } from './service.js';
import { registerStart } from './start.js';
import { registerStatus } from './status.js';
import { registerTemplate } from './template.js';

/** Each CLI command lives in its own file and adds itself to the program here. */
export type RegisterCommand = (program: Command) => void;

export const commands: RegisterCommand[] = [registerStart, registerStatus, registerCluster, registerKey, registerService, registerLogs, registerPull, registerDoctor, registerRun, registerPlan, registerLoad, registerChat, registerBench, registerNetwork, registerLend, registerRelay, registerTemplate];
