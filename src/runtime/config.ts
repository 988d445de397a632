import path from 'node:path';

/** Settings read from the environment, once, by an entry point (CLI or worker). */
export interface RuntimeConfig {
  /** Warden's own folder: embedded server database, tools, worktrees, lineage. */
  readonly wardenHome: string;
  /** A Temporal cluster to use; undefined means the embedded dev server. */
  readonly temporalAddress?: string;
  readonly namespace: string;
  readonly tls?: { readonly certPath?: string; readonly keyPath?: string; readonly caPath?: string; readonly serverName?: string };
  readonly apiKey?: string;
  readonly worktreeRoot: string;
  readonly lineageRoot: string;
  readonly logLevel: string;
  /** PostgreSQL for the ledger; undefined means the embedded server under `<wardenHome>/postgres`. */
  readonly databaseUrl?: string;
  readonly postgresDataDir: string;
}

/**
 * Reads Warden's settings. Temporal variables are named as the Temporal CLI names them
 * (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_TLS_CERT, TEMPORAL_TLS_KEY, TEMPORAL_TLS_CA,
 * TEMPORAL_TLS, TEMPORAL_TLS_SERVER_NAME, TEMPORAL_API_KEY).
 */
export function loadRuntimeConfig(env: NodeJS.ProcessEnv, cwd: string = process.cwd()): RuntimeConfig {
  const wardenHome = path.resolve(cwd, env.WARDEN_HOME ?? '.warden');
  const certPath = env.TEMPORAL_TLS_CERT;
  const keyPath = env.TEMPORAL_TLS_KEY;
  const caPath = env.TEMPORAL_TLS_CA;
  const tlsOn = env.TEMPORAL_TLS === 'true' || Boolean(certPath || keyPath || caPath || env.TEMPORAL_API_KEY);
  return {
    wardenHome,
    temporalAddress: env.TEMPORAL_ADDRESS || undefined,
    namespace: env.TEMPORAL_NAMESPACE || 'default',
    tls: tlsOn ? { certPath, keyPath, caPath, serverName: env.TEMPORAL_TLS_SERVER_NAME } : undefined,
    apiKey: env.TEMPORAL_API_KEY || undefined,
    worktreeRoot: path.resolve(cwd, env.WARDEN_WORKTREES ?? path.join(wardenHome, 'worktrees')),
    lineageRoot: path.join(wardenHome, 'lineage'),
    logLevel: env.WARDEN_LOG_LEVEL ?? 'info',
    databaseUrl: env.DATABASE_URL || undefined,
    postgresDataDir: path.join(wardenHome, 'postgres'),
  };
}
