/**
 * The one-time Temporal server build's bookkeeping (src/runtime/temporal-server-install.ts): used
 * when installed, a clear error without Go, the Go caches and scratch removed after a failure
 * (kept when asked), the failure left for a waiting process. A fake `go` stands in for the
 * toolchain; the real build is what test/runtime/real-server.test.ts runs on.
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ensureTemporalServer, findGoForTemporal, KEEP_GO_CACHE_ENV, temporalServerInstall } from '../../src/runtime/temporal-server-install';
import { renderTemplate } from '../../src/runtime/temporal-cluster';

let dir: string;
let toolsDir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'warden-temporal-build-'));
  toolsDir = path.join(dir, 'tools');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function script(file: string, body: string): string {
  writeFileSync(file, `#!/bin/sh\n${body}\n`);
  chmodSync(file, 0o755);
  return file;
}

/** A `go` that writes into its module cache, then fails the way a proxy refusal would. */
const failingGo = (): string => script(path.join(dir, 'go'), 'mkdir -p "$GOMODCACHE/cache" && echo x > "$GOMODCACHE/cache/file"\necho "proxy.golang.org answered 403 for go.temporal.io/server" >&2\nexit 1');

describe('the Temporal server build', () => {
  it('says how to get Go when there is none', () => {
    expect(() => findGoForTemporal({ PATH: dir }, path.join(dir, 'no-go'))).toThrow(/needs the Go toolchain .* no `go` is on PATH or at .*no-go; install Go from https:\/\/go\.dev\/dl\//);
  });

  it('uses an installed server without building', async () => {
    const install = temporalServerInstall(toolsDir);
    mkdirSync(path.join(install.postgresSchema, 'temporal', 'versioned'), { recursive: true });
    script(install.server, 'echo server');
    script(install.sqlTool, 'echo tool');
    await expect(ensureTemporalServer({ toolsDir, go: path.join(dir, 'no-go') })).resolves.toEqual(install);
  });

  it('fails with the tool’s words, removes its scratch and Go caches, and leaves the failure for waiting processes', async () => {
    const lines: string[] = [];
    await expect(ensureTemporalServer({ toolsDir, go: failingGo(), env: { ...process.env, [KEEP_GO_CACHE_ENV]: '' }, log: (line) => lines.push(line) })).rejects.toThrow(
      /building the Temporal server 1\.32\.2 failed: .*proxy\.golang\.org answered 403/,
    );
    expect(readdirSync(toolsDir).sort()).toEqual(['temporal-server-1.32.2.failed']);
    expect(readFileSync(path.join(toolsDir, 'temporal-server-1.32.2.failed'), 'utf8')).toMatch(/answered 403/);
    expect(lines.some((line) => line.includes('3.5 GB of caches'))).toBe(true);
  });

  it(`keeps the Go caches with ${KEEP_GO_CACHE_ENV}=1`, async () => {
    await expect(ensureTemporalServer({ toolsDir, go: failingGo(), env: { ...process.env, [KEEP_GO_CACHE_ENV]: '1' } })).rejects.toThrow(/answered 403/);
    expect(existsSync(path.join(toolsDir, '.temporal-server-1.32.2.build', 'gopath', 'pkg', 'mod', 'cache', 'file'))).toBe(true);
  });
});

describe('the server config template', () => {
  it('fills every placeholder, and refuses one without a value or a value without a placeholder', () => {
    expect(renderTemplate('port: {{PORT}}, db: "{{DB}}"', { PORT: 7233, DB: 'temporal' })).toBe('port: 7233, db: "temporal"');
    expect(() => renderTemplate('port: {{PORT}}', {})).toThrow('the config template names {{PORT}}, which has no value');
    expect(() => renderTemplate('port: {{PORT}}', { PORT: 1, EXTRA: 2 })).toThrow('the config template has no placeholder for EXTRA');
  });
});
