import type { ConnectionLike } from '@temporalio/client';
import { UserError } from '../shared/errors';

/*
 * Which Warden home an embedded Temporal server belongs to. Two homes on one machine
 * (WARDEN_HOME) would otherwise share the server on 7233 and the task queue `warden`, and one
 * home's worker would run the other's intents with its own config and ledger. The home that
 * starts the server writes its path into the namespace's data; a worker or command of another
 * home that finds the server refuses, naming that home and how to get a server of its own.
 */

/** The namespace data key that holds the owning home's path. */
export const OWNER_HOME_KEY = 'warden-home';

/** Records `home` as the owner of the embedded server `connection` reaches. */
export async function claimEmbeddedServer(connection: ConnectionLike, namespace: string, home: string): Promise<void> {
  await connection.workflowService.updateNamespace({ namespace, updateInfo: { data: { [OWNER_HOME_KEY]: home } } });
}

/** The home the embedded server was started by, when it says (a server Warden did not start says nothing). */
export async function embeddedServerHome(connection: ConnectionLike, namespace: string): Promise<string | undefined> {
  // A namespace the server lacks says nothing: the command fails on it later, with its own error.
  const described = await connection.workflowService.describeNamespace({ namespace }).catch(() => undefined);
  return described?.namespaceInfo?.data?.[OWNER_HOME_KEY] || undefined;
}

/** Throws the one-line refusal when the embedded server at `port` belongs to another home than `home`. */
export async function refuseAnotherHomesServer(connection: ConnectionLike, namespace: string, home: string, port: number): Promise<void> {
  const owner = await embeddedServerHome(connection, namespace);
  if (owner === undefined || owner === home) return;
  throw new UserError(
    `the embedded Temporal server on 127.0.0.1:${port} belongs to the Warden home ${owner}, not to this one (${home}): ` +
      `its workers would run this home's intents with that home's config and ledger. Stop that home's warden dev, ` +
      `or give this home a server of its own with WARDEN_TEMPORAL_PORT (e.g. WARDEN_TEMPORAL_PORT=${port + 1}; its Web UI is then on port ${port + 1 + 1000})`,
  );
}
