/** Errors in OpenAI's shape: {"error": {"message", "type", "param", "code"}}, and in the dialects' shapes on their routes. */
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { anthropicError } from '../dialects/anthropic.js';

export function errorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'invalid_request_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

export function errorBody(status: number, message: string, code: string | null = null, param: string | null = null) {
  return { error: { message, type: errorType(status), param, code } };
}

/**
 * Codes whose cause waiting does not fix (the model's files cannot be loaded; a model given up on):
 * the OpenAI and Anthropic SDKs, which retry a 503 twice by default, are told not to.
 */
const PERMANENT_CODES = new Set(['model_load_failed', 'model_failed']);

/** The headers an error answer carries: `retry-after` for a busy or briefly unavailable pod, `x-should-retry: false` when retrying cannot help. */
export function errorHeaders(status: number, code: string | null = null): Record<string, string> {
  if (code && PERMANENT_CODES.has(code)) return { 'x-should-retry': 'false' };
  return status === 429 || status === 503 ? { 'retry-after': '1' } : {};
}

export function sendError(reply: FastifyReply, status: number, message: string, code: string | null = null, param: string | null = null) {
  reply.headers(errorHeaders(status, code));
  return reply.code(status).send(errorBody(status, message, code, param));
}

/** The APIs on this port, each with its own error shape. */
export type ErrorDialect = 'openai' | 'anthropic' | 'ollama';

/** One error in `dialect`'s shape: Anthropic's {"type":"error","error":{type,message}}, Ollama's {"error":message}, else OpenAI's. */
export function dialectErrorBody(dialect: ErrorDialect, status: number, message: string, code: string | null = null, param: string | null = null): unknown {
  if (dialect === 'anthropic') return anthropicError(status, message);
  if (dialect === 'ollama') return { error: message };
  return errorBody(status, message, code, param);
}

/**
 * Errors raised outside a route's own code (the guard, the token check, Fastify's parsers, unknown
 * paths) in the shape of the API the route belongs to. Routes are tagged as the dialects register
 * them; everything else (Orchard's own routes, /v1/* of OpenAI, unknown paths) answers in OpenAI's.
 */
export class ErrorShapes {
  readonly #byRoute = new Map<string, ErrorDialect>();
  #current: ErrorDialect | null = null;

  /** Starts tagging `app`'s routes (call once, before any route is added). */
  attach(app: FastifyInstance): void {
    app.addHook('onRoute', (route: RouteOptions) => {
      if (this.#current) this.#byRoute.set(route.url, this.#current);
    });
  }

  /** Runs `register`, tagging every route it adds as `dialect`'s. */
  registering(dialect: ErrorDialect, register: () => void): void {
    this.#current = dialect;
    try {
      register();
    } finally {
      this.#current = null;
    }
  }

  dialectOf(req: FastifyRequest): ErrorDialect {
    const url = req.routeOptions?.url;
    return (url && this.#byRoute.get(url)) || 'openai';
  }

  send(req: FastifyRequest, reply: FastifyReply, status: number, message: string, code: string | null = null, param: string | null = null): FastifyReply {
    reply.headers(errorHeaders(status, code));
    return reply.code(status).send(dialectErrorBody(this.dialectOf(req), status, message, code, param));
  }
}
