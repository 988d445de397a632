import { createHash } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Ledger } from '../ledger/ledger';
import { deterministicUuid } from '../ledger/event-id';
import { activeLineageDir } from '../shared/ids';
import type { Intent } from '../shared/intent';
import type { Redactor } from '../shared/redact';
import { commitAll } from './index-commit';
import { ensureWorktree } from './worktree';

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

export function createDocumentEditActivities(deps: { readonly worktreeRoot: string; readonly ledger: Ledger; readonly redact: Redactor }) {
  return {
    /**
     * A person approved their own version of a design document: it replaces the stage's latest
     * artifact (what the next stage reads), is committed on the intent branch, and the ledger
     * keeps both versions in one DOCUMENT_EDITED event. Idempotent: a retry finds the text in
     * place and writes the same event.
     */
    async applyDocumentEdits(input: { readonly intent: Intent; readonly stage: 'lld' | 'spec'; readonly artifactPath: string; readonly text: string; readonly by: string }): Promise<{ readonly commit?: string }> {
      const { intent, stage, artifactPath, by } = input;
      const lineage = activeLineageDir(intent.id);
      if (path.posix.normalize(artifactPath) !== artifactPath || !artifactPath.startsWith(`${lineage}/`)) {
        throw new Error(`${artifactPath} is not a document of ${intent.id}'s lineage`);
      }
      const { worktreePath } = await ensureWorktree({ repoPath: intent.repoPath, baseBranch: intent.baseBranch, intentId: intent.id, worktreeRoot: deps.worktreeRoot });
      const file = path.join(worktreePath, artifactPath);
      const text = input.text.endsWith('\n') ? input.text : `${input.text}\n`;
      const current = await readFile(file, 'utf8');
      const original = current === text ? undefined : current;
      if (original !== undefined) await writeFile(file, text);
      const commit = await commitAll(worktreePath, `warden(${intent.id}): ${stage} as edited and approved by ${by}`);
      await deps.ledger.audit.recordSafetyEvent({
        id: deterministicUuid('DOCUMENT_EDITED', intent.id, artifactPath, sha256(text)),
        timestamp: new Date(),
        eventType: 'DOCUMENT_EDITED',
        severity: 'info',
        intentId: intent.id,
        stage,
        reason: `${by} edited ${path.basename(artifactPath)} and approved their version: the next stage reads it`,
        metadata: {
          artifactPath,
          by,
          editedSha256: sha256(text),
          ...(original !== undefined ? { originalSha256: sha256(original), original: deps.redact(original) } : {}),
          edited: deps.redact(text),
          commit: commit ?? null,
        },
      });
      return commit ? { commit } : {};
    },
  };
}
