import path from 'node:path';
import type { Client } from '@temporalio/client';
import type { Logger } from 'pino';
import { ServeSchema, type WardenConfig } from '../../config/schema';
import type { RuntimeConfig } from '../../runtime/config';
import { linkSecretOrWhyNot } from '../../runtime/link-secret';
import { approverKeysDir } from '../../shared/approver-keys-dir';
import { UserError } from '../../shared/errors';
import { openOwnedLedger } from '../session';
import { connectTemporal } from '../../runtime/temporal';
import { startWebApp, type WebApp } from './server';

/**
 * `warden serve`: connects to Temporal and the ledger and serves the web app until `close`. A
 * port in use is a clear error; `--port 0` takes a free one.
 */
export async function serveWebApp(
  config: RuntimeConfig,
  warden: WardenConfig,
  options: { readonly host?: string; readonly port?: number; readonly operator: string; readonly logger: Logger; readonly print: (line: string) => void },
): Promise<WebApp> {
  const target = await connectTemporal(config, options.print);
  let app: WebApp;
  try {
    app = await webAppOn(target.client, config, warden, options);
  } catch (error) {
    await target.close();
    throw error;
  }
  return {
    url: app.url,
    operatorUrl: app.operatorUrl,
    async close() {
      await app.close();
      await target.close();
    },
  };
}

/** The web app on a Temporal client the caller holds; it opens (and closes) its own ledger connection. */
async function webAppOn(
  client: Client,
  config: RuntimeConfig,
  warden: WardenConfig,
  options: { readonly host?: string; readonly port?: number; readonly operator: string; readonly logger: Logger; readonly print: (line: string) => void },
): Promise<WebApp> {
  const serve = ServeSchema.parse({ ...warden.serve, ...(options.host ? { host: options.host } : {}), ...(options.port !== undefined ? { port: options.port } : {}) });
  const { ledger, database } = await openOwnedLedger(config, options.print);
  const linkSecret = linkSecretOrWhyNot();
  // Still served: the operator's session decides, and view links show their gates.
  if (linkSecret.missing) options.print(`note: links in notifications cannot decide here, only show their gate: ${linkSecret.missing}`);
  let app: WebApp;
  try {
    const forgeWebhookSecret = warden.merge?.forge ? process.env[warden.merge.forge.webhookSecretEnv] : undefined;
    app = await startWebApp({ client, ledger, linkSecret, operator: options.operator, keysDir: approverKeysDir(), host: serve.host, port: serve.port, logger: options.logger, cacheDir: path.join(config.wardenHome, 'serve-changes'), ...(forgeWebhookSecret ? { forgeWebhookSecret } : {}) });
  } catch (error) {
    await database.close();
    if ((error as NodeJS.ErrnoException).code === 'EADDRINUSE') throw new UserError(`port ${serve.port} on ${serve.host} is in use: stop what listens there, or pass --port (0 takes a free one)`);
    throw error;
  }
  return {
    url: app.url,
    operatorUrl: app.operatorUrl,
    async close() {
      await app.close();
      await database.close();
    },
  };
}

/**
 * The web app for as long as a command follows intents (`warden run`, `warden dev`), on the
 * command's own Temporal client, so that a notification's link works wherever the intent was
 * started. A port in use is not an error here: another Warden command may be serving it already.
 */
export async function serveAlongside(
  client: Client,
  config: RuntimeConfig,
  warden: WardenConfig,
  options: { readonly operator: string; readonly logger: Logger; readonly print: (line: string) => void },
): Promise<WebApp | undefined> {
  try {
    const app = await webAppOn(client, config, warden, { ...options, print: () => undefined });
    options.print(`review and decide in a browser: ${app.operatorUrl}`);
    return app;
  } catch (error) {
    options.print(`note: the web app is not served from here (${(error as Error).message})`);
    return undefined;
  }
}
