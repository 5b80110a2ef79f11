/** Every client dialect's routes, registered together by serving (Anthropic Messages, Ollama, OpenAI Responses). */
import type { FastifyInstance } from 'fastify';
import { anthropicRoutes } from './anthropic.js';
import { ollamaRoutes, type OllamaDeps } from './ollama.js';
import { responsesRoutes } from './responses.js';

export async function dialectRoutes(app: FastifyInstance, deps: OllamaDeps): Promise<void> {
  await anthropicRoutes(app, deps);
  await ollamaRoutes(app, deps);
  await responsesRoutes(app, deps);
}
