import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Client, Connection, type ClientInterceptors, type TLSConfig } from '@temporalio/client';
import type * as TemporalWorker from '@temporalio/worker';
import type { NativeConnection } from '@temporalio/worker';
import { UserError } from '../shared/errors';
import type { PemSource, RuntimeConfig } from './config';
import { isTemporalReachable, startDevServer, type DevServer } from './dev-server';
import { claimEmbeddedServer, refuseAnotherHomesServer } from './embedded-home';
import { ensureTemporalCli } from './temporal-cli';

/**
 * The embedded server listens on a fixed port (WARDEN_TEMPORAL_PORT, default 7233), so a second
 * Warden process of the same home finds the first one's server; its Web UI 1000 above.
 */
function embeddedAddress(config: Pick<RuntimeConfig, 'embeddedTemporalPort'>): { address: string; uiPort: number; uiUrl: string } {
  const uiPort = config.embeddedTemporalPort + 1000;
  return { address: `127.0.0.1:${config.embeddedTemporalPort}`, uiPort, uiUrl: `http://127.0.0.1:${uiPort}` };
}

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
    const local = embeddedAddress(config);
    address = local.address;
    if (await isTemporalReachable(address)) {
      uiUrl = local.uiUrl;
    } else {
      const cliPath = await ensureTemporalCli({ wardenHome: config.wardenHome, env: process.env, log });
      log(`starting the embedded Temporal server (${path.join(config.wardenHome, 'temporal.db')})`);
      embedded = await startDevServer({
        cliPath,
        dbFile: path.join(config.wardenHome, 'temporal.db'),
        port: config.embeddedTemporalPort,
        uiPort: local.uiPort,
        namespace: config.namespace,
        logFile: path.join(config.wardenHome, 'temporal.log'),
        log,
      });
      uiUrl = embedded.uiUrl;
    }
  }
  const target = await connectTo(config, address, { uiUrl, embedded, interceptors });
  if (!config.temporalAddress) await ownEmbeddedServer(config, target, embedded !== undefined, log);
  return target;
}

/**
 * The embedded server is one home's: the home that started it claims it, and another home's
 * process that finds it refuses (see embedded-home.ts). A server on a TEMPORAL_ADDRESS is
 * the operator's to share.
 */
async function ownEmbeddedServer(config: RuntimeConfig, target: TemporalTarget, startedHere: boolean, log: (message: string) => void = () => undefined): Promise<void> {
  if (startedHere) {
    // Without the claim the server still works; only the check of other homes is lost.
    await claimEmbeddedServer(target.client.connection, config.namespace, config.wardenHome).catch((error: Error) =>
      log(`could not record this Warden home in the embedded Temporal server (${error.message}): other homes will not be told it is this one's`),
    );
    return;
  }
  try {
    await refuseAnotherHomesServer(target.client.connection, config.namespace, config.wardenHome, config.embeddedTemporalPort);
  } catch (error) {
    await target.close();
    throw error;
  }
}

/**
 * Connects like connectTemporal, but never starts the embedded server: undefined when
 * TEMPORAL_ADDRESS is unset and no embedded server runs. For commands that only read, which
 * can answer without the server (from the ledger) rather than wait for one to start and stop.
 */
export async function connectTemporalIfRunning(config: RuntimeConfig): Promise<TemporalTarget | undefined> {
  if (config.temporalAddress) return connectTo(config, config.temporalAddress, {});
  const local = embeddedAddress(config);
  if (!(await isTemporalReachable(local.address))) return undefined;
  const target = await connectTo(config, local.address, { uiUrl: local.uiUrl });
  await ownEmbeddedServer(config, target, false);
  return target;
}

async function connectTo(
  config: RuntimeConfig,
  address: string,
  { uiUrl, embedded, interceptors }: { readonly uiUrl?: string; readonly embedded?: DevServer; readonly interceptors?: ClientInterceptors },
): Promise<TemporalTarget> {
  const options = await connectionOptions(config);
  const connection = await connectOrExplain(address, config.namespace, () => Connection.connect({ address, ...options }));
  const client = new Client({ connection, namespace: config.namespace, ...(interceptors ? { interceptors } : {}) });
  const natives: NativeConnection[] = [];
  return {
    address,
    namespace: config.namespace,
    uiUrl,
    embedded,
    client,
    async nativeConnection() {
      // Loaded here, by the commands that run a worker: the SDK's native runtime is slow to load.
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const { NativeConnection } = require('@temporalio/worker') as typeof TemporalWorker;
      const native = await connectOrExplain(address, config.namespace, () => NativeConnection.connect({ address, ...options }));
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

/** What the SDK's connections need besides the address: TLS (or `false`: off) and the API key. */
export interface ConnectionSecurity {
  /** `false` keeps TLS off even with an API key (the SDK would turn it on otherwise). */
  readonly tls: TLSConfig | false;
  readonly apiKey?: string;
}

/** The connection options for `config`, reading the PEM files it names. */
export async function connectionOptions(config: Pick<RuntimeConfig, 'tls' | 'apiKey'>): Promise<ConnectionSecurity> {
  if (!config.tls) return { tls: false, apiKey: config.apiKey };
  const { serverName, serverCaCert, clientCert } = config.tls;
  return {
    tls: {
      ...(serverName ? { serverNameOverride: serverName } : {}),
      ...(serverCaCert ? { serverRootCACertificate: await readPem(serverCaCert) } : {}),
      ...(clientCert ? { clientCertPair: { crt: await readPem(clientCert.cert), key: await readPem(clientCert.key) } } : {}),
    },
    apiKey: config.apiKey,
  };
}

async function readPem(source: PemSource): Promise<Buffer> {
  if ('data' in source) return Buffer.from(source.data);
  try {
    return await readFile(source.path);
  } catch (error) {
    throw new UserError(`cannot read ${source.variable} (${source.path}): ${(error as Error).message}`);
  }
}

/** A connection failure names the address, so a wrong TEMPORAL_ADDRESS is plain to see. */
async function connectOrExplain<T>(address: string, namespace: string, connect: () => Promise<T>): Promise<T> {
  try {
    return await connect();
  } catch (error) {
    const message = (error as Error).message ?? String(error);
    throw new UserError(`cannot connect to Temporal at ${address} (namespace ${namespace}): ${message}; is the server up? (\`warden dev\` runs one here) Otherwise check TEMPORAL_ADDRESS and the TLS settings`, 1);
  }
}
