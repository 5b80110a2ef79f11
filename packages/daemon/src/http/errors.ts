/** Errors in OpenAI's shape: {"error": {"message", "type", "param", "code"}}. */
import type { FastifyReply } from 'fastify';

export function errorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 404) return 'invalid_request_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

export function errorBody(status: number, message: string, code: string | null = null, param: string | null = null) {
  return { error: { message, type: errorType(status), param, code } };
}

export function sendError(reply: FastifyReply, status: number, message: string, code: string | null = null, param: string | null = null) {
  if (status === 429 || status === 503) reply.header('retry-after', '1');
  return reply.code(status).send(errorBody(status, message, code, param));
}
