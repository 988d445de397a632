/**
 * The one-time Gitea build's bookkeeping (test/setup/gitea-forge.ts): found when there, a clear
 * error without Go, scratch cleaned after a failure, and a second process waiting on the lock.
 * A fake `go` stands in for the toolchain; the real build is what the forge tests run on.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ensureGitea, findGo, giteaInstall } from '../setup/gitea-forge';

let dir: string;
let toolsDir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'warden-gitea-build-'));
  toolsDir = path.join(dir, 'tools');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function script(file: string, body: string): string {
  writeFileSync(file, `#!/bin/sh\n${body}\n`);
  chmodSync(file, 0o755);
  return file;
}

/** A `go` that fails the way a proxy refusal would. */
const failingGo = (): string => script(path.join(dir, 'go'), 'echo "proxy.golang.org answered 403 for some/module" >&2\nexit 1');

function placeBinary(): string {
  const install = giteaInstall(toolsDir);
  mkdirSync(install.dir, { recursive: true });
  return script(install.binary, 'echo gitea');
}

async function exitedPid(): Promise<number> {
  const child = spawn('true');
  await new Promise((resolve) => child.once('exit', resolve));
  return child.pid!;
}

describe('the Gitea build', () => {
  it('says how to get Go when there is none', () => {
    expect(() => findGo({ PATH: dir }, path.join(dir, 'no-go'))).toThrow(/needs the Go toolchain .* no `go` is on PATH or at .*no-go; install Go from https:\/\/go\.dev\/dl\//);
  });

  it('returns an installed binary without building', async () => {
    const binary = placeBinary();
    await expect(ensureGitea({ toolsDir, go: path.join(dir, 'no-go') })).resolves.toBe(binary);
  });

  it('fails with the toolchain\'s words, leaving no scratch and no lock, and a note for waiters', async () => {
    const lines: string[] = [];
    await expect(ensureGitea({ toolsDir, go: failingGo(), log: (line) => lines.push(line) })).rejects.toThrow(/building Gitea 1\.26\.0 failed: .*proxy\.golang\.org answered 403/);
    const install = giteaInstall(toolsDir);
    expect(readdirSync(toolsDir).sort()).toEqual([path.basename(install.failure)]);
    expect(lines[0]).toMatch(/^building Gitea 1\.26\.0 from the Go module proxy into /);
  });

  it('takes over a lock whose process is gone', async () => {
    const install = giteaInstall(toolsDir);
    mkdirSync(toolsDir, { recursive: true });
    writeFileSync(install.lock, `${await exitedPid()}\n`);
    await expect(ensureGitea({ toolsDir, go: failingGo() })).rejects.toThrow(/proxy\.golang\.org answered 403/);
    expect(existsSync(install.lock)).toBe(false);
  });

  describe('while another process holds the lock', () => {
    let holder: ChildProcess;
    beforeEach(() => {
      holder = spawn('sleep', ['600'], { stdio: 'ignore' });
      mkdirSync(toolsDir, { recursive: true });
      writeFileSync(giteaInstall(toolsDir).lock, `${holder.pid}\n`);
    });
    afterEach(() => {
      holder.kill();
    });

    async function waiting(): Promise<{ result: Promise<string>; lines: string[] }> {
      const lines: string[] = [];
      const result = ensureGitea({ toolsDir, go: failingGo(), log: (line) => lines.push(line) });
      result.catch(() => undefined);
      while (!lines.some((line) => line.startsWith('waiting for the Gitea build'))) await new Promise((resolve) => setTimeout(resolve, 50));
      return { result, lines };
    }

    it('waits, then takes the binary the holder built', async () => {
      const { result, lines } = await waiting();
      expect(lines.join('\n')).toContain(`another process (${holder.pid})`);
      const binary = placeBinary();
      rmSync(giteaInstall(toolsDir).lock);
      await expect(result).resolves.toBe(binary);
    });

    it("waits, then fails with the holder's failure rather than building again", async () => {
      const { result } = await waiting();
      writeFileSync(giteaInstall(toolsDir).failure, 'building Gitea 1.26.0 failed: gcc is missing\n');
      rmSync(giteaInstall(toolsDir).lock);
      await expect(result).rejects.toThrow(/the Gitea build this process waited for failed: building Gitea 1\.26\.0 failed: gcc is missing/);
    });
  });
});
