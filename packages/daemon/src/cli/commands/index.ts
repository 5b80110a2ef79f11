import type { Command } from 'commander';

/** Each CLI command lives in its own file and adds itself to the program here. */
export type RegisterCommand = (program: Command) => void;

export const commands: RegisterCommand[] = [];
