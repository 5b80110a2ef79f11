/**
 * Typed reads of config.json fields: every defect is a ModelFormatError naming the file and field.
 * Shared by config.ts and the per-feature readers (moe-config.ts, mla-config.ts).
 */
import { ModelFormatError } from '../errors.js';

export interface ConfigFields {
  readonly path: string;
  /** The raw value (undefined when absent). */
  get(field: string): unknown;
  /** Present and not null. */
  has(field: string): boolean;
  /** A positive integer (`fallback` when absent or null). */
  int(field: string, fallback?: number): number;
  /** A non-negative integer. */
  count(field: string, fallback?: number): number;
  /** A positive finite number. */
  num(field: string, fallback?: number): number;
  /** A finite number of any sign. */
  real(field: string, fallback?: number): number;
  bool(field: string, fallback: boolean): boolean;
  /** An array of non-negative integers. */
  ints(field: string): number[];
}

export function configFields(c: Record<string, unknown>, path: string, file = 'config.json'): ConfigFields {
  const value = (field: string, fallback: unknown) => (c[field] === undefined || c[field] === null ? fallback : c[field]);
  const fail = (field: string, what: string): never => {
    throw new ModelFormatError(`${file}: ${field} must be ${what}, got ${JSON.stringify(c[field])}`, path, field);
  };
  return {
    path,
    get: (field) => c[field],
    has: (field) => c[field] !== undefined && c[field] !== null,
    int(field, fallback) {
      const v = value(field, fallback);
      return typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : fail(field, 'a positive integer');
    },
    count(field, fallback) {
      const v = value(field, fallback);
      return typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : fail(field, 'a non-negative integer');
    },
    num(field, fallback) {
      const v = value(field, fallback);
      return typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : fail(field, 'a positive number');
    },
    real(field, fallback) {
      const v = value(field, fallback);
      return typeof v === 'number' && Number.isFinite(v) ? v : fail(field, 'a number');
    },
    bool(field, fallback) {
      const v = value(field, fallback);
      return typeof v === 'boolean' ? v : fail(field, 'true or false');
    },
    ints(field) {
      const v = value(field, []);
      return Array.isArray(v) && v.every((x) => typeof x === 'number' && Number.isInteger(x) && x >= 0) ? (v as number[]) : fail(field, 'an array of layer indices');
    },
  };
}
