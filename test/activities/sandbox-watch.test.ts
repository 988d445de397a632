/**
 * The sandbox's watcher with the real bubblewrap: every connection to a port an agent would
 * reach for is reported and refused, writes to shell rc files and credential paths in the
 * sandbox's scratch space are reported, and none of it is reported without the watch.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { gitDirsOf, probeBubblewrap, sandboxCommand, sandboxEnvironment } from '../../src/activities/sandbox';
import { parseWatchReport, tripwires } from '../../src/activities/sandbox-watch';
import { ensureWorktree } from '../../src/activities/worktree';
import { agentEnvironment, runProcess } from '../../src/activities/process';
import { createSampleRepo } from '../../src/client/sample-repo';
import { describeWith } from '../setup/prerequisites';

const SCRATCH = path.resolve(__dirname, '../../.warden/test-sandbox');
let root: string;
let worktree: string;

beforeAll(async () => {
  mkdirSync(SCRATCH, { recursive: true });
  root = mkdtempSync(path.join(SCRATCH, 'watch-'));
  const repo = createSampleRepo(path.join(root, 'repo'));
  worktree = (await ensureWorktree({ repoPath: repo, baseBranch: 'main', intentId: 'watched', worktreeRoot: path.join(root, 'worktrees') })).worktreePath;
});

afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Runs `command` in bubblewrap on the sandbox's own network, watched or not. */
async function sandboxed(command: string, watch: boolean) {
  const { bwrapPath } = await probeBubblewrap();
  const exec = sandboxCommand({ level: 'bubblewrap', bwrapPath, worktreePath: worktree, ...gitDirsOf(worktree), network: false, command, watch });
  return runProcess({ command, exec, cwd: worktree, env: sandboxEnvironment('bubblewrap', agentEnvironment(process.env)), timeoutMs: 120_000, maxOutputBytes: 1 << 20, report: true });
}

/** A connection from inside, and what it got: `refused` when nothing listens, `reset` when the tripwire took it. */
const connect = (host: string, port: number) =>
  `node -e "const s=require('net').connect(${port},'${host}');s.on('connect',()=>{});s.on('error',e=>console.log('${port} '+e.code));s.on('close',()=>{})"`;

describe('the tripwires', () => {
  test('cover the embedded servers, the web app, the common databases and the metadata port, and the worker\'s own ports', () => {
    const ports = tripwires({ TEMPORAL_ADDRESS: '127.0.0.1:17233', DATABASE_URL: 'postgres://u:p@127.0.0.1:15432/warden' }).map((w) => w.port);
    expect(ports).toEqual(expect.arrayContaining([7233, 8233, 5432, 5433, 7431, 3306, 6379, 27017, 80, 17233, 15432]));
    expect(new Set(ports).size).toBe(ports.length);
  });
});

describeWith('bubblewrap', 'a watched sandbox', () => {
  test('every connection to a watched port is reported with its port and refused; writes to rc files and credential paths are reported; the exit status is the command\'s', async () => {
    const command = [
      connect('127.0.0.1', 7233),
      connect('localhost', 5432),
      connect('127.0.0.1', 7431),
      connect('169.254.169.254', 80),
      'echo "export X=1" >> ~/.bashrc',
      'mkdir -p ~/.aws && echo "[default]" > ~/.aws/credentials',
      'echo note > /tmp/notes.txt',
      'grep CapEff /proc/self/status',
      'echo ok',
      'exit 3',
    ].join('; ');
    const outcome = await sandboxed(command, true);
    expect(outcome.exitCode).toBe(3);
    expect(outcome.stdout).toContain('ok');
    // The connection was taken and reset: the command learns nothing from the other side.
    expect(outcome.stdout).toMatch(/7233 ECONNRESET/);
    // The setup's capabilities are gone before the command starts.
    expect(outcome.stdout).toMatch(/CapEff:\s+0{16}/);
    const { attempts } = parseWatchReport(outcome.report ?? '');
    const connects = attempts.flatMap((a) => (a.kind === 'connect' ? [a.port] : []));
    expect(connects).toEqual(expect.arrayContaining([7233, 5432, 7431, 80]));
    const writes = attempts.flatMap((a) => (a.kind === 'scratch-write' ? [a.path] : []));
    expect(writes.sort()).toEqual(['~/.aws/credentials', '~/.bashrc']);
  });

  test('unwatched, nothing is reported and nothing listens', async () => {
    const outcome = await sandboxed(`${connect('127.0.0.1', 7233)}; echo x >> ~/.bashrc`, false);
    expect(outcome.stdout).toMatch(/7233 ECONNREFUSED/);
    expect(outcome.report).toBe('');
  });
});
