/**
 * The environment variables that decide whether text is coloured (https://no-color.org,
 * FORCE_COLOR, TERM), read here so the colour decision itself (`colors.ts`) stays pure.
 */
export function colorEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return { NO_COLOR: env.NO_COLOR, FORCE_COLOR: env.FORCE_COLOR, TERM: env.TERM };
}
