import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ForgeError } from '../../src/forge/forge-client';
import { GiteaClient } from '../../src/forge/gitea';

/**
 * Gitea refuses a merge with 405 "Please try again later" while it checks a pull request again
 * (after its base moved), and for any state but mergeable. The adapter asks again a few times:
 * a check that ends merges, a state that stays is refused as not mergeable. (A local server
 * speaking Gitea's answers: the real Gitea's timing cannot be arranged.)
 */

let server: Server;
let refusals = 0;
let posts = 0;
beforeAll(async () => {
  server = createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    if (req.method === 'POST' && req.url === '/api/v1/repos/team/service/pulls/7/merge') {
      posts++;
      if (posts <= refusals) {
        res.writeHead(405).end(JSON.stringify({ message: 'Please try again later' }));
        return;
      }
      res.writeHead(200).end();
      return;
    }
    if (req.method === 'GET' && req.url === '/api/v1/repos/team/service/pulls/7') {
      res.writeHead(200).end(JSON.stringify({ number: 7, merged: true, merge_commit_sha: 'a'.repeat(40), state: 'closed', html_url: '', head: { ref: 'warden/x', sha: 'b'.repeat(40) }, base: { ref: 'main' } }));
      return;
    }
    res.writeHead(404).end(JSON.stringify({ message: 'not found' }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});

function client(): GiteaClient {
  const { port } = server.address() as AddressInfo;
  return new GiteaClient({ kind: 'gitea', webUrl: `http://127.0.0.1:${port}`, path: 'team/service' }, 'token');
}

const merge = () => client().merge(7, { method: 'rebase', headSha: 'b'.repeat(40), title: 'Land it', message: 'Merged.' });

test('a merge Gitea asks to try again later goes through once its check is over', async () => {
  posts = 0;
  refusals = 2;
  await expect(merge()).resolves.toEqual({ mergeCommit: 'a'.repeat(40) });
  expect(posts).toBe(3);
});

test('a pull request Gitea keeps refusing is not mergeable, after a few tries', async () => {
  posts = 0;
  refusals = 100;
  const error = await merge().then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(ForgeError);
  expect((error as ForgeError).kind).toBe('not-mergeable');
  expect(posts).toBe(5);
});
