/**
 * The Node options that run one of Warden's own scripts in a child process. From a checkout the
 * scripts are TypeScript, run through tsx's loader (a development dependency); the installed
 * package runs compiled JavaScript and needs none.
 */
export function nodeOptionsFor(script: string): string[] {
  return script.endsWith('.ts') ? ['--require', require.resolve('tsx/cjs')] : [];
}
