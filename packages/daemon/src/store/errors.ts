/** Errors from the model store; each names the repository and file it concerns. */
export class StoreError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StoreError';
  }
}

/** The engine cannot load the model (found from its small files and headers, before the weights were fetched). */
export class ModelRefusedError extends StoreError {
  constructor(
    readonly repo: string,
    readonly reason: string,
  ) {
    super(`${repo}: Orchard cannot run this model: ${reason} (checked before downloading the weights; nothing else was fetched)`);
    this.name = 'ModelRefusedError';
  }
}

/** The bytes on disk do not match the checksum the hub (or a peer's manifest) promised. */
export class ChecksumError extends StoreError {
  constructor(
    readonly file: string,
    readonly expected: string,
    readonly actual: string,
  ) {
    super(`${file}: checksum mismatch (expected ${expected}, got ${actual}); the corrupt download was discarded`);
    this.name = 'ChecksumError';
  }
}

const TLS_CODES = /^(CERT_|ERR_TLS_|ERR_SSL_|UNABLE_TO_|SELF_SIGNED_|DEPTH_ZERO_|HOSTNAME_MISMATCH|ERR_CERT)/;

/**
 * Why a request to `url` never got an answer, in words: fetch only says "fetch failed" and keeps the
 * real cause (DNS, refused, TLS, timeout) in `err.cause`.
 */
export function networkCause(err: unknown, url: string): string {
  let host = url;
  try {
    host = new URL(url).host;
  } catch {
    /* keep the text */
  }
  const e = err as Error & { cause?: Error & { code?: string; hostname?: string } };
  if (e?.name === 'TimeoutError') return `no answer from ${host} in time`;
  const c = e?.cause ?? (e as Error & { code?: string });
  const code = (c as { code?: string })?.code ?? '';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_FAIL') {
    return `cannot resolve ${new URL(url).hostname} (DNS ${code}): check the name, your network or a VPN/proxy`;
  }
  if (code === 'ECONNREFUSED') return `connection refused by ${host} (nothing listens there, or a firewall rejects it)`;
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET') return `connection to ${host} reset (${code}); a proxy or firewall may cut it`;
  if (code === 'ETIMEDOUT' || code === 'UND_ERR_CONNECT_TIMEOUT') return `timed out connecting to ${host} (${code})`;
  if (code === 'ENETUNREACH' || code === 'EHOSTUNREACH') return `${host} is unreachable from here (${code}): no network route`;
  if (TLS_CODES.test(code)) return `TLS with ${host} failed (${code}: ${c.message}); a proxy that intercepts HTTPS, or a wrong clock, causes this`;
  return `${e?.message ?? String(err)}${c && c !== e && c.message ? ` (${code ? `${code}: ` : ''}${c.message})` : ''}`;
}

/** What a refused or missing repo means, with what to do: HF answers 401 for a missing repo too when no token is sent. */
export function hubRefusal(repo: string, status: number, tokenSent: boolean, what = 'the file listing'): string {
  if (status === 401 || status === 403) {
    return tokenSent
      ? `${repo}: the hub refused ${what} (HTTP ${status}) although HF_TOKEN is set: the token may lack access to this gated or private repo (accept its licence on its page), or the name is wrong`
      : `${repo}: the hub refused ${what} (HTTP ${status}): the repo is gated or private (set HF_TOKEN to a token with access), or it does not exist`;
  }
  return `${repo}: the hub answered HTTP ${status} for ${what}`;
}

/**
 * The disk refused a write: full (ENOSPC, EDQUOT), read-only (EROFS) or not ours to write (EACCES,
 * EPERM). Names the path and what to do, because the raw code says neither.
 */
export class DiskError extends StoreError {
  constructor(
    message: string,
    readonly code: string,
    readonly path: string,
  ) {
    super(message);
    this.name = 'DiskError';
  }
}

/** Not enough free space for a pull, found before a byte was fetched. */
export class DiskSpaceError extends DiskError {
  constructor(
    message: string,
    path: string,
    readonly neededBytes: number,
    readonly freeBytes: number,
  ) {
    super(message, 'ENOSPC', path);
    this.name = 'DiskSpaceError';
  }
}

const DATA_DIR_FIX = 'start orchard with --data-dir on another disk (or set ORCHARD_DATA_DIR)';

/** `err` as a DiskError naming `path`, when the disk (not the network or the data) is at fault; else undefined. */
export function diskError(err: unknown, path: string, what = 'writing'): DiskError | undefined {
  if (err instanceof DiskError) return err;
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'ENOSPC' || code === 'EDQUOT') {
    return new DiskError(`no space left on the disk ${what} ${path} (${code}): free some space there, or ${DATA_DIR_FIX}; \`orchard pull\` again resumes where it stopped`, code, path);
  }
  if (code === 'EROFS') return new DiskError(`${path} is on a read-only file system (${code}) so it cannot be ${what === 'writing' ? 'written' : what}: remount it read-write, or ${DATA_DIR_FIX}`, code, path);
  if (code === 'EACCES' || code === 'EPERM') {
    return new DiskError(`no permission ${what} ${path} (${code}): make the data directory writable by this user (chown/chmod), or ${DATA_DIR_FIX}`, code, path);
  }
  return undefined;
}

/** Human bytes for these messages (GB/MB as the hub's pages show sizes). */
export function formatSize(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} GB`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)} MB`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} kB`;
  return `${n} B`;
}
