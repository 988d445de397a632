import path from 'node:path';
import { UserError } from '../shared/errors';
import { wardenHomeOf } from '../shared/warden-home';
import { LOG_FORMATS, type LogFormat } from './logger';

/** A PEM given as a file (the Temporal CLI's `…_PATH` variables) or inline (`…_DATA`). */
export type PemSource = { readonly path: string; readonly variable: string } | { readonly data: string; readonly variable: string };

/** TLS to the Temporal cluster, as the Temporal CLI's variables describe it. */
export interface TemporalTlsSettings {
  /** TEMPORAL_TLS_SERVER_NAME: the name the server's certificate is checked against. */
  readonly serverName?: string;
  /** TEMPORAL_TLS_SERVER_CA_CERT_*: the CA that signed the server's certificate (default: the system's). */
  readonly serverCaCert?: PemSource;
  /** TEMPORAL_TLS_CLIENT_CERT_* and TEMPORAL_TLS_CLIENT_KEY_*: the client's pair, for mTLS. */
  readonly clientCert?: { readonly cert: PemSource; readonly key: PemSource };
}

/** Where the embedded Temporal server listens unless WARDEN_TEMPORAL_PORT says otherwise. */
export const DEFAULT_EMBEDDED_TEMPORAL_PORT = 7233;

/** Settings read from the environment, once, by an entry point (CLI or worker). */
export interface RuntimeConfig {
  /**
   * Warden's own folder, one per user (WARDEN_HOME, default ~/.warden): the embedded servers'
   * data, installed tools, worktrees, lineage and logs, whichever folder a command runs from.
   */
  readonly wardenHome: string;
  /** A Temporal cluster to use; undefined means the embedded dev server. */
  readonly temporalAddress?: string;
  /** WARDEN_TEMPORAL_PORT: the embedded server's port (default 7233; its Web UI on this plus 1000), e.g. one per Warden home. */
  readonly embeddedTemporalPort: number;
  readonly namespace: string;
  /** TLS to the cluster; undefined means a plain connection (even with an API key, when TEMPORAL_TLS=false). */
  readonly tls?: TemporalTlsSettings;
  readonly apiKey?: string;
  readonly worktreeRoot: string;
  readonly lineageRoot: string;
  readonly logLevel: string;
  /** WARDEN_LOG_FORMAT: human (a log file, readable warnings) or json (JSON lines on stdout). */
  readonly logFormat: LogFormat;
  /** PostgreSQL for the ledger; undefined means the embedded server under `<wardenHome>/postgres`. */
  readonly databaseUrl?: string;
  readonly postgresDataDir: string;
}

/**
 * Reads Warden's settings. Temporal's are the Temporal CLI's environment variables (see
 * `temporal options`), so a shell set up for `temporal` works for Warden unchanged.
 */
export function loadRuntimeConfig(env: NodeJS.ProcessEnv, cwd: string = process.cwd()): RuntimeConfig {
  const wardenHome = wardenHomeOf(env, cwd);
  const apiKey = env.TEMPORAL_API_KEY || undefined;
  return {
    wardenHome,
    temporalAddress: env.TEMPORAL_ADDRESS || undefined,
    embeddedTemporalPort: embeddedPortFrom(env),
    namespace: env.TEMPORAL_NAMESPACE || 'default',
    tls: temporalTlsFromEnv(env, cwd),
    apiKey,
    worktreeRoot: path.resolve(cwd, env.WARDEN_WORKTREES ?? path.join(wardenHome, 'worktrees')),
    lineageRoot: path.join(wardenHome, 'lineage'),
    logLevel: env.WARDEN_LOG_LEVEL ?? 'info',
    logFormat: logFormatFrom(env),
    databaseUrl: env.DATABASE_URL || undefined,
    postgresDataDir: path.join(wardenHome, 'postgres'),
  };
}

/** The embedded Temporal server's port: 7233 unless WARDEN_TEMPORAL_PORT says; the Web UI takes it plus 1000. */
function embeddedPortFrom(env: NodeJS.ProcessEnv): number {
  const text = env.WARDEN_TEMPORAL_PORT;
  if (!text) return DEFAULT_EMBEDDED_TEMPORAL_PORT;
  const port = Number(text);
  if (!/^\d+$/.test(text) || port < 1024 || port > 64535) {
    throw new UserError(`WARDEN_TEMPORAL_PORT must be a port from 1024 to 64535 (the Web UI takes it plus 1000), not "${text}"`);
  }
  return port;
}

function logFormatFrom(env: NodeJS.ProcessEnv): LogFormat {
  const format = env.WARDEN_LOG_FORMAT || 'human';
  if (!(LOG_FORMATS as readonly string[]).includes(format)) throw new UserError(`WARDEN_LOG_FORMAT must be ${LOG_FORMATS.join(' or ')}, not "${format}"`);
  return format as LogFormat;
}

/** Names some setups carry over from the Temporal Web UI server; Warden (like `temporal`) does not read them. */
const FOREIGN_TLS_VARIABLES: Readonly<Record<string, string>> = {
  TEMPORAL_TLS_CERT: 'TEMPORAL_TLS_CLIENT_CERT_PATH',
  TEMPORAL_TLS_KEY: 'TEMPORAL_TLS_CLIENT_KEY_PATH',
  TEMPORAL_TLS_CA: 'TEMPORAL_TLS_SERVER_CA_CERT_PATH',
};

/**
 * TLS settings from the Temporal CLI's variables. As with `temporal`, TLS is on when
 * TEMPORAL_TLS is true, or when it is unset and an API key or any TLS option is set;
 * TEMPORAL_TLS=false turns it off. Contradictions are a `UserError` naming the variables.
 */
export function temporalTlsFromEnv(env: NodeJS.ProcessEnv, cwd: string = process.cwd()): TemporalTlsSettings | undefined {
  for (const [foreign, ours] of Object.entries(FOREIGN_TLS_VARIABLES)) {
    if (env[foreign]) throw new UserError(`${foreign} is not a Temporal CLI variable; set ${ours} (or the _DATA form) instead`);
  }
  const explicit = booleanVariable(env, 'TEMPORAL_TLS');
  const serverCaCert = pemFrom(env, 'TEMPORAL_TLS_SERVER_CA_CERT', cwd);
  const cert = pemFrom(env, 'TEMPORAL_TLS_CLIENT_CERT', cwd);
  const key = pemFrom(env, 'TEMPORAL_TLS_CLIENT_KEY', cwd);
  const serverName = env.TEMPORAL_TLS_SERVER_NAME || undefined;
  if (cert && !key) throw new UserError(`${cert.variable} is set but no client key: set TEMPORAL_TLS_CLIENT_KEY_PATH or TEMPORAL_TLS_CLIENT_KEY_DATA too`);
  if (key && !cert) throw new UserError(`${key.variable} is set but no client certificate: set TEMPORAL_TLS_CLIENT_CERT_PATH or TEMPORAL_TLS_CLIENT_CERT_DATA too`);
  if (booleanVariable(env, 'TEMPORAL_TLS_DISABLE_HOST_VERIFICATION')) {
    // The SDK always checks the server's name; pointing it at the right one keeps the check.
    throw new UserError(
      "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION is not supported by Temporal's TypeScript SDK: set TEMPORAL_TLS_SERVER_NAME to the name in the server's certificate instead",
    );
  }
  const tlsOptions = [serverCaCert?.variable, cert?.variable, key?.variable, serverName && 'TEMPORAL_TLS_SERVER_NAME'].filter(Boolean);
  if (explicit === false) {
    if (tlsOptions.length > 0) throw new UserError(`TEMPORAL_TLS=false contradicts ${tlsOptions.join(', ')}: unset one or the other`);
    return undefined;
  }
  if (explicit !== true && tlsOptions.length === 0 && !env.TEMPORAL_API_KEY) return undefined;
  return { serverName, serverCaCert, ...(cert && key ? { clientCert: { cert, key } } : {}) };
}

/** `NAME_PATH` or `NAME_DATA`, not both. */
function pemFrom(env: NodeJS.ProcessEnv, name: string, cwd: string): PemSource | undefined {
  const file = env[`${name}_PATH`] || undefined;
  const data = env[`${name}_DATA`] || undefined;
  if (file && data) throw new UserError(`set ${name}_PATH or ${name}_DATA, not both`);
  if (file) return { path: path.resolve(cwd, file), variable: `${name}_PATH` };
  if (data) return { data, variable: `${name}_DATA` };
  return undefined;
}

/** A boolean variable as the Temporal CLI reads it (true/false, 1/0); unset or empty is undefined. */
function booleanVariable(env: NodeJS.ProcessEnv, name: string): boolean | undefined {
  const raw = env[name]?.trim().toLowerCase();
  if (!raw) return undefined;
  if (raw === 'true' || raw === '1') return true;
  if (raw === 'false' || raw === '0') return false;
  throw new UserError(`${name} must be true or false, not "${env[name]}"`);
}
