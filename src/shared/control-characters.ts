/**
 * Control characters in text that came from outside Warden (a goal, an agent's answer, a file of
 * the repository): refused where an intent's text enters, and made visible wherever Warden prints
 * such text, so that nothing it shows can move the cursor, recolour or retitle a terminal, or
 * hide what follows it.
 *
 * Workflow-safe: plain string functions, no imports.
 */

/**
 * C0 controls other than tab and newline, DEL, C1 controls (U+0080–U+009F: U+009B is a
 * one-character CSI in many terminals), and the bidirectional overrides and isolates that
 * reorder what a reader sees.
 */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;
/** The same, with tab and newline too: for text shown on one line. */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const UNSAFE_ON_ONE_LINE = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;
/** What a decoder puts where bytes were not UTF-8 (Node does so for argv, files and stdin). */
const REPLACEMENT = '\ufffd';

/**
 * Why `text` is not plain text Warden accepts from a person (undefined when it is): bytes that
 * were not UTF-8, unpaired surrogates, or control characters other than newline and tab.
 */
export function textProblem(text: string): string | undefined {
  if (text.includes(REPLACEMENT) || !isWellFormed(text)) return 'is not valid UTF-8 text';
  const controls = [...new Set(text.match(UNSAFE) ?? [])];
  if (controls.length > 0) return `holds control characters (${controls.map(visible).join(', ')}); only newline and tab are allowed`;
  return undefined;
}

/** `text` with each unsafe control character written out (`\x1b`, `\u202e`); newlines and tabs kept. */
export function forTerminal(text: string): string {
  return text.replace(UNSAFE, visible);
}

/** `text` for one line of output: every control character written out, newline and tab too. */
export function forTerminalLine(text: string): string {
  return text.replace(UNSAFE_ON_ONE_LINE, visible);
}

/**
 * JSON text for a terminal: JSON.stringify escapes C0 controls itself, but leaves DEL, C1
 * controls and the bidirectional ones as they are; those become `\\uXXXX` escapes, the same
 * value to a JSON reader.
 */
export function jsonForTerminal(json: string): string {
  return json.replace(/[\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function visible(character: string): string {
  const code = character.charCodeAt(0);
  if (character === '\n') return '\\n';
  if (character === '\t') return '\\t';
  if (character === '\r') return '\\r';
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/** No lone surrogate (String.prototype.isWellFormed, Node 20+, spelled out for the compiler's lib). */
function isWellFormed(text: string): boolean {
  return (text as string & { isWellFormed(): boolean }).isWellFormed();
}
