import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Client, Connection, type ClientInterceptors } from '@temporalio/client';
import { NativeConnection, type NativeConnectionOptions } from '@temporalio/worker';
import type { RuntimeConfig } from './config';
import { isTemporalReachable, startDevServer, type DevServer } from './dev-server';
import { ensureTemporalCli } from './temporal-cli';

/** The embedded server listens here, so a second Warden process finds the first one's server. */
export const EMBEDDED_PORT = 7233;
export const EMBEDDED_UI_PORT = 8233;

/** A Temporal server Warden talks to, and how to stop it if Warden started it. */
export interface TemporalTarget {
  readonly address: string;
  readonly namespace: string;
  readonly uiUrl?: string;
  /** Set when this process started the embedded server. */
  readonly embedded?: DevServer;
  readonly client: Client;
  /** A connection for a worker (native, as the worker needs). */
  nativeConnection(): Promise<NativeConnection>;
  close(): Promise<void>;
}

/**
 * Connects to TEMPORAL_ADDRESS when set; otherwise to an embedded dev server on localhost,
 * reusing one that is already running (`warden dev` in another terminal) or starting one with its
 * database under `.warden/temporal.db`.
 */
/** `interceptors`: client interceptors, e.g. OpenTelemetry's (see telemetry.ts). */
export async function connectTemporal(config: RuntimeConfig, log: (message: string) => void, interceptors?: ClientInterceptors): Promise<TemporalTarget> {
  let address = config.temporalAddress;
  let embedded: DevServer | undefined;
  let uiUrl: string | undefined;
  if (!address) {
    address = `127.0.0.1:${EMBEDDED_PORT}`;
    if (await isTemporalReachable(address)) {
      uiUrl = `http://127.0.0.1:${EMBEDDED_UI_PORT}`;
    } else {
      const cliPath = await ensureTemporalCli({ wardenHome: config.wardenHome, env: process.env, log });
      log(`starting the embedded Temporal server (${path.join(config.wardenHome, 'temporal.db')})`);
      embedded = await startDevServer({
        cliPath,
        dbFile: path.join(config.wardenHome, 'temporal.db'),
        port: EMBEDDED_PORT,
        uiPort: EMBEDDED_UI_PORT,
        namespace: config.namespace,
        logFile: path.join(config.wardenHome, 'temporal.log'),
        log,
      });
      uiUrl = embedded.uiUrl;
    }
  }
  const tls = await tlsOptions(config);
  const connection = await Connection.connect({ address, tls, apiKey: config.apiKey });
  const client = new Client({ connection, namespace: config.namespace, ...(interceptors ? { interceptors } : {}) });
  const natives: NativeConnection[] = [];
  return {
    address,
    namespace: config.namespace,
    uiUrl,
    embedded,
    client,
    async nativeConnection() {
      const native = await NativeConnection.connect({ address, tls, apiKey: config.apiKey });
      natives.push(native);
      return native;
    },
    async close() {
      await Promise.all(natives.map((n) => n.close()));
      await connection.close();
      await embedded?.stop();
    },
  };
}

async function tlsOptions(config: RuntimeConfig): Promise<NativeConnectionOptions['tls']> {
  if (!config.tls) return undefined;
  const { certPath, keyPath, caPath, serverName } = config.tls;
  return {
    serverNameOverride: serverName,
    serverRootCACertificate: caPath ? await readFile(caPath) : undefined,
    clientCertPair: certPath && keyPath ? { crt: await readFile(certPath), key: await readFile(keyPath) } : undefined,
  };
}
