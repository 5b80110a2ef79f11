/**
 * The Hugging Face hub this process downloads from, read from the environment as the official
 * clients read it: HF_ENDPOINT, HF_TOKEN (or the older HUGGING_FACE_HUB_TOKEN). An empty variable
 * counts as unset. Both the daemon's options and the CLI take their hub from here.
 */
export const DEFAULT_HF_ENDPOINT = 'https://huggingface.co';

export interface HubSettings {
  endpoint: string;
  token: string | null;
}

export function hubSettings(env: NodeJS.ProcessEnv = process.env): HubSettings {
  return {
    endpoint: (env.HF_ENDPOINT || DEFAULT_HF_ENDPOINT).replace(/\/+$/, ''),
    token: env.HF_TOKEN || env.HUGGING_FACE_HUB_TOKEN || null,
  };
}
