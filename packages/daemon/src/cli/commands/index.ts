import type { Command } from 'commander';
import { registerDoctor } from './doctor.js';
import { registerLogs } from './logs.js';
import { registerPull } from './pull.js';
import { registerRun } from './run.js';
import { registerService } from './service.js';

/** Each CLI command lives in its own file and adds itself to the program here. */
export type RegisterCommand = (program: Command) => void;

export const commands: RegisterCommand[] = [registerService, registerLogs, registerPull, registerDoctor, registerRun];
