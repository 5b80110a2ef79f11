export * from './checks.js';
export { realDoctorEnv } from './env.js';
